"""GeoTree: conventional spine from a histogram, nesting checks, aggregation, families."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from engine.core.errors import ValidationError
from engine.data.histogram import BlockHistogram
from engine.topdown.geography import GeoTree
from tests.engine.topdown.helpers import TWO_CELL_SCHEMA, tiny_histogram


def test_from_histogram_builds_root_first_tree_with_block_leaves():
    hist = tiny_histogram()
    tree = GeoTree.from_histogram(hist)
    assert tree.levels == ("State", "County", "Block")
    assert tree.node_id[:3] == ("44", "44001", "44003")
    assert tree.parent.tolist() == [-1, 0, 0, 1, 1, 2, 2]
    assert tree.block_node.tolist() == [3, 4, 5, 6]
    counts = tree.aggregate(hist.counts)
    assert counts[0].tolist() == [14, 7]
    assert counts[1].tolist() == [8, 3] and counts[2].tolist() == [6, 4]
    assert [f.tolist() for f in tree.families_by_depth()] == [[0], [1, 2]]


def test_skipping_a_level_and_adding_a_us_root():
    hist = tiny_histogram()
    tree = GeoTree.from_histogram(hist, ("US", "State", "Block"))
    assert tree.node_id[0] == "US" and tree.level_names[1] == "State"
    assert tree.aggregate(hist.counts)[0].sum() == 21
    assert tree.children(1).size == 4


def test_root_with_several_geounits_and_bad_nesting_are_errors():
    hist = tiny_histogram()
    with pytest.raises(ValidationError, match="add a 'US' root"):
        GeoTree.from_histogram(hist, ("County", "Block"))
    geo = hist.geography.copy()
    geo["Tract"] = ["T1", "T1", "T1", "T2"]  # T1 spans two counties
    bad = BlockHistogram(TWO_CELL_SCHEMA, ("State", "County", "Tract", "Block"), geo, hist.counts)
    with pytest.raises(ValidationError, match="does not nest"):
        GeoTree.from_histogram(bad)
    with pytest.raises(ValidationError, match="not a geography column"):
        GeoTree.from_histogram(hist, ("State", "Tract"))


def test_general_tree_invariants_are_checked():
    with pytest.raises(ValidationError, match="numbered before"):
        GeoTree(
            ("L0", "L1"), np.array([0, 1, 1]), np.array([-1, 2, 0]), ("r", "a", "b"), np.array([1])
        )
    with pytest.raises(ValidationError, match="leaf"):
        GeoTree(("L0", "L1"), np.array([0, 1]), np.array([-1, 0]), ("r", "a"), np.array([0]))
    # A child may skip a level: block directly under the root of a three-level tree.
    tree = GeoTree(
        ("State", "County", "Block"),
        np.array([0, 1, 2, 2]),
        np.array([-1, 0, 1, 0]),
        ("s", "c", "b1", "b2"),
        np.array([2, 3]),
    )
    assert tree.aggregate(np.array([[1, 2], [3, 4]]))[0].tolist() == [4, 6]
    assert isinstance(tree.nodes_frame(), pd.DataFrame)
