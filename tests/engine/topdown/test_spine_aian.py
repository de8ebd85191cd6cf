"""AIAN-style split of a spine (SPN §1, Figure 1, footnote 2)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.core.errors import ValidationError
from engine.topdown.spine.aian import split_by_special_areas
from engine.topdown.spine.levels import SpineLevels
from engine.topdown.spine.osed import entity_osed

# US > State {A: blocks 0-3, B: 4-5} > County {A1: 0,1; A2: 2,3; B1: 4,5} > Block
TOY = SpineLevels.from_block_labels(
    ("US", "State", "County", "Block"),
    [
        ["US"] * 6,
        ["A", "A", "A", "A", "B", "B"],
        ["A1", "A1", "A2", "A2", "B1", "B1"],
        [f"b{i}" for i in range(6)],
    ],
)
AREA = np.array([False, True, True, True, False, False])  # blocks 1, 2, 3


def test_split_only_geounits_that_straddle_the_areas():
    split = split_by_special_areas(TOY, AREA)
    assert split.names == TOY.names
    assert split.labels[0] == ("US",)
    assert sorted(split.labels[1]) == ["A|inside", "A|outside", "B"]  # B has no area: not split
    assert sorted(split.labels[2]) == ["A1|inside", "A1|outside", "A2", "B1"]  # A2 lies inside
    assert split.labels[3] == TOY.labels[3]


def test_branches_sum_to_the_original_state():
    split = split_by_special_areas(TOY, AREA)
    state = split.index("State")
    parts = {split.labels[state][u]: np.flatnonzero(split.codes[state] == u) for u in range(3)}
    assert np.array_equal(
        np.sort(np.concatenate([parts["A|inside"], parts["A|outside"]])), [0, 1, 2, 3]
    )
    # every geounit lies wholly inside or wholly outside the areas
    for level in range(1, split.n_levels):
        for u in range(split.n_units(level)):
            assert len(set(AREA[split.codes[level] == u])) == 1


def test_special_area_union_is_on_the_aian_spine():
    assert entity_osed(TOY, AREA)[0] == 2  # A − b0
    assert entity_osed(split_by_special_areas(TOY, AREA), AREA)[0] == 1
    # the complement is A|outside + B (or US − A|inside)
    assert entity_osed(split_by_special_areas(TOY, AREA), ~AREA)[0] == 2


def test_bad_special_areas():
    with pytest.raises(ValidationError, match="none of the spine's blocks"):
        split_by_special_areas(TOY, np.zeros(6, dtype=bool))
    with pytest.raises(ValidationError, match="one entry per block"):
        split_by_special_areas(TOY, np.ones(4, dtype=bool))
    with pytest.raises(ValidationError, match="root level cannot be split"):
        split_by_special_areas(TOY, AREA, split_level="US")
