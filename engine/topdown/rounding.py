"""Multi-pass controlled rounding to non-negative integers (TDA §7.1 eq. 7.3–7.4, §7.3 eq. 7.7).

Given the least-squares solution x̃ of a family, x̂ = ⌊x̃⌋ + y with y ∈ {0, 1}, such that the children
sum to the parent cell by cell, invariants hold, and — pass by pass along a nested chain of
marginals Q^(1) ⊂ … ⊂ Q^(K) = DETAILED (e.g. TOTAL → VOTINGAGE → DETAILED) — the L1 distance
1ᵀ|Q^(k)(x̃ − x̂)| is minimised while the answers Q^(j) x̂^(j) of earlier passes are frozen (eq. 7.7).

Each pass is a linear program over a totally unimodular constraint matrix: the "sum to the parent"
rows form one laminar family, the per-child marginals of a nested chain another, and the union of
two laminar families is a network matrix (TDA §7.3). The L1 objective on a marginal answer
v = Q x̂ (an integer) is replaced by its piecewise-linear interpolation at the integers, written with
unit segment variables v = Q⌊x̃⌋ + Σ_j s_j (0 ≤ s_j ≤ 1, segment j costing |L+j+1−a| − |L+j−a|),
which appends unit columns and keeps the matrix TUM and the objective exact at integer points. For
the DETAILED pass the cost is linear in y: |f − y| = f + (1 − 2f) y for y ∈ {0, 1}. A vertex solution
(HiGHS dual simplex via SciPy) is therefore integral; we verify it and fall back to a MILP if not.
All families of a batch are solved as one block-diagonal LP per pass.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, linprog, milp

from engine.topdown.family import FamilyBatch, QuerySpec
from engine.topdown.feasibility import TopDownInfeasible, describe_family_failure

INTEGRALITY_TOL = 1e-6
SNAP_TOL = 1e-6


class _LPFailed(Exception):
    """The rounding LP (or MILP) reported no solution."""


def _solve_lp(
    c: np.ndarray,
    a_eq: sp.csr_matrix,
    b_eq: np.ndarray,
    n_int: int,
    a_ub: sp.csr_matrix | None = None,
    b_ub: np.ndarray | None = None,
) -> tuple[np.ndarray, bool]:
    """Solve min cᵀv, A v = b, A_ub v ≤ b_ub, 0 ≤ v ≤ 1 at a vertex; MILP fallback if not integral.

    Returns the solution and whether the MILP fallback was needed.
    """
    if a_ub is not None and a_ub.shape[0] == 0:
        a_ub = b_ub = None
    if a_ub is not None and a_ub.shape[1] < c.size:
        a_ub = sp.hstack([a_ub, sp.csr_matrix((a_ub.shape[0], c.size - a_ub.shape[1]))], "csr")
    result = linprog(
        c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, bounds=(0.0, 1.0), method="highs-ds"
    )
    if result.status != 0:
        raise _LPFailed(result.message)
    v = result.x
    if np.all(np.abs(v - np.round(v)) <= INTEGRALITY_TOL):
        return v, False
    integrality = np.zeros(c.size)
    integrality[:n_int] = 1
    constraints = [LinearConstraint(a_eq, b_eq, b_eq)]
    if a_ub is not None:
        constraints.append(LinearConstraint(a_ub, -np.inf, b_ub))
    mres = milp(
        c,
        constraints=constraints,
        bounds=Bounds(0.0, 1.0),
        integrality=integrality,
    )
    if mres.status != 0:
        raise _LPFailed(mres.message)
    return mres.x, True


def round_batch(
    batch: FamilyBatch, x_tilde: np.ndarray, chain: Sequence[QuerySpec]
) -> tuple[np.ndarray, int]:
    """Round ``x_tilde`` ``(K, n_cells)`` of every family (TDA eq. 7.7); returns int64 ``(K, n)``
    and the number of passes that needed the MILP fallback (0 when every LP vertex was integral).

    Cells whose least-squares value is already an integer (within 1e-6; most block cells are 0)
    keep it: x̃ itself lies in the restricted polytope, so it stays non-empty and totally
    unimodular, and the LPs shrink several-fold. Should the restricted problem fail numerically,
    the full problem (every cell free to move up by one) is solved instead.
    """
    try:
        return _round(batch, x_tilde, chain, restrict=True)
    except _LPFailed:
        pass
    try:
        return _round(batch, x_tilde, chain, restrict=False)
    except _LPFailed as exc:
        raise TopDownInfeasible(
            describe_family_failure(batch, "controlled rounding (TDA eq. 7.7)", str(exc))
        ) from None


def _on(spec: QuerySpec, n_children: int, n_cells: int, cols: np.ndarray) -> sp.csr_matrix:
    """``kron(I_K, Q)`` on the free cells ``cols`` only, built directly (no Kronecker product
    over all K · n_cells cells: on the 2,016-cell schema most cells of a family are not free)."""
    child, cell = np.divmod(cols, n_cells)
    rows = child * spec.size + spec.cell_index[cell]
    return sp.csr_matrix(
        (np.ones(cols.size), (rows, np.arange(cols.size))),
        shape=(n_children * spec.size, cols.size),
    )


def _select(rows: list[sp.spmatrix], rhs: list[np.ndarray], n_cols: int):
    """The stacked rows (already on the free cells) without empty rows (their rhs must be 0)."""
    if not rows:
        return sp.csr_matrix((0, n_cols)), np.zeros(0)
    a = sp.vstack(rows, format="csr")
    b = np.concatenate(rhs)
    nonempty = np.diff(a.indptr) > 0
    if np.any(np.abs(b[~nonempty]) > 1e-9):
        raise _LPFailed("a constraint has no free cell left but is not yet met")
    return a[nonempty], b[nonempty]


def _select_ub(rows: list[sp.spmatrix], rhs: list[np.ndarray]):
    """Like :func:`_select` for ≤ rows: a row with no free cell left must already hold."""
    if not rows:
        return None, None
    a = sp.vstack(rows, format="csr")
    b = np.concatenate(rhs)
    nonempty = np.diff(a.indptr) > 0
    if np.any(b[~nonempty] < -1e-9):
        raise _LPFailed("a structural bound has no free cell left but is not yet met")
    return a[nonempty], b[nonempty]


def _round(
    batch: FamilyBatch, x_tilde: np.ndarray, chain: Sequence[QuerySpec], *, restrict: bool
) -> tuple[np.ndarray, int]:
    n_children, n_cells = x_tilde.shape
    n_y = n_children * n_cells
    x_tilde = np.maximum(x_tilde, 0.0)
    nearest = np.round(x_tilde)
    near = np.abs(x_tilde - nearest) <= SNAP_TOL
    base = np.where(near, nearest, np.floor(x_tilde))
    frac = np.where(near, 0.0, x_tilde - base)
    free = ~near if restrict else np.ones_like(near)
    cols = np.flatnonzero(free.reshape(-1))
    # Equality rows shared by every pass: children sum to the parent; invariants.
    base_rows: list[sp.spmatrix] = []
    base_rhs: list[np.ndarray] = []
    n_free = cols.size
    if batch.parent is not None:
        child, cell = np.divmod(cols, n_cells)
        base_rows.append(
            sp.csr_matrix(
                (np.ones(n_free), (batch.child_family[child] * n_cells + cell, np.arange(n_free))),
                shape=(batch.n_families * n_cells, n_free),
            )
        )
        base_sum = np.add.reduceat(base, batch.child_ptr[:-1], axis=0)
        base_rhs.append((batch.parent - base_sum).reshape(-1))
    for q, target in enumerate(batch.invariant):
        if target is None:
            continue
        flat = target.reshape(-1)
        fixed = np.flatnonzero(np.isfinite(flat))
        if fixed.size:
            spec = batch.queries[q]
            base_rows.append(_on(spec, n_children, n_cells, cols)[fixed])
            base_rhs.append(flat[fixed] - spec.answer(base).reshape(-1)[fixed])
    for held in batch.sums:  # a sum of siblings held exact (TDA §7.4)
        spec = batch.queries[held.query]
        base_rows.append(sp.csr_matrix(batch.sum_matrix(held))[:, cols])
        base_rhs.append(held.target - spec.answer(base[held.rows]).sum(axis=0))
    # Structural bounds (TDA §5.3): lower ≤ Q(base + y) ≤ upper, as rows A_ub y ≤ b_ub.
    ub_rows: list[sp.spmatrix] = []
    ub_rhs: list[np.ndarray] = []
    for bound in batch.bounds:
        stacked = _on(bound.spec, n_children, n_cells, cols)
        at_base = bound.spec.answer(base).reshape(-1)
        upper, lower = bound.upper.reshape(-1), bound.lower.reshape(-1)
        up, low = np.flatnonzero(np.isfinite(upper)), np.flatnonzero(np.isfinite(lower))
        ub_rows += [stacked[up], -stacked[low]]
        ub_rhs += [upper[up] - at_base[up], at_base[low] - lower[low]]
    a_ub, b_ub = _select_ub(ub_rows, ub_rhs)
    frozen_rows: list[sp.spmatrix] = []
    frozen_rhs: list[np.ndarray] = []
    y = np.zeros(n_y)
    fallbacks = 0
    for spec in chain:
        a_eq, b_eq = _select(base_rows + frozen_rows, base_rhs + frozen_rhs, n_free)
        if spec.is_detailed:
            c = (1.0 - 2.0 * frac).reshape(-1)[cols]
            v, used = (
                _solve_lp(c, a_eq, b_eq, n_free, a_ub, b_ub) if n_free else (np.zeros(0), False)
            )
        else:
            stacked = _on(spec, n_children, n_cells, cols)
            lower = spec.answer(base).reshape(-1)  # L = Q x_base per (child, answer cell)
            target = spec.answer(x_tilde).reshape(-1)  # a = Q x̃
            seg_count = np.diff(stacked.tocsr().indptr)  # free cells behind each answer
            seg_owner = np.repeat(np.arange(seg_count.size), seg_count)
            seg_step = np.arange(seg_owner.size) - np.repeat(
                np.cumsum(seg_count) - seg_count, seg_count
            )
            level = lower[seg_owner] + seg_step
            cost = np.abs(level + 1 - target[seg_owner]) - np.abs(level - target[seg_owner])
            n_s = seg_owner.size
            # Link rows: Q y − Σ segments = 0 for every (child, answer cell) with a free cell.
            link = sp.hstack(
                [
                    stacked,
                    -sp.csr_matrix(
                        (np.ones(n_s), (seg_owner, np.arange(n_s))), shape=(seg_count.size, n_s)
                    ),
                ],
                format="csr",
            )[seg_count > 0]
            a_full = sp.vstack(
                [sp.hstack([a_eq, sp.csr_matrix((a_eq.shape[0], n_s))], format="csr"), link],
                format="csr",
            )
            b_full = np.concatenate([b_eq, np.zeros(link.shape[0])])
            c = np.concatenate([np.zeros(n_free), cost])
            v, used = (
                _solve_lp(c, a_full, b_full, c.size, a_ub, b_ub) if n_free else (np.zeros(0), False)
            )
        fallbacks += int(used)
        y = np.zeros(n_y)
        y[cols] = np.round(v[:n_free])
        if not spec.is_detailed:
            stacked = _on(spec, n_children, n_cells, cols)
            frozen_rows.append(stacked)
            frozen_rhs.append(stacked @ y[cols])
    x_hat = (base + y.reshape(n_children, n_cells)).astype(np.int64)
    return x_hat, fallbacks
