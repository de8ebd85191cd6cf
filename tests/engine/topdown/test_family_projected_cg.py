"""The large-family solver (engine/topdown/qp/family_projected_cg.py: ADMM guess, projected-CG
active-set polish) against an independent per-family cvxpy model of TDA eq. 7.5 with every
constraint type (cells the parent cannot populate, non-negativity, structural zeros, GQ lower
bounds, bands of an earlier pass), its KKT conditions, the null-space projection, the dispatch of
large families and the Clarabel fallback."""

from __future__ import annotations

import numpy as np
import pytest

from engine.topdown.family import FamilyBatch
from engine.topdown.qp import family_admm, family_projected_cg
from engine.topdown.qp.family_admm import FamilyNotSolved
from engine.topdown.qp.least_squares import solve_pass
from engine.topdown.qp.problem import Band
from tests.engine.topdown.family_models import cvxpy_objective, family_batch

PASS = [1, 2, 3]


def _bands(batch: FamilyBatch) -> list[Band]:
    first = solve_pass(batch, [0], method="clarabel")
    return [Band(0, batch.queries[0].answer(first.x), np.full(batch.n_families, 0.1))]


def _objective(batch: FamilyBatch, f: int, x: np.ndarray) -> float:
    lo = batch.child_ptr[f]
    total = 0.0
    for q in PASS:
        spec = batch.queries[q]
        w = batch.weight[lo, q]
        total += w * float(((spec.answer(x) - batch.noisy[q][lo : lo + x.shape[0]]) ** 2).sum())
    return total


@pytest.mark.parametrize("seed", [3, 4, 11])
@pytest.mark.parametrize("bounds", [False, True])
def test_objective_matches_cvxpy_with_every_constraint(seed, bounds):
    batch = family_batch(seed, bounds=bounds)
    bands = _bands(batch)
    for f in range(batch.n_families):
        for pass_bands in ([], bands):
            x = family_projected_cg.solve_family(batch, f, PASS, pass_bands)
            expected = cvxpy_objective(batch, f, PASS, pass_bands)
            assert _objective(batch, f, x) == pytest.approx(expected, rel=1e-6)
            _assert_feasible(batch, f, x, pass_bands)


def _assert_feasible(batch: FamilyBatch, f: int, x: np.ndarray, bands) -> None:
    lo, hi = batch.child_ptr[f], batch.child_ptr[f + 1]
    assert x.min() >= 0
    assert x.sum(axis=0) == pytest.approx(batch.parent[f], abs=1e-7)
    for bound in batch.bounds:
        answers = bound.spec.answer(x)
        assert np.all(answers >= bound.lower[lo:hi] - 1e-7)
        assert np.all(answers <= bound.upper[lo:hi] + 1e-7)
    for band in bands:
        gap = np.abs(batch.queries[band.query].answer(x) - band.target[lo:hi])
        assert np.all(gap <= band.tol[f] + 1e-7)


def test_kkt_conditions_hold_at_the_polished_point():
    """Stationarity with a sign-correct multiplier on every cell at 0 and every active row."""
    batch = family_batch(5, bounds=True, n_families=1)
    bands = _bands(batch)
    fam = family_admm.family_problem(batch, 0, PASS, bands)
    hess = family_projected_cg._Hessian(batch, 0, PASS, fam.cells)
    probe = np.random.default_rng(0).normal(size=fam.grad.shape)
    assert hess.apply(probe) == pytest.approx(probe @ fam.hess, abs=1e-12)
    assert hess.dense() == pytest.approx(fam.hess, abs=1e-12)
    assert hess.apply(hess.minimiser(fam.grad)) == pytest.approx(-fam.grad, abs=1e-9)
    stepper = family_admm.AdmmStepper(fam, family_projected_cg.RHO_CELL)
    x = family_projected_cg.polish(fam, hess, stepper.run(stepper.start(), 300))
    assert x is not None
    zero_set = fam.zero | (x <= 1e-12)
    cx = x @ fam.rows.T
    at_lower = np.isclose(cx, fam.lower, atol=1e-9) & (fam.lower < fam.upper)
    at_upper = np.isclose(cx, fam.upper, atol=1e-9)
    at_lower, at_upper = family_admm.independent_rows(fam, zero_set, at_lower, at_upper)
    solved = family_projected_cg._solve_equality(fam, hess, ~zero_set, at_lower, at_upper, None)
    assert solved is not None
    again, grad, lam, coupling = solved
    assert again == pytest.approx(x, abs=1e-8)
    assert coupling.max() < 1e-8
    assert np.abs(grad[~zero_set]).max(initial=0.0) < 1e-8  # ∇ = 0 on cells above 0
    assert grad[zero_set & ~fam.zero].min(initial=0.0) > -1e-8  # ν ≥ 0 on cells at 0
    assert np.all(lam[at_upper] >= -1e-8) and np.all(lam[at_lower] <= 1e-8)


def test_projection_is_onto_the_null_space_of_the_constraints():
    rng = np.random.default_rng(1)
    k, n, m = 4, 9, 3
    rows = (rng.random((m, n)) < 0.5).astype(float)
    free = rng.random((k, n)) < 0.7
    free[0] = True
    active = rng.random((k, m)) < 0.5
    cons = family_projected_cg._Constraints(rows, free, active)
    v = rng.normal(size=(k, n)) * free
    p = cons.project(v)
    s, t = cons.apply(p)
    assert np.abs(s).max() < 1e-12 and (t.size == 0 or np.abs(t).max() < 1e-12)
    assert cons.project(p) == pytest.approx(p, abs=1e-12)
    assert np.all(p[~free] == 0)
    # v − Pv is in the range of Eᵀ: orthogonal to every null-space vector.
    w = cons.project(rng.normal(size=(k, n)) * free)
    assert float(np.vdot(v - p, w)) == pytest.approx(0.0, abs=1e-10)


def test_large_families_are_dispatched_here_and_match_clarabel(monkeypatch):
    batch = family_batch(9, bounds=True)
    bands = _bands(batch)
    reference = solve_pass(batch, PASS, bands, method="clarabel")
    calls: list[int] = []
    original = family_projected_cg.solve_family

    def counting(batch, f, pass_queries, bands, **options):
        calls.append(f)
        return original(batch, f, pass_queries, bands, **options)

    monkeypatch.setattr(family_admm, "MAX_PERSONS_PER_CHILD", 0.0)  # every family is "large"
    monkeypatch.setattr(family_projected_cg, "solve_family", counting)
    auto = solve_pass(batch, PASS, bands, method="admm")
    assert sorted(calls) == list(range(batch.n_families))
    assert auto.objective == pytest.approx(reference.objective, rel=1e-6)


def test_unverified_polish_falls_back_to_clarabel(monkeypatch):
    batch = family_batch(6, bounds=True)
    expected = solve_pass(batch, PASS, method="clarabel")
    monkeypatch.setattr(family_admm, "MAX_PERSONS_PER_CHILD", 0.0)
    monkeypatch.setattr(family_projected_cg, "ACTIVE_SET_STEPS", 0)  # every polish "fails"
    monkeypatch.setattr(family_projected_cg, "MAX_ITERATIONS", 100)
    with pytest.raises(FamilyNotSolved):
        family_projected_cg.solve_family(batch, 0, PASS, [])
    x = np.zeros((batch.n_children, batch.n_cells))
    solved = np.zeros(batch.n_families, dtype=bool)
    family_projected_cg.solve_large_families(batch, PASS, [], x, solved)
    assert not solved.any()
    fallback = solve_pass(batch, PASS, method="admm")
    assert fallback.objective == pytest.approx(expected.objective, rel=1e-8)


def test_uncovered_passes_are_not_taken():
    batch = family_batch(7)
    x = np.zeros((batch.n_children, batch.n_cells))
    solved = np.zeros(batch.n_families, dtype=bool)
    family_projected_cg.solve_large_families(batch, [0], [], x, solved)  # no DETAILED
    assert not solved.any()


def test_families_above_the_work_limit_get_the_first_polish_only(monkeypatch):
    """Above MAX_WORK no ADMM is run: the first polish verifies or Clarabel takes the family."""
    batch = family_batch(10, bounds=True)
    monkeypatch.setattr(family_admm, "MAX_PERSONS_PER_CHILD", 0.0)
    monkeypatch.setattr(family_projected_cg, "MAX_WORK", 0.0)

    def no_admm(*_args, **_kwargs):
        raise AssertionError("ADMM must not run above MAX_WORK")

    monkeypatch.setattr(family_admm.AdmmStepper, "__init__", no_admm)
    x = np.zeros((batch.n_children, batch.n_cells))
    solved = np.zeros(batch.n_families, dtype=bool)
    family_projected_cg.solve_large_families(batch, PASS, [], x, solved)
    for f in np.flatnonzero(solved):
        lo, hi = batch.child_ptr[f], batch.child_ptr[f + 1]
        assert _objective(batch, f, x[lo:hi]) == pytest.approx(
            cvxpy_objective(batch, f, PASS, []), rel=1e-6
        )
    monkeypatch.setattr(family_projected_cg, "polish", lambda *_args: None)
    x[:] = 0.0
    solved[:] = False
    family_projected_cg.solve_large_families(batch, PASS, [], x, solved)
    assert not solved.any() and not x.any()
    reference = solve_pass(batch, PASS, method="clarabel")
    assert solve_pass(batch, PASS, method="admm").objective == pytest.approx(
        reference.objective, rel=1e-6
    )


def test_admm_takes_over_when_the_first_polish_fails(monkeypatch):
    """The polish from the projected unconstrained minimisers is tried first; when it does not
    verify, ADMM rounds guess the active set and a later polish must still give the optimum."""
    batch = family_batch(12, bounds=True, n_families=1)
    bands = _bands(batch)
    original = family_projected_cg.polish
    calls: list[bool] = []

    def first_fails(fam, hess, state):
        calls.append(True)
        return None if len(calls) == 1 else original(fam, hess, state)

    monkeypatch.setattr(family_projected_cg, "polish", first_fails)
    x = family_projected_cg.solve_family(batch, 0, PASS, bands)
    assert len(calls) >= 2
    assert _objective(batch, 0, x) == pytest.approx(
        cvxpy_objective(batch, 0, PASS, bands), rel=1e-6
    )
    _assert_feasible(batch, 0, x, bands)


def test_heavy_polish_families_take_the_first_polish_then_family_admm(monkeypatch):
    """Above MAX_POLISH_WORK (children × cells³) a family of small children tries the projected-CG
    first polish (no ADMM of this module), then family_admm's ADMM + dense polish, then Clarabel."""
    batch = family_batch(9, bounds=True)
    bands = _bands(batch)
    reference = solve_pass(batch, PASS, bands, method="clarabel")
    assert family_admm.polish_heavy(batch).sum() == 0  # default: these small families are not
    monkeypatch.setattr(family_admm, "MAX_POLISH_WORK", 0.0)
    assert family_admm.polish_heavy(batch).all()
    first: list[int] = []
    admm: list[int] = []
    original_first, original_admm = family_projected_cg.solve_family, family_admm.solve_family

    def counting_first(batch, f, pass_queries, bands, **options):
        assert options == {"admm": False}
        first.append(f)
        return original_first(batch, f, pass_queries, bands, **options)

    def counting_admm(batch, f, pass_queries, bands):
        admm.append(f)
        return original_admm(batch, f, pass_queries, bands)

    monkeypatch.setattr(family_projected_cg, "solve_family", counting_first)
    monkeypatch.setattr(family_admm, "solve_family", counting_admm)
    heavy = solve_pass(batch, PASS, bands, method="admm")
    assert sorted(first) == list(range(batch.n_families))
    assert heavy.objective == pytest.approx(reference.objective, rel=1e-6)
    # First polish made to fail: family_admm solves every family, same objective.
    first.clear()
    monkeypatch.setattr(family_projected_cg, "polish", lambda *_args: None)
    fallback = solve_pass(batch, PASS, bands, method="admm")
    assert sorted(first) == sorted(admm) == list(range(batch.n_families))
    assert fallback.objective == pytest.approx(reference.objective, rel=1e-6)
    # Both made to fail: Clarabel takes them.
    monkeypatch.setattr(family_admm, "ACTIVE_SET_STEPS", 0)
    last = solve_pass(batch, PASS, bands, method="admm")
    assert last.objective == pytest.approx(reference.objective, rel=1e-6)
