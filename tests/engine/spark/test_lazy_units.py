"""The Spark executor builds a lazy sequence's units one slice at a time.

TopDown hands an executor a level's units as a :class:`~collections.abc.Sequence` that builds unit
``k`` when asked (:class:`~engine.topdown.estimation.LevelUnits`); the Spark executor pickles a
unit only when its slice is about to be sent, so before the first result only the slices in flight
were built, and the driver keeps no built unit alive (only the pickled bytes of the slices sent).
"""

from __future__ import annotations

import pytest

from engine.spark.executor import SparkExecutor
from tests.engine.topdown.test_lazy_units import Payload, TrackedUnits, payload_sum

pytestmark = pytest.mark.spark


def test_spark_executor_builds_units_one_slice_at_a_time(spark) -> None:
    units = TrackedUnits(8)
    seen: list[tuple[int, int, int]] = []
    executor = SparkExecutor(spark, slice_bytes=1, jobs_in_flight=2)  # one unit a slice
    got = executor.map(
        payload_sum, units, done=lambda i, _: seen.append((i, units.built, units.alive()))
    )
    assert got == [payload_sum(Payload(k)) for k in range(8)]
    assert units.built == 8 and executor.jobs == 8
    # unit i's result arrives when at most the jobs in flight after it (and the unit that closed
    # the last slice) were built — not the whole level
    for i, built, alive in seen:
        assert built <= i + executor.jobs_in_flight + 1, (i, built)
        assert alive <= 1, (i, alive)
    assert seen[0][1] <= 3
