"""The official config.json (PHSafe 3.0.0) and the PHS Table 10 presets."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from engine.core.errors import ValidationError
from engine.phsafe.config import PHSafeConfig, preset

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "phsafe_official"


def test_official_configs_parse_with_infinity() -> None:
    c1 = PHSafeConfig.from_json(FIXTURES / "e2e_test1" / "config.json")
    assert c1.privacy_defn == "puredp" and c1.state_filter == ["06"]
    assert c1.budget("PH2", "usa_*") == 1.0 and c1.tau["PH2"] == 10
    c2 = PHSafeConfig.from_json(FIXTURES / "e2e_test2" / "config.json")
    assert math.isinf(c2.budget("PH3", "state_A-G"))
    again = PHSafeConfig.from_json(c2.to_json())
    assert again.to_dict() == c2.to_dict()


def test_table10_preset_total_and_puerto_rico() -> None:
    us = preset("production-us")
    assert us.total_budget() == pytest.approx(1.257281, abs=1e-9)
    assert us.tau == {"PH1_num": 10, "PH2": 10, "PH3": 6, "PH4": 10, "PH6": 6, "PH7": 10}
    pr = preset("production-pr")
    assert pr.is_puerto_rico
    assert all(
        not lvl.startswith("usa_") for t in pr.privacy_budget for lvl in pr.enabled_levels(t)
    )


def _raw() -> dict:
    return json.loads((FIXTURES / "e2e_test1" / "config.json").read_text())


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda c: c["privacy_budget"]["PH2"].update({"usa_A-G": 1.0}), "allowed"),
        (lambda c: c["privacy_budget"]["PH1_num"].update({"usa_*": -1}), "≥ 0"),
        (lambda c: c["tau"].pop("PH3"), "tau is missing"),
        (lambda c: c["tau"].update({"PH3": 0}), "at least 1"),
        (lambda c: c.update({"state_filter": ["06", "72"]}), "Puerto Rico"),
        (lambda c: c.update({"state_filter": ["99"]}), "invalid code"),
        (lambda c: c.update({"privacy_defn": "approxdp"}), "privacy_defn"),
        (lambda c: c.update({"state_filter": ["72"]}), "no Nation level"),
        (lambda c: c["privacy_budget"].update({"PH5_num": {"usa_*": 1.0}}), "derived"),
    ],
)
def test_invalid_configs_raise_named_errors(mutate, message: str) -> None:
    raw = _raw()
    mutate(raw)
    with pytest.raises(ValidationError, match=message):
        PHSafeConfig.from_json(raw)


def test_unknown_preset_lists_choices() -> None:
    with pytest.raises(ValidationError, match="production-us"):
        preset("nope")


def test_empty_state_filter_means_states_and_dc_and_tau_only_for_measured_tables() -> None:
    raw = _raw()
    raw["state_filter"] = []
    raw["privacy_budget"]["PH3"] = {lvl: 0.0 for lvl in raw["privacy_budget"]["PH3"]}
    raw["tau"].pop("PH3")
    config = PHSafeConfig.from_json(raw)
    assert len(config.state_filter) == 51 and "11" in config.state_filter
    assert "72" not in config.state_filter
    assert "PH3" not in config.to_dict()["tau"]


def test_phexplore_budget_presets_convert() -> None:
    from engine.dp.presets import load_phsafe_preset

    us = PHSafeConfig.from_json(load_phsafe_preset("phsafe-2020").to_official_config())
    # PHS Table 10: total unbounded ρ of the US production run.
    assert us.total_budget() == pytest.approx(1.257281, abs=1e-9)
    assert preset("production-us").total_budget() == pytest.approx(1.257281, abs=1e-9)
    pr = PHSafeConfig.from_json(load_phsafe_preset("phsafe-2020-pr").to_official_config())
    assert pr.is_puerto_rico
