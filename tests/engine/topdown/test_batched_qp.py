"""The exact active-set solve of engine/topdown/batched_qp.py (``_kkt_solve``, used by ``polish``)
against one dense KKT system per family solved by NumPy: cells held at 0, band rows at either
bound, shared and per-child rows, families padded to a common size, cells no child may hold."""

from __future__ import annotations

import numpy as np
import pytest

from engine.topdown import batched_qp
from engine.topdown.batched_qp import FamilyQP


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
    sol, nu, grad, none_free, used_hi, used_lo = batched_qp._kkt_solve(qp, zero, at_hi, at_lo)
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
    positions, valid = batched_qp._compact(mask)
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
    sol, nu, grad, none_free, used_hi, used_lo = batched_qp._kkt_solve(qp, zero, at_hi, at_lo)
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
    z[0, 0] = 0.5 * batched_qp.CELL_RATIO  # above the slack, not clearly
    x, ok = batched_qp.polish(qp, np.zeros((k, n)), s, z, fixed, steps=1)
    assert ok.all() and x == pytest.approx(np.array([[0.5, 3, 3], [0.5, 3, 3]]))
    z[0, 0] = 2.0 * batched_qp.CELL_RATIO  # held at 0: its multiplier is negative
    _x, ok = batched_qp.polish(qp, np.zeros((k, n)), s, z, fixed, steps=1)
    assert not ok.any()
    x, ok = batched_qp.polish(qp, np.zeros((k, n)), s, z, fixed, steps=2)
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
    z[2, 0] = 2.0 * batched_qp.CELL_RATIO  # family 1: cell 0 of its first child held at 0
    fixed = np.zeros((k, n), dtype=bool)
    sizes = []
    solve = batched_qp._kkt_solve

    def counted(sub, *args):
        sizes.append(sub.g.shape[0])
        return solve(sub, *args)

    monkeypatch.setattr(batched_qp, "_kkt_solve", counted)
    x, ok = batched_qp.polish(qp, np.zeros((k, n)), s, z, fixed, steps=3)
    assert ok.all() and sizes == [4, 2]
    assert x == pytest.approx(target)
    for f in range(2):
        one = batched_qp._subset_qp(qp, np.arange(2) == f)
        rows = qp.family == f
        x_f, ok_f = batched_qp.polish(one, np.zeros((2, n)), s[rows], z[rows], fixed[rows], 3)
        assert ok_f.all() and np.array_equal(x_f, x[rows])
