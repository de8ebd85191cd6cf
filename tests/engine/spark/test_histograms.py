"""Spark's true histograms equal the tree's sums (TDA §5; sparse block histograms in a
DataFrame, upper levels by ``groupBy``).

On a county of the shipped RI sample (conventional spine) and on a hand-made spine with a bypassed
level (a block directly under a tract) and a coarser leaf (three blocks on one leaf), from dense
and from sparse block counts: the same integers as :meth:`GeoTree.aggregate`, and only non-zero
cells in the long DataFrame and in the CSR result.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from engine.data.inputs import load_topdown_input
from engine.runs.data_source import BlockFilter
from engine.runs.topdown import filter_blocks
from engine.spark.histograms import (
    _ancestors,
    block_cells,
    spark_truth,
    write_block_cells,
)
from engine.topdown.geography import GeoTree

pytestmark = pytest.mark.spark


def _bypass_tree() -> GeoTree:
    """root 0 > county 1 > tracts 2, 3; tract 2 > block group 4 > blocks 6, 7; tract 3 > block 5
    (its block group bypassed); blocks 8, 9, 10 share leaf 7 (a coarser leaf)."""
    return GeoTree(
        levels=("State", "County", "Tract", "Block_Group", "Block"),
        level=np.array([0, 1, 2, 2, 3, 4, 4, 4]),
        parent=np.array([-1, 0, 1, 1, 2, 3, 4, 4]),
        node_id=("44", "44001", "t1", "t2", "bg1", "b5", "b6", "b7"),
        block_node=np.array([6, 5, 7, 7, 7]),
    )


def test_ancestors_follow_the_spine_to_the_root() -> None:
    up = _ancestors(_bypass_tree())
    assert up[5].tolist() == [0, 1, 3, 5, -1]  # bypassed block group: block at depth 3
    assert up[7].tolist() == [0, 1, 2, 4, 7]
    assert up[0].tolist() == [0, -1, -1, -1, -1]


def test_hand_made_spine_dense_and_sparse(spark) -> None:
    tree = _bypass_tree()
    rng = np.random.default_rng(4)
    counts = rng.integers(0, 3, size=(5, 6)) * (rng.random((5, 6)) < 0.5)
    want = tree.aggregate(counts.astype(np.int64))
    for given in (counts, sp.csr_matrix(counts)):
        got = spark_truth(spark, tree, given, 6)
        assert got.dtype == np.int64 and np.all(got.data != 0)
        assert np.array_equal(got.toarray(), want)


def test_ri_county_equals_tree_sums_and_writes_parquet(spark, tmp_path: Path) -> None:
    hist = filter_blocks(load_topdown_input("ri2010"), BlockFilter("County", ("44001",)))
    tree = GeoTree.from_histogram(hist)
    cells = block_cells(spark, tree, hist.counts)
    assert cells.count() == int(np.count_nonzero(hist.counts))
    write_block_cells(cells, str(tmp_path / "cells"))
    table = pq.read_table(tmp_path / "cells")
    assert table.column_names == ["node", "cell", "count"]
    assert int(table.column("count").to_numpy().sum()) == int(hist.counts.sum())
    got = spark_truth(spark, tree, hist.counts, hist.counts.shape[1])
    assert np.array_equal(got.toarray(), tree.aggregate(hist.counts.astype(np.int64)))
