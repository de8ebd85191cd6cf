"""Simple-random-sampling baseline (PF): f = 1 is exact; MAE falls as f grows."""

from __future__ import annotations

import numpy as np
import pytest

from engine.core.errors import ValidationError
from engine.metrics.error_tables import mae_table
from engine.metrics.srs import sample_counts, srs_estimate, srs_sweep, srs_tidy, tabulate_tidy


def test_full_sample_has_zero_error(histogram) -> None:
    tidy = srs_tidy(histogram, 1.0, np.random.default_rng(0))
    assert (tidy["estimate"] == tidy["true"]).all()


def test_sample_is_without_replacement(histogram) -> None:
    rng = np.random.default_rng(1)
    drawn = sample_counts(histogram.counts, 0.3, rng)
    assert drawn.shape == histogram.counts.shape
    assert (drawn >= 0).all() and (drawn <= histogram.counts).all()
    assert drawn.sum() == round(0.3 * histogram.counts.sum())


def test_estimate_is_unbiased_on_average(histogram) -> None:
    rng = np.random.default_rng(2)
    mean = np.mean([srs_estimate(histogram.counts, 0.4, rng) for _ in range(300)], axis=0)
    assert np.abs(mean - histogram.counts).mean() < 0.35


def test_mae_decreases_with_fraction(histogram_factory) -> None:
    hist = histogram_factory(n_blocks=200, seed=3)
    sweep = srs_sweep(hist, [0.1, 0.3, 0.6, 0.9, 1.0], seeds=[0, 1], n_boot=0)
    for (level, query), group in sweep.groupby(["geolevel", "query"]):
        if level == "State" and query == "TOTAL":
            continue  # a fixed-size sample scaled by 1/f hits the state total up to rounding
        mae = group.groupby("fraction")["mae"].mean()
        assert (np.diff(mae.to_numpy()) < 0).all(), (level, query, mae)
        assert mae.loc[1.0] == 0


def test_sweep_columns_and_reproducibility(histogram_factory) -> None:
    hist = histogram_factory(n_blocks=40, seed=4)
    a = srs_sweep(hist, [0.5], seeds=[7], n_boot=5)
    b = srs_sweep(hist, [0.2, 0.5], seeds=[7], n_boot=5)
    assert {
        "fraction",
        "seed",
        "geolevel",
        "query",
        "mae",
        "median_ae",
        "epl",
        "epl_low",
        "epl_high",
        "n_residuals",
    } <= set(a.columns)
    assert np.allclose(a["mae"], b[b["fraction"] == 0.5]["mae"])


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, float("nan"), True])
def test_bad_fraction(histogram, bad) -> None:
    with pytest.raises(ValidationError, match="fraction"):
        srs_estimate(histogram.counts, bad, np.random.default_rng(0))


def test_tabulate_marginals(histogram) -> None:
    tidy = tabulate_tidy(histogram, histogram.counts, ("TOTAL", "RACEETH*VOTINGAGE", "VOTINGAGE"))
    state = tidy[tidy["geolevel"] == "State"]
    total = state[state["query"] == "TOTAL"]["true"].iloc[0]
    assert total == histogram.counts.sum()
    cube = histogram.counts.sum(axis=0).reshape(histogram.schema.shape)
    rv = state[state["query"] == "RACEETH*VOTINGAGE"].set_index("cell")["true"]
    assert rv["hisp|18_plus"] == cube[1, 0]
    assert rv["two|under_18"] == cube[0, 7]
    with pytest.raises(ValidationError, match="query 'SEX'"):
        tabulate_tidy(histogram, histogram.counts, ("SEX",))
    with pytest.raises(ValidationError, match="shape"):
        tabulate_tidy(histogram, histogram.counts[:3], ("TOTAL",))
    assert mae_table(tidy)["mae"].eq(0).all()
