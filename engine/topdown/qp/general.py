"""The general model of a least-squares pass: one sparse QP for any solver (TDA eq. 7.5–7.6).

Every family of a pass (TDA eq. 7.5) — the root, children with invariants or sums of siblings held
(TDA §7.4), any constraint — is one sparse QP, block-diagonal over the families of a batch: a
variable for each cell the parent populates that is not a structural zero (the others are 0),
residual variables r = A_q x − m̃ for every query but DETAILED (a diagonal P, no dense Kronecker
matrix, no constant in the objective), and centred on a non-negative reference point x0 (a state's
counts are ~10⁶ while its residuals are ~noise: in d = x − x0 a solver's tolerances mean what they
should). :func:`build` assembles it in one step from index arrays (:class:`SparseModel`: P, c,
A, b with the equality rows first, and the lower bounds of the variables); :func:`solve_piqp`
(PIQP, Schwan et al. 2023) and :func:`solve_clarabel` solve it — the routes ``piqp`` and
``clarabel`` of :mod:`.route`; :func:`minimal_slack` is the linear program of TDA eq. 7.6 on
the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import clarabel
import numpy as np
import piqp
import scipy.sparse as sp

from engine.topdown.family import FamilyBatch
from engine.topdown.feasibility import TopDownInfeasible, describe_family_failure
from engine.topdown.qp.problem import Band
from engine.topdown.qp.settings import SETTINGS, QPSettings

WHAT = "weighted least squares (TDA eq. 7.5)"
ROW_TOL = 1e-9
"""A row without a variable must already hold to this (it is then left out)."""


class _RowFails(Exception):
    """A constraint over cells held at 0 cannot hold (e.g. an invariant in an empty cell)."""


@dataclass
class _Rows:
    """Constraint rows as triplets, equality and inequality (≤) kept apart."""

    n_vars: int
    parts: dict[bool, list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]] = field(
        default_factory=lambda: {True: [], False: []}
    )

    def add(self, eq: bool, keys: np.ndarray, cols: np.ndarray, vals, rhs: np.ndarray) -> None:
        """Rows Σ_{i: keys_i = k} vals_i · v[cols_i] (=, ≤) rhs[k] for every key k that has a
        variable; a key without one must already hold (rhs 0 for =, ≥ 0 for ≤)."""
        used, row = np.unique(keys, return_inverse=True)
        rest = np.ones(rhs.size, dtype=bool)
        rest[used] = False
        left = rhs[rest]
        left = left[np.isfinite(left)]
        if np.any(np.abs(left) > ROW_TOL if eq else left < -ROW_TOL):
            raise _RowFails()
        target = rhs[used]
        keep = np.isfinite(target)
        if not keep.all():  # +inf: no constraint
            renumber = np.cumsum(keep) - 1
            on = keep[row]
            row, cols, target = renumber[row[on]], cols[on], target[keep]
            vals = np.broadcast_to(vals, on.shape)[on]
        vals = np.broadcast_to(np.asarray(vals, dtype=np.float64), row.shape)
        self.parts[eq].append((row.reshape(-1), cols, vals, target))

    def matrices(self) -> tuple[sp.csc_matrix, np.ndarray, int]:
        """(A, b, number of equality rows): the equality rows, then the inequality rows."""
        parts = self.parts[True] + self.parts[False]
        offsets = np.cumsum([0, *(part[3].size for part in parts)])
        n_eq = int(offsets[len(self.parts[True])])
        if not parts:
            return sp.csc_matrix((0, self.n_vars)), np.zeros(0), 0
        rows = np.concatenate([part[0] + o for part, o in zip(parts, offsets, strict=False)])
        vals = np.concatenate([part[2] for part in parts])
        cols = np.concatenate([part[1] for part in parts])
        a = sp.csc_matrix((vals, (rows, cols)), shape=(int(offsets[-1]), self.n_vars))
        return a, np.concatenate([part[3] for part in parts]), n_eq


@dataclass(frozen=True)
class SparseModel:
    """min ½ vᵀPv + cᵀv  s.t.  A[:n_eq] v = b[:n_eq],  A[n_eq:] v ≤ b[n_eq:],  v ≥ ``lower``
    (v = [d on the free cells, residuals]); :meth:`to_x` maps a solution back to the histograms."""

    p: sp.csc_matrix
    c: np.ndarray
    a: sp.csc_matrix
    b: np.ndarray
    n_eq: int
    lower: np.ndarray
    batch: FamilyBatch
    what: str
    x0: np.ndarray
    free: np.ndarray

    def to_x(self, raw: np.ndarray) -> np.ndarray:
        """The histograms ``(K, n_cells)`` of a solution ``raw``: x = max(x0 + d, 0)."""
        k, n = self.batch.n_children, self.batch.n_cells
        x = np.zeros(k * n)
        x[self.free] = np.maximum(self.x0 + raw[: self.free.size], 0.0)
        return x.reshape(k, n)

    def with_lower_rows(self) -> SparseModel:
        """The same model with v ≥ lower written as rows −v ≤ −lower (for Clarabel)."""
        on = np.flatnonzero(np.isfinite(self.lower))
        rows = sp.csc_matrix(
            (-np.ones(on.size), (np.arange(on.size), on)), shape=(on.size, self.c.size)
        )
        a = sp.vstack([self.a, rows], format="csc")
        b = np.concatenate([self.b, -self.lower[on]])
        return replace(self, a=a, b=b, lower=np.full(self.c.size, -np.inf))


def _fixed_cells(batch: FamilyBatch) -> np.ndarray | None:
    """``(K, n_cells)`` cells that must be 0: empty in the parent, or structural zeros."""
    fixed = None if batch.parent is None else batch.parent[batch.child_family] <= 0
    zero = batch.structural_zero_cells()
    if zero is not None:
        fixed = zero if fixed is None else fixed | zero
    return fixed


def _reference_point(batch: FamilyBatch, child: np.ndarray, cell: np.ndarray) -> np.ndarray:
    """A non-negative point near the answer on the free cells: the clipped noisy detailed
    cells (+10⁻³), rescaled so the children sum to the parent (or, at the root, to an invariant
    total)."""
    base = np.ones(child.size)
    for q, spec in enumerate(batch.queries):
        measured = batch.weight[child, q] > 0
        if spec.is_detailed and measured.any():
            noisy = batch.noisy[q][child, spec.cell_index[cell]]
            base = np.where(measured, np.maximum(noisy, 0.0) + 1e-3, base)
    n = batch.n_cells
    if batch.parent is not None:
        keys = batch.child_family[child] * n + cell
        sums = np.bincount(keys, weights=base, minlength=batch.n_families * n)
        parent = batch.parent.reshape(-1)
        return base * (parent[keys] / np.where(sums[keys] > 0, sums[keys], 1.0))
    for q, target in enumerate(batch.invariant):
        if target is not None and batch.queries[q].size == 1 and np.all(np.isfinite(target)):
            totals = np.bincount(child, weights=base, minlength=batch.n_children)
            return base * (target[:, 0] / np.where(totals > 0, totals, 1.0))[child]
    return base


def _answers(size: int, keys: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.bincount(keys, weights=x, minlength=size)


def _constraints(
    batch: FamilyBatch,
    rows: _Rows,
    child: np.ndarray,
    cell: np.ndarray,
    x0: np.ndarray,
    bands: Sequence[Band],
    tau: np.ndarray | None = None,
) -> None:
    """The rows of eq. 7.5 (and 7.6) on d = x − x0 over the free cells (child, cell): children
    sum to the parent, invariants, sums of siblings held, structural bounds (TDA §5.3), and the
    bands of earlier passes — |B(x0 + d) − target| ≤ tol, or ≤ τ_family when ``tau`` gives each
    family's τ column (eq. 7.6)."""
    n, k = batch.n_cells, batch.n_children
    cols = np.arange(child.size)
    if batch.parent is not None:
        keys = batch.child_family[child] * n + cell
        size = batch.n_families * n
        rows.add(True, keys, cols, 1.0, batch.parent.reshape(-1) - _answers(size, keys, x0))
    for q, target in enumerate(batch.invariant):
        if target is None or not np.isfinite(target).any():
            continue
        spec = batch.queries[q]
        keys = child * spec.size + spec.cell_index[cell]
        rhs = target.reshape(-1) - _answers(k * spec.size, keys, x0)
        rhs = np.where(np.isfinite(target.reshape(-1)), rhs, np.inf)  # NaN: not held
        held = np.isfinite(rhs[keys])
        rows.add(True, keys[held], cols[held], 1.0, rhs)
    for held_sum in batch.sums:  # a sum of siblings held exact (TDA §7.4)
        spec = batch.queries[held_sum.query]
        member = np.isin(child, held_sum.rows)
        keys = spec.cell_index[cell[member]]
        rhs = held_sum.target - _answers(spec.size, keys, x0[member])
        rows.add(True, keys, cols[member], 1.0, rhs)
    for bound in batch.bounds:  # lower ≤ A_q x_c ≤ upper where finite
        spec = bound.spec
        keys = child * spec.size + spec.cell_index[cell]
        at_x0 = _answers(k * spec.size, keys, x0)
        rows.add(False, keys, cols, 1.0, bound.upper.reshape(-1) - at_x0)
        rows.add(False, keys, cols, -1.0, at_x0 - bound.lower.reshape(-1))
    for band in bands:
        spec = batch.queries[band.query]
        keys = child * spec.size + spec.cell_index[cell]
        gap = band.target.reshape(-1) - _answers(k * spec.size, keys, x0)
        family = np.repeat(batch.child_family, spec.size)
        if tau is None:
            tol = band.tol[family]
            rows.add(False, keys, cols, 1.0, gap + tol)
            rows.add(False, keys, cols, -1.0, tol - gap)
            continue
        # |A x − target| ≤ τ_f: one τ entry per row (its key, the family's τ column).
        every = np.arange(gap.size)
        for sign in (1.0, -1.0):
            both = np.concatenate([keys, every])
            on = np.concatenate([cols, tau[family]])
            vals = np.concatenate([np.full(keys.size, sign), -np.ones(every.size)])
            rows.add(False, both, on, vals, sign * gap)


def build(
    batch: FamilyBatch, pass_queries: Sequence[int], bands: Sequence[Band], what: str = WHAT
) -> SparseModel:
    """The pass of every family of ``batch`` as one centred sparse QP (see the module doc)."""
    n = batch.n_cells
    fixed = _fixed_cells(batch)
    free = np.arange(batch.n_children * n) if fixed is None else np.flatnonzero(~fixed.reshape(-1))
    child, cell = np.divmod(free, n)
    x0 = _reference_point(batch, child, cell)
    n_free = free.size
    top = float(batch.weight.max()) if batch.weight.size else 0.0
    weight = batch.weight / top if top > 0 else batch.weight
    diag_x, lin_x = np.zeros(n_free), np.zeros(n_free)
    links = []  # (keys of the free cells, live keys, their residual targets, weights)
    for q in pass_queries:
        spec = batch.queries[q]
        w = weight[:, q]
        if not np.any(w > 0):
            continue
        if spec.is_detailed and np.array_equal(spec.cell_index, np.arange(n)):
            diag_x += 2.0 * w[child]
            lin_x += -2.0 * w[child] * (batch.noisy[q][child, cell] - x0)
            continue
        keys = child * spec.size + spec.cell_index[cell]
        measured = w[child] > 0
        live = np.unique(keys[measured])
        target = (
            batch.noisy[q].reshape(-1)[live]
            - _answers(batch.n_children * spec.size, keys, x0)[live]
        )
        links.append((keys, live, target, np.repeat(w, spec.size)[live]))
    n_r = sum(link[1].size for link in links)
    rows = _Rows(n_free + n_r)
    diag = np.concatenate([diag_x, np.zeros(n_r)])
    offset = n_free
    for keys, live, target, w in links:
        # r − A_q d = −(m̃ − A_q x0) for every live answer cell (one with a measured free cell).
        position = np.searchsorted(live, keys)
        on = (position < live.size) & (live[np.minimum(position, live.size - 1)] == keys)
        row_keys = np.concatenate([position[on], np.arange(live.size)])
        row_cols = np.concatenate([np.flatnonzero(on), offset + np.arange(live.size)])
        vals = np.concatenate([-np.ones(int(on.sum())), np.ones(live.size)])
        rows.add(True, row_keys, row_cols, vals, -target)
        diag[offset : offset + live.size] = 2.0 * w
        offset += live.size
    try:
        _constraints(batch, rows, child, cell, x0, bands)
    except _RowFails:
        raise TopDownInfeasible(describe_family_failure(batch, what, "infeasible")) from None
    a, b, n_eq = rows.matrices()
    lower = np.concatenate([-x0, np.full(n_r, -np.inf)])  # x = x0 + d ≥ 0
    c = np.concatenate([lin_x, np.zeros(n_r)])
    return SparseModel(sp.diags(diag, format="csc"), c, a, b, n_eq, lower, batch, what, x0, free)


def solve_clarabel(
    model: SparseModel,
    *,
    strict: bool = True,
    raise_on_failure: bool = True,
    reference: bool = False,
    settings: QPSettings = SETTINGS,
) -> np.ndarray | None:
    """Clarabel on ``model``: tight tolerances, then Clarabel's defaults as a retry (``strict``
    False: the defaults only; ``reference``: tighter still, for benchmarks). Raises
    :class:`TopDownInfeasible` naming the family when both fail (or returns ``None``)."""
    full = model.with_lower_rows()
    cones: list[object] = []
    if full.n_eq:
        cones.append(clarabel.ZeroConeT(full.n_eq))
    if full.b.size > full.n_eq:
        cones.append(clarabel.NonnegativeConeT(full.b.size - full.n_eq))
    status = ""
    for tight in (True, False) if strict else (False,):
        options = clarabel.DefaultSettings()
        options.verbose = False
        if tight:
            options.tol_gap_abs = 1e-11 if reference else 1e-9
            options.tol_gap_rel = 1e-12 if reference else 1e-10
            options.tol_feas = 1e-11 if reference else 1e-10
        options.max_iter = 400
        if full.p.shape[0] >= settings.faer_min_variables:
            options.direct_solve_method = "faer"
            # One thread: faer's parallel factorisation sums in an order that depends on the
            # thread count, so results would depend on the backend; one thread makes all agree.
            options.max_threads = 1
        solver = clarabel.DefaultSolver(
            sp.triu(full.p, format="csc"), full.c, full.a, full.b, cones, options
        )
        solution = solver.solve()
        status = str(solution.status)
        if status in ("Solved", "AlmostSolved"):
            return np.asarray(solution.x)
    if not raise_on_failure:
        return None
    raise TopDownInfeasible(describe_family_failure(model.batch, model.what, status))


def solve_piqp(model: SparseModel, settings: QPSettings = SETTINGS) -> np.ndarray | None:
    """PIQP (a proximal interior point, sparse KKT) on ``model``, the variables' lower bounds
    as bounds; ``None`` when it does not report the problem solved (the next route takes it)."""
    a = model.a.tocsr()
    n_eq = model.n_eq
    solver = piqp.SparseSolver()
    solver.settings.eps_abs = settings.piqp_eps_abs
    solver.settings.eps_rel = settings.piqp_eps_rel
    solver.settings.verbose = False
    solver.setup(
        sp.csc_matrix(model.p),
        model.c,
        sp.csc_matrix(a[:n_eq]),
        model.b[:n_eq],
        sp.csc_matrix(a[n_eq:]),
        None,
        model.b[n_eq:],
        model.lower,
        None,
    )
    if solver.solve() != piqp.PIQP_SOLVED:
        return None
    return np.asarray(solver.result.x)


def solve(
    batch: FamilyBatch,
    pass_queries: Sequence[int],
    bands: Sequence[Band],
    settings: QPSettings = SETTINGS,
) -> np.ndarray:
    """x ``(K, n_cells)`` of every family of ``batch`` by Clarabel on the general model."""
    model = build(batch, pass_queries, bands)
    return model.to_x(solve_clarabel(model, settings=settings))


def minimal_slack(batch: FamilyBatch, bands: Sequence[Band]) -> np.ndarray:
    """τ̂ of TDA eq. 7.6 for each family: the smallest τ with |B^(j)(x − x̃^(j))| ≤ τ for all j
    (an LP on the rows of eq. 7.5, in units of the problem's largest count)."""
    what = "minimal slack of earlier passes (TDA eq. 7.6)"
    scale = max(
        [1.0, *(float(np.abs(m).max()) for m in batch.noisy if m.size)]
        + ([float(np.abs(batch.parent).max())] if batch.parent is not None else [])
    )
    n = batch.n_cells
    fixed = _fixed_cells(batch)
    free = np.arange(batch.n_children * n) if fixed is None else np.flatnonzero(~fixed.reshape(-1))
    child, cell = np.divmod(free, n)
    scaled = replace(
        batch,
        parent=None if batch.parent is None else batch.parent / scale,
        invariant=tuple(None if t is None else t / scale for t in batch.invariant),
        bounds=tuple(bound.scaled(scale) for bound in batch.bounds),
        sums=tuple(replace(s, target=s.target / scale) for s in batch.sums),
    )
    scaled_bands = [Band(b.query, b.target / scale, b.tol / scale) for b in bands]
    tau = free.size + np.arange(batch.n_families)
    rows = _Rows(free.size + batch.n_families)
    try:
        _constraints(scaled, rows, child, cell, np.zeros(free.size), scaled_bands, tau)
    except _RowFails:
        raise TopDownInfeasible(describe_family_failure(batch, what, "infeasible")) from None
    a, b, n_eq = rows.matrices()
    total = free.size + batch.n_families
    lower = np.concatenate([np.zeros(free.size), np.full(batch.n_families, -np.inf)])
    c = np.concatenate([np.zeros(free.size), np.ones(batch.n_families)])
    model = SparseModel(
        sp.csc_matrix((total, total)), c, a, b, n_eq, lower, batch, what, np.zeros(0), free
    )
    raw = solve_clarabel(model)
    return scale * np.maximum(raw[free.size :], 0.0)
