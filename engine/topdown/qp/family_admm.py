"""Family least squares by operator splitting with one shared factorisation, then an exact polish
(TDA §7.1–7.2, eq. 7.5; SPEC §4).

A family of TDA eq. 7.5 — children c of a fixed parent x̂_γ — has a special structure: every child
has the same query matrices and (per level) the same weights, so the Hessian is one matrix
H = 2 Σ_q w_q A_qᵀA_q restricted to the cells the parent can populate, and the children are coupled
only through the parent (Σ_c x_c = x̂_γ, cell by cell). This module exploits it:

1. **ADMM** (the OSQP splitting, Stellato et al. 2020, "OSQP: an operator splitting solver for
   quadratic programs", Algorithm 1) on min Σ_c ½x_cᵀHx_c + g_cᵀx_c subject to the per-cell set
   {z_c ≥ 0 (= 0 on structural zeros), Σ_c z_c = x̂_γ} and per-child boxes l_c ≤ C x_c ≤ u_c
   (structural bounds of :class:`~engine.topdown.family.ChildBounds`, the bands that hold earlier
   passes). Its x-update is one linear system with the SAME matrix H + σI + ρI + ρ_r CᵀC for every
   child — factorised once per family, all children solved as right-hand sides of one BLAS-3 call —
   and its z-update is the Euclidean projection of every cell's column of children onto
   {z ≥ 0, Σ_c z_c = parent cell}, closed form by sorting (Held, Wolfe & Crowder 1974).
2. **Polish**: the iterate's zero pattern and active rows guess the active set; the equality-
   constrained KKT system on that set is solved exactly — per-child inverses of H on the child's
   free cells, then one Schur complement over the parent's cells and the active rows — and the KKT
   conditions are verified (primal feasibility, signs of the multipliers). A violated guess is
   corrected by primal–dual active-set steps (Hintermüller, Ito & Kunisch 2002); if that does not
   settle, ADMM runs longer and polishes again, and a family that still fails raises
   :class:`FamilyNotSolved` so the caller hands it to the general sparse Clarabel model.

What the solver covers (:func:`covered`): a parent (not the root), children of a family sharing
their weights, a pass that contains DETAILED (so H is positive definite on every set of cells), no
invariants below the parent and no sums of siblings held. Everything else goes to Clarabel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg as la
from scipy.linalg import lapack

from engine.core.blas_threads import single_blas_thread
from engine.topdown.family import FamilyBatch

if TYPE_CHECKING:
    from engine.topdown.qp.problem import Band

SIGMA = 1e-6
"""ADMM proximal term on x (OSQP's σ)."""

RHO_CELL = 0.05
"""ADMM penalty on the cell constraints (non-negativity and the sum to the parent), with weights
normalised to a largest of 1 (H ≈ 2I from DETAILED). Measured on generated RI county→tract
families: 0.05 identified the active set in 200 iterations where 0.2 and 1 had not after 3,200;
OSQP's adaptive ρ rule moved it to ≈ 0.6 and failed likewise, so ρ is fixed."""

ROW_RATIO = 1.0
"""ADMM penalty of the per-child rows (structural bounds, bands of earlier passes) ÷ that of the
cells (10 and 100, OSQP-style larger penalties on narrow boxes, converged more slowly)."""


ALPHA = 1.6
"""ADMM over-relaxation (OSQP's default)."""

POLISH_AT = (50, 100, 200, 400, 800)
"""ADMM iteration counts after which a polish is attempted (the last failure gives up)."""

MAX_PERSONS_PER_CHILD = 50_000.0
"""Families whose children hold more persons than this on average (a state's counties: 200,000
each at 1M persons) are left to :mod:`engine.topdown.qp.family_projected_cg`: with ρ fixed at
:data:`RHO_CELL` this module's ADMM needed 200+ iterations and a dozen dense polishes there
(state→5 counties at 1M persons: 4.7 s, against 2.6 s for Clarabel alone), while county→tract
families (≈ 4,000 persons per tract) solve in 0.3–1 s against 5–15 s."""

MAX_POLISH_WORK = 3e9
"""Families whose polish would cost more than this — children × (populated cells)³, the per-child
dense inverses of one active-set step — try :mod:`engine.topdown.qp.family_projected_cg`'s first
polish before this module's ADMM (:func:`polish_heavy`). Measured on the five county→tract
families of a generated 1M-person RI (pass 2, one process): each failed dense polish of the
85-child family on 386 cells (≈ 4.9e9) cost 0.3–0.7 s, and ADMM + polish took 6.7 s against 0.75 s
for the projected-CG first polish; the 55-child family on 323 cells (≈ 1.9e9) took 0.29 s here
against 0.37 s there, and the 36-child one (≈ 8.5e8), where that first polish does not verify,
0.55 s here against 0.69 s lost there — so those stay here."""

EARLY_POLISH_AT = (10, 25)
"""Extra, earlier polish attempts for small families (a polish costs less than the iterations)."""

SMALL_FAMILY_CELLS = 2_000
"""Families with at most this many (child, free cell) pairs get :data:`EARLY_POLISH_AT`."""

ACTIVE_SET_STEPS = 12
"""Primal–dual active-set corrections per polish attempt."""

RELEASE_BY_SURPLUS = True
"""When every child's TOTAL row is active the rows fix Σ_c totals, which the parent fixes too; with
no side given, the polish releases a row on the side the bounds' surplus points to (the totals
they fix exceed the parent's: an upper-bound row; short of it: a lower-bound row;
:func:`_bound_surplus`) instead of the weakest of either side, and :func:`solve_family` then skips
the retry on that side alone. Measured on the five county→tract families of a generated
1M-person RI (pass 2, CPU s, one process, 3 runs each): 0.32 → 0.26, 2.95 → 2.30, 0.25 → 0.09,
0.093 → 0.067, 0.13 → 0.13 (43 / 85 / 36 / 16 / 55 children), the same objectives."""

KKT_TOL = 1e-9
"""Relative tolerance of the verified KKT conditions (primal: × the largest parent cell; dual: ×
the largest gradient entry)."""


class FamilyNotSolved(RuntimeError):
    """The family is not covered, or ADMM + polish did not verify the KKT conditions."""


@dataclass(frozen=True)
class Family:
    """One family's pass, reduced to the ``n`` cells its parent can populate."""

    hess: np.ndarray  # (n, n)
    grad: np.ndarray  # (K, n)
    parent: np.ndarray  # (n,)
    zero: np.ndarray  # (K, n) structural zeros
    rows: np.ndarray  # (m, n) per-child constraint rows C
    lower: np.ndarray  # (K, m)
    upper: np.ndarray  # (K, m)
    cells: np.ndarray  # (n,) indices into the schema's cells


def covered(batch: FamilyBatch, pass_queries: Sequence[int]) -> bool:
    """Whether the batch's pass has the structure this solver needs (see the module docstring)."""
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


def _complement(used: np.ndarray, size: int) -> np.ndarray:
    """``(size,)`` bool: the answer cells not in ``used``."""
    out = np.ones(size, dtype=bool)
    out[used] = False
    return out


@dataclass(frozen=True)
class CellRows:
    """A family's per-child constraints on the ``n`` cells its parent populates (SPEC §6, §8):
    structural zeros, then the rows of the bounds (the first ``n_bound_rows``) and of earlier
    passes' bands."""

    zero: np.ndarray  # (K, n) structural zeros
    rows: np.ndarray  # (m, n) constraint rows C, shared by the children
    lower: np.ndarray  # (K, m)
    upper: np.ndarray  # (K, m); a bound's upper 0 is +inf (held by the structural zeros)
    n_bound_rows: int


def cell_rows(
    batch: FamilyBatch,
    f: int,
    cells: np.ndarray,
    bands: Sequence[Band],
    zero_cells: Sequence[np.ndarray] | None = None,
) -> CellRows:
    """Family ``f``'s constraints restricted to ``cells`` (the cells its parent populates).

    ``zero_cells``: each bound's :meth:`~engine.topdown.family.ChildBounds.zero_cells` for the
    whole batch, when the caller computed them once. Raises :class:`FamilyNotSolved` when a
    constraint over cells the parent cannot populate fails (left to the general model, which
    reports the infeasibility)."""
    lo, hi = int(batch.child_ptr[f]), int(batch.child_ptr[f + 1])
    k, n = hi - lo, cells.size
    if zero_cells is None:
        zero_cells = [bound.zero_cells() for bound in batch.bounds]
    zero = np.zeros((k, n), dtype=bool)
    row_blocks: list[np.ndarray] = []
    lower_blocks: list[np.ndarray] = []
    upper_blocks: list[np.ndarray] = []
    for bound, zero_of_bound in zip(batch.bounds, zero_cells, strict=True):
        zero |= zero_of_bound[lo:hi][:, cells]
        used, rows = _rows_on(bound.spec.cell_index, cells)
        low, up = bound.lower[lo:hi], bound.upper[lo:hi]
        unused = _complement(used, bound.spec.size)
        if np.any(low[:, unused] > 0) or np.any(up[:, unused] < 0):
            raise FamilyNotSolved("a bound over cells the parent cannot populate fails")
        low, up = low[:, used], up[:, used]
        if np.any((up == 0) & (low > 0)):
            raise FamilyNotSolved("a structural zero with a positive lower bound")
        row_blocks.append(rows)
        lower_blocks.append(low)
        upper_blocks.append(np.where(up == 0, np.inf, up))  # held by the structural zeros
    n_bound_rows = sum(r.shape[0] for r in row_blocks)
    for band in bands:
        spec = batch.queries[band.query]
        used, rows = _rows_on(spec.cell_index, cells)
        target, tol = band.target[lo:hi], float(band.tol[f])
        unused = _complement(used, spec.size)
        if np.any(np.abs(target[:, unused]) > tol):
            raise FamilyNotSolved("a band over cells the parent cannot populate fails")
        row_blocks.append(rows)
        lower_blocks.append(target[:, used] - tol)
        upper_blocks.append(target[:, used] + tol)
    if np.any(zero.all(axis=0)):
        raise FamilyNotSolved("a populated parent cell is a structural zero in every child")
    m = sum(r.shape[0] for r in row_blocks)
    return CellRows(
        zero=zero,
        rows=np.concatenate(row_blocks) if m else np.zeros((0, n)),
        lower=np.concatenate(lower_blocks, axis=1) if m else np.zeros((k, 0)),
        upper=np.concatenate(upper_blocks, axis=1) if m else np.zeros((k, 0)),
        n_bound_rows=n_bound_rows,
    )


def family_problem(
    batch: FamilyBatch,
    f: int,
    pass_queries: Sequence[int],
    bands: Sequence[Band],
    *,
    hessian: bool = True,
) -> Family:
    """Family ``f``'s pass on the cells its parent populates (weights normalised to a largest of
    1); ``hessian=False`` leaves ``hess`` empty ``(0, 0)`` for callers that apply H otherwise."""
    lo, hi = int(batch.child_ptr[f]), int(batch.child_ptr[f + 1])
    parent = batch.parent[f]
    cells = np.flatnonzero(parent > 0)
    n, k = cells.size, hi - lo
    weights = batch.weight[lo:hi]
    top = 0.0
    for q in pass_queries:
        w = weights[:, q]
        if np.ptp(w) != 0.0:
            raise FamilyNotSolved("children of the family have different weights")
        top = max(top, float(w[0]))
    if top <= 0:
        raise FamilyNotSolved("no measured query in the pass")
    hess = np.zeros((n, n) if hessian else (0, 0))
    grad = np.zeros((k, n))
    for q in pass_queries:
        w = float(weights[0, q]) / top
        if w == 0.0:
            continue
        spec = batch.queries[q]
        labels = spec.cell_index[cells]
        if not hessian:
            pass
        elif spec.is_detailed:
            hess[np.arange(n), np.arange(n)] += 2.0 * w
        else:
            hess += 2.0 * w * (labels[:, None] == labels[None, :])
        grad -= 2.0 * w * batch.noisy[q][lo:hi][:, labels]
    rows = cell_rows(batch, f, cells, bands)
    return Family(
        hess=hess,
        grad=grad,
        parent=parent[cells].astype(np.float64),
        zero=rows.zero,
        rows=rows.rows,
        lower=rows.lower,
        upper=rows.upper,
        cells=cells,
    )


def project_cells(v: np.ndarray, parent: np.ndarray, zero: np.ndarray) -> np.ndarray:
    """Euclidean projection of each column of ``v`` ``(K, n)`` onto {z ≥ 0, z = 0 where ``zero``,
    Σ_c z_c = parent} (per column a scaled simplex; sort, then the threshold λ with
    z = max(v − λ, 0))."""
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


@dataclass
class AdmmState:
    """ADMM state of one family (x, z and y of the cell and row constraints)."""

    x: np.ndarray
    zc: np.ndarray
    yc: np.ndarray
    zr: np.ndarray
    yr: np.ndarray
    rho: float


class AdmmStepper:
    """ADMM steps of one family at a fixed ρ, with H + σI + ρI + ρ_r CᵀC factorised once."""

    def __init__(self, fam: Family, rho: float) -> None:
        self.fam = fam
        self.rho = rho
        c = fam.rows
        n = fam.hess.shape[0]
        matrix = fam.hess + (SIGMA + rho) * np.eye(n) + ROW_RATIO * rho * (c.T @ c)
        self.factor = la.cho_factor(matrix, lower=True, check_finite=False)

    def start(self) -> AdmmState:
        """The projected start of the cells (each child's unconstrained diagonal minimiser)."""
        fam = self.fam
        k, n = fam.grad.shape
        m = fam.rows.shape[0]
        start = project_cells(-fam.grad / np.diag(fam.hess)[None, :], fam.parent, fam.zero)
        return AdmmState(
            x=start,
            zc=start.copy(),
            yc=np.zeros((k, n)),
            zr=np.clip(start @ fam.rows.T, fam.lower, fam.upper) if m else np.zeros((k, 0)),
            yr=np.zeros((k, m)),
            rho=self.rho,
        )

    def run(self, state: AdmmState, iterations: int) -> AdmmState:
        """``iterations`` ADMM steps from ``state``."""
        fam, rho, factor = self.fam, self.rho, self.factor
        c = fam.rows
        m = c.shape[0]
        x, zc, yc, zr, yr = state.x, state.zc, state.yc, state.zr, state.yr
        lower, upper = fam.lower, fam.upper
        rho_r = ROW_RATIO * rho
        for _ in range(iterations):
            rhs = SIGMA * x - fam.grad + rho * zc - yc
            if m:
                rhs += (rho_r * zr - yr) @ c
            xt = la.cho_solve(factor, rhs.T, check_finite=False).T
            vc = ALPHA * xt + (1.0 - ALPHA) * zc
            zc_new = project_cells(vc + yc / rho, fam.parent, fam.zero)
            yc = yc + rho * (vc - zc_new)
            zc = zc_new
            if m:
                vr = ALPHA * (xt @ c.T) + (1.0 - ALPHA) * zr
                zr_new = np.clip(vr + yr / rho_r, lower, upper)
                yr = yr + rho_r * (vr - zr_new)
                zr = zr_new
            x = ALPHA * xt + (1.0 - ALPHA) * x
        return AdmmState(x, zc, yc, zr, yr, rho)


def _admm(fam: Family, state: AdmmState | None, iterations: int) -> AdmmState:
    """``iterations`` ADMM steps from ``state`` (or a projected start of the cells)."""
    stepper = AdmmStepper(fam, RHO_CELL if state is None else state.rho)
    return stepper.run(stepper.start() if state is None else state, iterations)


def _spd_inverse(a: np.ndarray) -> np.ndarray:
    """Inverse of a symmetric positive definite matrix by LAPACK potrf/potri (about half the
    time of ``np.linalg.inv``'s LU on 250 × 250 blocks)."""
    if a.shape[0] == 0:
        return a.copy()
    factor, info = lapack.dpotrf(a, lower=1, clean=0)
    if info == 0:
        inverse, info = lapack.dpotri(factor, lower=1)
    if info != 0:
        return np.linalg.inv(a)
    upper = np.triu_indices(a.shape[0], 1)
    inverse[upper] = inverse.T[upper]  # potri fills the lower triangle only
    return inverse


def _padded_inverse(
    h: np.ndarray, free: np.ndarray, cache: dict[int, tuple[bytes, np.ndarray]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per child, the inverse of H on its free cells, padded to the largest free set:
    (index ``(K, F)`` of the free cells, mask ``(K, F)``, inverses ``(K, F, F)``).

    ``cache`` keeps each child's inverse with its free set: an active-set step changes some
    children, and only theirs are inverted again."""
    k, n = free.shape
    counts = free.sum(axis=1)
    width = max(int(counts.max(initial=0)), 1)
    order = np.argsort(~free, axis=1, kind="stable")[:, :width]
    mask = np.arange(width)[None, :] < counts[:, None]
    index = np.where(mask, order, 0)
    keys = [free[c].tobytes() for c in range(k)]
    stale = np.array([cache.get(c, (b"", None))[0] != keys[c] for c in range(k)], dtype=bool)
    for c in np.flatnonzero(stale):
        cells = index[c, : counts[c]]
        cache[int(c)] = (keys[c], _spd_inverse(h[np.ix_(cells, cells)]))
    inv = np.zeros((k, width, width))
    for c in range(k):
        size = int(counts[c])
        inv[c, :size, :size] = cache[c][1]
    return index, mask, inv


def _polish_once(
    fam: Family,
    zero_set: np.ndarray,
    at_lower: np.ndarray,
    at_upper: np.ndarray,
    cache: dict[int, tuple[bytes, np.ndarray]] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Exact solve on the guessed active set: (x ``(K, n)``, cell multipliers ν ``(K, n)``,
    row multipliers λ ``(K, m)``, coupling multipliers μ ``(n,)``)."""
    h, c = fam.hess, fam.rows
    k, n = fam.grad.shape
    m = c.shape[0]
    free = ~zero_set
    index, mask, inv = _padded_inverse(h, free, {} if cache is None else cache)
    width = index.shape[1]
    active = at_lower | at_upper  # (K, m)
    n_act = active.sum(axis=1)
    depth = int(n_act.max(initial=0))
    # Active rows of each child, padded to ``depth`` (padding rows are zero, λ = 0 there).
    if depth:
        row_order = np.argsort(~active, axis=1, kind="stable")[:, :depth]
        row_mask = np.arange(depth)[None, :] < n_act[:, None]
        row_id = np.where(row_mask, row_order, 0)
        crow = c[row_id[:, :, None], index[:, None, :]]  # (K, depth, F)
        crow = np.where(row_mask[:, :, None] & mask[:, None, :], crow, 0.0)
        bound = np.where(at_upper, fam.upper, fam.lower)
        rhs_rows = np.where(row_mask, np.take_along_axis(bound, row_id, axis=1), 0.0)
    else:
        row_mask = np.zeros((k, 0), dtype=bool)
        row_id = np.zeros((k, 0), dtype=np.int64)
        crow = np.zeros((k, 0, width))
        rhs_rows = np.zeros((k, 0))
    g_free = np.where(mask, np.take_along_axis(fam.grad, index, axis=1), 0.0)
    hinv_g = np.einsum("kij,kj->ki", inv, g_free)
    size = n + k * depth
    schur = np.zeros(size * size)
    # μμ block: Σ_c scatter of the inverses.
    flat = (index[:, :, None] * size + index[:, None, :])[mask[:, :, None] & mask[:, None, :]]
    weights = inv[mask[:, :, None] & mask[:, None, :]]
    schur += np.bincount(flat, weights=weights, minlength=size * size)
    schur = schur.reshape(size, size)
    rhs = -fam.parent.copy()
    np.add.at(rhs, index[mask], -hinv_g[mask])
    rhs = np.concatenate([rhs, np.zeros(k * depth)])
    if depth:
        v = crow @ inv  # (K, depth, F): C_a H⁻¹
        lam_pos = n + np.arange(k)[:, None] * depth + np.arange(depth)[None, :]  # (K, depth)
        # μλ and λμ blocks.
        rows_idx = np.broadcast_to(index[:, None, :], v.shape)
        cols_idx = np.broadcast_to(lam_pos[:, :, None], v.shape)
        keep = mask[:, None, :] & row_mask[:, :, None]
        np.add.at(schur, (rows_idx[keep], cols_idx[keep]), v[keep])
        np.add.at(schur, (cols_idx[keep], rows_idx[keep]), v[keep])
        block = v @ crow.transpose(0, 2, 1)  # (K, depth, depth)
        pad = ~row_mask
        block[:, np.arange(depth), np.arange(depth)] += pad  # λ = 0 on padding rows
        ii = np.broadcast_to(lam_pos[:, :, None], block.shape)
        jj = np.broadcast_to(lam_pos[:, None, :], block.shape)
        schur[ii, jj] += block
        rhs[n:] = (-rhs_rows - np.einsum("kdf,kf->kd", crow, hinv_g)).reshape(-1)
    try:
        factor = la.cho_factor(schur, lower=True, check_finite=False)
        nu = la.cho_solve(factor, rhs, check_finite=False)
    except la.LinAlgError:
        nu = la.lstsq(schur, rhs, check_finite=False)[0]
    mu = nu[:n]
    lam_pad = nu[n:].reshape(k, depth) if depth else np.zeros((k, 0))
    force = g_free + np.where(mask, mu[index], 0.0)
    if depth:
        force += np.einsum("kdf,kd->kf", crow, lam_pad)
    x_free = -np.einsum("kij,kj->ki", inv, force)
    x = np.zeros((k, n))
    child = np.broadcast_to(np.arange(k)[:, None], index.shape)
    x[child[mask], index[mask]] = x_free[mask]
    x[zero_set] = 0.0
    lam = np.zeros((k, m))
    if depth:
        owner = np.broadcast_to(np.arange(k)[:, None], row_id.shape)
        lam[owner[row_mask], row_id[row_mask]] = lam_pad[row_mask]
    grad_full = x @ h + fam.grad + mu[None, :] + lam @ c
    return x, grad_full, lam, mu


def independent_rows(
    fam: Family, zero_set: np.ndarray, at_lower: np.ndarray, at_upper: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Drop active rows that are empty or repeat another active row on the child's free cells
    (e.g. a TOTAL band and the household bound of a child whose free cells are all household),
    keeping the tighter bound: dependent rows would make the Schur complement singular."""
    at_lower, at_upper = at_lower.copy(), at_upper.copy()
    active = at_lower | at_upper
    for child in np.flatnonzero(active.sum(axis=1) >= 1):
        rows = np.flatnonzero(active[child])
        pattern = fam.rows[rows][:, ~zero_set[child]]
        kept: dict[bytes, int] = {}
        for r, row in zip(rows, pattern, strict=True):
            if not row.any():
                at_lower[child, r] = at_upper[child, r] = False
                continue
            key = row.tobytes()
            other = kept.get(key)
            if other is None:
                kept[key] = r
                continue
            upper_side = at_upper[child, r] and at_upper[child, other]
            if upper_side or (at_lower[child, r] and at_lower[child, other]):
                side = fam.upper if upper_side else fam.lower
                tighter = side[child, r] < side[child, other]
                if tighter == upper_side:  # r binds harder: keep r, drop the other
                    kept[key] = r
                    r = other
                at_lower[child, r] = at_upper[child, r] = False
    return at_lower, at_upper


def _bound_surplus(fam: Family, at_lower: np.ndarray, at_upper: np.ndarray) -> float:
    """For a TOTAL row (all ones on the family's cells) active for every child: the children's
    totals its bounds fix, less the parent's total (0 when no such row)."""
    for r in np.flatnonzero((fam.rows == 1.0).all(axis=1)):
        active = at_lower[:, r] | at_upper[:, r]
        if active.all():
            fixed = np.where(at_upper[:, r], fam.upper[:, r], fam.lower[:, r])
            return float(fixed.sum() - fam.parent.sum())
    return 0.0


def _polish(
    fam: Family, state: AdmmState, side: str | None = None, chose: set[str] | None = None
) -> np.ndarray | None:
    """Active-set guess from the ADMM iterate, corrected by primal–dual active-set steps; the
    verified solution or ``None``."""
    k, n = fam.grad.shape
    c = fam.rows
    zero_set = fam.zero | (state.zc <= 0.0)
    at_lower = (state.zr <= fam.lower) & (state.yr < 0) & np.isfinite(fam.lower)
    at_upper = (state.zr >= fam.upper) & (state.yr > 0) & np.isfinite(fam.upper)
    p_tol = KKT_TOL * max(1.0, float(fam.parent.max(initial=0.0)))
    d_tol = KKT_TOL * max(1.0, float(np.abs(fam.grad).max(initial=0.0)))
    seen: set[bytes] = set()
    cache: dict[int, tuple[bytes, np.ndarray]] = {}
    for _ in range(ACTIVE_SET_STEPS):
        # Every populated parent cell needs a child free to hold it.
        starving = zero_set.all(axis=0) & ~fam.zero.all(axis=0)
        if starving.any():
            pick = np.argmax(np.where(fam.zero, -np.inf, state.zc), axis=0)
            cols = np.flatnonzero(starving)
            zero_set[pick[cols], cols] = False
        key = zero_set.tobytes() + at_lower.tobytes() + at_upper.tobytes()
        if key in seen:
            return None  # cycling
        seen.add(key)
        at_lower, at_upper = independent_rows(fam, zero_set, at_lower, at_upper)
        x, nu, lam, _mu = _polish_once(fam, zero_set, at_lower, at_upper, cache)
        cx = x @ c.T if c.shape[0] else np.zeros((k, 0))
        neg = ~zero_set & (x < -p_tol)
        released = zero_set & ~fam.zero & (nu < -d_tol)
        over = ~at_upper & (cx > fam.upper + p_tol)
        under = ~at_lower & (cx < fam.lower - p_tol)
        equal = fam.lower == fam.upper
        wrong_up = at_upper & ~equal & (lam < -d_tol)
        wrong_low = at_lower & ~equal & (lam > d_tol)
        if np.abs(x.sum(axis=0) - fam.parent).max(initial=0.0) > p_tol:
            # The Schur system was singular: the active rows and the coupling are dependent
            # (e.g. every child's TOTAL band active fixes Σ_c totals, which the parent fixes
            # too). Release an active row and solve again:
            # the one with the weakest ADMM multiplier (on ``side`` only, when given: both
            # sides' weakest rows can be sign-consistent, and only one of them is right).
            if side is None and RELEASE_BY_SURPLUS:
                # The active rows hold the children's sum above the parent (a surplus):
                # a row at its upper bound must give; below it, one at its lower bound.
                surplus = _bound_surplus(fam, at_lower, at_upper)
                side = "upper" if surplus > p_tol else "lower" if surplus < -p_tol else None
                if chose is not None and side is not None:
                    chose.add(side)
            side_rows = {"lower": at_lower, "upper": at_upper}.get(side, at_lower | at_upper)
            strength = np.where(side_rows, np.abs(state.yr), np.inf)
            if not np.isfinite(strength).any():
                return None
            child, row = np.unravel_index(int(np.argmin(strength)), strength.shape)
            at_lower[child, row] = at_upper[child, row] = False
            continue
        violated = (neg, released, over, under, wrong_up, wrong_low)
        if not any(v.any() for v in violated):
            return np.maximum(x, 0.0)
        zero_set = (zero_set & ~released) | neg
        at_upper = (at_upper & ~wrong_up) | over
        at_lower = (at_lower & ~wrong_low) | under
    return None


def solve_family(
    batch: FamilyBatch, f: int, pass_queries: Sequence[int], bands: Sequence[Band]
) -> np.ndarray:
    """x ``(K_f, n_cells)`` of family ``f`` for one pass (TDA eq. 7.5), verified by its KKT
    conditions; raises :class:`FamilyNotSolved` when not covered or not verified."""
    fam = family_problem(batch, f, pass_queries, bands)
    k = int(batch.child_ptr[f + 1] - batch.child_ptr[f])
    out = np.zeros((k, batch.n_cells))
    if fam.cells.size == 0:
        return out
    state: AdmmState | None = None
    done = 0
    small = fam.grad.size <= SMALL_FAMILY_CELLS
    for target in (EARLY_POLISH_AT if small else ()) + POLISH_AT:
        state = _admm(fam, state, target - done)
        done = target
        chose: set[str] = set()
        for side in (None, "lower", "upper"):
            if side is not None and chose == {side}:
                continue  # the first attempt released rows on this side only: tried
            x = _polish(fam, state, side, chose)
            if x is not None:
                out[:, fam.cells] = x
                return out
            if not fam.rows.shape[0]:
                break  # no rows: the side makes no difference
    raise FamilyNotSolved(f"ADMM + polish did not verify the KKT conditions in {done} iterations")


def solve_families(
    batch: FamilyBatch, pass_queries: Sequence[int], bands: Sequence[Band], settings=None
) -> tuple[np.ndarray, np.ndarray]:
    """Every family of ``batch`` for one pass: (x ``(K, n_cells)``, solved ``(F,)`` bool); the rows
    of a family not verified are 0 ("not mine": the next route takes it)."""
    x = np.zeros((batch.n_children, batch.n_cells))
    solved = np.zeros(batch.n_families, dtype=bool)
    # Small dense matrices: one BLAS thread (threads only add synchronisation here, and a loaded
    # machine makes them far slower); also keeps the floating-point results thread-independent.
    with single_blas_thread():
        for f in range(batch.n_families):
            try:
                x[batch.child_ptr[f] : batch.child_ptr[f + 1]] = solve_family(
                    batch, f, pass_queries, bands
                )
                solved[f] = True
            except FamilyNotSolved:
                continue
    return x, solved
