"""Structural zeros and GQ bounds held in least squares and rounding (docs/science.md §6)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.core.errors import ValidationError
from engine.data.histogram import subset_histogram
from engine.data.samples import load_topdown_sample
from engine.dp.presets import load_topdown_preset
from engine.topdown.constraints import block_bounds, unconstrained_note
from engine.topdown.estimation import _build_batch
from engine.topdown.feasibility import check_batch
from engine.topdown.options import TopDownOptions
from tests.engine.topdown.helpers import engine_run, ri_subset


@pytest.fixture(scope="module")
def ri_allocation():
    return load_topdown_preset("ri2010-production-like")["persons"]


@pytest.fixture(scope="module")
def ri_with_frame():
    """RI blocks with a unit frame: blocks without persons have no housing unit and no GQ."""
    hist = ri_subset(n_tracts_per_county=2, counties=2)
    pop = hist.counts.sum(axis=1)
    extra = {
        "housing_units": np.where(pop > 0, np.maximum(pop // 2, 1), 0),
        "occupied_units": np.where(pop > 0, 1, 0),
        "gq_facilities": np.zeros((hist.n_blocks, 7), dtype=np.int64),
    }
    return hist.replace(extra=extra)


def test_empty_blocks_receive_nobody_when_the_frame_says_so(ri_with_frame, ri_allocation):
    empty = ri_with_frame.counts.sum(axis=1) == 0
    assert empty.sum() > 50
    result = engine_run(ri_with_frame, ri_allocation, seed=11)
    blocks = result.block_histogram()
    assert blocks[empty].sum() == 0
    # each occupied unit holds its householder: TOTAL ≥ occupied units (= 1 per populated block)
    assert np.all(blocks[~empty].sum(axis=1) >= 1)
    report = result.diagnostics["structural"]
    assert report["structural_zeros_held"] and report["bound_violations"] == 0
    assert report["structural_zero_blocks"] == int(empty.sum())


def test_without_a_frame_the_run_quantifies_persons_in_empty_blocks(ri_with_frame, ri_allocation):
    bare = ri_with_frame.replace(extra={})
    result = engine_run(bare, ri_allocation, seed=11)
    report = result.diagnostics["structural"]
    assert report["structural_zeros_held"] is False
    moved = result.block_histogram()[bare.counts.sum(axis=1) == 0].sum()
    assert moved > 0 and report["persons_in_empty_blocks"] == moved
    assert "received" in report["note"] and f"{moved:,}" in report["note"]


@pytest.fixture(scope="module")
def perry_tract():
    hist = load_topdown_sample("ppmf_perry_al")
    present = hist.extra["gq_types_present"]
    # the tract with the most GQ persons: GQ types are the hard part
    gq = hist.counts.reshape(hist.n_blocks, 8, -1)[:, 1:].sum(axis=(1, 2))
    tract = hist.geography["Tract"].to_numpy()[np.argmax(gq)]
    sub = subset_histogram(hist, "Tract", [tract])
    keep = hist.geography["Tract"].to_numpy() == tract
    sub.extra["gq_types_present"] = present[keep]
    return sub


def test_ppmf_gq_types_are_lower_and_upper_bounds(perry_tract):
    allocation = load_topdown_preset("topdown-2020-production")["persons"]
    result = engine_run(perry_tract, allocation, seed=5)
    est = result.block_histogram().reshape(perry_tract.n_blocks, 8, -1).sum(axis=2)
    present = perry_tract.extra["gq_types_present"] > 0
    assert np.all(est[:, 1:][~present] == 0), "persons in a GQ type the block has no facility of"
    assert np.all(est[:, 1:][present] >= 1), "a GQ facility left empty"
    assert result.diagnostics["structural"]["bound_violations"] == 0


def test_truth_that_breaks_the_frame_is_reported_in_words(ri_with_frame):
    extra = dict(ri_with_frame.extra)
    hu = extra["housing_units"].copy()
    populated = np.flatnonzero(ri_with_frame.counts.sum(axis=1) > 0)
    hu[populated[0]] = 0
    extra["housing_units"] = hu
    with pytest.raises(ValidationError, match="unit frame allows none"):
        block_bounds(ri_with_frame.replace(extra=extra))


def test_feasibility_check_names_the_family_and_the_bound(ri_with_frame, ri_allocation):
    result = engine_run(ri_with_frame, ri_allocation, seed=11)
    tree = result.tree
    from engine.topdown.constraints import node_bounds
    from engine.topdown.family import QuerySpec
    from engine.topdown.queries import query_group

    frame = block_bounds(ri_with_frame)
    group = query_group(ri_with_frame.schema, frame.query)
    spec = QuerySpec(group.name, group.cell_index, group.size)
    nodes = node_bounds(tree, frame)
    estimates = result.estimates.copy()
    parent = int(tree.parent[tree.block_node[np.flatnonzero(frame.upper[:, 0] == 0)[0]]])
    specs = tuple(QuerySpec(q.name, q.cell_index, q.size) for q in result.queries)
    weight = result.measured.weight()
    # a parent with fewer persons than its children's occupied units
    estimates[parent] = 0
    batch = _build_batch(
        np.array([parent]), tree, estimates, specs, result.measured, weight, bounds=(spec, nodes)
    )
    problems = check_batch(batch)
    assert problems and "need at least" in problems[0] and tree.node_id[parent] in problems[0]


def test_unconstrained_note_counts_persons_in_empty_blocks():
    truth = np.array([[0, 0], [3, 1], [0, 0]])
    estimate = np.array([[1, 0], [2, 1], [0, 2]])
    note = unconstrained_note(truth, estimate)
    assert (note.empty_blocks, note.persons_in_empty_blocks, note.persons) == (2, 3, 6)
    assert note.as_dict()["share_of_persons"] == pytest.approx(0.5)


def test_structural_zeros_can_be_switched_off(ri_with_frame, ri_allocation):
    result = engine_run(
        ri_with_frame, ri_allocation, seed=11, options=TopDownOptions(structural_zeros=False)
    )
    assert result.diagnostics["structural"]["structural_zeros_held"] is False


def test_bounded_family_matches_a_cvxpy_model(ri_with_frame, ri_allocation):
    """TDA eq. 7.5 with structural zeros and lower bounds: same objective as cvxpy (±1e-6)."""
    import cvxpy as cp

    from engine.topdown import estimation as estimation_module
    from engine.topdown.qp.route import solve_pass

    batches = []
    original = estimation_module.estimate_batch

    def recording(batch, passes, chain, *rest):
        batches.append((batch, passes))
        return original(batch, passes, chain, *rest)

    estimation_module.estimate_batch = recording
    try:
        engine_run(ri_with_frame, ri_allocation, seed=3)
    finally:
        estimation_module.estimate_batch = original
    batch, passes = next((b, p) for b, p in batches if b.child_level == "Block" and b.has_bounds)
    f = int(np.argmax(np.diff(batch.child_ptr)))
    one = batch.subset([f])
    ours = solve_pass(one, passes[-1]).objective[0]
    x = cp.Variable((one.n_children, one.n_cells), nonneg=True)
    terms = [
        cp.sum(
            cp.multiply(
                one.weight[:, q][:, None], cp.square(x @ one.queries[q].matrix().T - one.noisy[q])
            )
        )
        for q in passes[-1]
        if np.any(one.weight[:, q] > 0)
    ]
    bound = one.bounds[0]
    answers = x @ bound.spec.matrix().T
    cons = [cp.sum(x, axis=0) == one.parent[0]]
    up, low = np.isfinite(bound.upper), np.isfinite(bound.lower)
    cons.append(cp.multiply(up, answers) <= np.where(up, bound.upper, 0))
    cons.append(cp.multiply(low, answers) >= np.where(low, bound.lower, 0))
    problem = cp.Problem(cp.Minimize(sum(terms)), cons)
    problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    assert ours == pytest.approx(problem.value, rel=1e-6)
    assert np.any(bound.upper == 0), "the family has structurally zero blocks"
