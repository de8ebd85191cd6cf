"""Bypass of geounits (SPN Algorithm 3, Theorem 3) on hand-made trees."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from engine.core.errors import ValidationError
from engine.topdown.spine.bypass import bypass_geounits, node_depths
from tests.engine.topdown.helpers import path_share_sums

# 0 US(1/10) ─ 1 State(2/10) ─┬─ 2 County(3/10) ─ 4 Tract(1/10) ─┬─ 6 Block(3/10)
#                             │                                 └─ 7 Block(3/10)
#                             └─ 3 County(3/10) ─ 5 Tract(1/10) ─── 8 Block(3/10)
PARENT = np.array([-1, 0, 1, 1, 2, 3, 4, 4, 5])
LEVEL_SHARE = [Fraction(1, 10), Fraction(2, 10), Fraction(3, 10), Fraction(1, 10), Fraction(3, 10)]
DEPTH = node_depths(PARENT)
SHARE = np.array([LEVEL_SHARE[d] for d in DEPTH], dtype=object)
LEAVES = np.array([6, 7, 8])


def test_zcdp_bypass_removes_exactly_the_single_child_parents():
    result = bypass_geounits(PARENT, SHARE)
    single_child = {u for u in range(PARENT.size) if np.count_nonzero(PARENT == u) == 1}  # noqa: SIM300
    assert set(np.flatnonzero(~result.kept)) == single_child == {0, 2, 3, 5}
    # the state becomes the root; the tract under county 2 hangs from the state
    assert result.parent[1] == -1
    assert result.parent[4] == 1
    assert result.parent[8] == 1
    assert result.share[1] == Fraction(3, 10)
    assert result.share[4] == Fraction(4, 10)  # tract + county
    assert result.share[8] == Fraction(7, 10)  # block + tract + county


def test_bypass_conserves_every_block_path_sum():
    before = path_share_sums(PARENT, SHARE, LEAVES)
    result = bypass_geounits(PARENT, SHARE)
    after = path_share_sums(result.parent, result.share, LEAVES)
    assert before == after == [Fraction(1)] * 3
    assert all(isinstance(v, Fraction) for v in after)


def test_kept_nodes_form_a_tree_with_no_single_child_parent():
    result = bypass_geounits(PARENT, SHARE)
    kept = np.flatnonzero(result.kept)
    for u in kept:
        assert result.parent[u] == -1 or result.kept[result.parent[u]]
        assert (result.parent[kept] == u).sum() != 1


def test_pure_dp_rule_bypasses_parents_with_generous_children():
    # root(0.2) ─ p(0.2) ─ 3 children(0.6 each... ) : 0.6 ≥ (3−1)·0.2/2 → bypass p
    parent = np.array([-1, 0, 1, 1, 1, 0])
    share = np.array([0.2, 0.2, 0.6, 0.6, 0.6, 0.8])
    zcdp = bypass_geounits(parent, share)
    assert zcdp.kept.all()
    pure = bypass_geounits(parent, share, pure_dp=True)
    assert np.flatnonzero(~pure.kept).tolist() == [1]
    assert pure.parent[2:5].tolist() == [0, 0, 0]
    assert pure.share[2:5] == pytest.approx([0.8, 0.8, 0.8])
    assert path_share_sums(pure.parent, pure.share, [2, 3, 4, 5]) == pytest.approx([1.0] * 4)


def test_pure_dp_rule_keeps_parents_with_stingy_children():
    # 4 children with 0.1 each under a parent with 0.4: 0.1 < (4−1)·0.4/2
    parent = np.array([-1, 0, 1, 1, 1, 1, 0])
    share = np.array([0.5, 0.4, 0.1, 0.1, 0.1, 0.1, 0.5])
    assert bypass_geounits(parent, share, pure_dp=True).kept.all()


def test_bad_trees_are_rejected():
    with pytest.raises(ValidationError, match="exactly one root"):
        bypass_geounits(np.array([-1, -1]), np.array([0.5, 0.5]))
    with pytest.raises(ValidationError, match="one share per node"):
        bypass_geounits(PARENT, np.ones(3))
    with pytest.raises(ValidationError, match="cycle"):
        node_depths(np.array([-1, 2, 1]))


def test_a_merged_geounit_takes_the_query_shares_of_the_topmost_bypassed_parent():
    # SPN §5: bypassing u puts its lone child in u's geolevel (the DAS code's definition), so the
    # child is measured with u's level query proportions; along a chain, the topmost one's.
    result = bypass_geounits(PARENT, SHARE)
    kept = np.flatnonzero(result.kept)
    owner = dict(zip(kept.tolist(), result.query_owner[kept].tolist(), strict=True))
    assert owner[1] == 0  # the state took the bypassed US root's place
    assert owner[4] == 2  # tract under county 2 (county bypassed)
    assert owner[8] == 3  # block under tract 5 under county 3: both bypassed, county is topmost
    assert owner[6] == 6 and owner[7] == 6 + 1  # blocks with siblings keep their own level
