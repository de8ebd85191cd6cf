"""OSED (SPN Algorithm 1, eq. 2–5) on small hand-made spines."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from engine.core.errors import ValidationError
from engine.topdown.spine.bypass import bypass_geounits
from engine.topdown.spine.levels import SpineLevels
from engine.topdown.spine.osed import (
    entity_osed,
    lexicographic_le,
    reduce_osed,
    tree_osed,
)

# US > State {A, B} > County {A1: blocks 0,1; A2: 2,3; B1: 4,5} > Block
TOY = SpineLevels.from_block_labels(
    ("US", "State", "County", "Block"),
    [
        ["US"] * 6,
        ["A", "A", "A", "A", "B", "B"],
        ["A1", "A1", "A2", "A2", "B1", "B1"],
        [f"b{i}" for i in range(6)],
    ],
)


def member(*blocks: int) -> np.ndarray:
    out = np.zeros(6, dtype=bool)
    out[list(blocks)] = True
    return out


@pytest.mark.parametrize(
    ("blocks", "expected"),
    [
        ((0, 1), 1),  # a county
        ((0, 1, 2, 3), 1),  # a state
        ((0, 1, 2, 3, 4, 5), 1),  # the root
        ((3,), 1),  # a block
        ((2, 3, 4, 5), 2),  # complement of county A1: US − A1
        ((4, 5, 0, 1), 2),  # union of two counties in different states
        ((0, 2), 2),  # two blocks
        ((0, 1, 2), 2),  # state A minus one block
        ((0, 1, 2, 4), 3),  # A − b3 + b4
        ((), 0),  # empty entity
    ],
)
def test_osed_of_geounits_complements_and_unions(blocks, expected):
    assert entity_osed(TOY, member(*blocks)[:, None])[0] == expected


def brute_force_osed(spine: SpineLevels, target: np.ndarray) -> int:
    """Smallest number of geounits combined with signs ±1 that give the target indicator."""
    rows = []
    for level in range(spine.n_levels):
        for unit in range(spine.n_units(level)):
            rows.append((spine.codes[level] == unit).astype(int))
    rows = np.unique(np.array(rows), axis=0)
    for size in range(0, 5):
        for combo in itertools.combinations(range(len(rows)), size):
            for signs in itertools.product((1, -1), repeat=size):
                total = sum(
                    (s * rows[i] for s, i in zip(signs, combo, strict=True)), np.zeros(6, int)
                )
                if np.array_equal(total, target.astype(int)):
                    return size
    raise AssertionError("no decomposition with ≤ 4 geounits")


def test_osed_matches_brute_force_for_every_entity_of_the_toy_spine():
    entities = np.array(list(itertools.product((0, 1), repeat=6)), dtype=bool)
    values = entity_osed(TOY, entities.T)
    for entity, value in zip(entities[::7], values[::7], strict=True):
        assert value == brute_force_osed(TOY, entity)


def test_complement_symmetry_and_reduces():
    k = member(0, 2)
    values = entity_osed(TOY, np.stack([k, ~k, member(0, 1)], axis=1))
    assert values.tolist() == [2, 3, 1]  # ~k = {1,3,4,5}: US − b0 − b2
    assert reduce_osed(values, "mean") == pytest.approx(2.0)
    assert reduce_osed(values, "max") == 3.0
    assert reduce_osed(values, "sorted") == (3, 2, 1)
    assert reduce_osed(entity_osed(TOY, member(0, 1)), "max") == 1.0  # Algorithm 1's reduce


def test_lexicographic_order_accepts_ties():
    assert lexicographic_le((3, 2, 1), (3, 2, 1))
    assert lexicographic_le((3, 1, 9), (3, 2, 0))
    assert not lexicographic_le((4, 0, 0), (3, 9, 9))


def test_membership_shape_is_checked():
    with pytest.raises(ValidationError, match="one row per block"):
        entity_osed(TOY, np.zeros((5, 1), dtype=bool))
    with pytest.raises(ValidationError, match="unknown OSED reduce"):
        reduce_osed(np.array([1]), "median")  # type: ignore[arg-type]


# TOY as a tree: 0 US; 1 A, 2 B; 3 A1, 4 A2, 5 B1; blocks 6..11
TOY_PARENT = np.array([-1, 0, 0, 1, 1, 2, 3, 3, 4, 4, 5, 5])
TOY_BLOCK_NODE = np.arange(6, 12)
ALL_ENTITIES = np.array(list(itertools.product((0, 1), repeat=6)), dtype=bool).T


def compact(parent: np.ndarray, kept: np.ndarray, block_node: np.ndarray):
    keep = np.flatnonzero(kept)
    index = np.full(parent.size, -1)
    index[keep] = np.arange(keep.size)
    return np.where(parent[keep] >= 0, index[parent[keep]], -1), index[block_node]


def test_tree_osed_equals_level_osed_and_survives_zcdp_bypass():
    by_levels = entity_osed(TOY, ALL_ENTITIES)
    assert np.array_equal(tree_osed(TOY_PARENT, TOY_BLOCK_NODE, ALL_ENTITIES), by_levels)
    result = bypass_geounits(TOY_PARENT, np.full(12, 0.25))
    assert np.flatnonzero(~result.kept).tolist() == [2]  # state B has the single county B1
    parent, block_node = compact(result.parent, result.kept, TOY_BLOCK_NODE)
    assert np.array_equal(tree_osed(parent, block_node, ALL_ENTITIES), by_levels)


def test_pure_dp_bypass_of_a_two_child_parent_can_raise_an_osed():
    result = bypass_geounits(TOY_PARENT, np.full(12, 0.25), pure_dp=True)
    assert not result.kept[3]  # county A1: 0.25 ≥ (2 − 1)·0.25/2
    parent, block_node = compact(result.parent, result.kept, TOY_BLOCK_NODE)
    a1 = member(0, 1)[:, None]
    assert entity_osed(TOY, a1)[0] == 1
    assert tree_osed(parent, block_node, a1)[0] > 1


def test_mean_osed_of_an_entity_set():
    """The metrics.json ``osed`` section: mean OSED of a set's entities on the spine used (on a
    run's tree: tests/engine/runs/test_spine.py)."""
    from engine.topdown.spine.entities import EntitySet
    from engine.topdown.spine.osed import mean_osed

    spine = SpineLevels.from_block_labels(
        ("US", "County", "Block"),
        [["US"] * 4, ["A", "A", "B", "B"], ["b0", "b1", "b2", "b3"]],
    )
    pair = EntitySet("pair", ("p", "q"), np.array([0, -1, 0, 1]))
    assert mean_osed(spine, pair.membership()) == 1.5  # {b0, b2} needs 2 blocks, {b3} is a block
