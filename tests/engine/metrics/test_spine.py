"""Spine-independent MAE by geography (SPN §7, Tables 2–3) from plain block arrays."""

from __future__ import annotations

import numpy as np
import pytest

from engine.core.errors import ValidationError
from engine.metrics.spine import entity_total_mae, grouped_total_mae, level_total_mae, spine_mae

TRUTH = np.array([10, 0, 5, 5])
ESTIMATE = np.array([12, -1, 5, 2])  # errors +2, −1, 0, −3
LEVELS = {"County": (np.array([0, 0, 1, 1]), 2), "Block": (np.arange(4), 4)}


def test_level_and_entity_mae_from_block_errors() -> None:
    assert level_total_mae(LEVELS, TRUTH, ESTIMATE) == {"County": (1 + 3) / 2, "Block": 6 / 4}
    pair = np.array([0, -1, 0, 1])  # entity p = {b0, b2}, q = {b3}; b1 in neither
    assert entity_total_mae(pair, 2, TRUTH, ESTIMATE) == pytest.approx((2 + 3) / 2)
    sections = spine_mae(LEVELS, {"pair": (pair, 2)}, TRUTH, ESTIMATE)
    assert list(sections) == ["conventional_mae", "entity_mae"]
    assert sections["entity_mae"] == {"pair": pytest.approx(2.5)}


def test_a_group_without_blocks_counts_with_error_zero() -> None:
    assert grouped_total_mae(np.array([0, 0, 0, 0]), 2, TRUTH, ESTIMATE) == pytest.approx(2 / 2)


def test_exact_estimates_have_zero_mae() -> None:
    assert level_total_mae(LEVELS, TRUTH, TRUTH) == {"County": 0.0, "Block": 0.0}


def test_shape_mismatches_are_named() -> None:
    with pytest.raises(ValidationError, match="one true and one estimated total per block"):
        level_total_mae(LEVELS, TRUTH[:3], ESTIMATE)
    with pytest.raises(ValidationError, match="one group code per block"):
        grouped_total_mae(np.array([0, 1]), 2, TRUTH, ESTIMATE)
