"""A TOTAL-only least-squares pass under structural bounds in closed form (TDA §7.1, eq. 7.5 with
the bounds of §5.3; SPEC §4, §6).

The first pass of a non-leaf family (production: TOTAL alone) minimises Σ_c w_c (1ᵀx_c − m_c)²,
which depends on the children's totals t_c only. Under structural zeros (cells a child cannot
hold) and group-quarters lower bounds (Σ_{j ∈ g} x_cj ≥ L_cg), each total lies in [L_c, U_c] with
L_c = Σ_g L_cg and U_c = the parent's persons in the cells the child may hold. The relaxation
min Σ_c w_c (t_c − m_c)² s.t. Σ_c t_c = P, L_c ≤ t_c ≤ U_c has a closed form (water filling:
t_c = clip(m_c − λ/(2w_c), L_c, U_c), λ by bisection, then exactly on the final partition); its
optimum bounds the pass from below. A histogram with those totals is sought by iterative
proportional fitting of the parent over the cells each child may hold (x_cj = a_c b_j); if it meets
every constraint (totals, the parent, x ≥ 0, the lower bounds) to 1e-9, it attains the bound and
the pass is solved exactly. Families where it does not are left to the general QP.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.topdown.family import FamilyBatch

FIT_ITERATIONS = 1000
"""Iterative proportional fitting sweeps at most (it stops once the totals are met to 1e-13 of the
parent's total: an objective near 0 — noisy totals that already sum to the parent — then still
matches cvxpy to 1e-6 relative); a family whose fit misses :data:`FIT_TOL` goes to the general QP."""

FIT_TOL = 1e-9
"""Relative tolerance on the fitted histogram's totals, parent cells and lower bounds."""


def applies(batch: FamilyBatch, pass_queries: Sequence[int], bands: Sequence[object]) -> bool:
    """A TOTAL-only pass with a parent and structural bounds, no bands, no invariants below."""
    return (
        batch.parent is not None
        and batch.has_bounds
        and len(pass_queries) == 1
        and batch.queries[pass_queries[0]].size == 1
        and not bands
        and not batch.sums
        and not any(t is not None and np.isfinite(t).any() for t in batch.invariant)
        and bool(np.all(batch.weight[:, pass_queries[0]] > 0))
    )


def water_fill_boxed(
    m: np.ndarray, w: np.ndarray, lower: np.ndarray, upper: np.ndarray, total: float
) -> np.ndarray | None:
    """argmin Σ w (t − m)² s.t. Σ t = ``total``, lower ≤ t ≤ upper; ``None`` if infeasible."""
    if lower.sum() > total * (1 + FIT_TOL) + FIT_TOL or upper.sum() < total * (1 - FIT_TOL):
        return None
    half = 1.0 / (2.0 * w)
    lo = float(np.min((m - upper) / half)) - 1.0  # every t at its upper end: Σ ≥ total
    hi = float(np.max((m - lower) / half)) + 1.0  # every t at its lower end: Σ ≤ total
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if np.clip(m - mid * half, lower, upper).sum() > total:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * max(1.0, abs(lo), abs(hi)):
            break
    lam = 0.5 * (lo + hi)
    raw = m - lam * half
    at_low, at_high = raw <= lower, raw >= upper
    free = ~(at_low | at_high)
    if free.any():
        rest = total - lower[at_low].sum() - upper[at_high].sum()
        lam = (m[free].sum() - rest) / half[free].sum()
    return np.clip(m - lam * half, lower, upper)


def _fit(parent: np.ndarray, totals: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """x_cj = a_c b_j on ``allowed`` cells with row sums ``totals`` and column sums ``parent``
    (iterative proportional fitting from the parent's shares)."""
    x = np.where(allowed, parent[None, :], 0.0)
    for _ in range(FIT_ITERATIONS):
        rows = x.sum(axis=1)
        x *= np.where(rows > 0, totals / np.where(rows > 0, rows, 1.0), 0.0)[:, None]
        cols = x.sum(axis=0)
        x *= np.where(cols > 0, parent / np.where(cols > 0, cols, 1.0), 0.0)[None, :]
        if np.abs(x.sum(axis=1) - totals).max(initial=0.0) <= 1e-13 * max(1.0, parent.sum()):
            break
    return x


def solve_total_pass(batch: FamilyBatch, q: int) -> tuple[np.ndarray, np.ndarray]:
    """Every family's TOTAL pass: (x ``(K, n_cells)``, solved ``(F,)``); unsolved rows are 0."""
    x = np.zeros((batch.n_children, batch.n_cells))
    solved = np.zeros(batch.n_families, dtype=bool)
    zero = batch.structural_zero_cells()
    for f in range(batch.n_families):
        lo, hi = int(batch.child_ptr[f]), int(batch.child_ptr[f + 1])
        parent = batch.parent[f].astype(np.float64)
        allowed = np.broadcast_to(parent > 0, (hi - lo, parent.size))
        if zero is not None:
            allowed = allowed & ~zero[lo:hi]
        lower = np.zeros(hi - lo)
        for bound in batch.bounds:
            low = bound.lower[lo:hi]
            lower = np.maximum(lower, np.where(np.isfinite(low) & (low > 0), low, 0.0).sum(axis=1))
        upper = (allowed * parent).sum(axis=1)
        totals = water_fill_boxed(
            batch.noisy[q][lo:hi, 0], batch.weight[lo:hi, q], lower, upper, float(parent.sum())
        )
        if totals is None:
            continue
        values = _fit(parent, totals, allowed)
        tol = FIT_TOL * max(1.0, float(parent.sum()))
        ok = (
            np.abs(values.sum(axis=1) - totals).max(initial=0.0) <= tol
            and np.abs(values.sum(axis=0) - parent).max(initial=0.0) <= tol
        )
        for bound in batch.bounds:
            low = bound.lower[lo:hi]
            answers = bound.spec.answer(values)
            ok = ok and bool(np.all(~np.isfinite(low) | (answers >= low - tol)))
        if ok:
            x[lo:hi] = values
            solved[f] = True
    return x, solved
