"""The one problem type of the family solvers: a family's pass on its parent's populated cells.

A family of TDA eq. 7.5 — the children c of a fixed parent x̂_γ — is solved on the cells the parent
populates (every other cell is 0 in every feasible point): per child a convex quadratic
½ x_cᵀ H_c x_c + g_cᵀ x_c with H_c = 2 Σ_q w_{c,q} A_qᵀA_q (the identity for DETAILED, "same answer
cell" blocks for the other queries), x ≥ 0 with the structural zeros held at 0, per-child rows
lower ≤ C x_c ≤ upper (the structural bounds of TDA §5.3 and the bands of earlier passes, eq. 7.5)
and the coupling Σ_c x_c = x̂_γ cell by cell. :func:`reduce` builds that :class:`Family` from a
batch; :class:`Band` is how a later pass holds an earlier one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.topdown.family import FamilyBatch


@dataclass(frozen=True)
class Band:
    """Hold query ``query`` of every child within ``tol[family]`` of ``target`` (eq. 7.5)."""

    query: int
    target: np.ndarray
    tol: np.ndarray


class FamilyNotSolved(RuntimeError):
    """The family is not a solver's to take, or its answer was not verified ("not mine")."""


@dataclass(frozen=True)
class Family:
    """One family's pass on the ``n`` cells its parent populates (weights ÷ the largest): one
    Hessian ``(n, n)`` for all children; ``rows`` ``(m, n)`` shared by the children — structural
    bounds (a bound's upper 0 is held by ``zero`` and written +inf), then bands."""

    hess: np.ndarray
    grad: np.ndarray  # (k, n)
    parent: np.ndarray  # (n,)
    zero: np.ndarray  # (k, n) structural zeros
    rows: np.ndarray  # (m, n)
    lower: np.ndarray  # (k, m)
    upper: np.ndarray  # (k, m)
    cells: np.ndarray  # (n,) schema cells
    children: np.ndarray  # (k,) child rows of the batch


def covered(batch: FamilyBatch, pass_queries: Sequence[int]) -> bool:
    """The family solvers' structure: a parent, no invariants or sums of siblings below it, and
    DETAILED measured for every child in the pass (so H is positive definite on any cells)."""
    if batch.parent is None or batch.sums:
        return False
    if any(t is not None and np.isfinite(t).any() for t in batch.invariant):
        return False
    return any(
        batch.queries[q].is_detailed and np.all(batch.weight[:, q] > 0) for q in pass_queries
    )


def _rows_on(cell_index: np.ndarray, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Answer cells of a partition query touched by ``cells`` and the 0/1 rows on those cells."""
    labels = cell_index[cells]
    used = np.unique(labels)
    return used, (labels[None, :] == used[:, None]).astype(np.float64)


def _untouched(used: np.ndarray, size: int) -> np.ndarray:
    out = np.ones(size, dtype=bool)
    out[used] = False
    return out


def reduce(
    batch: FamilyBatch, f: int, pass_queries: Sequence[int], bands: Sequence[Band]
) -> Family:
    """Family ``f``'s pass on the cells its parent populates, one Hessian for all children.
    Raises :class:`FamilyNotSolved` when the children's weights differ, or when a constraint over
    cells the parent cannot populate fails (the general model then reports it in words)."""
    lo, hi = int(batch.child_ptr[f]), int(batch.child_ptr[f + 1])
    cells = np.flatnonzero(batch.parent[f] > 0)
    n, k = cells.size, hi - lo
    queries = np.asarray(pass_queries)
    weights = batch.weight[lo:hi][:, queries]
    measured = np.any(weights > 0, axis=0)
    if not measured.any():
        raise FamilyNotSolved("no measured query in the pass")
    if np.any(np.ptp(weights, axis=0) != 0.0):
        raise FamilyNotSolved("children of the family have different weights")
    w = weights[0, measured] / float(weights.max())
    hess = np.zeros((n, n))
    grad = np.zeros((k, n))
    for j, q in enumerate(queries[measured]):
        labels = batch.queries[q].cell_index[cells]
        grad -= 2.0 * w[j] * batch.noisy[q][lo:hi][:, labels]
        if batch.queries[q].is_detailed:
            hess[np.arange(n), np.arange(n)] += 2.0 * w[j]
        else:
            hess += 2.0 * w[j] * (labels[:, None] == labels[None, :])
    zero, rows, lower, upper = _constraints(batch, f, cells, bands)
    parent = batch.parent[f][cells].astype(np.float64)
    return Family(hess, grad, parent, zero, rows, lower, upper, cells, np.arange(lo, hi))


def _constraints(
    batch: FamilyBatch, f: int, cells: np.ndarray, bands: Sequence[Band]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(structural zeros, rows, lower, upper) of family ``f`` on ``cells``."""
    lo, hi = int(batch.child_ptr[f]), int(batch.child_ptr[f + 1])
    k, n = hi - lo, cells.size
    zero = np.zeros((k, n), dtype=bool)
    blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for bound in batch.bounds:
        zero |= bound.zero_cells()[lo:hi][:, cells]
        used, rows = _rows_on(bound.spec.cell_index, cells)
        low, up = bound.lower[lo:hi], bound.upper[lo:hi]
        unused = _untouched(used, bound.spec.size)
        if np.any(low[:, unused] > 0) or np.any(up[:, unused] < 0):
            raise FamilyNotSolved("a bound over cells the parent cannot populate fails")
        low, up = low[:, used], up[:, used]
        if np.any((up == 0) & (low > 0)):
            raise FamilyNotSolved("a structural zero with a positive lower bound")
        blocks.append((rows, low, np.where(up == 0, np.inf, up)))  # held by the zeros
    for band in bands:
        spec = batch.queries[band.query]
        used, rows = _rows_on(spec.cell_index, cells)
        target, tol = band.target[lo:hi], float(band.tol[f])
        if np.any(np.abs(target[:, _untouched(used, spec.size)]) > tol):
            raise FamilyNotSolved("a band over cells the parent cannot populate fails")
        blocks.append((rows, target[:, used] - tol, target[:, used] + tol))
    if np.any(zero.all(axis=0)):
        raise FamilyNotSolved("a populated parent cell is a structural zero in every child")
    if not blocks:
        return zero, np.zeros((0, n)), np.zeros((k, 0)), np.zeros((k, 0))
    rows = np.concatenate([b[0] for b in blocks])
    lower = np.concatenate([b[1] for b in blocks], axis=1)
    upper = np.concatenate([b[2] for b in blocks], axis=1)
    return zero, rows, lower, upper


def project_cells(v: np.ndarray, parent: np.ndarray, zero: np.ndarray) -> np.ndarray:
    """Euclidean projection of each column of ``v`` ``(K, n)`` onto {z ≥ 0, z = 0 where ``zero``,
    Σ_c z_c = parent} (per column a scaled simplex: sort, then the threshold λ with
    z = max(v − λ, 0); Held, Wolfe & Crowder 1974)."""
    k = v.shape[0]
    big = np.abs(v).max(initial=0.0) + parent.max(initial=0.0) + 1.0
    u = np.where(zero, -4.0 * big * k, v)
    s = -np.sort(-u, axis=0)
    cs = np.cumsum(s, axis=0)
    ks = np.arange(1, k + 1)[:, None]
    lam = (cs - parent[None, :]) / ks
    ok = s > lam
    last = k - 1 - np.argmax(ok[::-1], axis=0)  # largest index with s > λ
    theta = lam[last, np.arange(v.shape[1])]
    return np.where(zero, 0.0, np.maximum(u - theta[None, :], 0.0))
