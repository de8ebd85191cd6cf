"""PHSafe experiments: tidy measured cells, budgets rescaled to a total, grids over ρ × seeds."""

from __future__ import annotations

import numpy as np
import pytest

from engine.core.errors import ValidationError
from engine.phsafe.config import preset
from engine.runs.experiments import run_experiment
from engine.runs.phsafe_frames import scaled_config


@pytest.fixture(scope="module")
def phsafe_experiment():
    return run_experiment("phsafe", "phsafe_synthetic_us", [0.5, 50], [0, 1], n_boot=5)


def test_scaled_config_keeps_shares() -> None:
    config = preset("phsafe-2020")
    scaled = scaled_config(config, 10.0)
    assert scaled.total_budget() == pytest.approx(10.0)
    factor = 10.0 / config.total_budget()
    expected = config.budget("PH3", "state_A-G") * factor
    assert scaled.budget("PH3", "state_A-G") == pytest.approx(expected)
    assert scaled.tau == config.tau and scaled.state_filter == config.state_filter


def test_grid_per_table_and_level(phsafe_experiment) -> None:
    runs = phsafe_experiment.runs
    assert phsafe_experiment.engine == "phsafe" and phsafe_experiment.mechanism == "zcdp"
    assert {"PH1_num", "PH3", "PH7"} <= set(runs["query"])
    assert {"state_*", "state_A-G", "usa_*"} <= set(runs["geolevel"])
    assert len(runs.groupby(["rho", "seed"])) == 4
    summary = phsafe_experiment.summary().set_index(["rho", "geolevel", "query"])
    # More budget, less error at the state level (noise dominates there).
    assert (
        summary.loc[(50.0, "state_A-G", "PH3"), "mae_mean"]
        < summary.loc[(0.5, "state_A-G", "PH3"), "mae_mean"]
    )
    assert phsafe_experiment.srs.empty and phsafe_experiment.blau_summary().empty


def test_noise_coverage_near_nominal(phsafe_experiment) -> None:
    cov = phsafe_experiment.moe_coverage
    big = cov[cov["n_cells"] >= 500]
    assert not big.empty
    assert big["coverage_exact"].between(0.85, 1.0).all()


def test_tradeoff_has_only_the_engine(phsafe_experiment) -> None:
    table = phsafe_experiment.tradeoff("state_*", "PH1_num")
    assert set(table["design"]) == {"phsafe"}
    assert np.all(np.diff(table["error"].to_numpy()) < 0)


def test_phsafe_input_errors(tmp_path) -> None:
    with pytest.raises(ValidationError, match="config.json"):
        run_experiment("phsafe", tmp_path, [1.0], [0])
    with pytest.raises(ValidationError, match="CefExtract"):
        run_experiment("phsafe", 42, [1.0], [0], preset="phsafe-2020")
