"""Small families solved together (engine/topdown/qp/small_families.py: the batched interior point on
each parent's populated cells) against an independent per-family cvxpy model of TDA eq. 7.5 with
every constraint type — non-negativity, cells the parent cannot populate, structural zeros and GQ
lower bounds (ChildBounds), the bands of an earlier pass — and against the same families solved
one at a time; the fallbacks when a family is not covered or not solved."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engine.topdown.family import ChildSum, FamilyBatch
from engine.topdown.qp import interior_point, problem, small_families
from engine.topdown.qp.interior_point import FamilyQP, solve_family_qp
from engine.topdown.qp.problem import Band, FamilyNotSolved, reduce
from engine.topdown.qp.route import Pass, plan, solve_pass
from engine.topdown.qp.settings import SETTINGS
from tests.engine.topdown.family_models import cvxpy_objective
from tests.engine.topdown.family_models import family_batch as make_batch

PASS = [1, 2, 3]


def _bands(batch: FamilyBatch) -> list[Band]:
    """The TOTAL band of a first pass (held within 0.1, as production's second pass)."""
    first = solve_pass(batch, [0], solver="clarabel")
    return [Band(0, batch.queries[0].answer(first.x), np.full(batch.n_families, 0.1))]


def _assert_feasible(batch: FamilyBatch, x: np.ndarray, bands) -> None:
    assert x.min() >= 0
    sums = np.add.reduceat(x, batch.child_ptr[:-1], axis=0)
    assert sums == pytest.approx(batch.parent, abs=1e-7)
    assert np.all(x[batch.parent[batch.child_family] == 0] == 0)
    for bound in batch.bounds:
        answers = bound.spec.answer(x)
        assert np.all(answers >= bound.lower - 1e-7)
        assert np.all(answers <= bound.upper + 1e-7)
        assert np.all(x[bound.zero_cells()] == 0)  # structural zeros
    for band in bands:
        gap = np.abs(batch.queries[band.query].answer(x) - band.target)
        assert np.all(gap <= band.tol[batch.child_family, None] + 1e-7)


@pytest.mark.parametrize("seed", [21, 22, 23])
@pytest.mark.parametrize("bounds", [False, True])
@pytest.mark.parametrize("with_bands", [False, True])
def test_objectives_match_cvxpy_with_every_constraint(seed, bounds, with_bands):
    batch = make_batch(seed, bounds=bounds, n_families=4)
    assert small_families.small_families(batch).all()
    bands = _bands(batch) if with_bands else []
    x, solved = small_families.solve_small_families(batch, PASS, bands)
    assert solved.all()
    _assert_feasible(batch, x, bands)
    settings = replace(SETTINGS, small_held_passes_only=False)  # take the single pass too
    auto = solve_pass(batch, PASS, bands, solver="small_ipm", settings=settings)
    assert np.array_equal(auto.x, x)
    for f in range(batch.n_families):
        assert auto.objective[f] == pytest.approx(
            cvxpy_objective(batch, f, PASS, bands), rel=1e-6, abs=1e-9
        )


def test_batched_equals_one_family_at_a_time_and_is_deterministic():
    batch = make_batch(24, bounds=True, n_families=6)
    bands = _bands(batch)
    x, solved = small_families.solve_small_families(batch, PASS, bands)
    again, _ = small_families.solve_small_families(batch, PASS, bands)
    assert np.array_equal(x, again)  # same batch, same numbers
    assert solved.all()
    for f in range(batch.n_families):
        rows = np.arange(batch.child_ptr[f], batch.child_ptr[f + 1])
        one = batch.subset([f])
        one_bands = [Band(b.query, b.target[rows], b.tol[[f]]) for b in bands]
        alone, ok = small_families.solve_small_families(one, PASS, one_bands)
        assert ok.all()
        assert alone == pytest.approx(x[rows], abs=1e-6)


def test_passes_without_bands_are_left_to_admm():
    batch = make_batch(29, bounds=True, n_families=2)
    routes = plan(Pass(batch, tuple(PASS)))
    # small_held_passes_only: the single pass of leaf families stays with ADMM
    assert not routes["small_ipm"].any() and routes["admm"].all()
    reference = solve_pass(batch, PASS, solver="clarabel")
    assert solve_pass(batch, PASS, solver="auto").objective == pytest.approx(
        reference.objective, rel=1e-6
    )


def test_families_are_grouped_by_size():
    batch = make_batch(25, bounds=True, n_families=8)
    reduced = [reduce(batch, f, PASS, [], shared=False) for f in range(batch.n_families)]
    groups = small_families._groups(reduced, SETTINGS)
    assert sorted(i for g in groups for i in g) == list(range(batch.n_families))
    for group in groups:
        cells = [reduced[i].cells.size for i in group]
        assert max(cells) <= SETTINGS.small_group_spread * min(cells)
        assert sum(reduced[i].children.size for i in group) <= SETTINGS.small_group_children


def test_large_families_and_uncovered_passes_are_not_taken():
    batch = make_batch(26, n_families=3)
    assert not problem.covered(batch, [0])  # no DETAILED in the pass
    invariant = np.full((batch.n_children, 1), np.nan)
    invariant[0, 0] = 1.0
    with_invariant = FamilyBatch(**{**batch.__dict__, "invariant": (invariant, None, None, None)})
    assert not problem.covered(with_invariant, PASS)
    held = ChildSum(0, np.array([0, 1]), np.array([1.0]))
    assert not problem.covered(FamilyBatch(**{**batch.__dict__, "sums": (held,)}), PASS)
    sizes = np.diff(batch.child_ptr)
    limit = int(sizes.min() * np.count_nonzero(batch.parent > 0, axis=1).min())
    small = small_families.small_families(batch)
    assert small.all()
    tighter = replace(SETTINGS, small_max_variables=limit - 1)
    assert not small_families.small_families(batch, tighter).any()


def test_unsolved_groups_fall_back_to_admm_and_clarabel(monkeypatch):
    batch = make_batch(27, bounds=True, n_families=3)
    bands = _bands(batch)
    expected = solve_pass(batch, PASS, bands, solver="clarabel")

    def fail(*_args, **_kwargs):
        raise np.linalg.LinAlgError("made to fail")

    monkeypatch.setattr(small_families, "solve_verified", fail)
    _x, solved = small_families.solve_small_families(batch, PASS, bands)
    assert not solved.any()
    fallback = solve_pass(batch, PASS, bands, solver="auto")
    assert fallback.objective == pytest.approx(expected.objective, rel=1e-6)


def test_a_band_over_cells_the_parent_cannot_populate_is_left_to_the_general_model():
    batch = make_batch(30, n_families=2)  # family 0's parent has empty cells
    empty = int(np.flatnonzero(batch.parent[0] == 0)[0])
    target = np.zeros((batch.n_children, batch.queries[3].size))
    target[0, empty] = 5.0  # a DETAILED band demanding persons in a cell the parent lacks
    band = Band(3, target, np.array([0.1, 1e6]))  # family 1's band holds nothing
    with pytest.raises(FamilyNotSolved):
        reduce(batch, 0, PASS, [band], shared=False)
    _x, solved = small_families.solve_small_families(batch, PASS, [band])
    assert not solved[0] and solved[1]


def test_per_child_rows_and_infinite_bounds_match_shared_rows():
    """batched_qp with B per child ``(K, m, n)`` and inactive (infinite) sides gives the answer of
    the shared-B form with the same rows."""
    rng = np.random.default_rng(3)
    k, n = 6, 5
    family = np.repeat([0, 1], 3)
    a = rng.normal(size=(k, n, n))
    h = a @ a.transpose(0, 2, 1) + np.eye(n)
    g = rng.normal(size=(k, n)) * 3
    parent = rng.integers(1, 6, size=(2, n)).astype(float)
    b = np.ones((1, n))
    totals = np.repeat(parent.sum(axis=1) / 3, 3)[:, None]
    lo, hi = totals - 0.5, totals + 0.5
    shared = solve_family_qp(FamilyQP(h, g, family, parent, b, lo, hi), tol=1e-10)
    rows = np.concatenate([np.broadcast_to(b, (k, 1, n)), np.zeros((k, 1, n))], axis=1)
    per_child = FamilyQP(
        h,
        g,
        family,
        parent,
        np.ascontiguousarray(rows),
        np.concatenate([lo, np.full((k, 1), -np.inf)], axis=1),
        np.concatenate([hi, np.full((k, 1), np.inf)], axis=1),
    )
    assert solve_family_qp(per_child, tol=1e-10) == pytest.approx(shared, abs=1e-7)


def test_structural_zeros_take_no_share_of_the_coupling():
    """A cell fixed at 0 in one child (``FamilyQP.fixed``) stays 0; its siblings hold the parent."""
    k, n = 3, 4
    qp = FamilyQP(
        H=np.tile(2 * np.eye(n), (k, 1, 1)),
        g=-2 * np.full((k, n), 3.0),
        family=np.zeros(k, dtype=np.int64),
        parent=np.full((1, n), 9.0),
        B=np.zeros((0, n)),
        lo=np.zeros((k, 0)),
        hi=np.zeros((k, 0)),
        fixed=np.array([[True, False, False, False], [False] * 4, [False] * 4]),
    )
    x = solve_family_qp(qp, tol=1e-10)
    assert x[0, 0] == 0.0
    assert x[1:, 0] == pytest.approx([4.5, 4.5])
    assert x[:, 1:] == pytest.approx(np.full((k, n - 1), 3.0))
    assert SETTINGS.tiny_weight < 1e-50


def test_every_childs_total_band_active_is_solved_and_checked():
    """When every child's TOTAL row is at a bound the rows repeat the coupling (their sum is the
    parent's total): one is left out of the solve, and the guess is verified only if that row
    still sits on its bound."""
    k, n = 2, 3
    qp = FamilyQP(
        H=np.tile(2 * np.eye(n), (k, 1, 1)),
        g=-2 * np.array([[6.0, 6.0, 6.0], [1.0, 1.0, 1.0]]),
        family=np.zeros(k, dtype=np.int64),
        parent=np.full((1, n), 4.0),
        B=np.ones((1, n)),
        lo=np.array([[6.9], [4.9]]),
        hi=np.array([[7.1], [5.1]]),
    )
    m = 1
    s = np.ones((k, n + 2 * m))
    z = np.zeros((k, n + 2 * m))
    z[0, n] = 100.0  # child 0's total at its upper bound 7.1 (dual ≫ ROW_RATIO × slack)
    z[1, n + m] = 100.0  # child 1's total at its lower bound 4.9: 7.1 + 4.9 = 12 = parent total
    fixed = np.zeros((k, n), dtype=bool)
    x, ok = interior_point.polish(qp, np.zeros((k, n)), s, z, fixed)
    assert ok.all()  # the dependent pair is solved, not singular
    assert x.sum(axis=1) == pytest.approx([7.1, 4.9])
    z[1, n + m], z[1, n] = 0.0, 100.0  # both at upper bounds: 7.1 + 5.1 ≠ 12
    _x, ok = interior_point.polish(qp, np.zeros((k, n)), s, z, fixed)
    assert not ok.any()
    x, ok = interior_point.solve_verified(qp)
    assert ok.all() and x.sum(axis=1) == pytest.approx([7.1, 4.9])
