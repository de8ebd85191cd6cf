"""Blau index, its quintiles and bias tables; PF's homogeneity index (docs/science.md §5)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.errors import ValidationError
from engine.metrics.blau import (
    blau_index,
    blau_quintile_bias,
    blau_table,
    homogeneity_bias,
    homogeneity_index_from_histogram,
    homogeneity_index_from_tidy,
    raceeth_counts_from_histogram,
    raceeth_counts_from_tidy,
    rank_quintiles,
)
from engine.metrics.srs import tabulate_tidy


def test_blau_extremes() -> None:
    one_group = np.zeros(8)
    one_group[3] = 17
    assert blau_index(one_group) == pytest.approx(0.0)
    assert blau_index(np.full(8, 5)) == pytest.approx(1 - 1 / 8)
    assert np.isnan(blau_index(np.zeros(8)))
    assert blau_index([[1, 1, 0, 0, 0, 0, 0, 0]])[0] == pytest.approx(0.5)
    with pytest.raises(ValidationError):
        blau_index([-1, 2])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1) | st.just(0.0), min_size=1, max_size=300))
def test_quintiles_have_equal_counts(values: list[float]) -> None:
    q = rank_quintiles(values)
    counts = np.bincount(q, minlength=6)[1:]
    assert counts.max() - counts.min() <= 1
    assert counts.sum() == len(values)
    # Monotone: a strictly larger value never lands in a lower quintile.
    v = np.asarray(values)
    order = np.argsort(v, kind="stable")
    assert (np.diff(q[order])[np.diff(v[order]) > 0] >= 0).all()


def test_quintiles_skip_nan() -> None:
    q = rank_quintiles([np.nan, 0.1, 0.2, 0.3, 0.4, 0.5])
    assert q[0] == 0 and sorted(q[1:].tolist()) == [1, 2, 3, 4, 5]


def test_counts_from_tidy_match_histogram(histogram) -> None:
    tidy = tabulate_tidy(histogram, histogram.counts, ("TOTAL", "RACEETH", "DETAILED"))
    from_tidy = blau_table(raceeth_counts_from_tidy(tidy)).sort_values(["geolevel", "geounit"])
    from_hist = blau_table(raceeth_counts_from_histogram(histogram)).sort_values(
        ["geolevel", "geounit"]
    )
    assert np.allclose(from_tidy["population"], from_hist["population"])
    assert np.allclose(from_tidy["blau"], from_hist["blau"], equal_nan=True)
    assert (from_tidy["quintile"].to_numpy() == from_hist["quintile"].to_numpy()).all()


def test_counts_from_tidy_rejects_unknown_cells() -> None:
    tidy = pd.DataFrame(
        {
            "geolevel": "B",
            "geounit": "1",
            "query": "RACEETH",
            "cell": ["x"],
            "true": [1],
            "estimate": [1],
        }
    )
    with pytest.raises(ValidationError, match="not Blau groups"):
        raceeth_counts_from_tidy(tidy)
    with pytest.raises(ValidationError, match="no 'RACE'"):
        raceeth_counts_from_tidy(tidy, query="RACE")


def test_quintile_bias_reports_signed_error(histogram) -> None:
    blau = blau_table(raceeth_counts_from_histogram(histogram))
    block_blau = blau[blau["geolevel"] == "Block"]
    # Estimate = true + 1 in the most homogeneous quintile, − 2 in the most diverse one.
    shift = block_blau.set_index("geounit")["quintile"].map({1: 1.0, 5: -2.0}).fillna(0.0)
    tidy = tabulate_tidy(histogram, histogram.counts, ("TOTAL",), levels=("Block",))
    tidy["estimate"] = tidy["true"] + tidy["geounit"].map(shift).to_numpy()
    bias = blau_quintile_bias(tidy, blau).set_index("quintile")
    assert bias.loc[1, "mean_signed_error"] == pytest.approx(1.0)
    assert bias.loc[5, "mean_signed_error"] == pytest.approx(-2.0)
    assert bias.loc[3, "mean_signed_error"] == pytest.approx(0.0)
    non_empty = int((block_blau["quintile"] > 0).sum())
    assert bias["n_geounits"].sum() == non_empty
    assert (bias["blau_low"].diff().dropna() >= 0).all()


def test_quintile_bias_uses_detailed_when_total_missing(histogram) -> None:
    blau = blau_table(raceeth_counts_from_histogram(histogram))
    tidy = tabulate_tidy(histogram, histogram.counts + 1, ("DETAILED",), levels=("County",))
    bias = blau_quintile_bias(tidy, blau)
    blocks_per_county = histogram.geography.groupby("County").size().to_numpy()
    assert np.allclose(bias["mean_signed_error"], histogram.schema.size * blocks_per_county)
    with pytest.raises(ValidationError, match="none of the queries"):
        blau_quintile_bias(tidy.assign(query="OTHER"), blau)


def test_homogeneity_index_tidy_and_histogram_agree(histogram) -> None:
    tidy = tabulate_tidy(histogram, histogram.counts, ("TOTAL", "DETAILED"))
    a = homogeneity_index_from_tidy(tidy).sort_values(["geolevel", "geounit"])
    b = homogeneity_index_from_histogram(histogram).sort_values(["geolevel", "geounit"])
    assert a["homogeneity_index"].tolist() == b["homogeneity_index"].tolist()
    empty_block = histogram.geography["Block"].iloc[0]
    assert int(b.set_index("geounit").loc[empty_block, "homogeneity_index"]) == 16
    bias = homogeneity_bias(tidy.assign(estimate=tidy["true"] + 3), b)
    assert np.allclose(bias["mean_signed_error"], 3.0)


def test_empty_geounits_are_homogeneous_by_default(histogram) -> None:
    counts = raceeth_counts_from_histogram(histogram)
    default = blau_table(counts)
    excluded = blau_table(counts, empty_blau=None)
    empty = default["population"] == 0
    assert empty.any()
    assert (default.loc[empty, "blau"] == 0).all() and (default.loc[empty, "quintile"] >= 1).all()
    assert excluded.loc[empty, "blau"].isna().all() and (excluded.loc[empty, "quintile"] == 0).all()


def test_tabulation_bias_from_blocks_and_geography_labels(histogram) -> None:
    """Tabulation levels summed from blocks; on the conventional spine they equal the spine's."""
    from engine.metrics.blau import (
        blau_bias_report,
        raceeth_counts_from_tidy,
        tabulation_blau_bias,
        tabulation_totals,
    )
    from engine.metrics.srs import srs_tidy

    tidy = srs_tidy(histogram, 0.5, np.random.default_rng(3), ("TOTAL", "RACEETH"))
    blocks = tidy[(tidy["geolevel"] == "Block") & (tidy["query"] == "TOTAL")]
    order = histogram.geography["Block"].astype(str)
    est = blocks.set_index("geounit").loc[order, "estimate"].to_numpy()
    totals = tabulation_totals(histogram, est)
    tract = totals[totals["geolevel"] == "Tract"].set_index("geounit")
    tidy_tract = tidy[(tidy["geolevel"] == "Tract") & (tidy["query"] == "TOTAL")]
    assert tract.loc[tidy_tract["geounit"], "estimate"].to_numpy() == pytest.approx(
        tidy_tract["estimate"].to_numpy()
    )
    # Conventional spine: one set of numbers per level, marked "spine = tabulation".
    report = blau_bias_report(tidy, histogram, est, spine_counts=raceeth_counts_from_tidy(tidy))
    assert set(report["geography"]) == {"spine = tabulation"}
    direct = tabulation_blau_bias(histogram, est)
    left = report.set_index(["geolevel", "quintile"])["mean_signed_error"].sort_index()
    right = direct.set_index(["geolevel", "quintile"])["mean_signed_error"].sort_index()
    assert left.to_numpy() == pytest.approx(right.to_numpy())
    # A spine whose Tract level has other geounits (an AIAN-style split): both are kept.
    split = tidy.copy()
    is_tract = split["geolevel"] == "Tract"
    split.loc[is_tract, "geounit"] = split.loc[is_tract, "geounit"] + "|inside"
    mixed = blau_bias_report(split, histogram, est, spine_counts=raceeth_counts_from_tidy(split))
    geo = dict(zip(mixed["geolevel"], mixed["geography"], strict=False))
    assert geo["Tract (spine)"] == "spine" and geo["Tract"] == "tabulation"
    with pytest.raises(ValidationError, match="one value per block"):
        tabulation_totals(histogram, est[:-1])
