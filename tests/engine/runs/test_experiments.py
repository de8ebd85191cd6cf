"""Experiments over ρ × seeds on small real subsets of ri2010 (TopDown engine), plus the grid logic."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from engine.core.errors import ValidationError
from engine.data.histogram import subset_histogram
from engine.data.samples import load_topdown_sample
from engine.metrics.experiments import moe_coverage_table
from engine.runs.experiments import run_experiment


@pytest.fixture(scope="module")
def ri2010():
    return load_topdown_sample("ri2010")


@pytest.fixture(scope="module")
def one_tract_experiment(ri2010):
    hist = subset_histogram(ri2010, "Tract", ["44007001000"])
    return run_experiment(
        "topdown",
        hist,
        [0.5, 20],
        [0, 1],
        n_boot=10,
        srs_fractions=[0.3, 0.9, 1.0],
        data_name="ri2010 tract 44007001000",
    )


def test_grid_is_complete_and_tidy(one_tract_experiment) -> None:
    runs = one_tract_experiment.runs
    expected = {
        "rho",
        "seed",
        "geolevel",
        "query",
        "mae",
        "median_ae",
        "epl",
        "epl_low",
        "epl_high",
        "n_residuals",
        "runtime_s",
    }
    assert expected <= set(runs.columns)
    grid = runs.groupby(["rho", "seed"]).size()
    assert len(grid) == 4 and grid.nunique() == 1
    assert set(runs["query"]) == {"TOTAL", "VOTINGAGE", "RACEETH", "DETAILED"}
    summary = one_tract_experiment.summary()
    assert (summary["n_seeds"] == 2).all()
    assert (summary["mae_low"] <= summary["mae_high"]).all()


def test_mae_falls_with_rho(one_tract_experiment) -> None:
    summary = one_tract_experiment.summary().set_index(["rho", "geolevel", "query"])
    low = summary.loc[(0.5, "Block", "DETAILED"), "mae_mean"]
    high = summary.loc[(20.0, "Block", "DETAILED"), "mae_mean"]
    assert high < low


def test_invariant_state_total_has_no_epl(one_tract_experiment) -> None:
    runs = one_tract_experiment.runs
    state_total = runs[(runs["geolevel"] == "State") & (runs["query"] == "TOTAL")]
    assert (state_total["mae"] == 0).all()
    assert state_total["epl"].isna().all()
    assert state_total["reason"].str.contains("residual").all()


def test_srs_on_same_axes(one_tract_experiment) -> None:
    srs = one_tract_experiment.srs
    assert set(srs["fraction"]) == {0.3, 0.9, 1.0}
    assert (srs[srs["fraction"] == 1.0]["mae"] == 0).all()
    tradeoff = one_tract_experiment.tradeoff("Block", "TOTAL", error="mae")
    assert set(tradeoff["design"]) == {"topdown", "srs"}
    assert {"parameter", "error", "epl", "epl_low", "epl_high", "n_residuals"} <= set(
        tradeoff.columns
    )
    with pytest.raises(ValidationError, match="no results"):
        one_tract_experiment.tradeoff("Nation", "TOTAL")


def test_moe_coverage_near_nominal(one_tract_experiment) -> None:
    cov = one_tract_experiment.moe_coverage
    blocks = cov[(cov["geolevel"] == "Block") & (cov["query"] == "DETAILED")]
    assert (blocks["n_cells"] > 500).all()
    assert blocks["coverage_exact"].between(0.85, 1.0).all()
    assert (cov["coverage_exact"].between(0, 1)).all()


def test_blau_tables(one_tract_experiment) -> None:
    blau = one_tract_experiment.blau_summary()
    block = blau[(blau["geolevel"] == "Block") & (blau["rho"] == 0.5)]
    assert block["quintile"].tolist() == [1, 2, 3, 4, 5]
    assert block["n_geounits"].max() - block["n_geounits"].min() <= 1


def test_write(one_tract_experiment, tmp_path) -> None:
    written = one_tract_experiment.write(tmp_path / "out")
    names = {p.name for p in written}
    assert {
        "runs.csv",
        "summary.csv",
        "srs.csv",
        "blau_bias.csv",
        "moe_coverage.csv",
        "experiment.json",
    } <= names
    again = pd.read_csv(tmp_path / "out" / "runs.csv")
    assert len(again) == len(one_tract_experiment.runs)


def test_same_seed_same_results(ri2010, one_tract_experiment) -> None:
    hist = subset_histogram(ri2010, "Tract", ["44007001000"])
    rerun = run_experiment("topdown", hist, [0.5], [1], n_boot=10, srs_fractions=None)
    first = one_tract_experiment.runs
    first = first[(first["rho"] == 0.5) & (first["seed"] == 1)].reset_index(drop=True)
    assert np.allclose(rerun.runs["mae"], first["mae"])


def test_blau_bias_pattern_and_shrinkage(ri2010) -> None:
    """TDA Table 13 sign pattern at low ρ on a real county (Bristol, 1,092 blocks); smaller at high ρ."""
    hist = subset_histogram(ri2010, "County", ["44001"])
    result = run_experiment(
        "topdown",
        hist,
        [0.1, 10],
        [0],
        n_boot=0,
        srs_fractions=None,
        queries=("TOTAL", "RACEETH", "DETAILED"),
    )
    blau = result.blau_summary()
    block = blau[blau["geolevel"] == "Block"].set_index(["rho", "quintile"])["mean_signed_error"]
    assert block[(0.1, 1)] > 0 > block[(0.1, 5)]
    assert block[(10.0, 1)] > 0
    assert block.loc[10.0].abs().max() < block.loc[0.1].abs().max()


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"engine": "magic"}, "unknown engine"),
        ({"rhos": [0.0]}, "positive"),
        ({"rhos": []}, "at least one budget"),
        ({"seeds": [1, 1]}, "distinct"),
        ({"seeds": [-1]}, "non-negative"),
    ],
)
def test_bad_grid(kwargs, fragment) -> None:
    args = {"engine": "topdown", "data": "ri2010", "rhos": [1.0], "seeds": [0], **kwargs}
    with pytest.raises(ValidationError, match=fragment):
        run_experiment(**args)


def test_subset_validation(ri2010) -> None:
    with pytest.raises(ValidationError, match="not in the data"):
        subset_histogram(ri2010, "County", ["99999"])
    with pytest.raises(ValidationError, match="unknown geolevel"):
        subset_histogram(ri2010, "Ward", ["1"])


def test_moe_coverage_table_counts() -> None:
    frame = pd.DataFrame(
        {
            "geolevel": "Block",
            "query": "TOTAL",
            "true": [10, 10, 10, 10, 10],
            "noisy": [10, 11, 14, 10, 3],
            "variance": [1.0, 1.0, 1.0, 1.0, 0.0],
            "scale": [1.0, 1.0, 1.0, 1.0, 0.0],
        }
    )
    table = moe_coverage_table(frame, mechanism="zcdp")
    row = table.iloc[0]
    assert row["n_cells"] == 4  # the invariant row is left out
    assert row["moe_exact"] == 2  # N_Z(0, 1): P(|X| ≤ 1) ≈ 0.79, P(|X| ≤ 2) ≈ 0.95
    assert row["coverage_exact"] == pytest.approx(0.75)
    with pytest.raises(ValidationError, match="mechanism"):
        moe_coverage_table(frame, mechanism="laplace")
