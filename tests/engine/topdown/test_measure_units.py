"""Measurements drawn as units of work (contiguous node ranges, e.g. on Spark executors) equal the
measurements drawn at once: keyed noise depends only on (seed, level, geounit, query) (SPEC §8)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from engine.executors import InProcessExecutor
from engine.topdown.run import TopDownOptions, measure_plan, plan_run
from phexplore.presets import load_topdown_preset
from tests.engine.topdown.helpers import ri_subset


class CountingExecutor(InProcessExecutor):
    """In process, counting the units it was given."""

    def __init__(self) -> None:
        self.units = 0

    def map(self, fn, units, **kwargs):  # type: ignore[no-untyped-def]
        self.units += len(units)
        return super().map(fn, units, **kwargs)


def test_measurements_in_units_equal_measurements_at_once() -> None:
    hist = ri_subset()
    allocation = load_topdown_preset("ri2010-production-like")["persons"]
    plan = plan_run(hist, allocation, options=TopDownOptions(chunk_cells=16 * 7))
    truth = plan.tree.aggregate(hist.counts.astype(np.int64))
    whole = measure_plan(plan, truth, 11)
    executor = CountingExecutor()
    split = measure_plan(plan, truth, 11, executor=executor)
    assert executor.units == -(-plan.tree.n_nodes // 7) > 2
    for a, b in zip(whole.noisy, split.noisy, strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(whole.invariant, split.invariant, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(whole.variance, split.variance)
    np.testing.assert_array_equal(whole.nominal_variance, split.nominal_variance)
    np.testing.assert_array_equal(whole.budget, split.budget)
    # exact (OpenDP) noise is never split: it runs in this process
    exact = replace(plan, options=replace(plan.options, noise_method="exact"))
    executor.units = 0
    measure_plan(exact, truth, 11, executor=executor)
    assert executor.units == 0
