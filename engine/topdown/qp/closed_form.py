"""A TOTAL-only least-squares pass in closed form (TDA §7.1, eq. 7.5, with the bounds of §5.3).

The first pass of a non-leaf family (production: TOTAL alone) minimises Σ_c w_c (1ᵀx_c − m_c)²,
which depends on the children's totals t_c only, each in [L_c, U_c] (L_c: the child's GQ lower
bounds summed; U_c: the parent's persons in the cells it may hold). Water filling gives the
totals (t_c = clip(m_c − λ/(2w_c), L_c, U_c), λ by bisection, then exactly on the final
partition), a lower bound of the pass; iterative proportional fitting of the parent over the
cells each child may hold (x_cj = a_c b_j) attains it when it meets every constraint to 1e-9
(checked; without bounds, x_c = t_c · x̂_γ / P after one sweep). Other families: not mine.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.topdown.family import FamilyBatch
from engine.topdown.qp.settings import SETTINGS, QPSettings


def applies(batch: FamilyBatch, pass_queries: Sequence[int], bands: Sequence[object]) -> bool:
    """A TOTAL-only pass of every child measured, with a parent, no bands, no invariants below."""
    return (
        batch.parent is not None
        and len(pass_queries) == 1
        and batch.queries[pass_queries[0]].size == 1
        and not bands
        and not batch.sums
        and not any(t is not None and np.isfinite(t).any() for t in batch.invariant)
        and bool(np.all(batch.weight[:, pass_queries[0]] > 0))
    )


def water_fill_families(
    m: np.ndarray,
    w: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    total: np.ndarray,
    child_ptr: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """argmin Σ w (t − m)² s.t. Σ t = ``total``, lower ≤ t ≤ upper for every family at once
    (children of family f are rows
    ``child_ptr[f]:child_ptr[f+1]``; every family has a child): (t ``(K,)``, feasible ``(F,)``).

    Bisection on each family's multiplier λ, vectorised over families (a family stops when its
    bracket is 1e-13 relative), then λ exactly on the final partition into children at their
    lower bound, at their upper bound and free."""
    sizes = np.diff(child_ptr)
    fam = np.repeat(np.arange(sizes.size), sizes)
    starts = child_ptr[:-1]
    feasible = ~(
        (np.add.reduceat(lower, starts) > total * (1 + SETTINGS.fit_tol) + SETTINGS.fit_tol)
        | (np.add.reduceat(upper, starts) < total * (1 - SETTINGS.fit_tol))
    )
    half = 1.0 / (2.0 * w)
    lo = np.minimum.reduceat((m - upper) / half, starts) - 1.0  # every t at its upper end
    hi = np.maximum.reduceat((m - lower) / half, starts) + 1.0  # every t at its lower end
    going = feasible.copy()
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        sums = np.add.reduceat(np.clip(m - mid[fam] * half, lower, upper), starts)
        above = sums > total
        lo = np.where(going & above, mid, lo)
        hi = np.where(going & ~above, mid, hi)
        going &= hi - lo > 1e-13 * np.maximum(1.0, np.maximum(np.abs(lo), np.abs(hi)))
        if not going.any():
            break
    lam = 0.5 * (lo + hi)
    raw = m - lam[fam] * half
    at_low, at_high = raw <= lower, raw >= upper
    free = ~(at_low | at_high)
    rest = (
        total
        - np.add.reduceat(np.where(at_low, lower, 0.0), starts)
        - np.add.reduceat(np.where(at_high, upper, 0.0), starts)
    )
    den = np.add.reduceat(np.where(free, half, 0.0), starts)
    num = np.add.reduceat(np.where(free, m, 0.0), starts) - rest
    lam = np.where(den > 0, num / np.where(den > 0, den, 1.0), lam)
    return np.clip(m - lam[fam] * half, lower, upper), feasible


def _fit(
    parent: np.ndarray,
    totals: np.ndarray,
    allowed: np.ndarray,
    child_ptr: np.ndarray,
    iterations: int = SETTINGS.fit_iterations,
) -> np.ndarray:
    """x_cj = a_c b_j on ``allowed`` cells with row sums ``totals`` and, per family, column sums
    ``parent`` ``(F, n)`` (iterative proportional fitting from the parent's shares, all families
    at once; a family stops sweeping once its totals are met to 1e-13 of its parent's total, so
    its result does not depend on the other families of the batch)."""
    sizes = np.diff(child_ptr)
    fam = np.repeat(np.arange(sizes.size), sizes)
    starts = child_ptr[:-1]
    x = np.where(allowed, parent[fam], 0.0)
    stop = 1e-13 * np.maximum(1.0, parent.sum(axis=1))
    going = np.ones(sizes.size, dtype=bool)
    for _ in range(iterations):
        rows = x.sum(axis=1)
        row_factor = np.where(rows > 0, totals / np.where(rows > 0, rows, 1.0), 0.0)
        x *= np.where(going[fam], row_factor, 1.0)[:, None]
        cols = np.add.reduceat(x, starts, axis=0)
        col_factor = np.where(cols > 0, parent / np.where(cols > 0, cols, 1.0), 0.0)
        x *= np.where(going[:, None], col_factor, 1.0)[fam]
        going &= np.maximum.reduceat(np.abs(x.sum(axis=1) - totals), starts) > stop
        if not going.any():
            break
    return x


def solve_total_pass(
    batch: FamilyBatch, q: int, settings: QPSettings = SETTINGS
) -> tuple[np.ndarray, np.ndarray]:
    """Every family's TOTAL pass, all families at once: (x ``(K, n_cells)``, solved ``(F,)``);
    unsolved rows are 0."""
    x = np.zeros((batch.n_children, batch.n_cells))
    solved = np.zeros(batch.n_families, dtype=bool)
    if batch.n_families == 0:
        return x, solved
    fam = batch.child_family
    starts = batch.child_ptr[:-1]
    parent_all = batch.parent.astype(np.float64)
    cols = np.flatnonzero((parent_all > 0).any(axis=0))  # cells some parent populates
    parent = parent_all[:, cols]
    allowed = parent[fam] > 0
    zero = batch.structural_zero_cells()
    if zero is not None:
        allowed &= ~zero[:, cols]
    lower = np.zeros(batch.n_children)
    for bound in batch.bounds:
        low = bound.lower
        lower = np.maximum(lower, np.where(np.isfinite(low) & (low > 0), low, 0.0).sum(axis=1))
    upper = (allowed * parent[fam]).sum(axis=1)
    population = parent.sum(axis=1)
    totals, feasible = water_fill_families(
        batch.noisy[q][:, 0], batch.weight[:, q], lower, upper, population, batch.child_ptr
    )
    totals = np.where(feasible[fam], totals, 0.0)
    values = _fit(parent, totals, allowed, batch.child_ptr, settings.fit_iterations)
    tol = settings.fit_tol * np.maximum(1.0, population)
    ok = feasible & (np.maximum.reduceat(np.abs(values.sum(axis=1) - totals), starts) <= tol)
    ok &= np.abs(np.add.reduceat(values, starts, axis=0) - parent).max(axis=1) <= tol
    full = np.zeros((batch.n_children, batch.n_cells))
    full[:, cols] = values
    for bound in batch.bounds:
        answers = bound.spec.answer(full)
        met = ~np.isfinite(bound.lower) | (answers >= bound.lower - tol[fam, None])
        ok &= np.logical_and.reduceat(met.all(axis=1), starts)
    rows = ok[fam]
    x[rows] = full[rows]
    return x, ok
