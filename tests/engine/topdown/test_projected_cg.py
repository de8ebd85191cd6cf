"""The large-family solver (engine/topdown/qp/projected_cg.py: ADMM guess, projected-CG
active-set polish) against an independent per-family cvxpy model of TDA eq. 7.5 with every
constraint type (cells the parent cannot populate, non-negativity, structural zeros, GQ lower
bounds, bands of an earlier pass), its KKT conditions, the null-space projection, the dispatch of
large families and the Clarabel fallback."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engine.topdown.family import FamilyBatch
from engine.topdown.qp import family_admm, problem, projected_cg
from engine.topdown.qp.problem import Band, FamilyNotSolved
from engine.topdown.qp.route import Pass, plan, solve_pass
from engine.topdown.qp.settings import SETTINGS
from tests.engine.topdown.family_models import cvxpy_objective, family_batch

PASS = [1, 2, 3]


def _bands(batch: FamilyBatch) -> list[Band]:
    first = solve_pass(batch, [0], solver="clarabel")
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
            x = projected_cg.solve_family(batch, f, PASS, pass_bands)
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
    fam = problem.reduce(batch, 0, PASS, bands)
    hess = projected_cg._Hessian(batch, 0, PASS, fam.cells)
    probe = np.random.default_rng(0).normal(size=fam.grad.shape)
    assert hess.apply(probe) == pytest.approx(probe @ fam.hess, abs=1e-12)
    assert hess.apply(hess.minimiser(fam.grad)) == pytest.approx(-fam.grad, abs=1e-9)
    stepper = family_admm.AdmmStepper(fam, SETTINGS.cg_rho)
    x = projected_cg.polish(fam, hess, stepper.run(stepper.start(), 300))
    assert x is not None
    zero_set = fam.zero | (x <= 1e-12)
    cx = x @ fam.rows.T
    at_lower = np.isclose(cx, fam.lower, atol=1e-9) & (fam.lower < fam.upper)
    at_upper = np.isclose(cx, fam.upper, atol=1e-9)
    at_lower, at_upper = family_admm.independent_rows(fam, zero_set, at_lower, at_upper)
    solved = projected_cg._solve_equality(fam, hess, ~zero_set, at_lower, at_upper, None)
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
    cons = projected_cg._Constraints(rows, free, active)
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
    reference = solve_pass(batch, PASS, bands, solver="clarabel")
    calls: list[int] = []
    original = projected_cg.solve_family

    def counting(batch, f, pass_queries, bands, **options):
        calls.append(f)
        return original(batch, f, pass_queries, bands, **options)

    large = replace(SETTINGS, large_persons_per_child=0.0, piqp_max_variables=0.0)  # all "large"
    monkeypatch.setattr(projected_cg, "solve_family", counting)
    auto = solve_pass(batch, PASS, bands, settings=large)
    assert sorted(calls) == list(range(batch.n_families))
    assert auto.objective == pytest.approx(reference.objective, rel=1e-6)


def test_unverified_polish_falls_back_to_clarabel(monkeypatch):
    batch = family_batch(6, bounds=True)
    expected = solve_pass(batch, PASS, solver="clarabel")
    # every family "large", every polish "fails"
    failing = replace(
        SETTINGS,
        large_persons_per_child=0.0,
        piqp_max_variables=0.0,
        cg_active_set_steps=0,
        cg_max_admm_iterations=100,
    )
    with pytest.raises(FamilyNotSolved):
        projected_cg.solve_family(batch, 0, PASS, [], s=failing)
    none = np.zeros(batch.n_families, dtype=bool)
    _x, solved = projected_cg.solve_families(batch, PASS, [], none, failing)
    assert not solved.any()
    routes: dict[str, int] = {}
    fallback = solve_pass(batch, PASS, settings=failing, routes=routes)
    assert routes == {"clarabel": batch.n_families}  # as before: not PIQP (a 10M state: slow)
    assert fallback.objective == pytest.approx(expected.objective, rel=1e-8)


def test_uncovered_passes_are_not_taken():
    batch = family_batch(7)
    large = replace(SETTINGS, large_persons_per_child=0.0, piqp_max_variables=0.0)
    assert not plan(Pass(batch, (0,)), large)["projected_cg"].any()  # no DETAILED
    assert plan(Pass(batch, tuple(PASS)), large)["projected_cg"].all()


def test_families_above_the_work_limit_get_the_first_polish_only(monkeypatch):
    """Above cg_admm_max_work no ADMM is run: the first polish verifies or Clarabel takes it."""
    batch = family_batch(10, bounds=True)
    limited = replace(
        SETTINGS, large_persons_per_child=0.0, cg_admm_max_work=0.0, piqp_max_variables=0.0
    )
    none = np.zeros(batch.n_families, dtype=bool)

    def no_admm(*_args, **_kwargs):
        raise AssertionError("ADMM must not run above MAX_WORK")

    monkeypatch.setattr(family_admm.AdmmStepper, "__init__", no_admm)
    x, solved = projected_cg.solve_families(batch, PASS, [], none, limited)
    for f in np.flatnonzero(solved):
        lo, hi = batch.child_ptr[f], batch.child_ptr[f + 1]
        assert _objective(batch, f, x[lo:hi]) == pytest.approx(
            cvxpy_objective(batch, f, PASS, []), rel=1e-6
        )
    monkeypatch.setattr(projected_cg, "polish", lambda *_args: None)
    x, solved = projected_cg.solve_families(batch, PASS, [], none, limited)
    assert not solved.any() and not x.any()
    reference = solve_pass(batch, PASS, solver="clarabel")
    assert solve_pass(batch, PASS, settings=limited).objective == pytest.approx(
        reference.objective, rel=1e-6
    )


def test_admm_takes_over_when_the_first_polish_fails(monkeypatch):
    """The polish from the projected unconstrained minimisers is tried first; when it does not
    verify, ADMM rounds guess the active set and a later polish must still give the optimum."""
    batch = family_batch(12, bounds=True, n_families=1)
    bands = _bands(batch)
    original = projected_cg.polish
    calls: list[bool] = []

    def first_fails(fam, hess, state, s):
        calls.append(True)
        return None if len(calls) == 1 else original(fam, hess, state, s)

    monkeypatch.setattr(projected_cg, "polish", first_fails)
    x = projected_cg.solve_family(batch, 0, PASS, bands)
    assert len(calls) >= 2
    assert _objective(batch, 0, x) == pytest.approx(
        cvxpy_objective(batch, 0, PASS, bands), rel=1e-6
    )
    _assert_feasible(batch, 0, x, bands)


def test_heavy_polish_families_take_the_first_polish_then_family_admm(monkeypatch):
    """Above heavy_polish_work (children × cells³) a family of small children tries the
    projected-CG first polish (no ADMM of that module), then family_admm's ADMM + dense polish,
    then Clarabel."""
    batch = family_batch(9, bounds=True)
    bands = _bands(batch)
    reference = solve_pass(batch, PASS, bands, solver="clarabel")
    assert not plan(Pass(batch, tuple(PASS), tuple(bands)))["projected_cg"].any()  # not heavy
    heavy_settings = replace(SETTINGS, heavy_polish_work=0.0, piqp_max_variables=0.0)
    assert plan(Pass(batch, tuple(PASS), tuple(bands)), heavy_settings)["projected_cg"].all()
    first: list[int] = []
    admm: list[int] = []
    original_first, original_admm = projected_cg.solve_family, family_admm.solve_family

    def counting_first(batch, f, pass_queries, bands, **options):
        assert options["admm"] is False
        first.append(f)
        return original_first(batch, f, pass_queries, bands, **options)

    def counting_admm(batch, f, pass_queries, bands, s):
        admm.append(f)
        return original_admm(batch, f, pass_queries, bands, s)

    monkeypatch.setattr(projected_cg, "solve_family", counting_first)
    monkeypatch.setattr(family_admm, "solve_family", counting_admm)
    heavy = solve_pass(batch, PASS, bands, settings=heavy_settings)
    assert sorted(first) == list(range(batch.n_families))
    assert heavy.objective == pytest.approx(reference.objective, rel=1e-6)
    # First polish made to fail: family_admm solves every family, same objective.
    first.clear()
    monkeypatch.setattr(projected_cg, "polish", lambda *_args: None)
    fallback = solve_pass(batch, PASS, bands, settings=heavy_settings)
    assert sorted(first) == sorted(admm) == list(range(batch.n_families))
    assert fallback.objective == pytest.approx(reference.objective, rel=1e-6)
    # Both made to fail: Clarabel takes them.
    last = solve_pass(batch, PASS, bands, settings=replace(heavy_settings, admm_active_set_steps=0))
    assert last.objective == pytest.approx(reference.objective, rel=1e-6)
