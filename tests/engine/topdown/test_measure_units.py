"""Keyed measurements drawn on demand (any subset of nodes, in any order) equal the measurements
drawn at once: keyed noise depends only on (seed, level, geounit, query, cell) (docs/science.md
§8)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from engine.dp.presets import load_topdown_preset
from engine.topdown.measure import measure
from engine.topdown.measurement import KeyedMeasurements, measure_plan
from engine.topdown.options import TopDownOptions
from engine.topdown.plan import plan_run
from tests.engine.topdown.helpers import ri_subset


def test_lazy_measurements_equal_measurements_at_once() -> None:
    from engine.noise.keyed import geounit_hashes

    hist = ri_subset()
    allocation = load_topdown_preset("ri2010-production-like")["persons"]
    plan = plan_run(hist, allocation, options=TopDownOptions(chunk_cells=16 * 7))
    truth = plan.tree.aggregate(hist.counts.astype(np.int64))
    hashes = geounit_hashes(plan.tree.level_names, plan.tree.node_id)
    whole = measure(
        truth,
        plan.queries,
        plan.budget,
        plan.invariant,
        allocation.mechanism,
        None,
        seed=11,
        geounit_hash=hashes,
    )
    lazy = measure_plan(plan, truth, 11)
    assert isinstance(lazy, KeyedMeasurements)
    assert "noisy" not in lazy.__dict__  # nothing is drawn up front: units draw their own answers
    for a, b in zip(whole.noisy, lazy.noisy, strict=True):
        np.testing.assert_array_equal(a, b)
    # any subset, in any order, gives the same numbers
    nodes = np.array([plan.tree.n_nodes - 1, 0, 5, 3])
    for j in range(len(plan.queries)):
        np.testing.assert_array_equal(lazy.answers(j, nodes), whole.noisy[j][nodes])
    for a, b in zip(whole.invariant, lazy.invariant, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(whole.variance, lazy.variance)
    np.testing.assert_array_equal(whole.nominal_variance, lazy.nominal_variance)
    np.testing.assert_array_equal(whole.budget, lazy.budget)
    np.testing.assert_array_equal(whole.weight(), lazy.weight())
    # exact (OpenDP) noise is drawn whole, in this process
    exact = replace(plan, options=replace(plan.options, noise_method="exact"))
    drawn = measure_plan(exact, truth, 11)
    assert not isinstance(drawn, KeyedMeasurements)
    assert drawn.noisy[0].shape == whole.noisy[0].shape
