"""The time/memory estimate shown before a run (engine/topdown/cost.py)."""

from __future__ import annotations

import pytest

from engine.topdown.cost import estimate_topdown_cost


def test_cost_grows_with_blocks_and_cells():
    small = estimate_topdown_cost(1_000, 2016)
    large = estimate_topdown_cost(100_000, 2016)
    folded = estimate_topdown_cost(100_000, 16)
    assert small.seconds < large.seconds and small.gigabytes < large.gigabytes
    assert folded.seconds < large.seconds and folded.gigabytes < large.gigabytes
    assert "peak memory" in large.sentence() and "min" in large.sentence()


def test_cost_rejects_impossible_sizes():
    with pytest.raises(ValueError):
        estimate_topdown_cost(-1, 2016)
