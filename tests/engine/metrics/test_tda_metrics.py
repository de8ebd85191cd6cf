"""TDA's definition of the absolute error, the block universe and the published tables beside it.

Before: metrics.json had only the per-cell MAE (labelled as TDA's), its block figures averaged over
every block, structural zeros included, and TDA's published tables were nowhere.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from engine.core.errors import ValidationError
from engine.data.histogram import BlockHistogram
from engine.metrics.blau import RACEETH_GROUPS, raceeth_counts_from_histogram, raceeth_fold
from engine.metrics.counted import counted_residuals
from engine.metrics.error_tables import mae_table, tda_mae_table
from engine.metrics.metrics_json import build_metrics_json, validate_metrics_json
from engine.metrics.tabulation import (
    FROM_BLOCKS,
    size_class_rows,
    tabulation_residual_sets,
    tda_mae_section,
)
from engine.metrics.tda_reference import (
    comparability,
    comparison_caption,
    load_tda_absolute_error,
    load_tda_blau_bias,
    load_tda_size_classes,
    tda_comparison,
    tda_mae_of_metrics,
)
from engine.metrics.universe import ALL, HOUSED, block_universe, universe_of_metrics
from engine.schema.attributes import REDISTRICTING_SCHEMA, RI2010_SCHEMA


def _framed(histogram: BlockHistogram) -> BlockHistogram:
    """The fixture's blocks with a unit frame: every 7th block (empty) has no unit."""
    n = histogram.n_blocks
    hu = np.where(np.arange(n) % 7 == 0, 0, 3)
    return histogram.replace(
        extra={"housing_units": hu, "gq_facilities": np.zeros((n, 7), dtype=np.int64)}
    )


def test_tda_mae_is_the_per_geounit_sum_over_cells(histogram):
    rng = np.random.default_rng(0)
    rows = []
    for g in range(5):
        for c in range(8):
            rows.append(("Tract", f"t{g}", "RACEETH", str(c), 10, 10 + rng.integers(-3, 4)))
    tidy = pd.DataFrame(rows, columns=["geolevel", "geounit", "query", "cell", "true", "estimate"])
    by_hand = (tidy["estimate"] - tidy["true"]).abs().groupby(tidy["geounit"]).sum().mean()
    assert tda_mae_table(tidy)["tda_mae"].iloc[0] == pytest.approx(by_hand)
    table = mae_table(tidy)
    assert table["tda_mae"].iloc[0] == pytest.approx(8 * table["mae"].iloc[0])


def test_universe_keeps_blocks_with_units_or_gq_and_says_so(histogram):
    framed = _framed(histogram)
    housed = block_universe(framed)
    assert housed.kind == HOUSED and housed.n_inside == framed.n_blocks - len(range(0, 60, 7))
    section = housed.section()
    assert section["blocks_left_out"] == 9 and "housing units or group quarters" in section["label"]
    assert block_universe(framed, ALL).kind == ALL
    bare = block_universe(histogram)  # no unit frame: every block, said so
    assert bare.kind == ALL and "no housing-unit frame" in bare.note
    with pytest.raises(ValidationError, match="not one of"):
        block_universe(framed, "some")
    # the restriction drops the block rows left out, nothing above the block level
    ids = framed.geography["Block"].to_numpy()
    tidy = pd.DataFrame(
        {"geolevel": ["Block"] * 60 + ["Tract"], "geounit": [*ids, "t"], "x": range(61)}
    )
    kept = housed.restrict(tidy, ids)
    assert len(kept) == 61 - 9 and "t" in set(kept["geounit"])
    nodes = housed.level_nodes("Block", np.arange(10, 70), np.arange(10, 70))
    assert nodes.size == 51 and housed.level_nodes("Tract", np.arange(3), np.arange(60)).size == 3
    assert universe_of_metrics({})["universe"] == ALL  # an old metrics.json: every block


def test_counted_tabulation_residuals_and_the_section_order():
    diff = sp.csr_matrix(np.array([[1, -2], [0, 3], [-1, 0]]))
    codes = np.array([0, 0, 1])
    answers = {"TOTAL": sp.csr_matrix(np.ones((2, 1))), "A": sp.identity(2, format="csr")}
    sets = tabulation_residual_sets(diff, {"Block_Group": (codes, 2)}, answers)
    # block group 0 = blocks 0 + 1: cells (1, 1), total 2; block group 1: (−1, 0), total −1
    assert sets[("Block_Group", "TOTAL")].n_units == 2
    section, geography = tda_mae_section(
        {("Block", "TOTAL"): counted_residuals(sp.csr_matrix(np.array([[1], [3], [1]])))},
        sets,
        tabulation_levels=["Block_Group", "Block"],
        spine_equals_tabulation=["Block"],
    )
    assert list(section) == ["Block_Group", "Block"]  # root to block
    assert section["Block_Group"]["TOTAL"] == pytest.approx(1.5)  # (|2| + |−1|) / 2
    assert section["Block_Group"]["A"] == pytest.approx(1.5)  # (1 + 1 + 1 + 0) / 2
    assert geography == {"Block_Group": FROM_BLOCKS}
    rows = size_class_rows(np.array([0, 5, 50, 500]), np.array([2, 4, 50, 490]), [("0", 0, 0)])
    assert len(rows) == 1 and rows[0]["n"] == 1 and rows[0]["mae"] == 2


def test_metrics_json_writes_tda_mae_and_the_universe(histogram):
    tidy = pd.DataFrame(
        {
            "geolevel": ["Tract"] * 4,
            "geounit": ["a", "a", "b", "b"],
            "query": ["V"] * 4,
            "cell": ["0", "1", "0", "1"],
            "true": [1, 2, 3, 4],
            "estimate": [2, 2, 1, 4],
        }
    )
    universe = block_universe(_framed(histogram)).section()
    payload = build_metrics_json(
        engine="topdown", tidy=tidy, runtime_s=1, rho=1, seed=0, error_universe=universe
    )
    assert payload["tda_mae"] == {"Tract": {"V": 1.5}} and payload["mae"]["Tract"]["V"] == 0.75
    assert payload["error_universe"]["universe"] == HOUSED
    validate_metrics_json(payload)
    with pytest.raises(ValidationError, match="tda_mae"):
        validate_metrics_json({**payload, "tda_mae": {"Tract": {"V": "x"}}})


def test_the_2016_cell_schema_folds_into_the_eight_blau_groups():
    fold = raceeth_fold(REDISTRICTING_SCHEMA).toarray()
    assert fold.shape == (2016, 8) and (fold.sum(axis=1) == 1).all()
    cells = fold.reshape(8, 2, 2, 63, 8)
    assert (cells[:, :, 1, :, 0] == 1).all()  # Hispanic of any race → hisp
    assert (cells[:, :, 0, 0, 1] == 1).all() and (cells[:, :, 0, 5, 6] == 1).all()
    assert (cells[:, :, 0, 6:, 7] == 1).all()  # CENRACE 07–63 → two or more races
    assert (raceeth_fold(RI2010_SCHEMA).toarray().reshape(2, 8, 8) == np.eye(8)).all()
    counts = sp.csr_matrix(
        ([5, 7, 2], ([0, 0, 1], [REDISTRICTING_SCHEMA.size - 1, 0, 63])), shape=(2, 2016)
    )
    geography = pd.DataFrame({"State": ["44", "44"], "Block": ["b1", "b2"]})
    hist = BlockHistogram(REDISTRICTING_SCHEMA, ("State", "Block"), geography, counts)
    table = raceeth_counts_from_histogram(hist).set_index(["geolevel", "geounit"])
    assert list(table.columns) == list(RACEETH_GROUPS)
    assert table.loc[("Block", "b1"), "hisp"] == 5 and table.loc[("Block", "b1"), "white"] == 7
    assert table.loc[("Block", "b2"), "hisp"] == 2  # cell 63 = (household, under 18, Hispanic, 01)


def test_the_published_tables_are_shipped_whole():
    absolute = load_tda_absolute_error()
    assert len(absolute) == 36 and set(absolute["table"]) == {9, 10}
    row = absolute[(absolute["geolevel"] == "Tract") & (absolute["query"] == "CENRACE")]
    assert row["baseline1"].iloc[0] == 35.04
    sizes = load_tda_size_classes()
    blocks = sizes[(sizes["table"] == 12) & (sizes["metric"] == "mae")]
    assert blocks["count"].sum() == 6_398_202  # TDA Table 2's blocks with housing units or GQ
    counties = sizes[(sizes["table"] == 11) & (sizes["metric"] == "mae")]
    assert counties["count"].sum() == 3_143
    blau = load_tda_blau_bias()
    assert blau[blau["geolevel"] == "Block"]["quintile"].tolist() == ["1 and 2", "3", "4", "5"]


def _production_payload(**sections):
    from engine.dp.presets import load_topdown_preset

    production = load_topdown_preset("topdown-2020-production")["persons"]
    return {
        "engine": "topdown",
        "allocation": production.name,
        "rho": float(production.rho),
        "run": {"config": production.to_dict(), "data": {"source": "generated"}},
        "n_geounits": {"State": 1, "County": 5, "Tract": 235, "Block": 23_133},
        **sections,
    }


def test_tda_comparison_for_production_runs_only():
    payload = _production_payload(
        tda_mae={"County": {"TOTAL": 1.6}, "Tract": {"TOTAL": 1.9, "CENRACE": 34.2}}
    )
    ok, why = comparability(payload)
    assert ok, why
    table = tda_comparison(payload)
    assert table[["geolevel", "query"]].values.tolist() == [
        ["County", "TOTAL"],
        ["Tract", "TOTAL"],
        ["Tract", "CENRACE"],
    ]
    assert table["tda"].tolist() == [1.75, 1.94, 35.04]
    caption = comparison_caption(payload)
    for words in ("population", "spine", "block universe", "3,143 counties"):
        assert words in caption
    other = _production_payload()
    other["run"]["config"] = {**other["run"]["config"], "rho": "1"}
    ok, why = comparability(other)
    assert not ok and "ρ" in why
    from engine.dp.presets import load_topdown_preset

    ri = load_topdown_preset("ri2010-production-like")["persons"]
    assert not comparability({"engine": "topdown", "run": {"config": ri.to_dict()}})[0]


def test_old_metrics_json_derive_tda_mae_from_the_per_cell_mae():
    old = {
        "mae": {"Tract": {"TOTAL": 2.0, "CENRACE": 0.5}},
        "n_cells": {"Tract": {"TOTAL": 10, "CENRACE": 630}},
        "n_geounits": {"Tract": 10},
    }
    section, note = tda_mae_of_metrics(old)
    assert section == {"Tract": {"TOTAL": 2.0, "CENRACE": pytest.approx(31.5)}}
    assert "predates tda_mae" in note
    assert tda_mae_of_metrics({"mae": {}})[0] == {}
