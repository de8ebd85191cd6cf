"""The time/memory estimate shown before a run (engine/topdown/cost.py)."""

from __future__ import annotations

import pytest

from engine.topdown.cost import estimate_topdown_cost


def test_cost_grows_with_blocks_and_cells():
    small = estimate_topdown_cost(1_000, 2016)
    large = estimate_topdown_cost(150_000, 2016)
    folded = estimate_topdown_cost(150_000, 16)
    assert small.seconds < large.seconds and small.gigabytes < large.gigabytes
    assert folded.seconds < large.seconds and folded.gigabytes < large.gigabytes
    assert "peak memory" in large.sentence() and " s and" in large.sentence()
    assert "min" in estimate_topdown_cost(400_000, 2016).sentence()


def test_cost_rejects_impossible_sizes():
    with pytest.raises(ValueError):
        estimate_topdown_cost(-1, 2016)


def test_cost_matches_the_quiet_machine_measurements():
    # docs/topdown.md "The cost estimate shown before Run": this code end to end on a quiet
    # machine, 8.57 s on 23,133 blocks and 110.9 s on 292,120 blocks (medians of 3, 2026-11-27);
    # "Sparse block histograms from the file": peaks with the sparse loader of 0.40 GiB (CLI) on
    # 23,133 blocks and 1.11 GiB (benchmark) on 292,120 blocks.
    one_m = estimate_topdown_cost(23_133, 2016)
    ten_m = estimate_topdown_cost(292_120, 2016)
    assert 0.8 < one_m.seconds / 8.57 < 1.25
    assert 0.8 < ten_m.seconds / 110.9 < 1.25
    assert 0.8 < one_m.gigabytes / (0.40 * 1.074) < 1.25
    assert 0.8 < ten_m.gigabytes / (1.11 * 1.074) < 1.25


def test_the_kept_table_adds_memory_up_to_its_limit():
    from engine.topdown.cost import table_rows

    assert table_rows(100, 16, 5_000_000) == int(1.04 * 100 * 16 * 1.3)
    assert table_rows(300_000, 2016, 5_000_000) == 5_000_000
    bare = estimate_topdown_cost(300_000, 2016)
    kept = estimate_topdown_cost(300_000, 2016, kept_rows=5_000_000)
    assert kept.gigabytes - bare.gigabytes == pytest.approx(1.65)
    with pytest.raises(ValueError):
        estimate_topdown_cost(10, 2016, kept_rows=-1)


def test_the_app_prediction_table_is_counted_when_asked():
    # docs/topdown.md: at 1,000,000 persons (23,133 blocks, 2,016 cells) the table's count
    # profile +419 MB / 3.1 s and its prediction on a sample of families +485 MB / 8.0 s
    bare = estimate_topdown_cost(23_133, 2016)
    app = estimate_topdown_cost(23_133, 2016, prediction=True)
    assert app.gigabytes - bare.gigabytes == pytest.approx(0.419 + 0.485, rel=0.05)
    assert app.seconds - bare.seconds == pytest.approx(3.1 + 8.0, rel=0.05)
    # the sample bounds it: twice the blocks add only the profile's share (it was +6.9 GB at
    # 1e6 and ≈ 14 GB at the app's 2,000,000-person limit before)
    twice = estimate_topdown_cost(46_266, 2016, prediction=True)
    bare2 = estimate_topdown_cost(46_266, 2016)
    added = twice.gigabytes - bare2.gigabytes
    assert added - (app.gigabytes - bare.gigabytes) == pytest.approx(0.419, rel=0.05)
    assert added < 1.5
    ri = estimate_topdown_cost(25_181, 16, prediction=True)
    assert ri.gigabytes < 1.0
