"""Spines of a run as GeoTrees with budget proportions (SPN §1, §4–§6; Theorem 3 accounting)."""

from __future__ import annotations

import importlib.util
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from engine.core.errors import ValidationError
from engine.data.histogram import BlockHistogram
from engine.schema.attributes import HHGQ, VOTINGAGE, Schema
from engine.topdown.spine.build import (
    OPTIMIZED_BLOCK_GROUP_LEVEL,
    PRODUCTION_ROOT_FRACTION,
    build_spine,
    gq_signature,
)
from engine.topdown.spine.levels import SpineLevels
from engine.topdown.spine.osed import entity_osed
from tests.engine.topdown.helpers import path_share_sums

_spec = importlib.util.spec_from_file_location(
    "spine_toy", Path(__file__).with_name("spine_toy.py")
)
_toy = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_toy)  # type: ignore[union-attr]
toy_histogram, ALLOCATION, CITY, WARDS = _toy.toy_histogram, _toy.ALLOCATION, _toy.CITY, _toy.WARDS


def block_path_sums(built) -> set:
    tree = built.tree
    return set(path_share_sums(tree.parent, np.array(built.share, dtype=object), tree.block_node))


def test_conventional_spine_folds_the_single_child_root_exactly():
    built = build_spine(toy_histogram(), "conventional", ALLOCATION)
    tree = built.tree
    assert tree.levels == ("State", "County", "Tract", "Block_Group", "Block")
    assert tree.node_id[0] == "44" and built.n_bypassed == 1
    assert built.share[0] == ALLOCATION.level_shares["State"]
    assert block_path_sums(built) == {Fraction(1)}
    assert built.invariants == {"State": ("TOTAL",)}
    # no other bypass: the lone block group of tract 44001000200 stays
    assert "440010002001" in tree.node_id
    budget = built.budget(ALLOCATION, list(ALLOCATION.all_queries()))
    block = tree.nodes_at_level("Block")[0]
    assert budget[block, 0] == pytest.approx(
        ALLOCATION.query_budget("Block", ALLOCATION.all_queries()[0])
    )


def test_aian_spine_keeps_a_whole_state_root_above_the_two_branches():
    built = build_spine(toy_histogram(), "aian", ALLOCATION, special_areas=CITY)
    tree = built.tree
    assert tree.levels[0] == "US" and tree.parent[0] == -1
    states = tree.nodes_at_level("State")
    assert sorted(tree.node_id[s] for s in states) == ["44|inside", "44|outside"]
    assert built.invariants == {"US": ("TOTAL",)}  # the state total holds for the two branches
    state_share = ALLOCATION.level_shares["State"]
    assert built.share[0] == state_share * PRODUCTION_ROOT_FRACTION
    assert built.share[states[0]] == state_share * (1 - PRODUCTION_ROOT_FRACTION)
    assert block_path_sums(built) == {Fraction(1)}
    assert entity_osed(built.levels, CITY.union())[0] == 1


def test_optimized_spine_bypasses_and_brings_the_wards_closer():
    hist = toy_histogram()
    conventional = SpineLevels.from_geography(hist.geography, hist.levels)
    built = build_spine(hist, "optimized", ALLOCATION, special_areas=CITY, entities=[CITY, WARDS])
    tree = built.tree
    assert OPTIMIZED_BLOCK_GROUP_LEVEL in tree.levels and "Block_Group" not in tree.levels
    assert built.n_bypassed > 0
    # no kept parent has exactly one child
    counts = np.bincount(tree.parent[1:], minlength=tree.n_nodes)
    assert not np.any(counts == 1)
    assert block_path_sums(built) == {Fraction(1)}
    membership = WARDS.membership()
    assert entity_osed(built.levels, membership).sum() < entity_osed(conventional, membership).sum()


def test_optimized_with_tract_groups_and_without_branch():
    built = build_spine(
        toy_histogram(), "optimized", ALLOCATION, entities=[WARDS], tract_groups_enabled=True
    )
    assert "Tract_Group" in built.levels.names
    assert block_path_sums(built) == {Fraction(1)}


def test_spine_option_errors():
    hist = toy_histogram()
    with pytest.raises(ValidationError, match="unknown spine"):
        build_spine(hist, "bogus", ALLOCATION)
    with pytest.raises(ValidationError, match="needs special areas"):
        build_spine(hist, "aian", ALLOCATION)
    with pytest.raises(ValidationError, match="needs target entities"):
        build_spine(hist, "optimized", ALLOCATION)
    with pytest.raises(ValidationError, match="takes no special areas"):
        build_spine(hist, "conventional", ALLOCATION, special_areas=CITY)


def test_gq_signature_from_the_hhgq_attribute_and_from_extra():
    hist = toy_histogram()
    assert gq_signature(hist) is None
    schema = Schema("gq_toy", (HHGQ, VOTINGAGE))
    counts = np.zeros((_toy.N, schema.size), dtype=np.int64)
    counts[:, 0] = 3  # household population everywhere
    counts[1, 2 * 1] = 4  # block 1: GQ type 1
    counts[2, 2 * 5 + 1] = 2  # block 2: GQ type 5
    counts[3, 2 * 1] = 1  # block 3: GQ type 1, like block 1
    gq_hist = BlockHistogram(schema, hist.levels, hist.geography, counts)
    signature = gq_signature(gq_hist)
    assert signature[1] == signature[3] != signature[2]
    assert len({signature[0], signature[1], signature[2]}) == 3
    assert np.all(signature[4:] == signature[0])
    hist.extra["gq_population"] = counts.reshape(_toy.N, 8, 2).sum(axis=2)[:, 1:]
    assert np.array_equal(gq_signature(hist), signature)


def test_a_bypassed_root_chain_keeps_the_total_invariant_on_the_new_root():
    hist = toy_histogram()
    one_county = np.array([i for i, b in enumerate(_toy.BLOCK_IDS) if b.startswith("44001")])
    geography = hist.geography.iloc[one_county].reset_index(drop=True)
    sub = BlockHistogram(hist.schema, hist.levels, geography, hist.counts[one_county])
    built = build_spine(sub, "conventional", ALLOCATION)
    assert built.tree.levels[0] == "County" and built.n_bypassed == 2  # US and State folded
    assert built.invariants["County"] == ("TOTAL",)
    assert block_path_sums(built) == {Fraction(1)}


def test_a_bypassed_lone_block_group_is_measured_with_the_tract_query_shares():
    # SPN §5, Algorithm 3, Observation 1: tract 44001000200 has one block group; bypassing the
    # tract gives the block group the tract's γ *and* the tract level's query proportions.
    built = build_spine(toy_histogram(), "conventional", ALLOCATION, bypass=True)
    tree = built.tree
    node = tree.node_id.index("440010002001")
    assert "44001000200" not in tree.node_id
    shares = ALLOCATION.level_shares
    assert built.share[node] == shares["Tract"] + shares["Block_Group"]
    assert built.query_level[node] == "Tract"
    names = list(ALLOCATION.all_queries())
    budget = built.budget(ALLOCATION, names)
    for j, q in enumerate(names):
        expected = ALLOCATION.rho * built.share[node] * ALLOCATION.query_share("Tract", q)
        assert budget[node, j] == pytest.approx(float(expected), rel=1e-12)
    # a block group with siblings keeps its own level's proportions
    other = tree.node_id.index("440010001001")
    assert built.query_level[other] == "Block_Group"
