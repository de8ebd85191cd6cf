"""metrics.json: builder output satisfies the documented schema and survives strict JSON."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from engine.core.errors import ValidationError
from engine.metrics.blau import blau_table, raceeth_counts_from_histogram
from engine.metrics.metrics_json import build_metrics_json, validate_metrics_json
from engine.metrics.srs import srs_tidy
from phexplore.cli._output import dumps_json


@pytest.fixture
def tidy(histogram):
    return srs_tidy(histogram, 0.5, np.random.default_rng(0), ("TOTAL", "RACEETH", "DETAILED"))


def test_build_and_validate(histogram, tidy) -> None:
    blau = blau_table(raceeth_counts_from_histogram(histogram))
    payload = build_metrics_json(
        engine="topdown",
        tidy=tidy,
        runtime_s=1.5,
        rho=1.0,
        seed=3,
        epl_boot=5,
        blau=blau,
        extra={"entity_mae": {"Providence": 3.0}},
    )
    validate_metrics_json(payload)
    assert payload["engine"] == "topdown" and payload["rho"] == 1.0 and payload["seed"] == 3
    county_total = tidy[(tidy["geolevel"] == "County") & (tidy["query"] == "TOTAL")]
    expected = (county_total["estimate"] - county_total["true"]).abs().mean()
    assert payload["mae"]["County"]["TOTAL"] == pytest.approx(expected)
    assert set(payload["blau_bias"]["Block"]) == {"1", "2", "3", "4", "5"}
    state_epl = payload["epl"]["State"]["TOTAL"]
    assert state_epl["n_residuals"] == 1 and state_epl["reason"]
    loaded = json.loads(dumps_json(payload))
    validate_metrics_json(loaded)
    assert loaded["epl"]["State"]["TOTAL"]["epl"] is None
    assert loaded["entity_mae"] == {"Providence": 3.0}
    # Every EPL says how its interval was made, and the interval holds the EPL.
    from engine.metrics.epl import INTERVAL_METHOD

    for level in payload["epl"].values():
        for entry in level.values():
            assert entry["interval"] == INTERVAL_METHOD
            values = (entry["epl"], entry["epl_low"], entry["epl_high"])
            if all(v is not None and math.isfinite(v) for v in values):
                assert entry["epl_low"] <= entry["epl"] <= entry["epl_high"]


def test_extra_may_not_overwrite(tidy) -> None:
    with pytest.raises(ValidationError, match="overwrite"):
        build_metrics_json(
            engine="x", tidy=tidy, runtime_s=0, rho=None, seed=None, extra={"mae": {}}
        )


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"mae": None}, "mae"),
        ({"seed": 1.5}, "seed"),
        ({"engine": ""}, "engine"),
        ({"mae": {"County": {"TOTAL": "big"}}}, "mae.County.TOTAL"),
        (
            {
                "epl": {
                    "County": {
                        "TOTAL": {"epl": None, "epl_low": None, "epl_high": None, "n_residuals": 5}
                    }
                }
            },
            "reason",
        ),
    ],
)
def test_validator_names_the_broken_key(tidy, change, fragment) -> None:
    payload = build_metrics_json(engine="phsafe", tidy=tidy, runtime_s=0.1, rho=None, seed=None)
    payload.update(change)
    with pytest.raises(ValidationError, match=fragment):
        validate_metrics_json(payload)
    with pytest.raises(ValidationError, match="lacks required"):
        validate_metrics_json({"engine": "x"})


def test_epl_settings_recorded_pf_by_default(tidy) -> None:
    from engine.metrics.epl_settings import PF_FUNCTION_DEFAULT, EPLSettings
    from engine.metrics.metrics_json import epl_settings_of_metrics

    payload = build_metrics_json(
        engine="topdown", tidy=tidy, runtime_s=1, rho=1.0, seed=1, epl_boot=0
    )
    assert payload["epl_settings"]["percentile"] == 95.0
    assert payload["epl_settings"]["multiplier"] == 1.0
    assert payload["epl_settings"]["pf_published"] is True
    assert epl_settings_of_metrics(payload) == EPLSettings()
    other = build_metrics_json(
        engine="topdown",
        tidy=tidy,
        runtime_s=1,
        rho=1.0,
        seed=1,
        epl_boot=0,
        epl_settings=PF_FUNCTION_DEFAULT,
    )
    assert other["epl_settings"]["pf_published"] is False
    validate_metrics_json(other)
    # A file from before the settings were recorded used 99 / 1.5.
    legacy = {k: v for k, v in other.items() if k != "epl_settings"}
    assert epl_settings_of_metrics(legacy) == PF_FUNCTION_DEFAULT
    broken = {**payload, "epl_settings": {"percentile": 20, "multiplier": 1.0}}
    with pytest.raises(ValidationError, match="epl_settings"):
        validate_metrics_json(broken)
