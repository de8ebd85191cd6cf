"""Optimized block groups and greedy tract groups (SPN §4, Algorithm 2)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.core.errors import ValidationError
from engine.topdown.spine.levels import SpineLevels
from engine.topdown.spine.optimized import (
    TRACT_GROUP_LEVEL,
    fanout_cap,
    optimized_block_groups,
    tract_groups,
)
from engine.topdown.spine.osed import entity_osed


def tract_spine(n_tracts: int, blocks_per_tract: int) -> SpineLevels:
    n = n_tracts * blocks_per_tract
    tract = np.repeat(np.arange(n_tracts), blocks_per_tract)
    return SpineLevels.from_block_labels(
        ("US", "County", "Tract", "Block_Group", "Block"),
        [
            ["US"] * n,
            ["C"] * n,
            [f"T{t}" for t in tract],
            [f"T{t}-BG{(i % blocks_per_tract) // 5}" for i, t in enumerate(tract)],
            [f"b{i:03d}" for i in range(n)],
        ],
    )


def test_fanout_cap():
    assert fanout_cap(100, 0) == 10
    assert fanout_cap(100, 12) == 22
    assert fanout_cap(2, 0.5) == 1
    with pytest.raises(ValidationError):
        fanout_cap(4, -1)


def test_optimized_block_groups_follow_entities_and_respect_the_cap():
    spine = tract_spine(2, 9)
    entity = np.zeros(18, dtype=bool)
    entity[[0, 1, 2, 3, 4, 5, 6, 10]] = True  # 7 blocks of tract 0, 1 of tract 1
    optimized = optimized_block_groups(spine, entity.astype(int), fanout_cutoff=0)  # cap 3
    bg = optimized.index("Block_Group")
    sizes = optimized.block_counts(bg)
    assert sizes.max() <= 3
    # tract 0: classes of 7 (→ 3 groups) and 2 (→ 1); tract 1: 1 and 8 (→ 3)
    assert optimized.n_units(bg) == 3 + 1 + 1 + 3
    for u in range(optimized.n_units(bg)):
        assert len(set(entity[optimized.codes[bg] == u])) == 1
    # the 7 entity blocks of tract 0 form 3 runs of consecutive blocks of sizes 2, 2, 3
    runs = optimized.codes[bg][:7]
    assert sorted(np.unique(runs, return_counts=True)[1].tolist()) == [2, 2, 3]
    assert np.all(np.diff(runs) >= 0)
    # tract 0 minus its outside group, plus the lone group of tract 1 (conventional BGs: 4)
    assert entity_osed(spine, entity)[0] == 4
    assert entity_osed(optimized, entity)[0] == 3


def test_optimized_block_groups_need_the_block_group_level_above_blocks():
    spine = tract_spine(1, 4)
    with pytest.raises(ValidationError, match="between"):
        optimized_block_groups(spine, np.zeros(4, int), parent_level="County", level="Tract")
    with pytest.raises(ValidationError, match="one entry per block"):
        optimized_block_groups(spine, np.zeros(3, int))


def _children_per_unit(spine, level: int) -> np.ndarray:
    """Number of children (in ``level + 1``) of each geounit of ``level``."""
    return np.bincount(spine.parent_codes(level + 1), minlength=spine.n_units(level))


def test_tract_groups_bring_a_two_tract_entity_onto_the_spine():
    spine = tract_spine(4, 2)
    entity = np.zeros(8, dtype=bool)
    entity[[2, 3, 4, 5]] = True  # tracts T1 and T2
    assert entity_osed(spine, entity)[0] == 2
    grouped = tract_groups(spine, entity[:, None], fanout_cutoff=0)  # cap ⌊√4⌋ = 2 tracts
    tg = grouped.index(TRACT_GROUP_LEVEL)
    assert grouped.names[tg - 1 : tg + 2] == ("County", TRACT_GROUP_LEVEL, "Tract")
    assert entity_osed(grouped, entity)[0] == 1
    assert _children_per_unit(grouped, tg).max() <= 2
    # a group never straddles the entity's boundary here
    for u in range(grouped.n_units(tg)):
        assert len(set(entity[grouped.codes[tg] == u])) == 1


def test_tract_groups_never_make_the_sorted_osed_worse():
    rng = np.random.default_rng(7)
    spine = tract_spine(9, 4)
    entities = rng.random((36, 3)) < 0.3
    before = np.sort(entity_osed(spine, entities))[::-1]
    grouped = tract_groups(spine, entities, fanout_cutoff=1)
    after = np.sort(entity_osed(grouped, entities))[::-1]
    diff = np.flatnonzero(before != after)
    assert diff.size == 0 or after[diff[0]] < before[diff[0]]
    tg = grouped.index(TRACT_GROUP_LEVEL)
    assert _children_per_unit(grouped, tg).max() <= int(np.sqrt(9) + 1)
