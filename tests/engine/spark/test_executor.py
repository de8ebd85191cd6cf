"""The Spark executor runs units of work on Spark with the results of the in-process loop
(docs/science.md §8).

Units are arrays (as TopDown's family batches are); results come back in unit order; a finished
``map`` is checkpointed to Parquet and found again by a new executor with the same inputs; an error
in a task names the Python exception; ``cancel()`` interrupts a running job.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from engine.core.errors import RunCancelled, ValidationError
from engine.spark.executor import SparkExecutor, SparkTaskFailed

pytestmark = pytest.mark.spark


def weighted_sums(unit: tuple[int, np.ndarray]) -> np.ndarray:
    scale, values = unit
    return scale * np.cumsum(values)


def fails_on_three(unit: int) -> int:
    if unit == 3:
        raise ValueError(f"unit {unit} is infeasible")
    return unit


def sleeps(unit: float) -> float:
    time.sleep(unit)
    return unit


def test_map_matches_in_process_and_resumes_from_checkpoint(spark, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    units = [(k, rng.integers(0, 100, size=k + 3)) for k in range(5)]
    expected = [weighted_sums(u) for u in units]
    seen: list[int] = []
    first = SparkExecutor(spark, checkpoint_dir=tmp_path)
    got = first.map(weighted_sums, units, done=lambda i, _: seen.append(i))
    assert seen == list(range(5))
    assert len(first.task_seconds) == 5
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_array_equal(g, e)
    assert len(list(tmp_path.glob("*.parquet"))) == 1
    # a new executor (a restarted run) with the same units reads the checkpoint, runs no job
    again = SparkExecutor(spark, checkpoint_dir=tmp_path)
    resumed = again.map(weighted_sums, units)
    assert again.checkpoint_hits == 1 and again.task_seconds == []
    for g, e in zip(resumed, expected, strict=True):
        np.testing.assert_array_equal(g, e)
    # different units are a different checkpoint
    again.map(weighted_sums, units[:2])
    assert again.checkpoint_hits == 1
    assert again.map(weighted_sums, []) == []


def test_task_error_is_named_and_cancel_interrupts(spark) -> None:
    executor = SparkExecutor(spark)
    with pytest.raises(SparkTaskFailed, match="ValueError: unit 3 is infeasible"):
        executor.map(fails_on_three, [1, 2, 3])
    started = time.perf_counter()
    deadline = started + 2.0
    with pytest.raises(RunCancelled):
        executor.map(sleeps, [60.0, 60.0], cancel=lambda: time.perf_counter() > deadline)
    # the tasks need 60 s: ending well before proves the interrupt (32 s seen on a loaded machine)
    assert time.perf_counter() - started < 50


def test_many_small_slices_match_in_process_and_resume_mid_map(spark, tmp_path: Path) -> None:
    """``slice_bytes=1`` sends every unit as its own Spark job (three at a time): the same results
    in unit order, one checkpoint per slice, and a rerun that lost some slices runs only those."""
    rng = np.random.default_rng(1)
    units = [(k + 1, rng.integers(0, 1000, size=3 + 5 * k)) for k in range(7)]
    expected = [weighted_sums(u) for u in units]
    seen: list[int] = []
    first = SparkExecutor(spark, checkpoint_dir=tmp_path, slice_bytes=1, jobs_in_flight=3)
    got = first.map(weighted_sums, units, done=lambda i, _: seen.append(i))
    assert seen == list(range(7)) and first.jobs == 7 and len(first.task_seconds) == 7
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_array_equal(g, e)
    slices = sorted(tmp_path.glob("*.parquet"))
    assert len(slices) == 7
    for lost in slices[::3]:  # a run stopped part-way through a level
        lost.unlink()
    again = SparkExecutor(spark, checkpoint_dir=tmp_path, slice_bytes=1, jobs_in_flight=2)
    resumed = again.map(weighted_sums, units)
    assert again.checkpoint_hits == 4 and again.jobs == 3
    for g, e in zip(resumed, expected, strict=True):
        np.testing.assert_array_equal(g, e)
    # slices by bytes: units of one size, two to a slice
    same_size = [(k + 1, rng.integers(0, 1000, size=50)) for k in range(7)]
    two = SparkExecutor(spark, slice_bytes=2 * len(_pickled(same_size[0])) + 1)
    assert [(i, len(b)) for i, b in two._slices(same_size)] == [(0, 2), (2, 2), (4, 2), (6, 1)]
    for g, u in zip(two.map(weighted_sums, same_size), same_size, strict=True):
        np.testing.assert_array_equal(g, weighted_sums(u))
    assert two.jobs == 4


def test_a_failing_slice_stops_the_others(spark) -> None:
    executor = SparkExecutor(spark, slice_bytes=1, jobs_in_flight=2)
    with pytest.raises(SparkTaskFailed, match="ValueError: unit 3 is infeasible"):
        executor.map(fails_on_three, [1, 2, 3, 4, 5])


def _pickled(unit: object) -> bytes:
    from engine.spark.executor import _dumps

    return _dumps(unit)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"slice_bytes": 0}, "slice_bytes must be from 1"),
        ({"slice_bytes": 2**31}, "slice_bytes must be from 1"),
        ({"slice_bytes": 1.5}, "whole number of bytes"),
        ({"jobs_in_flight": 0}, "jobs_in_flight must be from 1 to 16"),
        ({"jobs_in_flight": True}, "jobs_in_flight must be a whole number"),
    ],
)
def test_bad_slice_settings_are_refused(spark, kwargs: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        SparkExecutor(spark, **kwargs)
