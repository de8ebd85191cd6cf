"""Least squares (TDA eq. 7.5–7.6) and rounding (eq. 7.7) against hand values and independent cvxpy.

The hand-checkable family: a parent with 2 cells p = (10, 6) and two children with unit weights,
noisy totals (8, 9) and noisy cells m1 = (7, 2), m2 = (4, 5).
* Pass 1 (TOTAL): t = m − λ/2 with Σ t = 16 → λ = 1, t = (7.5, 8.5).
* Pass 2 (DETAILED, totals held within 0.1): unconstrained x1 = (m1 + p − m2)/2 = (6.5, 1.5) has
  total 8 > 7.6, so the band is active: x1 = (6.5, 1.5) − μ/4 with 8 − μ/2 = 7.6 → x1 = (6.3, 1.3),
  x2 = p − x1 = (3.7, 4.7).
"""

from __future__ import annotations

import itertools

import cvxpy as cp
import numpy as np
import pytest

from engine.topdown.family import FamilyBatch, QuerySpec
from engine.topdown.qp.problem import Band
from engine.topdown.qp.route import multipass_least_squares, solve_pass
from engine.topdown.rounding import round_batch

TOTAL = QuerySpec("TOTAL", np.zeros(2, dtype=np.int64), 1)
DETAILED = QuerySpec("DETAILED", np.arange(2), 2)


def hand_batch() -> FamilyBatch:
    return FamilyBatch(
        queries=(TOTAL, DETAILED),
        parent=np.array([[10.0, 6.0]]),
        child_ptr=np.array([0, 2]),
        noisy=(np.array([[8.0], [9.0]]), np.array([[7.0, 2.0], [4.0, 5.0]])),
        weight=np.ones((2, 2)),
        invariant=(None, None),
        family_id=("44",),
        child_id=("44001", "44003"),
        family_level="State",
        child_level="County",
    )


@pytest.mark.parametrize("method", ["auto", "piqp", "clarabel"])
def test_hand_checked_two_pass_least_squares(method):
    batch = hand_batch()
    first = solve_pass(batch, [0], solver=method)
    assert TOTAL.answer(first.x)[:, 0] == pytest.approx([7.5, 8.5], abs=1e-6)
    band = Band(0, TOTAL.answer(first.x), np.array([0.1]))
    second = solve_pass(batch, [1], [band], solver=method)
    assert second.x == pytest.approx(np.array([[6.3, 1.3], [3.7, 4.7]]), abs=1e-6)
    x, objectives = multipass_least_squares(batch, [[0], [1]])
    assert x == pytest.approx(second.x, abs=1e-6)
    assert objectives[1][0] == pytest.approx(0.7**2 * 2 + 0.3**2 * 2, abs=1e-6)


def test_hand_checked_rounding_against_brute_force():
    batch = hand_batch()
    x_tilde = np.array([[6.3, 1.3], [3.7, 4.7]])
    rounded, fallbacks = round_batch(batch, x_tilde, (TOTAL, DETAILED))
    assert fallbacks == 0
    assert rounded.sum(axis=0).tolist() == [10, 6]
    # Brute force over the box ⌊x̃⌋ + {0,1}: pass 1 minimises the totals' L1, pass 2 the cells'.
    best = None
    for y in itertools.product((0, 1), repeat=2):
        x1 = np.floor(x_tilde[0]) + y
        x2 = np.array([10.0, 6.0]) - x1
        if np.any(x2 < np.floor(x_tilde[1])) or np.any(x2 > np.floor(x_tilde[1]) + 1):
            continue
        cand = np.array([x1, x2])
        key = (
            np.abs(cand.sum(1) - x_tilde.sum(1)).sum().round(9),
            np.abs(cand - x_tilde).sum().round(9),
        )
        best = key if best is None or key < best else best
    got = (
        np.abs(rounded.sum(1) - x_tilde.sum(1)).sum().round(9),
        np.abs(rounded - x_tilde).sum().round(9),
    )
    assert got == best


def random_batch(seed: int, n_families: int = 4, n_cells: int = 16) -> FamilyBatch:
    """Families with 2–6 children on the RI-like schema VOTINGAGE (2) × RACEETH (8)."""
    rng = np.random.default_rng(seed)
    cells = np.arange(n_cells)
    specs = (
        QuerySpec("TOTAL", np.zeros(n_cells, dtype=np.int64), 1),
        QuerySpec("VOTINGAGE", cells // 8, 2),
        QuerySpec("RACEETH", cells % 8, 8),
        QuerySpec("DETAILED", cells, n_cells),
    )
    sizes = rng.integers(2, 7, size=n_families)
    k = int(sizes.sum())
    truth = rng.poisson(rng.choice([0.3, 3.0, 20.0], size=(k, n_cells)))
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    parent = np.add.reduceat(truth, ptr[:-1], axis=0).astype(float)
    sd = np.array([5.0, 3.0, 2.0, 1.5])
    noisy = tuple(s.answer(truth) + rng.normal(0, sd[j], (k, s.size)) for j, s in enumerate(specs))
    return FamilyBatch(
        queries=specs,
        parent=parent,
        child_ptr=ptr,
        noisy=noisy,
        weight=np.tile(1.0 / sd**2, (k, 1)),
        invariant=(None,) * 4,
        family_id=tuple(f"f{i}" for i in range(n_families)),
        child_id=tuple(f"c{i}" for i in range(k)),
    )


def cvxpy_pass(batch: FamilyBatch, f: int, queries, bands) -> float:
    """Independent per-family formulation of TDA eq. 7.5 (dense query matrices, Clarabel)."""
    lo, hi = batch.child_ptr[f], batch.child_ptr[f + 1]
    x = cp.Variable((hi - lo, batch.n_cells), nonneg=True)
    terms = []
    for q in queries:
        a = batch.queries[q].matrix().toarray()
        w = batch.weight[lo:hi, q]
        terms.append(cp.sum(cp.multiply(w[:, None], cp.square(x @ a.T - batch.noisy[q][lo:hi]))))
    constraints = [cp.sum(x, axis=0) == batch.parent[f]]
    for band in bands:
        a = batch.queries[band.query].matrix().toarray()
        constraints.append(cp.abs(x @ a.T - band.target[lo:hi]) <= band.tol[f])
    problem = cp.Problem(cp.Minimize(sum(terms)), constraints)
    problem.solve(solver=cp.CLARABEL)
    return float(problem.value)


@pytest.mark.parametrize("seed", [1, 2])
def test_batched_passes_match_independent_cvxpy(seed):
    batch = random_batch(seed)
    first = solve_pass(batch, [0])
    bands = [Band(0, batch.queries[0].answer(first.x), np.full(batch.n_families, 0.1))]
    second = solve_pass(batch, [1, 2, 3], bands)
    for f in range(batch.n_families):
        assert first.objective[f] == pytest.approx(
            cvxpy_pass(batch, f, [0], []), rel=1e-6, abs=1e-6
        )
        assert second.objective[f] == pytest.approx(
            cvxpy_pass(batch, f, [1, 2, 3], bands), rel=1e-6
        )
    assert np.all(second.x >= 0)
    assert np.abs(np.add.reduceat(second.x, batch.child_ptr[:-1]) - batch.parent).max() < 1e-6
    clarabel = solve_pass(batch, [1, 2, 3], bands, solver="clarabel")
    assert second.objective == pytest.approx(clarabel.objective, rel=1e-6)


def test_third_pass_uses_the_solved_minimal_slack():
    batch = random_batch(5, n_families=2)
    x, objectives = multipass_least_squares(batch, [[0], [1], [2, 3]])
    assert len(objectives) == 3
    totals = batch.queries[0].answer(x)
    assert np.all(x >= 0)
    assert (
        np.abs(np.add.reduceat(totals, batch.child_ptr[:-1])[:, 0] - batch.parent.sum(1)).max()
        < 1e-6
    )


def test_rounding_is_integral_consistent_and_matches_a_cvxpy_milp():
    batch = random_batch(3, n_families=3)
    x, _ = multipass_least_squares(batch, [[0], [1, 2, 3]])
    chain = (batch.queries[0], batch.queries[1], batch.queries[3])
    rounded, fallbacks = round_batch(batch, x, chain)
    assert fallbacks == 0 and rounded.dtype == np.int64 and np.all(rounded >= 0)
    assert np.array_equal(np.add.reduceat(rounded, batch.child_ptr[:-1]), batch.parent.astype(int))
    assert np.all(np.abs(rounded - x) < 1.0 + 1e-9)
    # Independent MILP of pass 1 (TOTAL) for each family: same optimal L1 on the totals.
    for f in range(batch.n_families):
        lo, hi = batch.child_ptr[f], batch.child_ptr[f + 1]
        base = np.floor(x[lo:hi] + 1e-9)
        y = cp.Variable(base.shape, boolean=True)
        totals = cp.sum(base + y, axis=1)
        problem = cp.Problem(
            cp.Minimize(cp.sum(cp.abs(totals - x[lo:hi].sum(1)))),
            [cp.sum(base + y, axis=0) == batch.parent[f]],
        )
        problem.solve(solver=cp.HIGHS)
        ours = np.abs(rounded[lo:hi].sum(1) - x[lo:hi].sum(1)).sum()
        assert ours <= problem.value + 1e-6
