"""engine.phsafe.inputs: sample names, directories, presets and config sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.core.errors import DataValidationError, ValidationError
from engine.phsafe.config import PHSafeConfig
from engine.phsafe.inputs import load_inputs, resolve_config
from engine.phsafe.join import prepare_extract
from engine.phsafe.release import run_phsafe

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "phsafe_official" / "e2e_test1"


def test_directory_with_its_own_config() -> None:
    extract, config = load_inputs(FIXTURE)
    assert config.state_filter == ["06"] and extract.n_units == 3


def test_config_forms() -> None:
    cfg = PHSafeConfig.from_json(FIXTURE / "config.json")
    assert resolve_config(cfg) is cfg
    assert resolve_config(cfg.to_dict()).to_dict() == cfg.to_dict()
    assert resolve_config("phsafe-2020").total_budget() == pytest.approx(1.257281, abs=1e-9)
    assert resolve_config(str(FIXTURE / "config.json")).to_dict() == cfg.to_dict()
    with pytest.raises(ValidationError, match="presets"):
        resolve_config(None, FIXTURE.parent)


def test_unknown_sample_name_lists_known_samples() -> None:
    with pytest.raises(DataValidationError, match="unknown sample"):
        load_inputs("no_such_sample_or_dir")


def test_prepared_extract_is_reused_and_checked() -> None:
    extract, config = load_inputs(FIXTURE)
    prepared = prepare_extract(extract, config.state_filter)
    a = run_phsafe(extract, config, seed=3, non_private=True)
    b = run_phsafe(extract, config, seed=3, non_private=True, prepared=prepared)
    assert all(a.official[t].equals(b.official[t]) for t in a.official)
    other = PHSafeConfig.from_json({**config.to_dict(), "state_filter": ["44"]})
    with pytest.raises(ValidationError, match="prepare it again"):
        run_phsafe(extract, other, seed=3, prepared=prepared)
