"""Families of large children (a state's counties): a guessed active set solved exactly by
projected conjugate gradients (TDA eq. 7.5; Gould, Hribar & Nocedal 2001, Algorithm II).

With DETAILED in the pass, H = 2 Σ_q w_q A_qᵀA_q on the parent's populated cells is well
conditioned (eigenvalues in [2, 36] on a generated state's pass 2, weights ÷ the largest). Each
active-set step is one equality-constrained least squares solved to machine precision by
projected CG: the projection onto the null space of the coupling (Σ_c x_cj = x̂_γj over the
children free at j: a diagonal block) and the active rows is closed form up to a Schur complement
over the active rows, and H is applied through the stacked sparse query matrices (no n × n
factorisation, no per-child inverse). The first guess is the children's unconstrained minimisers
projected onto the cell constraints (:func:`~.problem.project_cells`); if its polish does not
verify, ADMM (:class:`~.family_admm.AdmmStepper`) refines the guess and a polish is tried whenever
it settles. Every answer passes :func:`~.kkt.violations`; a family that does not is "not mine".
docs/topdown.md "Family solvers at production scale" has the measurements.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from engine.core.blas_threads import single_blas_thread
from engine.topdown.family import FamilyBatch
from engine.topdown.qp import family_admm, kkt
from engine.topdown.qp.problem import Band, Family, FamilyNotSolved, project_cells, reduce
from engine.topdown.qp.settings import SETTINGS, QPSettings


class _Hessian:
    """H v = 2 Σ_q w_q A_qᵀ(A_q v) on the parent's populated cells, with the query matrices as
    one sparse stack (10 non-zeros per cell on the production pass: ≈ 1/60 of the dense
    product's work on 633 cells), weights normalised as in
    :func:`~.problem.reduce`."""

    def __init__(self, batch: FamilyBatch, f: int, pass_queries: Sequence[int], cells: np.ndarray):
        lo = int(batch.child_ptr[f])
        top = max(float(batch.weight[lo, q]) for q in pass_queries)
        blocks, scale = [], []
        for q in pass_queries:
            w = float(batch.weight[lo, q]) / top
            if w == 0.0:
                continue
            used, labels = np.unique(batch.queries[q].cell_index[cells], return_inverse=True)
            blocks.append(
                sp.csr_matrix(
                    (np.ones(cells.size), (labels.reshape(-1), np.arange(cells.size))),
                    shape=(used.size, cells.size),
                )
            )
            scale.append(np.full(used.size, 2.0 * w))
        self.matrix = sp.vstack(blocks, format="csr")
        self.transposed = self.matrix.T.tocsr()
        self.scale = np.concatenate(scale)[:, None]

    def apply(self, v: np.ndarray) -> np.ndarray:
        """H v for ``v`` ``(K, n)`` (each row one child)."""
        return np.asarray(self.transposed @ (self.scale * (self.matrix @ v.T))).T

    def minimiser(self, grad: np.ndarray, s: QPSettings = SETTINGS) -> np.ndarray:
        """Each child's unconstrained minimiser −H⁻¹g by conjugate gradients (H is positive
        definite with DETAILED in the pass; its condition number is small, ≤ 18 in production)."""
        x = np.zeros_like(grad)
        r = -grad.copy()
        p = r.copy()
        rr = np.einsum("kn,kn->k", r, r)
        target = (s.cg_tol * max(1.0, float(np.abs(grad).max(initial=0.0)))) ** 2 * grad.shape[1]
        for _ in range(s.cg_max_iterations):
            if np.all(rr <= target):
                break
            hp = self.apply(p)
            curvature = np.einsum("kn,kn->k", p, hp)
            alpha = np.where(curvature > 0, rr / np.where(curvature > 0, curvature, 1.0), 0.0)
            x += alpha[:, None] * p
            r -= alpha[:, None] * hp
            rr_new = np.einsum("kn,kn->k", r, r)
            p = r + (rr_new / np.where(rr > 0, rr, 1.0))[:, None] * p
            rr = rr_new
        return x


class _Constraints:
    """The equality constraints of one active-set guess on the free cells and their projection.

    E x = [Σ_c x_c (per cell, free cells only); C_r x_c (per active (child, row))]. E Eᵀ has a
    diagonal coupling block D (children free at each cell), a cross block B and a block-diagonal
    row block R; (E Eᵀ)⁺ is applied through the Schur complement S = R − Bᵀ D⁻¹ B over the active
    rows (pseudo-inverse: rows that repeat the coupling, e.g. every child's TOTAL band, are
    dependent)."""

    def __init__(self, rows: np.ndarray, free: np.ndarray, active: np.ndarray) -> None:
        self.free = free
        self.freef = free.astype(np.float64)
        self.child, self.row = np.nonzero(active)
        self.ba = self.freef[self.child] * rows[self.row]  # (Na, n)
        self.owner = (np.arange(free.shape[0])[:, None] == self.child[None, :]).astype(np.float64)
        d = self.freef.sum(axis=0)
        self.d_inv = np.where(d > 0, 1.0 / np.maximum(d, 1.0), 0.0)
        if self.child.size:
            same = self.child[:, None] == self.child[None, :]
            r_block = np.where(same, self.ba @ self.ba.T, 0.0)
            schur = r_block - (self.ba * self.d_inv[None, :]) @ self.ba.T
            self.s_pinv = np.linalg.pinv(schur, rcond=1e-12, hermitian=True)
        else:
            self.s_pinv = np.zeros((0, 0))

    def apply(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """E v: (coupling sums ``(n,)``, active-row values ``(Na,)``)."""
        s = (v * self.freef).sum(axis=0)
        t = np.einsum("an,an->a", self.ba, v[self.child]) if self.child.size else np.zeros(0)
        return s, t

    def solve(self, s: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(E Eᵀ)⁺ [s; t] = (μ ``(n,)``, λ ``(Na,)``)."""
        if self.child.size:
            lam = self.s_pinv @ (t - self.ba @ (self.d_inv * s))
            mu = self.d_inv * (s - self.ba.T @ lam)
        else:
            lam = np.zeros(0)
            mu = self.d_inv * s
        return mu, lam

    def transpose(self, mu: np.ndarray, lam: np.ndarray) -> np.ndarray:
        """Eᵀ [μ; λ] ``(K, n)``."""
        out = self.freef * mu[None, :]
        if self.child.size:
            out += self.owner @ (lam[:, None] * self.ba)
        return out

    def project(self, v: np.ndarray) -> np.ndarray:
        """Orthogonal projection of ``v`` (zero off the free cells) onto the null space of E."""
        return v * self.freef - self.transpose(*self.solve(*self.apply(v)))


def _solve_equality(
    fam: Family,
    hess: _Hessian,
    free: np.ndarray,
    at_lower: np.ndarray,
    at_upper: np.ndarray,
    start: np.ndarray | None,
    s: QPSettings = SETTINGS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """min Σ_c ½x_cᵀHx_c + g_cᵀx_c on the free cells with the coupling and the active rows as
    equalities, by projected CG: (x, full gradient ∇ + μ + λC ``(K, n)``, λ ``(K, m)``, coupling
    residual) or ``None`` when the equalities are inconsistent."""
    g = fam.grad
    k, n = g.shape
    active = at_lower | at_upper
    cons = _Constraints(fam.rows, free, active)
    target_rows = np.where(at_upper, fam.upper, fam.lower)[cons.child, cons.row]
    x0 = cons.transpose(*cons.solve(fam.parent, target_rows))
    sums, t = cons.apply(x0)
    p_tol = s.kkt_tol * max(1.0, float(fam.parent.max(initial=0.0)))
    if np.abs(sums - fam.parent).max(initial=0.0) > p_tol or (
        t.size and np.abs(t - target_rows).max() > p_tol
    ):
        return None
    x = x0 if start is None else x0 + cons.project(start - x0)
    scale = max(1.0, float(np.abs(g).max(initial=0.0)))
    r = cons.project(hess.apply(x) + g)
    rr = float(np.vdot(r, r))
    p = -r
    for _ in range(s.cg_max_iterations):
        if np.sqrt(rr) <= s.cg_tol * scale * np.sqrt(r.size):
            break
        hp = hess.apply(p) * cons.freef
        curvature = float(np.vdot(p, hp))
        if curvature <= 0:
            break
        alpha = rr / curvature
        x = x + alpha * p
        r = cons.project(r + alpha * hp)
        rr_new = float(np.vdot(r, r))
        p = -r + (rr_new / rr) * p
        rr = rr_new
    gradient = hess.apply(x) + g
    mu, lam_a = cons.solve(*cons.apply(-gradient * cons.freef))
    lam = np.zeros((k, fam.rows.shape[0]))
    lam[cons.child, cons.row] = lam_a
    full = gradient + mu[None, :] + lam @ fam.rows
    return x * cons.freef, full, lam, np.abs(x.sum(axis=0) - fam.parent)


def polish(
    fam: Family, hess: _Hessian, state: family_admm.AdmmState, s: QPSettings = SETTINGS
) -> np.ndarray | None:
    """Active-set guess from the ADMM iterate, corrected by primal–dual active-set steps, each
    solved by projected CG; the verified solution or ``None``."""
    c = fam.rows
    k, n = fam.grad.shape
    zero_set = fam.zero | (state.zc <= 0.0)
    at_lower = (state.zr <= fam.lower) & (state.yr < 0) & np.isfinite(fam.lower)
    at_upper = (state.zr >= fam.upper) & (state.yr > 0) & np.isfinite(fam.upper)
    p_tol = s.kkt_tol * max(1.0, float(fam.parent.max(initial=0.0)))
    d_tol = s.kkt_tol * max(1.0, float(np.abs(fam.grad).max(initial=0.0)))
    seen: set[bytes] = set()
    x: np.ndarray | None = None
    cx = np.zeros_like(fam.lower)
    kept = np.zeros(fam.lower.shape, dtype=bool)  # rows seen binding after a release
    let_go: list[tuple[int, int]] = []  # rows released to make the equalities consistent
    for _ in range(s.cg_active_set_steps):
        starving = zero_set.all(axis=0)
        if starving.any():  # every populated parent cell needs a child free to hold it
            pick = np.argmax(np.where(fam.zero, -np.inf, state.zc), axis=0)
            cols = np.flatnonzero(starving)
            zero_set[pick[cols], cols] = False
        key = zero_set.tobytes() + at_lower.tobytes() + at_upper.tobytes() + kept.tobytes()
        if key in seen:
            return None  # cycling
        seen.add(key)
        at_lower, at_upper = family_admm.independent_rows(fam, zero_set, at_lower, at_upper)
        solved = _solve_equality(fam, hess, ~zero_set, at_lower, at_upper, x, s)
        if solved is None:
            # The active rows contradict the coupling (every child's TOTAL band at a bound fixes
            # Σ_c totals, which the parent fixes too): release the weakest row — by ADMM's
            # multiplier, then by how far the last solution overshot it — that was not seen
            # binding after an earlier release.
            overshoot = np.maximum(cx - fam.upper, 0.0) + np.maximum(fam.lower - cx, 0.0)
            strength = np.where((at_lower | at_upper) & ~kept, np.abs(state.yr) + overshoot, np.inf)
            if not np.isfinite(strength).any():
                return None
            child, row = np.unravel_index(int(np.argmin(strength)), strength.shape)
            at_lower[child, row] = at_upper[child, row] = False
            let_go.append((int(child), int(row)))
            continue
        x, full, lam, coupling = solved
        cx = x @ c.T if c.shape[0] else np.zeros((k, 0))
        active = (zero_set, at_lower, at_upper)
        wrong = kkt.violations(fam, x, full, lam, active, p_tol, d_tol)
        for child, row in let_go:
            kept[child, row] |= bool(wrong.over[child, row] or wrong.under[child, row])
        stationary = np.abs(full[~zero_set]).max(initial=0.0) <= d_tol
        if not wrong.per_child().any():
            if stationary and coupling.max(initial=0.0) <= p_tol:
                return np.maximum(x, 0.0)
            return None  # CG did not reach the verified tolerance
        zero_set, at_lower, at_upper = kkt.step(wrong, zero_set, at_lower, at_upper)
    return None


def _guess(fam: Family, state: family_admm.AdmmState) -> np.ndarray:
    """The active set the ADMM iterate suggests: cells at 0, rows at either bound (flat bool)."""
    return np.concatenate(
        [
            (state.zc <= 0.0).reshape(-1),
            (state.zr <= fam.lower).reshape(-1),
            (state.zr >= fam.upper).reshape(-1),
        ]
    )


def _exact_start(fam: Family, hess: _Hessian, s: QPSettings) -> family_admm.AdmmState:
    """The children's unconstrained minimisers projected onto the cell constraints, as an ADMM
    state without multipliers (no row guessed active: the polish adds violated rows)."""
    k, n = fam.grad.shape
    m = fam.rows.shape[0]
    z = project_cells(hess.minimiser(fam.grad, s), fam.parent, fam.zero)
    return family_admm.AdmmState(
        x=z,
        zc=z.copy(),
        yc=np.zeros((k, n)),
        zr=np.clip(z @ fam.rows.T, fam.lower, fam.upper) if m else np.zeros((k, 0)),
        yr=np.zeros((k, m)),
        rho=s.cg_rho,
    )


def solve_family(
    batch: FamilyBatch,
    f: int,
    pass_queries: Sequence[int],
    bands: Sequence[Band],
    *,
    admm: bool = True,
    s: QPSettings = SETTINGS,
) -> np.ndarray:
    """x ``(K_f, n_cells)`` of family ``f`` for one pass (TDA eq. 7.5), verified by its KKT
    conditions; raises :class:`FamilyNotSolved` when not covered or not verified (``admm=False``:
    when the first polish does not verify, without the ADMM fallback)."""
    fam = reduce(batch, f, pass_queries, bands)
    k = int(batch.child_ptr[f + 1] - batch.child_ptr[f])
    out = np.zeros((k, batch.n_cells))
    if fam.cells.size == 0:
        return out
    hess = _Hessian(batch, f, pass_queries, fam.cells)
    state = _exact_start(fam, hess, s)
    x = polish(fam, hess, state, s)
    if x is not None:
        out[:, fam.cells] = x
        return out
    if not admm:
        raise FamilyNotSolved("the first polish did not verify (ADMM not allowed at this size)")
    stepper = family_admm.AdmmStepper(fam, s.cg_rho, s)
    previous = _guess(fam, state)
    last_polish = polishes = 0
    every = s.cg_check_every
    for done in range(every, s.cg_max_admm_iterations + 1, every):
        state = stepper.run(state, every)
        guess = _guess(fam, state)
        changed = int(np.count_nonzero(guess != previous))
        previous = guess
        gap = done - last_polish
        settling = changed <= s.cg_settled_fraction * guess.size and gap >= s.cg_min_gap
        if settling or gap >= s.cg_polish_every:
            if polishes >= s.cg_max_polishes:
                break
            polishes += 1
            last_polish = done
            x = polish(fam, hess, state, s)
            if x is not None:
                out[:, fam.cells] = x
                return out
    raise FamilyNotSolved(
        f"the projected-CG polish did not verify the KKT conditions ({polishes} polishes after "
        "the first)"
    )


def solve_families(
    batch: FamilyBatch,
    pass_queries: Sequence[int],
    bands: Sequence[Band],
    first_polish_only: np.ndarray,
    settings: QPSettings = SETTINGS,
) -> tuple[np.ndarray, np.ndarray]:
    """Every family of ``batch`` for one pass: (x, solved ``(F,)``). Families flagged in
    ``first_polish_only`` (heavy dense polishes) get the first polish alone; the others, ADMM
    refinement too when children × populated cells² is at most
    ``settings.cg_admm_max_work``. Families not verified are left unsolved ("not mine")."""
    x = np.zeros((batch.n_children, batch.n_cells))
    solved = np.zeros(batch.n_families, dtype=bool)
    sizes = np.diff(batch.child_ptr)
    work = sizes * np.count_nonzero(batch.parent > 0, axis=1).astype(np.float64) ** 2
    with single_blas_thread():
        for f in range(batch.n_families):
            lo, hi = int(batch.child_ptr[f]), int(batch.child_ptr[f + 1])
            admm = not first_polish_only[f] and bool(work[f] <= settings.cg_admm_max_work)
            try:
                x[lo:hi] = solve_family(batch, f, pass_queries, bands, admm=admm, s=settings)
            except FamilyNotSolved:
                continue
            solved[f] = True
    return x, solved
