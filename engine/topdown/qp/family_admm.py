"""Family least squares by ADMM with one shared factorisation, then the exact polish (TDA eq. 7.5).

The children of a family share one Hessian H = 2 Σ_q w_q A_qᵀA_q on the parent's populated cells
and are coupled only through the parent. **ADMM** (the OSQP splitting, Stellato et al. 2020,
Algorithm 1): its x-update is one system with the SAME matrix H + σI + ρI + ρ_r CᵀC for every
child (factorised once per family), its z-update the projection of every cell's column of
children onto {z ≥ 0, Σ_c z_c = x̂_γ} (:func:`~.problem.project_cells`). **Polish**: the iterate's
zero pattern and active rows guess the active set; the KKT system on it is solved exactly
(per-child inverses of H on the free cells, one Schur complement over the parent's cells and the
active rows), verified by :func:`~.kkt.violations` and corrected by :func:`~.kkt.step`. A family
not verified after the last polish is "not mine". Measurements: docs/topdown.md."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg as la
from scipy.linalg.lapack import dpotrs as potrs

from engine.core.blas_threads import single_blas_thread
from engine.topdown.family import FamilyBatch
from engine.topdown.qp import kkt
from engine.topdown.qp.problem import Band, Family, FamilyNotSolved, project_cells, reduce
from engine.topdown.qp.settings import SETTINGS, QPSettings


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

    def __init__(self, fam: Family, rho: float, settings: QPSettings = SETTINGS) -> None:
        self.fam = fam
        self.rho = rho
        self.settings = settings
        c = fam.rows
        n = fam.hess.shape[0]
        s = settings
        matrix = (
            fam.hess + (s.admm_sigma + rho) * np.eye(n) + s.admm_row_penalty_ratio * rho * (c.T @ c)
        )
        self.factor = la.cho_factor(matrix, lower=True, check_finite=False)[0]

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
        s = self.settings
        sigma, alpha = s.admm_sigma, s.admm_alpha
        rho_r = s.admm_row_penalty_ratio * rho
        for _ in range(iterations):
            rhs = sigma * x - fam.grad + rho * zc - yc
            if m:
                rhs += (rho_r * zr - yr) @ c
            xt = potrs(factor, rhs.T, lower=1)[0].T  # cho_solve's LAPACK call, without its checks
            vc = alpha * xt + (1.0 - alpha) * zc
            zc_new = project_cells(vc + yc / rho, fam.parent, fam.zero)
            yc = yc + rho * (vc - zc_new)
            zc = zc_new
            if m:
                vr = alpha * (xt @ c.T) + (1.0 - alpha) * zr
                zr_new = np.clip(vr + yr / rho_r, lower, upper)
                yr = yr + rho_r * (vr - zr_new)
                zr = zr_new
            x = alpha * xt + (1.0 - alpha) * x
        return AdmmState(x, zc, yc, zr, yr, rho)


def _admm(fam: Family, state: AdmmState | None, iterations: int, s: QPSettings) -> AdmmState:
    """``iterations`` ADMM steps from ``state`` (or a projected start of the cells)."""
    stepper = AdmmStepper(fam, s.admm_rho if state is None else state.rho, s)
    return stepper.run(stepper.start() if state is None else state, iterations)


@dataclass
class Inverses:
    """The children's inverses of H on their free cells (``free`` ``(K, n)``), zero-padded in
    ``store`` ``(K, W, W)``, kept across a family's polishes: only changed children invert."""

    free: np.ndarray | None = None
    store: np.ndarray | None = None


def _padded_inverse(
    h: np.ndarray, free: np.ndarray, cache: Inverses
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per child, the inverse of H on its free cells, padded to the largest free set:
    (index ``(K, F)`` of the free cells, mask ``(K, F)``, inverses ``(K, F, F)``). Children of
    one free-set size are inverted in one batched call (the same numbers per matrix)."""
    k = free.shape[0]
    counts = free.sum(axis=1)
    width = max(int(counts.max(initial=0)), 1)
    order = np.argsort(~free, axis=1, kind="stable")[:, :width]
    mask = np.arange(width)[None, :] < counts[:, None]
    index = np.where(mask, order, 0)
    stale = np.ones(k, dtype=bool) if cache.free is None else np.any(cache.free != free, axis=1)
    store = cache.store if cache.store is not None else np.zeros((k, 0, 0))
    if store.shape[1] < width:  # grow, keeping the inverses held
        store, w = np.zeros((k, width, width)), store.shape[1]
        store[:, :w, :w] = cache.store if w else 0.0
    cache.store = store
    for size in np.unique(counts[stale]):
        group = np.flatnonzero(stale & (counts == size))
        cells = index[group, :size]
        store[group] = 0.0
        store[group, :size, :size] = kkt.spd_inverse(h[cells[:, :, None], cells[:, None, :]])
    cache.free = free.copy()
    return index, mask, np.ascontiguousarray(store[:, :width, :width])


def _polish_once(
    fam: Family,
    zero_set: np.ndarray,
    at_lower: np.ndarray,
    at_upper: np.ndarray,
    cache: Inverses | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Exact solve on the guessed active set: (x ``(K, n)``, cell multipliers ν ``(K, n)``,
    row multipliers λ ``(K, m)``, coupling multipliers μ ``(n,)``)."""
    h, c = fam.hess, fam.rows
    k, n = fam.grad.shape
    m = c.shape[0]
    free = ~zero_set
    index, mask, inv = _padded_inverse(h, free, Inverses() if cache is None else cache)
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
        row_mask, row_id = np.zeros((k, 0), dtype=bool), np.zeros((k, 0), dtype=np.int64)
        crow, rhs_rows = np.zeros((k, 0, width)), np.zeros((k, 0))
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
    fam: Family,
    state: AdmmState,
    side: str | None = None,
    chose: set[str] | None = None,
    s: QPSettings = SETTINGS,
    cache: Inverses | None = None,
) -> np.ndarray | None:
    """Active-set guess from the ADMM iterate, corrected by primal–dual active-set steps; the
    verified solution or ``None``. ``cache``: the children's inverses (one per family)."""
    k, n = fam.grad.shape
    zero_set = fam.zero | (state.zc <= 0.0)
    at_lower = (state.zr <= fam.lower) & (state.yr < 0) & np.isfinite(fam.lower)
    at_upper = (state.zr >= fam.upper) & (state.yr > 0) & np.isfinite(fam.upper)
    p_tol = s.kkt_tol * max(1.0, float(fam.parent.max(initial=0.0)))
    d_tol = s.kkt_tol * max(1.0, float(np.abs(fam.grad).max(initial=0.0)))
    seen: set[bytes] = set()
    cache = Inverses() if cache is None else cache
    for _ in range(s.admm_active_set_steps):
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
        if np.abs(x.sum(axis=0) - fam.parent).max(initial=0.0) > p_tol:
            # The Schur system was singular: the active rows and the coupling are dependent
            # (e.g. every child's TOTAL band active fixes Σ_c totals, which the parent fixes
            # too). Release an active row and solve again:
            # the one with the weakest ADMM multiplier (on ``side`` only, when given: both
            # sides' weakest rows can be sign-consistent, and only one of them is right).
            if side is None and s.release_by_surplus:
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
        active = (zero_set, at_lower, at_upper)
        wrong = kkt.violations(fam, x, nu, lam, active, p_tol, d_tol)
        if not wrong.per_child().any():
            return np.maximum(x, 0.0)
        zero_set, at_lower, at_upper = kkt.step(wrong, zero_set, at_lower, at_upper)
    return None


def solve_family(
    batch: FamilyBatch,
    f: int,
    pass_queries: Sequence[int],
    bands: Sequence[Band],
    s: QPSettings = SETTINGS,
) -> np.ndarray:
    """x ``(K_f, n_cells)`` of family ``f`` for one pass (TDA eq. 7.5), verified by its KKT
    conditions; raises :class:`~.problem.FamilyNotSolved` when not covered or not verified."""
    fam = reduce(batch, f, pass_queries, bands)
    k = int(batch.child_ptr[f + 1] - batch.child_ptr[f])
    out = np.zeros((k, batch.n_cells))
    if fam.cells.size == 0:
        return out
    state: AdmmState | None = None
    done, cache = 0, Inverses()
    small = fam.grad.size <= s.admm_early_max_cells
    for target in (s.admm_early_polish_at if small else ()) + s.admm_polish_at:
        state = _admm(fam, state, target - done, s)
        done = target
        chose: set[str] = set()
        for side in (None, "lower", "upper"):
            if side is not None and chose == {side}:
                continue  # the first attempt released rows on this side only: tried
            x = _polish(fam, state, side, chose, s, cache)
            if x is not None:
                out[:, fam.cells] = x
                return out
            if not fam.rows.shape[0]:
                break  # no rows: the side makes no difference
    raise FamilyNotSolved(f"ADMM + polish did not verify the KKT conditions in {done} iterations")


def solve_families(
    batch: FamilyBatch,
    pass_queries: Sequence[int],
    bands: Sequence[Band],
    settings: QPSettings = SETTINGS,
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
                    batch, f, pass_queries, bands, settings
                )
                solved[f] = True
            except FamilyNotSolved:
                continue
    return x, solved
