"""The general model of a least-squares pass: one sparse QP for any solver (TDA eq. 7.5–7.6).

Every family of a pass (TDA eq. 7.5) — the root, children with invariants or sums of siblings held
(TDA §7.4), any constraint — can be written as one sparse QP, block-diagonal over the families of a
batch: residual variables r = A_q x − m̃ (no dense Kronecker matrix, a diagonal P, no constant in the
objective), no variable for a cell that is empty in the parent or a structural zero, and centred on
a non-negative reference point x0 (a state's counts are ~10⁶ while its residuals are ~noise: in
d = x − x0 a solver's tolerances mean what they should). :func:`build` gives that model
(:class:`SparseModel`: P, c, A, b with the equality rows first); :func:`solve_clarabel` solves it
with Clarabel (cvxpy's default QP backend, called directly); :func:`minimal_slack` is the linear
program of TDA eq. 7.6 on the same rows. It is the route every family can take (``clarabel`` in
:mod:`.route`) and the model ``benchmarks/qp_solvers.py`` hands to the other well-kept solvers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import clarabel
import numpy as np
import scipy.sparse as sp

from engine.topdown.family import FamilyBatch, QuerySpec
from engine.topdown.feasibility import TopDownInfeasible, describe_family_failure
from engine.topdown.qp.problem import Band
from engine.topdown.qp.settings import SETTINGS, QPSettings

WHAT = "weighted least squares (TDA eq. 7.5)"


class _FixedRowViolated(Exception):
    """A constraint over variables fixed at 0 cannot hold (e.g. an invariant in an empty cell)."""


class _Builder:
    """Accumulate the rows of a Clarabel problem (zero cone first, then non-negative cone)."""

    def __init__(self, n_vars: int) -> None:
        self.n_vars = n_vars
        self.eq_blocks: list[sp.spmatrix] = []
        self.eq_rhs: list[np.ndarray] = []
        self.ineq_blocks: list[sp.spmatrix] = []
        self.ineq_rhs: list[np.ndarray] = []

    @staticmethod
    def _used(rows: sp.spmatrix, rhs: np.ndarray, is_eq: bool) -> tuple[sp.csr_matrix, np.ndarray]:
        """Drop rows without a variable (over cells fixed at 0); their rhs must already hold."""
        rows = sp.csr_matrix(rows)
        rhs = np.asarray(rhs, dtype=np.float64)
        used = np.diff(rows.indptr) > 0
        if used.all():
            return rows, rhs
        unused = rhs[~used]
        if np.any(np.abs(unused) > 1e-9 if is_eq else unused < -1e-9):
            raise _FixedRowViolated()
        return rows[used], rhs[used]

    def add_eq(self, rows: sp.spmatrix, rhs: np.ndarray) -> None:
        if rows.shape[0]:
            rows, rhs = self._used(rows, rhs, True)
            self.eq_blocks.append(rows)
            self.eq_rhs.append(rhs)

    def add_le(self, rows: sp.spmatrix, rhs: np.ndarray) -> None:
        if rows.shape[0]:
            rows, rhs = self._used(rows, rhs, False)
            self.ineq_blocks.append(rows)
            self.ineq_rhs.append(rhs)

    def matrices(self) -> tuple[sp.csc_matrix, np.ndarray, int]:
        """(A, b, number of equality rows): the equality rows, then the inequality rows."""
        parts = []
        for blocks, rhs in ((self.eq_blocks, self.eq_rhs), (self.ineq_blocks, self.ineq_rhs)):
            if not blocks:
                parts.append((sp.csr_matrix((0, self.n_vars)), np.zeros(0)))
                continue
            parts.append((sp.vstack(blocks, format="csr"), np.concatenate(rhs)))
        a = sp.vstack([parts[0][0], parts[1][0]], format="csc")
        b = np.concatenate([parts[0][1], parts[1][1]])
        return a, b, parts[0][0].shape[0]


def _pad(block: sp.spmatrix, left: int, total: int) -> sp.csr_matrix:
    """Place ``block`` at column offset ``left`` of a matrix with ``total`` columns."""
    block = sp.coo_matrix(block)
    return sp.csr_matrix((block.data, (block.row, block.col + left)), shape=(block.shape[0], total))


def _free_cells(batch: FamilyBatch, fixed: np.ndarray | None = None) -> np.ndarray:
    """Flat indices (child · n_cells + cell) of the x variables: every cell not ``fixed`` at 0."""
    n_x = batch.n_children * batch.n_cells
    if fixed is None:
        return np.arange(n_x)
    return np.flatnonzero(~np.asarray(fixed, dtype=bool).reshape(-1))


def _fixed_cells(batch: FamilyBatch) -> np.ndarray | None:
    """``(K, n_cells)`` cells that must be 0: empty in the parent, or structural zeros."""
    fixed = None if batch.parent is None else batch.parent[batch.child_family] <= 0
    zero = batch.structural_zero_cells()
    if zero is not None:
        fixed = zero if fixed is None else fixed | zero
    return fixed


def _stacked_free(spec: QuerySpec, n_children: int, n_cells: int, free: np.ndarray):
    """``kron(I_K, A_q)`` restricted to the columns ``free``, built directly (no Kronecker
    product over all K · n_cells columns: the family is built on the cells it can populate)."""
    child, cell = np.divmod(free, n_cells)
    rows = child * spec.size + spec.cell_index[cell]
    return sp.csr_matrix(
        (np.ones(free.size), (rows, np.arange(free.size))),
        shape=(n_children * spec.size, free.size),
    )


def _stacked_query(
    batch: FamilyBatch, q: int, rows: np.ndarray | None = None, free: np.ndarray | None = None
) -> sp.csr_matrix:
    """``kron(I_K, A_q)`` on the columns ``free`` (None: all) restricted to the answer rows
    ``rows`` (None: all)."""
    cols = np.arange(batch.n_children * batch.n_cells) if free is None else free
    full = _stacked_free(batch.queries[q], batch.n_children, batch.n_cells, cols)
    return full if rows is None else full[rows]


def _common_constraints(
    batch: FamilyBatch,
    builder: _Builder,
    free: np.ndarray,
    floor: np.ndarray | None = None,
) -> None:
    """Children sum to the parent; invariants; non-negativity (rows shared by eq. 7.5 and 7.6).

    The x variables are the cells ``free`` (flat indices; the others are 0).
    """
    n_cells, total = batch.n_cells, builder.n_vars
    n_free = free.size
    if batch.parent is not None:
        child, cell = np.divmod(free, n_cells)
        rows = sp.csr_matrix(
            (np.ones(n_free), (batch.child_family[child] * n_cells + cell, np.arange(n_free))),
            shape=(batch.n_families * n_cells, n_free),
        )
        builder.add_eq(_pad(rows, 0, total), batch.parent.reshape(-1).astype(np.float64))
    for q, target in enumerate(batch.invariant):
        if target is None:
            continue
        flat = target.reshape(-1)
        fixed = np.flatnonzero(np.isfinite(flat))
        if fixed.size:
            builder.add_eq(_pad(_stacked_query(batch, q, fixed, free), 0, total), flat[fixed])
    # Structural bounds (TDA §5.3): lower ≤ A_q x_c ≤ upper where finite.
    for bound in batch.bounds:
        stacked = _stacked_free(bound.spec, batch.n_children, n_cells, free)
        upper, lower = bound.upper.reshape(-1), bound.lower.reshape(-1)
        up = np.flatnonzero(np.isfinite(upper))
        low = np.flatnonzero(np.isfinite(lower))
        if up.size:
            builder.add_le(_pad(stacked[up], 0, total), upper[up])
        if low.size:
            builder.add_le(_pad(-stacked[low], 0, total), -lower[low])
    for held in batch.sums:  # a sum of siblings held exact (TDA §7.4: a split state's branches)
        held_rows = sp.csr_matrix(batch.sum_matrix(held))[:, free]
        builder.add_eq(_pad(held_rows, 0, total), held.target)
    # x ≥ floor (0, or −x0 for a problem centred at x0), written −x ≤ −floor.
    rhs = np.zeros(n_free) if floor is None else -floor.reshape(-1)[free]
    builder.add_le(_pad(-sp.identity(n_free, format="csr"), 0, total), rhs)


def _band_rows(
    batch: FamilyBatch,
    band: Band,
    builder: _Builder,
    tau_column: np.ndarray | None,
    free: np.ndarray,
) -> None:
    """|A_q x_c − target| ≤ tol (fixed slack) or ≤ τ_family (``tau_column`` given, eq. 7.6)."""
    stacked = _pad(_stacked_query(batch, band.query, None, free), 0, builder.n_vars)
    size = batch.queries[band.query].size
    target = band.target.reshape(-1)
    family_of_row = np.repeat(batch.child_family, size)
    if tau_column is None:
        tol = band.tol[family_of_row]
        builder.add_le(stacked, target + tol)
        builder.add_le(-stacked, -target + tol)
    else:
        tau = sp.csr_matrix(
            (np.ones(target.size), (np.arange(target.size), tau_column[family_of_row])),
            shape=(target.size, builder.n_vars),
        )
        builder.add_le(stacked - tau, target)
        builder.add_le(-stacked - tau, -target)


@dataclass(frozen=True)
class SparseModel:
    """min ½ vᵀPv + cᵀv  s.t.  A[:n_eq] v = b[:n_eq],  A[n_eq:] v ≤ b[n_eq:]  (v = [d on the free
    cells, residuals]); :meth:`to_x` maps a solution back to the histograms x = max(x0 + d, 0)."""

    p: sp.csc_matrix
    c: np.ndarray
    a: sp.csc_matrix
    b: np.ndarray
    n_eq: int
    batch: FamilyBatch
    what: str
    x0: np.ndarray | None = None
    free: np.ndarray | None = None

    def to_x(self, raw: np.ndarray) -> np.ndarray:
        """The histograms ``(K, n_cells)`` of a solution ``raw`` of the model."""
        k, n = self.batch.n_children, self.batch.n_cells
        x = np.zeros(k * n)
        x[self.free] = raw[: self.free.size]
        x = x.reshape(k, n)
        return x if self.x0 is None else np.maximum(self.x0 + x, 0.0)


def _model(
    p: sp.csc_matrix, c: np.ndarray, builder: _Builder, batch: FamilyBatch, what: str, **where
) -> SparseModel:
    a, b, n_eq = builder.matrices()
    return SparseModel(p, c, a, b, n_eq, batch, what, **where)


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
    cones: list[object] = []
    n_in = model.b.size - model.n_eq
    if model.n_eq:
        cones.append(clarabel.ZeroConeT(model.n_eq))
    if n_in:
        cones.append(clarabel.NonnegativeConeT(n_in))
    status = ""
    for tight in (True, False) if strict else (False,):
        options = clarabel.DefaultSettings()
        options.verbose = False
        if tight:
            options.tol_gap_abs = 1e-11 if reference else 1e-9
            options.tol_gap_rel = 1e-12 if reference else 1e-10
            options.tol_feas = 1e-11 if reference else 1e-10
        options.max_iter = 400
        if model.p.shape[0] >= settings.faer_min_variables:
            options.direct_solve_method = "faer"
            # One thread: faer's parallel factorisation sums in an order that depends on the
            # thread count, so the same family could round differently in a Spark worker
            # (OMP_NUM_THREADS=1) and in process; one thread makes every backend agree.
            options.max_threads = 1
        solver = clarabel.DefaultSolver(
            sp.triu(model.p, format="csc"), model.c, model.a, model.b, cones, options
        )
        solution = solver.solve()
        status = str(solution.status)
        if status in ("Solved", "AlmostSolved"):
            return np.asarray(solution.x)
    if not raise_on_failure:
        return None
    raise TopDownInfeasible(describe_family_failure(model.batch, model.what, status))


def _reference_point(batch: FamilyBatch) -> np.ndarray:
    """A non-negative point near the answer: the clipped noisy detailed cells, rescaled so the
    children sum to the parent (or, at the root, to an invariant total)."""
    n = batch.n_cells
    base = np.ones((batch.n_children, n))
    for q, spec in enumerate(batch.queries):
        if spec.is_detailed and np.any(batch.weight[:, q] > 0):
            measured = batch.weight[:, q] > 0
            base[measured] = np.maximum(batch.noisy[q][measured][:, spec.cell_index], 0.0) + 1e-3
    zero = batch.structural_zero_cells()
    if zero is not None:
        base[zero] = 0.0  # structural zeros stay 0 (x0 + d with d fixed at 0 there)
    if batch.parent is not None:
        sums = np.add.reduceat(base, batch.child_ptr[:-1], axis=0)
        safe = np.where(sums > 0, sums, 1.0)
        return base * (batch.parent / safe)[batch.child_family]
    for q, target in enumerate(batch.invariant):
        if target is not None and batch.queries[q].size == 1 and np.all(np.isfinite(target)):
            return base * (target[:, 0] / base.sum(axis=1))[:, None]
    return base


def _centred(
    batch: FamilyBatch, bands: Sequence[Band], x0: np.ndarray
) -> tuple[FamilyBatch, list[Band]]:
    """The problem in d = x − x0 (weights normalised to a largest of 1).

    Counts of a state are ~10⁶ while the residuals are ~noise; centring on x0 keeps the solver's
    variables at the scale of the noise, so its tolerances mean what they should. Shifting and
    scaling the objective by constants leaves the minimiser unchanged.
    """
    top = float(batch.weight.max()) if batch.weight.size else 0.0
    answers = [spec.answer(x0) for spec in batch.queries]
    centred = replace(
        batch,
        parent=(
            None
            if batch.parent is None
            else batch.parent - np.add.reduceat(x0, batch.child_ptr[:-1], axis=0)
        ),
        noisy=tuple(m - a for m, a in zip(batch.noisy, answers, strict=True)),
        weight=batch.weight / top if top > 0 else batch.weight,
        invariant=tuple(
            None if t is None else t - a for t, a in zip(batch.invariant, answers, strict=True)
        ),
        sums=tuple(
            replace(c, target=c.target - answers[c.query][c.rows].sum(axis=0)) for c in batch.sums
        ),
    )
    centred = replace(centred, bounds=tuple(b.shifted(b.spec.answer(x0)) for b in batch.bounds))
    centred_bands = [Band(b.query, b.target - answers[b.query], b.tol) for b in bands]
    return centred, centred_bands


def _scale_of(batch: FamilyBatch) -> float:
    """A count scale (the largest parent cell or noisy answer) to bring the problem to O(1)."""
    values = [np.abs(m).max() for m in batch.noisy if m.size]
    if batch.parent is not None and batch.parent.size:
        values.append(float(np.abs(batch.parent).max()))
    return max(1.0, *values) if values else 1.0


def _scaled(batch: FamilyBatch, scale: float) -> FamilyBatch:
    """The same problem in units of ``scale`` persons, weights normalised to a largest of 1.

    Both change the objective by a constant factor only, so the minimiser is the same.
    """
    top = float(batch.weight.max()) if batch.weight.size else 0.0
    return replace(
        batch,
        parent=None if batch.parent is None else batch.parent / scale,
        noisy=tuple(m / scale for m in batch.noisy),
        weight=batch.weight / top if top > 0 else batch.weight,
        invariant=tuple(None if t is None else t / scale for t in batch.invariant),
        bounds=tuple(b.scaled(scale) for b in batch.bounds),
        sums=tuple(replace(c, target=c.target / scale) for c in batch.sums),
    )


def _scaled_bands(bands: Sequence[Band], scale: float) -> list[Band]:
    return [Band(b.query, b.target / scale, b.tol / scale) for b in bands]


def _pass_model(
    batch: FamilyBatch,
    pass_queries: Sequence[int],
    bands: Sequence[Band],
    floor: np.ndarray | None = None,
    fixed: np.ndarray | None = None,
) -> SparseModel:
    """The pass as one sparse QP, built only on the cells the parent can populate.

    Cells fixed at 0 (``fixed``: empty in the parent, or structural zeros) get no variable. A
    DETAILED query (the identity) enters the objective directly on x (diagonal Hessian, linear
    term); every other query through residual variables r = A_q x − m̃, one per answer cell that
    involves a free cell (answers over fixed cells only are constants and are dropped). Compared
    with residuals for every answer cell this shrinks a block family of the 2,016-cell schema
    several-fold. Residual variables keep Clarabel's relative gap measured against the weighted
    residual itself (with z = A_q x the constant Σ w m̃² would dominate the objective).
    """
    n_cells, n_children = batch.n_cells, batch.n_children
    free = _free_cells(batch, fixed)
    n_free = free.size
    child, cell = np.divmod(free, n_cells)
    diag_x = np.zeros(n_free)
    lin_x = np.zeros(n_free)
    parts: list[tuple[int, sp.csr_matrix, np.ndarray]] = []  # (query, live rows, their index)
    n_r = 0
    for q in pass_queries:
        spec = batch.queries[q]
        w = batch.weight[:, q]
        if not np.any(w > 0):
            continue
        if spec.is_detailed and np.array_equal(spec.cell_index, np.arange(n_cells)):
            diag_x += 2.0 * w[child]
            lin_x += -2.0 * w[child] * batch.noisy[q][child, cell]
            continue
        stacked = _stacked_free(spec, n_children, n_cells, free)
        live = (np.diff(stacked.indptr) > 0) & np.repeat(w > 0, spec.size)
        rows = np.flatnonzero(live)
        parts.append((q, stacked[rows], rows))
        n_r += rows.size
    total = n_free + n_r
    builder = _Builder(total)
    diag = np.concatenate([diag_x, np.zeros(n_r)])
    offset = n_free
    for q, stacked, rows in parts:
        spec = batch.queries[q]
        w = np.repeat(batch.weight[:, q], spec.size)[rows]
        m = batch.noisy[q].reshape(-1)[rows]
        diag[offset : offset + rows.size] = 2.0 * w
        link = sp.hstack(
            [-stacked, sp.csr_matrix((rows.size, offset - n_free)), sp.identity(rows.size)],
            format="csr",
        )
        builder.add_eq(_pad(link, 0, total), -m)  # r − A_q x = −m̃
        offset += rows.size
    try:
        _common_constraints(batch, builder, free, floor)
        for band in bands:
            _band_rows(batch, band, builder, None, free)
    except _FixedRowViolated:
        raise TopDownInfeasible(describe_family_failure(batch, WHAT, "infeasible")) from None
    p = sp.diags(diag, format="csc")
    c = np.concatenate([lin_x, np.zeros(n_r)])
    return _model(p, c, builder, batch, WHAT, free=free)


def build(batch: FamilyBatch, pass_queries: Sequence[int], bands: Sequence[Band]) -> SparseModel:
    """The pass of every family of ``batch`` as one centred sparse QP (see the module doc)."""
    x0 = _reference_point(batch)
    centred, centred_bands = _centred(batch, bands, x0)
    model = _pass_model(centred, pass_queries, centred_bands, floor=-x0, fixed=_fixed_cells(batch))
    return replace(model, batch=batch, x0=x0)


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
    (solved in units of the problem's largest count, :func:`_scaled`)."""
    scale = _scale_of(batch)
    return scale * _slack_lp(_scaled(batch, scale), _scaled_bands(bands, scale))


def _slack_lp(batch: FamilyBatch, bands: Sequence[Band]) -> np.ndarray:
    free = _free_cells(batch, _fixed_cells(batch))
    n_x = free.size
    total = n_x + batch.n_families
    builder = _Builder(total)
    what = "minimal slack of earlier passes (TDA eq. 7.6)"
    try:
        _common_constraints(batch, builder, free)
        tau_column = n_x + np.arange(batch.n_families)
        for band in bands:
            _band_rows(batch, band, builder, tau_column, free)
    except _FixedRowViolated:
        raise TopDownInfeasible(describe_family_failure(batch, what, "infeasible")) from None
    c = np.concatenate([np.zeros(n_x), np.ones(batch.n_families)])
    p = sp.csc_matrix((total, total))
    raw = solve_clarabel(_model(p, c, builder, batch, what))
    return np.maximum(raw[n_x:], 0.0)
