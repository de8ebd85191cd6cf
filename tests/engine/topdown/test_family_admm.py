"""The shared-factorisation ADMM + polish family solver (engine/topdown/qp/family_admm.py) against an
independent per-family cvxpy model of TDA eq. 7.5 with every constraint type: non-negativity,
cells the parent cannot populate, structural zeros and GQ lower bounds (ChildBounds), the bands of
an earlier pass; the KKT conditions of its answers; and the Clarabel fallback."""

from __future__ import annotations

from dataclasses import replace

import cvxpy as cp
import numpy as np
import pytest

from engine.topdown.family import FamilyBatch
from engine.topdown.qp import family_admm, problem
from engine.topdown.qp.problem import Band
from engine.topdown.qp.route import family_objective, solve_pass
from engine.topdown.qp.settings import SETTINGS
from tests.engine.topdown.family_models import cvxpy_objective, family_batch


def _two_passes(batch: FamilyBatch, method: str):
    first = solve_pass(batch, [0], solver="clarabel")
    bands = [Band(0, batch.queries[0].answer(first.x), np.full(batch.n_families, 0.1))]
    return bands, solve_pass(batch, [1, 2, 3], bands, solver=method)


@pytest.mark.parametrize("seed", [3, 4])
@pytest.mark.parametrize("bounds", [False, True])
def test_objective_matches_cvxpy_with_every_constraint(seed, bounds):
    batch = family_batch(seed, bounds=bounds)
    x, solved = family_admm.solve_families(batch, [1, 2, 3], [])
    assert solved.all()
    one_pass = solve_pass(batch, [1, 2, 3], solver="auto")
    bands, two_pass = _two_passes(batch, "admm")
    for f in range(batch.n_families):
        assert one_pass.objective[f] == pytest.approx(
            cvxpy_objective(batch, f, [1, 2, 3], []), rel=1e-6
        )
        assert two_pass.objective[f] == pytest.approx(
            cvxpy_objective(batch, f, [1, 2, 3], bands), rel=1e-6
        )
    _assert_feasible(batch, two_pass.x, bands)


def _assert_feasible(batch: FamilyBatch, x: np.ndarray, bands) -> None:
    assert x.min() >= 0
    sums = np.add.reduceat(x, batch.child_ptr[:-1], axis=0)
    assert sums == pytest.approx(batch.parent, abs=1e-7)
    for bound in batch.bounds:
        answers = bound.spec.answer(x)
        assert np.all(answers >= bound.lower - 1e-7)
        assert np.all(answers <= bound.upper + 1e-7)
    for band in bands:
        gap = np.abs(batch.queries[band.query].answer(x) - band.target)
        assert np.all(gap <= band.tol[batch.child_family, None] + 1e-7)


def test_kkt_conditions_hold_at_the_polished_point():
    """Stationarity with a sign-correct multiplier on every cell at 0 and every active row."""
    batch = family_batch(5, bounds=True, n_families=1)
    fam = problem.reduce(batch, 0, [1, 2, 3], [])
    state = family_admm._admm(fam, None, 200, SETTINGS)
    x = family_admm._polish(fam, state)
    assert x is not None
    k, n = x.shape
    zero_set = fam.zero | (x <= 1e-12)
    cx = x @ fam.rows.T
    at_lower = np.isclose(cx, fam.lower, atol=1e-9)
    at_upper = np.isclose(cx, fam.upper, atol=1e-9)
    _x, grad, lam, mu = family_admm._polish_once(fam, zero_set, at_lower, at_upper)
    assert _x == pytest.approx(x, abs=1e-8)
    free = ~zero_set
    assert np.abs(grad[free]).max(initial=0.0) < 1e-8  # ∇ = 0 on cells above 0
    assert grad[zero_set & ~fam.zero].min(initial=0.0) > -1e-8  # ν ≥ 0 on cells at 0
    assert np.all(lam[at_upper] >= -1e-8) and np.all(lam[at_lower] <= 1e-8)
    assert mu.shape == (n,) and k == batch.n_children


def test_projection_onto_cells_is_the_euclidean_projection():
    rng = np.random.default_rng(0)
    v = rng.normal(0, 3, (6, 5))
    parent = rng.uniform(0.5, 10, 5)
    zero = rng.random((6, 5)) < 0.3
    zero[0] = False
    z = problem.project_cells(v, parent, zero)
    assert np.all(z >= 0) and np.all(z[zero] == 0)
    assert z.sum(axis=0) == pytest.approx(parent)
    for j in range(5):
        var = cp.Variable(6, nonneg=True)
        cons = [cp.sum(var) == parent[j]] + [var[i] == 0 for i in np.flatnonzero(zero[:, j])]
        cp.Problem(cp.Minimize(cp.sum_squares(var - v[:, j])), cons).solve(solver=cp.CLARABEL)
        assert z[:, j] == pytest.approx(var.value, abs=1e-6)


def test_failed_polish_falls_back_to_clarabel(monkeypatch):
    batch = family_batch(6, bounds=True)
    expected = solve_pass(batch, [1, 2, 3], solver="clarabel")
    none = replace(SETTINGS, admm_active_set_steps=0)  # every polish "fails"
    _x, solved = family_admm.solve_families(batch, [1, 2, 3], [], none)
    assert not solved.any()
    fallback = solve_pass(batch, [1, 2, 3], solver="admm", settings=none)
    assert fallback.objective == pytest.approx(expected.objective, rel=1e-8)


def test_uncovered_passes_are_left_to_clarabel():
    batch = family_batch(7)
    assert not problem.covered(batch, [0])  # no DETAILED: H is singular
    uneven = FamilyBatch(**{**batch.__dict__, "weight": 3.0 * batch.weight})
    assert problem.covered(uneven, [1, 2, 3])
    weight = batch.weight.copy()
    weight[0, 3] *= 2.0  # one child weighted differently: one Hessian no longer fits all
    mixed = FamilyBatch(**{**batch.__dict__, "weight": weight})
    x, solved = family_admm.solve_families(mixed, [1, 2, 3], [])
    assert not solved[0] and solved[1:].all()
    auto = solve_pass(mixed, [1, 2, 3], solver="auto")
    reference = solve_pass(mixed, [1, 2, 3], solver="clarabel")
    assert auto.objective == pytest.approx(reference.objective, rel=1e-6)


def test_invariants_and_held_sums_stay_with_clarabel():
    """Children with invariants or a held sum of siblings are not covered: solve_pass hands the
    whole pass to the Clarabel model, whose answer holds them exactly."""
    from engine.topdown.family import ChildSum

    batch = family_batch(8, n_families=1)
    invariant = np.full((batch.n_children, 1), np.nan)
    invariant[0, 0] = float(np.round(batch.noisy[0][0, 0]).clip(0, batch.parent[0].sum()))
    with_invariant = FamilyBatch(**{**batch.__dict__, "invariant": (invariant, None, None, None)})
    assert not problem.covered(with_invariant, [1, 2, 3])
    solved = solve_pass(with_invariant, [1, 2, 3])
    assert solved.x[0].sum() == pytest.approx(invariant[0, 0], abs=1e-6)
    total = float(batch.parent[0].sum())
    held = ChildSum(0, np.array([0, 1]), np.array([np.floor(total / 2)]))
    with_sum = FamilyBatch(**{**batch.__dict__, "sums": (held,)})
    assert not problem.covered(with_sum, [1, 2, 3])
    solved = solve_pass(with_sum, [1, 2, 3])
    assert solved.x[:2].sum() == pytest.approx(np.floor(total / 2), abs=1e-6)


def test_bound_surplus_of_a_total_row_active_for_every_child():
    """Σ_c (the bound each child's TOTAL row sits on) − the parent's total; 0 unless every child's
    TOTAL row is active."""
    k, n = 3, 4
    fam = problem.Family(
        hess=np.eye(n),
        grad=np.zeros((k, n)),
        parent=np.array([3.0, 3.0, 3.0, 3.0]),  # total 12
        zero=np.zeros((k, n), dtype=bool),
        rows=np.vstack([np.ones(n), np.array([1.0, 0.0, 0.0, 0.0])]),
        lower=np.array([[3.9, 0.0], [3.9, 0.0], [3.9, 0.0]]),
        upper=np.array([[4.1, 9.0], [4.1, 9.0], [4.1, 9.0]]),
        cells=np.arange(n),
        children=np.arange(k),
    )
    at_lower = np.zeros((k, 2), dtype=bool)
    at_upper = np.zeros((k, 2), dtype=bool)
    at_upper[:, 0] = True
    assert family_admm._bound_surplus(fam, at_lower, at_upper) == pytest.approx(0.3)
    at_upper[0, 0], at_lower[0, 0] = False, True
    assert family_admm._bound_surplus(fam, at_lower, at_upper) == pytest.approx(0.1)
    at_upper[1:, 0], at_lower[1:, 0] = False, True
    assert family_admm._bound_surplus(fam, at_lower, at_upper) == pytest.approx(-0.3)
    at_lower[2, 0] = False  # one child's TOTAL row free: no dependence
    assert family_admm._bound_surplus(fam, at_lower, at_upper) == 0.0


@pytest.mark.parametrize("seed", [3, 4, 5, 6])
def test_release_by_surplus_gives_the_same_verified_optimum(seed, monkeypatch):
    """Tight TOTAL bands (every child's TOTAL row near a bound): with the surplus rule and with
    the weakest row of either side, the same objectives as cvxpy."""
    batch = family_batch(seed, bounds=True)
    first = solve_pass(batch, [0], solver="clarabel")
    bands = [Band(0, batch.queries[0].answer(first.x), np.full(batch.n_families, 1e-3))]
    calls: list[float] = []
    surplus = family_admm._bound_surplus

    def recording(*args):
        calls.append(surplus(*args))
        return calls[-1]

    monkeypatch.setattr(family_admm, "_bound_surplus", recording)
    results = {}
    for flag in (True, False):
        x, solved = family_admm.solve_families(
            batch, [1, 2, 3], bands, replace(SETTINGS, release_by_surplus=flag)
        )
        assert solved.all()
        results[flag] = x
        _assert_feasible(batch, x, bands)
    assert any(abs(c) > 0 for c in calls)  # every child's TOTAL row was active somewhere
    for f in range(batch.n_families):
        expected = cvxpy_objective(batch, f, [1, 2, 3], bands)
        lo, hi = batch.child_ptr[f], batch.child_ptr[f + 1]
        for x in results.values():
            got = family_objective(batch.subset([f]), x[lo:hi], [1, 2, 3])[0]
            assert got == pytest.approx(expected, rel=1e-6)
