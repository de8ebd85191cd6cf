"""engine/topdown/qp/interior_point.py's building blocks.

The exact active-set solve (``_kkt_solve``, used by ``polish``) against one dense KKT system per
family solved by NumPy: cells held at 0, band rows at either bound, shared and per-child rows,
families padded to a common size, cells no child may hold.

``spd_inverse`` (LAPACK Cholesky potrf/potri per matrix) against ``np.linalg.inv``: equal to
1e-12 relative on well-conditioned batches of every size the interior point meets, exactly
symmetric, the input untouched, and the fallbacks when a matrix is not positive definite.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine.topdown.qp import interior_point
from engine.topdown.qp.interior_point import FamilyQP
from engine.topdown.qp.kkt import spd_inverse
from engine.topdown.qp.settings import SETTINGS


def _problem(seed: int, *, per_child_rows: bool, coupled: bool = True):
    """Three families (3, 2, 4 children) on n = 9 cells, the second padded to 6 cells; H shared by
    a family's children (scaled identity plus label-equality blocks, as the block groups')."""
    rng = np.random.default_rng(seed)
    n, m = 9, 3
    sizes = [3, 2, 4]
    family = np.repeat(np.arange(3), sizes)
    k = family.size
    h = np.zeros((k, n, n))
    for f in range(len(sizes)):
        labels = rng.integers(0, 3, size=n)
        hf = 2.0 * np.eye(n) + 2.0 * rng.uniform(0.5, 2.0) * (labels[:, None] == labels[None, :])
        h[family == f] = hf
    g = rng.normal(size=(k, n)) * 4
    parent = rng.integers(1, 9, size=(3, n)).astype(float)
    parent[1, 6:] = 0.0  # padding cells of the smaller family
    h[family == 1, 6:, :] = 0.0
    h[family == 1, :, 6:] = 0.0
    g[family == 1, 6:] = 0.0
    b = (rng.uniform(size=(m, n)) < 0.5).astype(float)
    b[0, :] = 0.0
    b[0, :4] = 1.0  # a band over some cells, never all of a child's free cells below
    if per_child_rows:
        b = np.ascontiguousarray(np.broadcast_to(b, (k, m, n)).copy())
        b[1, 2] = 0.0  # one child without its last row
    lo = rng.uniform(0, 5, size=(k, m))
    hi = lo + rng.uniform(0.5, 2, size=(k, m))
    qp = FamilyQP(h, g, family, parent if coupled else None, b, lo, hi)
    while True:  # active sets whose dense KKT matrices are regular (random ones may repeat rows)
        zero = rng.uniform(size=(k, n)) < 0.35
        zero[family == 1, 6:] = True
        zero[:, 5] = True  # no child may hold cell 5
        zero[:, 0] = False  # every child holds cell 0 (so band 0 touches a free cell)
        at_hi = rng.uniform(size=(k, m)) < 0.3
        at_lo = ~at_hi & (rng.uniform(size=(k, m)) < 0.3)
        try:
            _dense(qp, zero, at_hi, at_lo)
        except np.linalg.LinAlgError:
            continue
        return qp, zero, at_hi, at_lo


def _dense(qp: FamilyQP, zero, at_hi, at_lo):
    """x, ν and the reduced gradient from one KKT matrix per family (x of every child on all n
    cells, a multiplier per held cell, per active row and per parent cell some child may hold)."""
    k, n = qp.g.shape
    rows = qp.b_rows() if qp.per_child_rows else np.broadcast_to(qp.B, (k, *qp.B.shape))
    m = rows.shape[1]
    touches = np.einsum("kmn,kn->km", rows, (~zero).astype(float)) > 0
    at_hi, at_lo = at_hi & touches, at_lo & touches
    sol, nu = np.zeros((k, n)), np.zeros((k, m))
    coupling = np.zeros((k, n))
    for f in np.unique(qp.family):
        kids = np.flatnonzero(qp.family == f)
        eqs, rhs, tags = [], [], []
        for j, c in enumerate(kids):
            for i in np.flatnonzero(zero[c]):
                e = np.zeros(len(kids) * n)
                e[j * n + i] = 1.0
                eqs.append(e), rhs.append(0.0), tags.append(None)
            for r in np.flatnonzero(at_hi[c] | at_lo[c]):
                e = np.zeros(len(kids) * n)
                e[j * n : (j + 1) * n] = rows[c, r]
                eqs.append(e), rhs.append(qp.hi[c, r] if at_hi[c, r] else qp.lo[c, r])
                tags.append((c, r))
        if qp.parent is not None:
            for i in np.flatnonzero(~zero[kids].all(axis=0)):  # a cell no child holds: no row
                e = np.zeros(len(kids) * n)
                e[i::n] = 1.0
                eqs.append(e), rhs.append(qp.parent[f, i]), tags.append(("y", i))
        a = np.array(eqs).reshape(len(eqs), len(kids) * n)
        big_h = np.zeros((len(kids) * n, len(kids) * n))
        for j, c in enumerate(kids):
            big_h[j * n : (j + 1) * n, j * n : (j + 1) * n] = qp.H[c]
        size = big_h.shape[0] + a.shape[0]
        kkt = np.zeros((size, size))
        kkt[: big_h.shape[0], : big_h.shape[0]] = big_h
        kkt[big_h.shape[0] :, : big_h.shape[0]] = a
        kkt[: big_h.shape[0], big_h.shape[0] :] = a.T
        right = np.concatenate([-qp.g[kids].ravel(), rhs])
        if np.linalg.cond(kkt) > 1e8:
            raise np.linalg.LinAlgError("dependent active rows")
        full = np.linalg.solve(kkt, right)
        sol[kids] = full[: big_h.shape[0]].reshape(len(kids), n)
        for value, tag in zip(full[big_h.shape[0] :], tags, strict=True):
            if tag is not None and tag[0] == "y":
                coupling[kids, tag[1]] = value
            elif tag is not None:
                nu[tag] = value
    grad = np.einsum("kij,kj->ki", qp.H, sol) + qp.g + coupling + np.einsum("km,kmn->kn", nu, rows)
    return sol, nu, grad


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("per_child_rows", [False, True])
@pytest.mark.parametrize("coupled", [True, False])
def test_kkt_solve_matches_a_dense_kkt_system(seed, per_child_rows, coupled):
    qp, zero, at_hi, at_lo = _problem(seed, per_child_rows=per_child_rows, coupled=coupled)
    sol, nu, grad, none_free, used_hi, used_lo = interior_point._kkt_solve(qp, zero, at_hi, at_lo)
    ref_sol, ref_nu, ref_grad = _dense(qp, zero, at_hi, at_lo)
    assert sol == pytest.approx(ref_sol, abs=1e-9)
    assert np.all(sol[zero] == 0.0)
    assert nu == pytest.approx(ref_nu, abs=1e-8)
    # The reduced gradient is 0 on free cells and the multiplier of x ≥ 0 on held cells (on cells
    # no child may hold the coupling multiplier is arbitrary: only their rows of x are checked).
    held_by_some = ~none_free[qp.family] if coupled else np.ones_like(zero)
    assert grad[held_by_some] == pytest.approx(ref_grad[held_by_some], abs=1e-8)
    assert np.abs(grad[~zero]).max() < 1e-8
    if coupled:
        sums = np.add.reduceat(sol, [0, 3, 5], axis=0)
        assert sums[~none_free] == pytest.approx(qp.parent[~none_free], abs=1e-9)
        assert np.array_equal(none_free[:, 5], [True] * 3)
    rows = qp.b_rows() if per_child_rows else np.broadcast_to(qp.B, (qp.g.shape[0], *qp.B.shape))
    bx = np.einsum("kmn,kn->km", rows, sol)
    assert bx[used_hi] == pytest.approx(qp.hi[used_hi], abs=1e-9)
    assert bx[used_lo] == pytest.approx(qp.lo[used_lo], abs=1e-9)


def test_compact_puts_each_rows_true_positions_first():
    mask = np.array([[False, True, False, True], [True, True, True, False], [False] * 4])
    positions, valid = interior_point._compact(mask)
    assert positions.shape == valid.shape == (3, 3)
    assert np.array_equal(valid, [[True, True, False], [True, True, True], [False] * 3])
    assert np.array_equal(positions[0, :2], [1, 3]) and not mask[0, positions[0, 2]]
    assert np.array_equal(positions[1], [0, 1, 2])
    for row, pos, ok in zip(mask, positions, valid, strict=True):
        assert len(set(pos)) == pos.size  # distinct: padding writes touch only False positions
        assert np.all(row[pos] == ok)


def test_kkt_solve_with_nothing_free():
    qp, zero, at_hi, at_lo = _problem(0, per_child_rows=False)
    zero[:] = True
    sol, nu, grad, none_free, used_hi, used_lo = interior_point._kkt_solve(qp, zero, at_hi, at_lo)
    assert np.all(sol == 0.0) and np.all(nu == 0.0) and none_free.all()
    assert not used_hi.any() and not used_lo.any()


def test_polish_holds_a_cell_only_where_its_dual_clearly_exceeds_its_slack():
    """The first active-set guess holds x_i = 0 where z_i > CELL_RATIO · s_i; a cell whose dual
    is only somewhat above its slack (a small count near the central path) stays free, and one
    held wrongly is released by the next active-set step."""
    k, n = 2, 3
    qp = FamilyQP(
        H=np.tile(2 * np.eye(n), (k, 1, 1)),
        g=-2 * np.array([[0.5, 3.0, 3.0], [0.5, 3.0, 3.0]]),
        family=np.zeros(k, dtype=np.int64),
        parent=np.array([[1.0, 6.0, 6.0]]),  # optimum: x = [0.5, 3, 3] in both children
        B=np.zeros((0, n)),
        lo=np.zeros((k, 0)),
        hi=np.zeros((k, 0)),
    )
    s, z = np.ones((k, n)), np.zeros((k, n))
    fixed = np.zeros((k, n), dtype=bool)
    z[0, 0] = 0.5 * SETTINGS.cell_ratio  # above the slack, not clearly
    x, ok = interior_point.polish(qp, np.zeros((k, n)), s, z, fixed, steps=1)
    assert ok.all() and x == pytest.approx(np.array([[0.5, 3, 3], [0.5, 3, 3]]))
    z[0, 0] = 2.0 * SETTINGS.cell_ratio  # held at 0: its multiplier is negative
    _x, ok = interior_point.polish(qp, np.zeros((k, n)), s, z, fixed, steps=1)
    assert not ok.any()
    x, ok = interior_point.polish(qp, np.zeros((k, n)), s, z, fixed, steps=2)
    assert ok.all() and x == pytest.approx(np.array([[0.5, 3, 3], [0.5, 3, 3]]))


def test_later_active_set_steps_solve_only_the_families_not_yet_verified(monkeypatch):
    """Family 0's first guess is right, family 1's holds a cell wrongly: the second step solves
    family 1 alone, and both answers equal each family polished on its own."""
    k, n = 4, 3
    target = np.array([[0.5, 3.0, 3.0]] * 2 + [[1.0, 2.0, 4.0]] * 2)
    qp = FamilyQP(
        H=np.tile(2 * np.eye(n), (k, 1, 1)),
        g=-2 * target,
        family=np.array([0, 0, 1, 1]),
        parent=np.array([[1.0, 6.0, 6.0], [2.0, 4.0, 8.0]]),
        B=np.zeros((0, n)),
        lo=np.zeros((k, 0)),
        hi=np.zeros((k, 0)),
    )
    s, z = np.ones((k, n)), np.zeros((k, n))
    z[2, 0] = 2.0 * SETTINGS.cell_ratio  # family 1: cell 0 of its first child held at 0
    fixed = np.zeros((k, n), dtype=bool)
    sizes = []
    solve = interior_point._kkt_solve

    def counted(sub, *args):
        sizes.append(sub.g.shape[0])
        return solve(sub, *args)

    monkeypatch.setattr(interior_point, "_kkt_solve", counted)
    x, ok = interior_point.polish(qp, np.zeros((k, n)), s, z, fixed, steps=3)
    assert ok.all() and sizes == [4, 2]
    assert x == pytest.approx(target)
    for f in range(2):
        one = interior_point._subset_qp(qp, np.arange(2) == f)
        rows = qp.family == f
        x_f, ok_f = interior_point.polish(one, np.zeros((2, n)), s[rows], z[rows], fixed[rows], 3)
        assert ok_f.all() and np.array_equal(x_f, x[rows])


def _spd(k: int, n: int, seed: int = 0, shift: float = 1.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((k, n, n))
    a = g @ g.swapaxes(1, 2) / n + shift * np.eye(n)
    return 0.5 * (a + a.swapaxes(1, 2))


@pytest.mark.parametrize("k", [1, 3, 18, 64])
@pytest.mark.parametrize("n", [1, 13, 16, 17, 48, 133])
def test_spd_inverse_equals_numpy_inverse(k: int, n: int) -> None:
    a = _spd(k, n, seed=k * 1000 + n)
    before = a.copy()
    inverse = spd_inverse(a)
    reference = np.linalg.inv(a)
    assert inverse.shape == a.shape and inverse.dtype == np.float64
    assert np.abs(inverse - reference).max() <= 1e-12 * np.abs(reference).max()
    assert np.array_equal(a, before)  # the input is not overwritten
    if n >= SETTINGS.spd_lapack_from:
        assert np.array_equal(inverse, inverse.swapaxes(1, 2))  # mirrored, exactly symmetric


def test_spd_inverse_reads_the_lower_triangle() -> None:
    """Only the lower triangle enters (as LAPACK's symmetric routines): an upper triangle off by
    rounding, as in a Schur sum of inverses, gives the inverse of the symmetric matrix."""
    a = _spd(3, 40, seed=3)
    upper = np.triu(np.ones((40, 40), dtype=bool), 1)
    noisy = a + np.where(upper, 1e-3, 0.0)
    assert (
        np.abs(spd_inverse(noisy) - np.linalg.inv(a)).max()
        <= 1e-12 * np.abs(np.linalg.inv(a)).max()
    )


def test_spd_inverse_accepts_views_and_other_dtypes() -> None:
    a = _spd(4, 30, seed=4)
    strided = np.asfortranarray(a)[::2]  # non-contiguous view of two matrices
    assert np.allclose(spd_inverse(strided), np.linalg.inv(a[::2]), rtol=0, atol=1e-12)
    single = a.astype(np.float32)
    assert np.allclose(spd_inverse(single), np.linalg.inv(a), rtol=1e-4, atol=1e-5)


def test_spd_inverse_of_an_empty_batch() -> None:
    assert spd_inverse(np.zeros((0, 20, 20))).shape == (0, 20, 20)
    assert spd_inverse(np.zeros((3, 0, 0))).shape == (3, 0, 0)


def test_indefinite_matrices_fall_back_to_lu() -> None:
    """A symmetric matrix that is invertible but not positive definite is inverted by LU, the
    others of the batch still by Cholesky."""
    a = _spd(5, 24, seed=5)
    a[2] -= 3.0 * np.eye(24) * np.abs(np.linalg.eigvalsh(a[2])).max()  # negative definite
    a[4, 0, 0] = -50.0  # indefinite
    a[4] = 0.5 * (a[4] + a[4].T)
    reference = np.linalg.inv(a)
    inverse = spd_inverse(a)
    assert np.abs(inverse - reference).max() <= 1e-12 * np.abs(reference).max()


def test_singular_matrix_raises_linalg_error() -> None:
    """A singular matrix raises LinAlgError, as np.linalg.inv does (the interior point stops)."""
    a = _spd(3, 20, seed=6)
    a[1] = 0.0
    with pytest.raises(np.linalg.LinAlgError):
        spd_inverse(a)


def test_non_finite_entries_give_non_finite_results() -> None:
    a = _spd(2, 20, seed=7)
    a[0, 3, 3] = np.nan
    inverse = spd_inverse(a)
    assert not np.isfinite(inverse[0]).all()
    assert np.abs(inverse[1] - np.linalg.inv(a[1])).max() <= 1e-12 * np.abs(inverse[1]).max()


def test_newton_matrices_of_the_interior_point() -> None:
    """Matrices shaped as the interior point's (shared Hessian, barrier weights over 8 decades,
    indicator band rows): equal to LU's inverse to the accuracy their conditioning allows."""
    rng = np.random.default_rng(8)
    n, k = 48, 6
    q = rng.standard_normal((n, n))
    rows = np.zeros((3, n))
    rows[0, :20] = rows[1, 20:] = rows[2] = 1.0
    w = 10.0 ** rng.uniform(-4, 4, (k, n))
    u = 10.0 ** rng.uniform(-4, 4, (k, 3))
    a = q @ q.T / n + np.eye(n) + (rows.T * u[:, None, :]) @ rows
    a[:, np.arange(n), np.arange(n)] += w
    a = 0.5 * (a + a.swapaxes(1, 2))
    inverse = spd_inverse(a)
    reference = np.linalg.inv(a)
    cond = np.linalg.cond(a).max()
    assert np.abs(inverse - reference).max() <= 1e-15 * cond * np.abs(reference).max()
    identity = np.broadcast_to(np.eye(n), a.shape)
    assert np.abs(a @ inverse - identity).max() <= 1e-15 * cond
