"""A batched primal–dual interior-point solver for the family least-squares QPs (TDA eq. 7.2, 7.5).

Every family problem of TDA eq. 7.5 has the same structure: a convex quadratic per child with a
small dense Hessian H_c = 2 Σ_q w_{c,q} A_qᵀA_q (n_cells × n_cells, from the Kronecker-structured
query groups), per-child inequalities G x_c ≤ h_c (non-negativity x_c ≥ 0 and the bands
lo ≤ B x_c ≤ hi that hold earlier passes), and one coupling equality per family and cell,
Σ_{c ∈ f} x_c = x̂_f (children sum to the parent). A generic sparse solver factorises the whole
KKT matrix; here each Newton step (Mehrotra predictor–corrector, e.g. Nocedal & Wright §16.6) is
done with batched dense algebra instead:

    M_c = H_c + G_cᵀ W_c G_c                       (K small dense matrices, batched inverse)
    (Σ_{c∈f} M_c⁻¹) Δy_f = Σ_{c∈f} M_c⁻¹ r_c + r_f   (one n_cells × n_cells system per family)
    Δx_c = M_c⁻¹ (r_c − Δy_f)

so an iteration costs O(K · n_cells³) flops in a handful of vectorised NumPy calls, for all families
of a batch at once. It is used when n_cells is small (the RI schema: 16); larger schemas use the
sparse Clarabel formulation in :mod:`engine.topdown.qp.least_squares`. Solutions are checked against a
per-family cvxpy formulation in the tests and the benchmark.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from engine.topdown.family import FamilyBatch
from engine.topdown.qp import kkt
from engine.topdown.qp.problem import Band
from engine.topdown.qp.settings import SETTINGS


class QPNotConverged(RuntimeError):
    """The interior-point iterations did not reach the tolerance (the caller falls back)."""


@dataclass(frozen=True)
class FamilyQP:
    """min Σ_c ½ x_cᵀ H_c x_c + g_cᵀ x_c  s.t.  x ≥ 0, lo ≤ B x_c ≤ hi, Σ_{c∈f} x_c = parent_f.

    ``H`` ``(K, n, n)``, ``g`` ``(K, n)``, ``family`` ``(K,)`` family index of each child,
    ``parent`` ``(F, n)`` or ``None`` (no coupling), ``B`` ``(m, n)`` shared by every child or
    ``(K, m, n)`` per child, ``lo``/``hi`` ``(K, m)`` (``∓inf``: that side is no constraint);
    ``constant`` ``(K,)`` is the objective's constant per child (Σ w m̃²), used only to measure the
    duality gap relative to each family's true objective. ``fixed`` ``(K, n)`` marks cells held at
    0 besides those empty in the parent (structural zeros; ``None``: none).
    """

    H: np.ndarray
    g: np.ndarray
    family: np.ndarray
    parent: np.ndarray | None
    B: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    constant: np.ndarray | None = None
    fixed: np.ndarray | None = None

    @property
    def per_child_rows(self) -> bool:
        return self.B.ndim == 3

    def b_mul(self, x: np.ndarray) -> np.ndarray:
        """B x_c per child → (K, m)."""
        return np.matmul(self.B, x[:, :, None])[:, :, 0] if self.per_child_rows else x @ self.B.T

    def bt_mul(self, u: np.ndarray) -> np.ndarray:
        """B_cᵀ u_c per child → (K, n)."""
        return np.matmul(u[:, None, :], self.B)[:, 0, :] if self.per_child_rows else u @ self.B

    @cached_property
    def family_matrix(self) -> np.ndarray:
        """``(F, K)`` 0/1: child k belongs to family f (a family sum is one matrix product — ten
        times faster than ``np.add.reduceat`` over (K, n, n) stacks of a few children each)."""
        n_families = self.parent.shape[0] if self.parent is not None else int(self.family.max()) + 1
        out = np.zeros((n_families, self.family.size))
        out[self.family, np.arange(self.family.size)] = 1.0
        return out

    def b_rows(self) -> np.ndarray:
        """B as ``(K, m, n)`` or a broadcastable ``(1, m, n)``."""
        return self.B if self.per_child_rows else self.B[None, :, :]


def _g_mul(qp: FamilyQP, x: np.ndarray) -> np.ndarray:
    """G x per child: [−x, B x, −B x]  → (K, n + 2m)."""
    bx = qp.b_mul(x)
    return np.concatenate([-x, bx, -bx], axis=1)


def _gt_mul(qp: FamilyQP, u: np.ndarray) -> np.ndarray:
    """Gᵀ u per child → (K, n)."""
    n, m = qp.g.shape[1], qp.B.shape[-2]
    return -u[:, :n] + qp.bt_mul(u[:, n : n + m] - u[:, n + m :])


def _family_sum(qp: FamilyQP, values: np.ndarray, n_families: int) -> np.ndarray:
    """Sum over the children of each family (``n_families`` rows; children are stored family by
    family)."""
    k = values.shape[0]
    total = qp.family_matrix @ values.reshape(k, -1)
    return total.reshape((n_families, *values.shape[1:]))


def _mat_vec(a: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``a[i] @ v[i]`` for stacks ``(K, p, q)`` and ``(K, q)`` (a batched matmul: 2–10× faster
    than the equivalent einsum at these sizes)."""
    return np.matmul(a, v[:, :, None])[:, :, 0]


def _max_step(v: np.ndarray, dv: np.ndarray) -> float:
    """Largest step in (0, 1] keeping v + step·dv ≥ 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(dv < 0, v / -dv, np.inf)
    return float(min(1.0, ratio.min())) if ratio.size else 1.0


@dataclass(frozen=True)
class _NewtonSystem:
    """One factorised Newton system of the interior-point iteration (see the module docstring)."""

    qp: FamilyQP
    m_inv: np.ndarray
    schur_inv: np.ndarray | None
    r_d: np.ndarray
    r_p: np.ndarray
    r_g: np.ndarray
    s: np.ndarray
    z: np.ndarray
    fixed: np.ndarray
    active: np.ndarray

    def step(self, r_c: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]:
        """(Δx, Δy, Δs, Δz) for complementarity right-hand side ``r_c``."""
        qp, s, z = self.qp, self.s, self.z
        rhs1 = -self.r_d - _gt_mul(qp, (r_c + z * self.r_g) / s)
        rhs1[self.fixed] = 0.0
        v = _mat_vec(self.m_inv, rhs1)
        dy = None
        if self.schur_inv is not None:
            n_families = self.schur_inv.shape[0]
            dy = _mat_vec(self.schur_inv, _family_sum(qp, v, n_families) + self.r_p)
            dx = v - _mat_vec(self.m_inv, dy[qp.family])
            dx[self.fixed] = 0.0
        else:
            dx = v
        ds = np.where(self.active, -self.r_g - _g_mul(qp, dx), 0.0)
        dz = np.where(self.active, (r_c - z * ds) / s, 0.0)
        return dx, dy, ds, dz


def solve_family_qp(
    qp: FamilyQP,
    *,
    tol: float = 1e-8,
    accept: float = 1e-6,
    max_iter: int = 80,
    polish_from: float = SETTINGS.ipm_polish_from,
    polish_steps: int = 1,
) -> np.ndarray:
    """Solve the batched QP; returns x ``(K, n)``.

    Stops when the relative duality gap, primal residuals and (scaled) dual residual are all below
    ``tol``; if the iterations lose accuracy first, the best iterate is returned when its accuracy
    is below ``accept``, else :class:`QPNotConverged` is raised (the caller falls back to Clarabel).
    From accuracy ``polish_from`` on, each iterate is polished (:func:`polish`, with
    ``polish_steps`` active-set steps); families it verifies leave the iteration.
    """
    result, _verified, accuracy = _interior_point(
        qp, tol, accept, max_iter, polish_from, polish_steps
    )
    if accuracy > accept:
        raise QPNotConverged(
            f"batched interior-point method stopped at accuracy {accuracy:.1e} (need {accept:.0e})"
        )
    return result


def solve_verified(
    qp: FamilyQP,
    *,
    tol: float = 1e-9,
    max_iter: int = 80,
    polish_from: float = SETTINGS.ipm_polish_from,
    polish_steps: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """The interior point of :func:`solve_family_qp`, keeping only exact answers: (x ``(K, n)``,
    verified ``(F,)``) — a family is verified when a polish met every KKT condition (its rows of
    x are its exact optimum); the others' rows are not to be used."""
    result, verified, _accuracy = _interior_point(
        qp, tol, np.inf, max_iter, polish_from, polish_steps
    )
    return result, verified


def _interior_point(
    qp: FamilyQP,
    tol: float,
    accept: float,
    max_iter: int,
    polish_from: float,
    polish_steps: int,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Mehrotra iterations with polishing: (x, families verified by a polish, accuracy of the best
    iterate — 0 when every family was verified)."""
    k, n = qp.g.shape
    if k and np.any(np.diff(qp.family) < 0):
        raise ValueError("children must be stored family by family (family indices ascending)")
    m = qp.B.shape[-2]
    # Infinite bounds are no constraint: inactive rows (slack 1, dual 0, right-hand side 0).
    finite = np.concatenate([np.isfinite(qp.hi), np.isfinite(qp.lo)], axis=1)
    h = np.concatenate([np.zeros((k, n)), qp.hi, -qp.lo], axis=1)
    h[:, n:][~finite] = 0.0
    coupled = qp.parent is not None
    n_families = qp.parent.shape[0] if coupled else (int(qp.family.max()) + 1 if k else 0)
    # Cells whose parent cell is 0 are fixed at 0 for every child of the family (no variable):
    # leaving them to the barrier makes the Newton systems singular as x → 0.
    fixed = qp.parent[qp.family] <= 0 if coupled else np.zeros((k, n), dtype=bool)
    if qp.fixed is not None:
        fixed = fixed | qp.fixed
    free = ~fixed
    active = np.concatenate([free, finite], axis=1)
    n_ineq = max(int(active.sum()), 1)
    # Starting point: the clipped unconstrained minimiser rescaled to sum to the parent (satisfies
    # the coupling; about a quarter fewer iterations than an even split on RI blocks), slacks and
    # duals positive.
    if coupled:
        # Even split over the children free to hold each cell (structural zeros hold 0).
        holders = _family_sum(qp, free.astype(np.float64), n_families)
        x = np.where(free, (qp.parent / np.maximum(holders, 1.0))[qp.family], 0.0)
        x = _warm_start(qp, fixed, n_families, x)
        y = np.zeros((n_families, n))
    else:
        x = np.ones((k, n))
        y = np.zeros((0, n))
    scale = max(1.0, float(np.abs(h).max()) if h.size else 1.0, float(np.abs(x).max()))
    s = np.where(active, np.maximum(h - _g_mul(qp, x), 1e-2 * scale), 1.0)
    z = np.where(active, SETTINGS.dual_start * max(1.0, float(np.abs(qp.H).max(initial=0.0))), 0.0)
    g_norm = 1.0 + float(np.abs(qp.g).max())
    h_norm = 1.0 + float(np.abs(h).max())
    p_norm = 1.0 + (float(np.abs(qp.parent).max()) if coupled else 0.0)
    keep = (free[:, :, None] & free[:, None, :]).astype(np.float64)
    fixed_diag = fixed.astype(np.float64)
    diag = np.arange(n)
    best: tuple[float, np.ndarray, np.ndarray, np.ndarray] = (np.inf, x, s, z)
    polished_here = False  # the current iterate was already polished (its failures stay failures)
    result = np.zeros((k, n))
    rows = np.arange(k)
    family_ids = np.arange(n_families)
    verified = np.zeros(n_families, dtype=bool)
    # Static regularisation of the Newton matrices (rank-deficient H, e.g. a TOTAL-only pass).
    regularization = 1e-10 * max(1.0, float(np.abs(qp.H).max()) if k else 1.0)
    rows_b = qp.b_rows()
    for _ in range(max_iter):
        hx = _mat_vec(qp.H, x)
        r_d = hx + qp.g + _gt_mul(qp, z) + (y[qp.family] if coupled else 0.0)
        r_d[fixed] = 0.0
        r_p = _family_sum(qp, x, n_families) - qp.parent if coupled else np.zeros((0, n))
        r_g = np.where(active, _g_mul(qp, x) + s - h, 0.0)
        mu = float(np.sum(s * z)) / n_ineq
        child_obj = 0.5 * np.sum(x * hx, axis=1) + np.sum(qp.g * x, axis=1)
        if qp.constant is not None:
            child_obj = child_obj + qp.constant
        family_obj = _family_sum(qp, child_obj, n_families)
        family_gap = _family_sum(qp, np.sum(s * z, axis=1), n_families)
        merit = max(
            float(np.max(family_gap / np.maximum(1.0, np.abs(family_obj)))),
            float(np.abs(r_d).max()) / g_norm * 1e-2,
            float(np.abs(r_p).max()) / p_norm if coupled else 0.0,
            float(np.abs(r_g).max()) / h_norm,
        )
        if merit < best[0]:
            best = (merit, np.where(fixed, 0.0, np.maximum(x, 0.0)), s.copy(), z.copy())
        if merit <= tol:
            break
        if merit <= polish_from and coupled and not polished_here:
            polished, family_ok = polish(qp, x, s, z, fixed, polish_steps)
            if family_ok.any():
                # Families solved exactly leave the batch; the others keep iterating.
                done_children = family_ok[qp.family]
                result[rows[done_children]] = polished[done_children]
                verified[family_ids[family_ok]] = True
                if family_ok.all():
                    return result, verified, 0.0
                remaining = ~family_ok
                family_ids = family_ids[remaining]
                qp = _subset_qp(qp, remaining)
                rows = rows[~done_children]
                x, s, z = x[~done_children], s[~done_children], z[~done_children]
                h = h[~done_children]
                y = y[remaining]
                fixed, active = fixed[~done_children], active[~done_children]
                keep, fixed_diag = keep[~done_children], fixed_diag[~done_children]
                rows_b = qp.b_rows()
                n_families = int(remaining.sum())
                n_ineq = max(int(active.sum()), 1)
                best = (np.inf, x, s, z)
                polished_here = True
                continue
        if merit > 1e4 * best[0] or not np.isfinite(merit):
            break  # the iterates lost accuracy (huge barrier weights); keep the best one
        # Barrier weights far below the Hessian's scale are flushed to 0: as z → 1e-300 on rows
        # far from their bound, z/s became subnormal, and LAPACK on subnormal entries ran ~40×
        # slower (a 4 × 110 × 110 inverse: 19 ms instead of 0.5 ms).
        w = z / s
        w[w < SETTINGS.tiny_weight] = 0.0
        # M_c = H_c + diag(w_nonneg) + Bᵀ diag(w_hi + w_lo) B, inverted in one batched call;
        # fixed cells get an identity row and column (their step is 0).
        big_m = qp.H.copy()
        big_m[:, diag, diag] += w[:, :n]
        if m:
            wb = w[:, n : n + m] + w[:, n + m :]
            big_m += np.matmul(np.transpose(rows_b * wb[:, :, None], (0, 2, 1)), rows_b)
        big_m *= keep
        big_m[:, diag, diag] += fixed_diag + regularization
        try:
            # Fixed cells take no share of the coupling step (zero rows and columns of M⁻¹); a
            # cell no child of the family may hold gets an identity row in the Schur complement.
            m_inv = kkt.spd_inverse(big_m) * keep
            if coupled:
                schur = _family_sum(qp, m_inv, n_families)
                schur[:, diag, diag] += (
                    _family_sum(qp, (~fixed).astype(np.float64), n_families) == 0
                )
                schur_inv = kkt.spd_inverse(schur)
            else:
                schur_inv = None
        except np.linalg.LinAlgError:
            break

        system = _NewtonSystem(qp, m_inv, schur_inv, r_d, r_p, r_g, s, z, fixed, active)
        # Predictor (affine scaling), then Mehrotra's corrector.
        dx, dy, ds, dz = system.step(-s * z)
        a_aff = min(_max_step(s, ds), _max_step(z, dz))
        mu_aff = float(np.sum((s + a_aff * ds) * (z + a_aff * dz))) / n_ineq
        sigma = (mu_aff / mu) ** 3 if mu > 0 else 0.0
        dx, dy, ds, dz = system.step(np.where(active, -s * z - ds * dz + sigma * mu, 0.0))
        alpha = min(1.0, 0.99 * min(_max_step(s, ds), _max_step(z, dz)))
        x = x + alpha * dx
        polished_here = False
        if dy is not None:
            y = y + alpha * dy
        s = np.where(active, np.maximum(s + alpha * ds, 1e-300), 1.0)
        z = np.where(active, np.maximum(z + alpha * dz, 1e-300), 0.0)
    if best[0] <= accept:
        polished, family_ok = polish(qp, best[1], best[2], best[3], fixed, polish_steps)
        result[rows] = np.where(family_ok[qp.family][:, None], polished, best[1])
        verified[family_ids[family_ok]] = True
    return result, verified, float(best[0])


def _warm_start(qp: FamilyQP, fixed: np.ndarray, n_families: int, even: np.ndarray) -> np.ndarray:
    """x_c ∝ max(−H_c⁻¹ g_c, 0) + 10⁻³ per cell, scaled so the children sum to the parent; the
    even split ``even`` for cells where that is undefined (or if a solve fails)."""
    n = qp.g.shape[1]
    ridge = np.eye(n) * (1e-8 * max(1.0, float(np.abs(qp.H).max(initial=0.0))))
    try:
        unconstrained = -np.linalg.solve(qp.H + ridge, qp.g[:, :, None])[:, :, 0]
    except np.linalg.LinAlgError:
        return even
    ref = np.where(fixed, 0.0, np.maximum(unconstrained, 0.0) + 1e-3)
    sums = _family_sum(qp, ref, n_families)
    ok = sums > 0
    ratio = np.where(ok, qp.parent / np.where(ok, sums, 1.0), 0.0)
    x = np.where(ok[qp.family], ref * ratio[qp.family], even)
    return x if np.all(np.isfinite(x)) else even


def _subset_qp(qp: FamilyQP, families: np.ndarray) -> FamilyQP:
    """The problem restricted to the families flagged in ``families`` (renumbered in order)."""
    children = families[qp.family]
    renumber = np.cumsum(families) - 1
    return FamilyQP(
        H=qp.H[children],
        g=qp.g[children],
        family=renumber[qp.family[children]],
        parent=None if qp.parent is None else qp.parent[families],
        B=qp.B[children] if qp.per_child_rows else qp.B,
        lo=qp.lo[children],
        hi=qp.hi[children],
        constant=None if qp.constant is None else qp.constant[children],
        fixed=None if qp.fixed is None else qp.fixed[children],
    )


def polish(
    qp: FamilyQP,
    x: np.ndarray,
    s: np.ndarray,
    z: np.ndarray,
    fixed: np.ndarray,
    steps: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Re-solve exactly on the active set found by the interior point (like OSQP's polishing).

    A constraint is taken as active where its dual exceeds :attr:`~.settings.QPSettings.cell_ratio` (a cell's x ≥ 0) or
    :attr:`~.settings.QPSettings.row_ratio` (a band row's side) times its slack. With those constraints as
    equalities the problem is one linear KKT system per child, coupled per family through the
    parent; it is solved with the same batched elimination. Returns the polished point and, per
    family, whether it satisfies every KKT condition (feasible to 1e-9 relative; multipliers of
    the active bounds with the right signs) — then it is that family's exact optimum. With
    ``steps`` > 1, a family whose guess fails is corrected by up to ``steps − 1`` primal–dual
    active-set steps (Hintermüller, Ito & Kunisch 2002: cells below 0 join the zero set, zero
    cells with a negative multiplier leave it; rows likewise), all families at once.
    """
    k, n = qp.g.shape
    m = qp.B.shape[-2]
    n_fam = qp.parent.shape[0] if qp.parent is not None else (int(qp.family.max()) + 1 if k else 0)
    zero = fixed | (z[:, :n] > SETTINGS.cell_ratio * s[:, :n])
    at_hi = (z[:, n : n + m] > SETTINGS.row_ratio * s[:, n : n + m]) & np.isfinite(qp.hi)
    at_lo = (z[:, n + m :] > SETTINGS.row_ratio * s[:, n + m :]) & ~at_hi & np.isfinite(qp.lo)
    result = np.where(fixed, 0.0, np.maximum(x, 0.0))
    done = np.zeros(n_fam, dtype=bool)
    dual_tol = 1e-7 * (1.0 + float(np.abs(qp.g).max()))
    # The families not verified yet: each step solves only these (``sub``; its children are
    # ``children`` of ``qp``, its families ``families``). Families are independent, so a verified
    # family's solution would not change; it still counts in the scale of the feasibility test.
    sub, children, families = qp, np.arange(k), np.arange(n_fam)
    done_size = 0.0
    seen: set[bytes] = set()
    for _ in range(max(steps, 1)):
        key = zero.tobytes() + at_hi.tobytes() + at_lo.tobytes()
        if key in seen:
            break  # cycling
        seen.add(key)
        try:
            sol, nu, grad, none_free, at_hi, at_lo = _kkt_solve(sub, zero, at_hi, at_lo)
        except np.linalg.LinAlgError:
            break
        scale = 1.0 + max(float(np.abs(sol).max()), done_size)
        eps = 1e-9 * scale
        # A row left out of the solve as dependent (:func:`_dependent_rows`) must still sit on its
        # bound; one that does not is released (``off``: the next step finds its side).
        wrong = kkt.violations(
            sol, grad, nu, sub.b_mul(sol), zero, fixed, at_lo, at_hi, sub.lo, sub.hi, eps, dual_tol
        )
        bad = wrong.per_child()
        n_sub = families.size
        family_ok = _family_sum(sub, bad.astype(np.float64), n_sub) == 0
        if sub.parent is not None:
            family_ok &= np.abs(_family_sum(sub, sol, n_sub) - sub.parent).max(axis=1) <= eps
            family_ok &= ~np.any(none_free & (np.abs(sub.parent) > 0), axis=1)
        verified = family_ok[sub.family]
        result[children[verified]] = np.where(zero, 0.0, np.maximum(sol, 0.0))[verified]
        done[families[family_ok]] = True
        if family_ok.all():
            break
        solved = (zero, at_hi, at_lo)
        zero, at_lo, at_hi = kkt.step(wrong, zero, at_lo, at_hi)
        if family_ok.any():
            done_size = max(done_size, float(np.abs(sol[verified]).max(initial=0.0)))
            left = ~verified
            sub = _subset_qp(sub, ~family_ok)
            children, families = children[left], families[~family_ok]
            zero, at_hi, at_lo, fixed = zero[left], at_hi[left], at_lo[left], fixed[left]
            seen = {b"".join(part[left].tobytes() for part in solved)}
    return result, done


def _kkt_solve(
    qp: FamilyQP, zero: np.ndarray, at_hi: np.ndarray, at_lo: np.ndarray
) -> tuple[np.ndarray, ...]:
    """The equality-constrained KKT system with cells ``zero`` held at 0 and rows ``at_hi`` /
    ``at_lo`` at their bound, batched per child with one Schur complement per family: (x, row
    multipliers ν, reduced gradient (the multipliers of x ≥ 0), families' cells no child may
    hold, the rows used at hi, at lo).

    Each child's system is built on its free cells and active rows only (:func:`_compact`: the
    ``[H_FF B_AFᵀ; B_AF 0]`` of the child, padded with identity rows to the batch's largest), so
    the batched LU inverse is of size (free cells + active rows) rather than (n + m); the family's
    n × n Schur complement Σ_c (K_c⁻¹)_xx is summed in one ``bincount`` and solved, not inverted.
    """
    k, n = qp.g.shape
    m = qp.B.shape[-2]
    coupled = qp.parent is not None
    n_fam = qp.parent.shape[0] if coupled else (int(qp.family.max()) + 1 if k else 0)
    free = ~zero
    pf = free.astype(np.float64)
    touches_free = qp.b_mul(pf) > 0  # an active band over only zero cells is no equation
    at_hi = at_hi & touches_free
    at_lo = at_lo & touches_free
    covering, dropped = _dependent_rows(qp, at_hi | at_lo, pf, n_fam)
    act = (at_hi | at_lo) & ~dropped
    bound = np.where(at_hi, qp.hi, np.where(at_lo, qp.lo, 0.0))
    cells, cell_ok = _compact(free)  # (k, w): each child's free cells, then padding
    rows, row_ok = _compact(act)  # (k, a): each child's active rows, then padding
    w, a = cells.shape[1], rows.shape[1]
    size = w + a
    child = np.arange(k)[:, None]
    both_ok = cell_ok[:, :, None] & cell_ok[:, None, :]
    at_cells = cells[:, :, None] * n + cells[:, None, :]  # (k, w, w) positions in an n × n block
    kkt = np.zeros((k, size, size))
    kkt[:, :w, :w] = qp.H.reshape(-1).take(child[:, :, None] * (n * n) + at_cells) * both_ok
    if a:
        b_rows = qp.b_rows()
        b_act = b_rows[
            child[:, :, None] if qp.per_child_rows else 0, rows[:, :, None], cells[:, None, :]
        ]
        b_act = b_act * (row_ok[:, :, None] & cell_ok[:, None, :])
        kkt[:, w:, :w] = b_act
        kkt[:, :w, w:] = np.transpose(b_act, (0, 2, 1))
    padding = np.arange(size)
    kkt[:, padding, padding] += ~np.concatenate([cell_ok, row_ok], axis=1)
    rhs = np.concatenate([-qp.g[child, cells] * cell_ok, bound[child, rows] * row_ok], axis=1)
    inv = _inverse(kkt)
    full = (inv @ rhs[:, :, None])[:, :, 0]
    none_free = np.zeros((n_fam, n), dtype=bool)
    coupling = np.zeros((k, n))
    if coupled:
        # Schur complement per family: Σ_c (K_c⁻¹)_xx on the family's n cells (one bincount); a
        # cell no child may hold gets an identity row.
        at_family = qp.family[:, None, None] * (n * n) + at_cells
        schur = np.bincount(
            at_family[both_ok], weights=inv[:, :w, :w][both_ok], minlength=n_fam * n * n
        ).reshape(n_fam, n, n)
        none_free = _family_sum(qp, pf, n_fam) == 0
        diag = np.arange(n)
        schur[:, diag, diag] += none_free
        base_x = np.zeros((k, n))
        base_x[child, cells] = np.where(cell_ok, full[:, :w], 0.0)
        rhs_y = _family_sum(qp, base_x, n_fam) - qp.parent
        try:
            y = np.linalg.solve(schur, rhs_y[:, :, None])[:, :, 0]
        except np.linalg.LinAlgError:  # a degenerate active set
            y = (np.linalg.pinv(schur) @ rhs_y[:, :, None])[:, :, 0]
        coupling = y[qp.family]
        full -= (inv[:, :, :w] @ (coupling[child, cells] * cell_ok)[:, :, None])[:, :, 0]
    # Back to all n cells and m rows (padding positions are zero cells / inactive rows: 0).
    sol = np.zeros((k, n))
    sol[child, cells] = np.where(cell_ok, full[:, :w], 0.0)
    nu = np.zeros((k, m))
    nu[child, rows] = np.where(row_ok, full[:, w:], 0.0)
    if covering.any():
        # The multipliers of a dependent family are unique up to ν_D + t, μ − t: take the t
        # nearest 0 that gives every row of D a sign-correct multiplier (if there is one).
        low = np.where(covering & at_hi, -nu, -np.inf).max(axis=1)
        high = np.where(covering & at_lo, -nu, np.inf).min(axis=1)
        low = np.maximum.reduceat(low, np.searchsorted(qp.family, np.arange(n_fam)))
        high = np.minimum.reduceat(high, np.searchsorted(qp.family, np.arange(n_fam)))
        shift = np.where(low <= high, np.clip(0.0, low, high), 0.0)
        shift = np.where(covering.any(axis=1), shift[qp.family], 0.0)
        nu += np.where(covering, shift[:, None], 0.0)
        coupling = coupling - shift[:, None]
    grad = (qp.H @ sol[:, :, None])[:, :, 0] + qp.g + coupling + qp.bt_mul(nu)
    return sol, nu, grad, none_free, at_hi, at_lo


def _compact(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's True positions first (in order), cut to the largest count: (positions
    ``(K, w)``, valid ``(K, w)``). Past a row's count come distinct False positions of that row,
    so writing 0 there is harmless."""
    counts = np.count_nonzero(mask, axis=1)
    width = int(counts.max(initial=0))
    order = np.argsort(~mask, axis=1, kind="stable")[:, :width]
    return order, np.arange(width)[None, :] < counts[:, None]


def _inverse(a: np.ndarray) -> np.ndarray:
    """Batched inverse, or pseudo-inverse when some matrix is singular (degenerate active set)."""
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        return np.linalg.pinv(a)


def _dependent_rows(
    qp: FamilyQP, act: np.ndarray, pf: np.ndarray, n_fam: int
) -> tuple[np.ndarray, np.ndarray]:
    """Active rows that make the KKT system singular: (covering ``(K, m)`` — in a family where
    every child has an active row over all its free cells (a TOTAL band), those rows, whose sum the
    coupling to the parent already fixes; dropped ``(K, m)`` — the rows left out of the solve: the
    last child's covering row of such a family, and repeats of a covering row within a child).
    Leaving them out changes no solution: every row is still checked afterwards."""
    k, m = act.shape
    if qp.parent is None or not m or not k:
        return np.zeros_like(act), np.zeros_like(act)
    n_free = pf.sum(axis=1)
    covers = act & (np.abs(qp.b_mul(pf) - n_free[:, None]) < 0.5) & (n_free > 0)[:, None]
    first = covers & (np.cumsum(covers, axis=1) == 1)  # one covering row per child
    dropped = covers & ~first
    has = first.any(axis=1) | (n_free == 0)
    starts = np.searchsorted(qp.family, np.arange(n_fam))
    every = np.logical_and.reduceat(has, starts) & (np.add.reduceat(n_free, starts) > 0)
    covering = first & every[qp.family][:, None]
    # The last child (with a covering row) of each dependent family drops its row.
    child = np.arange(k)
    last = np.full(n_fam, -1)
    np.maximum.at(last, qp.family, np.where(covering.any(axis=1), child, -1))
    drop_child = np.zeros(k, dtype=bool)
    drop_child[last[last >= 0]] = True
    dropped |= covering & drop_child[:, None]
    return covering, dropped


def dense_problem(
    batch: FamilyBatch, pass_queries: Sequence[int], bands: Sequence[Band]
) -> FamilyQP:
    """The pass as a :class:`FamilyQP`: H_c = 2 Σ_q w A_qᵀA_q, g_c = −2 Σ_q w A_qᵀ m̃."""
    n = batch.n_cells
    hess = np.zeros((batch.n_children, n, n))
    grad = np.zeros((batch.n_children, n))
    constant = np.zeros(batch.n_children)
    for q in pass_queries:
        spec = batch.queries[q]
        w = batch.weight[:, q]
        same = (spec.cell_index[:, None] == spec.cell_index[None, :]).astype(np.float64)
        hess += 2.0 * w[:, None, None] * same[None]
        grad += -2.0 * w[:, None] * batch.noisy[q][:, spec.cell_index]
        constant += w * np.sum(batch.noisy[q] ** 2, axis=1)
    if bands:
        b_rows = np.concatenate([batch.queries[b.query].matrix().toarray() for b in bands])
        target = np.concatenate([b.target for b in bands], axis=1)
        tol = np.concatenate(
            [np.repeat(b.tol[batch.child_family, None], b.target.shape[1], 1) for b in bands],
            axis=1,
        )
    else:
        b_rows = np.zeros((0, n))
        target = tol = np.zeros((batch.n_children, 0))
    return FamilyQP(
        H=hess,
        g=grad,
        family=batch.child_family,
        parent=None if batch.parent is None else batch.parent.astype(np.float64),
        B=b_rows,
        lo=target - tol,
        hi=target + tol,
        constant=constant,
    )
