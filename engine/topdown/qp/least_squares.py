"""Multi-pass non-negative weighted least squares for batches of families (TDA §7.1–7.2).

For each family (a fixed parent histogram x̂_γ and its children) pass k solves TDA eq. 7.5:

    min_x  Σ_children Σ_{q ∈ pass k} w_{c,q} ‖A_q x_c − m̃_{c,q}‖²
    s.t.   x ≥ 0;  Σ_c x_c = x̂_γ (children sum to the parent, cell by cell);
           A_q x_c = invariant answers (e.g. state totals);
           |B^(j) (x − x̃^(j))| ≤ τ̂^(j) + 0.1   for every earlier pass j,

with weights w = 1/σ² (inverse noise variances at the noise scale, see
:class:`engine.topdown.measure.Measurements`) and B^(j) the stacked query groups of pass j. The
slack τ̂^(j) is the smallest feasible one, eq. 7.6. For pass 1, x̃^(1) itself attains slack 0, so
τ̂^(1) = 0 exactly; for later passes we solve the linear program 7.6. The root problem (eq. 7.1) is
the same without the parent constraint. Production used pass 1 = TOTAL, pass 2 = every other query
(SPEC §4).

Solvers (all families of a batch at once; objectives checked against per-family cvxpy models in
the tests and in ``benchmarks/topdown.py``):

* a TOTAL-only pass has a closed form (water filling, :func:`_water_fill_totals`; under
  structural bounds water filling within each child's bounds and a proportional fit of the
  parent, verified, :mod:`engine.topdown.qp.total_pass`);
* small schemas (≤ 64 cells) with parents up to :data:`MAX_DENSE_COUNT` persons per cell use the
  batched interior point of :mod:`engine.topdown.qp.batched_qp` on groups of about
  :data:`DENSE_GROUP_CHILDREN` children;
* other families whose pass contains DETAILED: small ones (a tract's block groups) together, the
  batched interior point on the cells each parent populates (:mod:`engine.topdown.qp.family_batch`),
  larger ones by :mod:`engine.topdown.qp.family_admm` (ADMM with one factorisation shared by all
  children of a family, then an exact, verified polish), families of large children (a state's
  counties) by :mod:`engine.topdown.qp.family_projected_cg` (a guessed active set solved exactly by
  a projected-CG active-set polish, verified);
* everything else (the root, children with invariants, or a family a faster method does not
  finish) is one sparse QP for Clarabel (cvxpy's default QP
  backend, called directly): residual variables r = A_q x − m̃ so that no dense Kronecker matrix is
  formed and the objective has no constant; centred on a non-negative reference point so that the
  variables are at the scale of the noise; no variable for cells that are empty in the parent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import clarabel
import numpy as np
import scipy.sparse as sp

from engine.topdown.family import FamilyBatch, QuerySpec
from engine.topdown.feasibility import TopDownInfeasible, describe_family_failure
from engine.topdown.qp import family_admm, family_batch, family_projected_cg, total_pass
from engine.topdown.qp.batched_qp import MAX_DENSE_CELLS, FamilyQP, QPNotConverged, solve_family_qp
from engine.topdown.qp.problem import Band

MAX_DENSE_COUNT = 20_000.0
"""The batched interior point is used for parents up to this many persons in a cell (block groups,
tracts); larger parents (states, counties — few families) go to the centred Clarabel model, whose
variables stay at the scale of the noise."""

DENSE_GROUP_CHILDREN = 400
"""Families are handed to the batched interior point in groups of about this many children: the
iteration count is the worst family's, and small groups stay in cache (measured ~2× faster than
groups of ~3,800 children on RI block groups)."""

FAER_MIN_VARIABLES = 10_000
"""Problems with at least this many variables use Clarabel's supernodal ``faer`` factorisation
instead of QDLDL: a county→tracts family of the 2,016-cell schema (18,500 variables) solved in
8.6 s instead of 17.3 s (same objective to 1e-11); small block-group families are faster with
QDLDL (0.11 s vs 0.16 s). faer runs on one thread (``max_threads = 1``) so that results do not
depend on the machine's or the executor's thread count."""

PASS_TOLERANCE = 0.1
"""Added to the solved slack τ̂ when an earlier pass is held (SPEC §4: slack + 0.1)."""


@dataclass(frozen=True)
class PassSolution:
    """Solution of one pass: ``x`` ``(K, n_cells)`` and the objective of each family ``(F,)``."""

    x: np.ndarray
    objective: np.ndarray


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

    def matrices(self) -> tuple[sp.csc_matrix, np.ndarray, list[object]]:
        """(A, b, cones): the equality rows (zero cone), then the inequality rows."""
        parts = []
        for blocks, rhs in ((self.eq_blocks, self.eq_rhs), (self.ineq_blocks, self.ineq_rhs)):
            if not blocks:
                parts.append((sp.csr_matrix((0, self.n_vars)), np.zeros(0)))
                continue
            parts.append((sp.vstack(blocks, format="csr"), np.concatenate(rhs)))
        a = sp.vstack([parts[0][0], parts[1][0]], format="csc")
        b = np.concatenate([parts[0][1], parts[1][1]])
        n_eq = parts[0][0].shape[0]
        n_in = parts[1][0].shape[0]
        cones: list[object] = []
        if n_eq:
            cones.append(clarabel.ZeroConeT(n_eq))
        if n_in:
            cones.append(clarabel.NonnegativeConeT(n_in))
        return a, b, cones


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


def _kron_rows(spec: QuerySpec, n_children: int) -> sp.csr_matrix:
    """``kron(I_K, A_q)`` for query ``spec`` (all columns)."""
    return _stacked_free(spec, n_children, spec.n_cells, np.arange(n_children * spec.n_cells))


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
    # Structural bounds (TDA §5.3, SPEC §6): lower ≤ A_q x_c ≤ upper where finite.
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


def _solve(
    p: sp.csc_matrix, c: np.ndarray, builder: _Builder, batch: FamilyBatch, what: str
) -> np.ndarray:
    """Solve with Clarabel (tight tolerances, then Clarabel's defaults as a retry)."""
    a, b, cones = builder.matrices()
    status = ""
    for strict in (True, False):  # tight tolerances first, Clarabel's defaults as a retry
        settings = clarabel.DefaultSettings()
        settings.verbose = False
        if strict:
            settings.tol_gap_abs = 1e-9
            settings.tol_gap_rel = 1e-10
            settings.tol_feas = 1e-10
        settings.max_iter = 400
        if p.shape[0] >= FAER_MIN_VARIABLES:
            settings.direct_solve_method = "faer"
            # One thread: faer's parallel factorisation sums in an order that depends on the
            # thread count, so the same family could round differently in a Spark worker
            # (OMP_NUM_THREADS=1) and in process; one thread makes every backend agree.
            settings.max_threads = 1
        solver = clarabel.DefaultSolver(sp.triu(p, format="csc"), c, a, b, cones, settings)
        solution = solver.solve()
        status = str(solution.status)
        if status in ("Solved", "AlmostSolved"):
            break
    else:
        raise TopDownInfeasible(describe_family_failure(batch, what, status))
    return np.asarray(solution.x)


def _has_child_invariants(batch: FamilyBatch) -> bool:
    return bool(batch.sums) or any(t is not None and np.isfinite(t).any() for t in batch.invariant)


def solve_pass(
    batch: FamilyBatch,
    pass_queries: Sequence[int],
    bands: Sequence[Band] = (),
    *,
    method: str = "auto",
) -> PassSolution:
    """One least-squares pass (TDA eq. 7.5) for every family of ``batch`` at once.

    ``method``: ``"batched"`` (the structure-exploiting interior point of
    :mod:`engine.topdown.qp.batched_qp`; small schemas, no child invariants), ``"admm"`` (one shared
    factorisation per family, then a verified exact polish: :mod:`engine.topdown.qp.family_admm`;
    families it does not solve go to Clarabel), ``"small"`` (small families together by the
    batched interior point of :mod:`engine.topdown.qp.family_batch` on the cells each parent
    populates, the others as ``"admm"``), ``"clarabel"`` (sparse QP) or ``"auto"`` (batched for
    small schemas below :data:`MAX_DENSE_COUNT`, else ``"small"`` where ADMM applies, Clarabel
    otherwise or if a faster method does not reach its tolerance).
    """
    if method == "auto" and _is_total_only(batch, pass_queries, bands):
        x = _water_fill_totals(batch, pass_queries[0])
        return PassSolution(x=x, objective=family_objective(batch, x, pass_queries))
    if method == "auto" and total_pass.applies(batch, pass_queries, bands):
        x, solved = total_pass.solve_total_pass(batch, pass_queries[0])
        return _rest_by_clarabel(batch, pass_queries, bands, x, solved)
    usable = (
        batch.n_cells <= MAX_DENSE_CELLS
        and not _has_child_invariants(batch)
        and not batch.has_bounds
        and batch.parent is not None
        and float(np.abs(batch.parent).max(initial=0.0)) <= MAX_DENSE_COUNT
    )
    if method in ("admm", "small") or (
        method == "auto" and not usable and family_admm.covered(batch, pass_queries)
    ):
        return _solve_admm_or_clarabel(batch, pass_queries, bands, small=method != "admm")
    if method == "batched" or (method == "auto" and usable):
        x = np.zeros((batch.n_children, batch.n_cells))
        for families in _family_groups(batch, DENSE_GROUP_CHILDREN):
            rows = _child_rows(batch, families)
            group, group_bands = batch.subset(families), _subset_bands(batch, bands, families)
            try:
                problem = _dense_problem(group, pass_queries, group_bands)
                x[rows] = solve_family_qp(problem, tol=1e-8, accept=1e-8)
            except (QPNotConverged, np.linalg.LinAlgError):
                if method == "batched":
                    raise
                x[rows] = _solve_clarabel_centred(group, pass_queries, group_bands)
        return PassSolution(x=x, objective=family_objective(batch, x, pass_queries))
    x = _solve_clarabel_centred(batch, pass_queries, bands)
    return PassSolution(x=x, objective=family_objective(batch, x, pass_queries))


def _solve_admm_or_clarabel(
    batch: FamilyBatch, pass_queries: Sequence[int], bands: Sequence[Band], *, small: bool = True
) -> PassSolution:
    """Small families together by :mod:`engine.topdown.qp.family_batch` (one batched interior point
    per group; unless ``small`` is false), the others by :mod:`engine.topdown.qp.family_admm`
    (shared factorisation + verified polish), families of large children (a state's counties) by
    :mod:`engine.topdown.qp.family_projected_cg`; the families none solves go to the centred
    Clarabel model together."""
    if small:
        x, solved = family_batch.solve_small_families(batch, pass_queries, bands)
    else:
        x = np.zeros((batch.n_children, batch.n_cells))
        solved = np.zeros(batch.n_families, dtype=bool)
    if solved.any():
        rest = np.flatnonzero(~solved)
        if rest.size:
            rows = _child_rows(batch, rest)
            x[rows], solved[rest] = family_admm.solve_pass_admm(
                batch.subset(rest), pass_queries, _subset_bands(batch, bands, rest)
            )
    else:
        x, solved = family_admm.solve_pass_admm(batch, pass_queries, bands)
    family_projected_cg.solve_large_families(batch, pass_queries, bands, x, solved)
    return _rest_by_clarabel(batch, pass_queries, bands, x, solved)


def _rest_by_clarabel(
    batch: FamilyBatch,
    pass_queries: Sequence[int],
    bands: Sequence[Band],
    x: np.ndarray,
    solved: np.ndarray,
) -> PassSolution:
    """Fill the families a faster method left unsolved with the centred Clarabel model."""
    if not solved.all():
        rest = np.flatnonzero(~solved)
        rows = _child_rows(batch, rest)
        x[rows] = _solve_clarabel_centred(
            batch.subset(rest), pass_queries, _subset_bands(batch, bands, rest)
        )
    return PassSolution(x=x, objective=family_objective(batch, x, pass_queries))


def _solve_clarabel_centred(
    batch: FamilyBatch, pass_queries: Sequence[int], bands: Sequence[Band]
) -> np.ndarray:
    x0 = _reference_point(batch)
    centred, centred_bands = _centred(batch, bands, x0)
    fixed = _fixed_cells(batch)
    d = _solve_pass_clarabel(centred, pass_queries, centred_bands, floor=-x0, fixed=fixed)
    return np.maximum(x0 + d, 0.0)


def _family_groups(batch: FamilyBatch, max_children: int) -> list[np.ndarray]:
    """Consecutive families in groups of at most ``max_children`` children (at least one family)."""
    groups: list[np.ndarray] = []
    start, count = 0, 0
    sizes = np.diff(batch.child_ptr)
    for f, size in enumerate(sizes):
        if count and count + size > max_children:
            groups.append(np.arange(start, f))
            start, count = f, 0
        count += int(size)
    if start < sizes.size:
        groups.append(np.arange(start, sizes.size))
    return groups


def _child_rows(batch: FamilyBatch, families: np.ndarray) -> np.ndarray:
    return np.concatenate([np.arange(batch.child_ptr[f], batch.child_ptr[f + 1]) for f in families])


def _subset_bands(batch: FamilyBatch, bands: Sequence[Band], families: np.ndarray) -> list[Band]:
    rows = _child_rows(batch, families)
    return [Band(b.query, b.target[rows], b.tol[families]) for b in bands]


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


def _is_total_only(batch: FamilyBatch, pass_queries: Sequence[int], bands: Sequence[Band]) -> bool:
    """A first pass on the total alone, every child measured, no invariants below the parent."""
    return (
        batch.parent is not None
        and len(pass_queries) == 1
        and batch.queries[pass_queries[0]].size == 1
        and not bands
        and not _has_child_invariants(batch)
        and not batch.has_bounds
        and bool(np.all(batch.weight[:, pass_queries[0]] > 0))
    )


def _water_fill_totals(batch: FamilyBatch, q: int) -> np.ndarray:
    """Closed form of a TOTAL-only pass: min Σ_c w_c (t_c − m_c)² s.t. Σ_c t_c = P, t ≥ 0.

    KKT: t_c = max(0, m_c − λ/(2 w_c)) with λ chosen so the totals sum to the parent's P (found by
    vectorised bisection on the monotone sum, then solved exactly on the final support). Any x_c ≥ 0
    with 1ᵀx_c = t_c and Σ_c x_c = x̂_γ is optimal; we take x_c = t_c · x̂_γ / P.
    """
    w = batch.weight[:, q]
    m = batch.noisy[q][:, 0]
    fam = batch.child_family
    total = batch.parent.sum(axis=1).astype(np.float64)
    starts = batch.child_ptr[:-1]
    lo = np.minimum.reduceat(2.0 * w * (m - total[fam]), starts) - 1.0  # Σ t ≥ P
    hi = np.maximum.reduceat(2.0 * w * m, starts) + 1.0  # Σ t = 0 ≤ P
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        sums = np.add.reduceat(np.maximum(0.0, m - mid[fam] / (2.0 * w)), starts)
        above = sums > total
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    lam = 0.5 * (lo + hi)
    support = (m - lam[fam] / (2.0 * w)) > 0
    num = np.add.reduceat(np.where(support, m, 0.0), starts) - total
    den = np.add.reduceat(np.where(support, 1.0 / (2.0 * w), 0.0), starts)
    lam = np.where(den > 0, num / np.where(den > 0, den, 1.0), lam)
    t = np.maximum(0.0, m - lam[fam] / (2.0 * w))
    share = t / np.where(total[fam] > 0, total[fam], 1.0)
    return share[:, None] * batch.parent[fam]


def _dense_problem(
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


def _solve_pass_clarabel(
    batch: FamilyBatch,
    pass_queries: Sequence[int],
    bands: Sequence[Band],
    floor: np.ndarray | None = None,
    fixed: np.ndarray | None = None,
) -> np.ndarray:
    """The pass as one sparse QP for Clarabel, built only on the cells the parent can populate.

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
        what = "weighted least squares (TDA eq. 7.5)"
        raise TopDownInfeasible(describe_family_failure(batch, what, "infeasible")) from None
    p = sp.diags(diag, format="csc")
    c = np.concatenate([lin_x, np.zeros(n_r)])
    raw = _solve(p, c, builder, batch, "weighted least squares (TDA eq. 7.5)")
    x = np.zeros(n_children * n_cells)
    x[free] = raw[:n_free]
    return x.reshape(n_children, n_cells)


def _partition_answer(spec: QuerySpec, x: np.ndarray) -> np.ndarray:
    """``spec.answer(x)`` summed over the columns of ``x`` that hold a non-zero (sorted by answer
    cell, summed in runs): no sparse matrix, and a block family's x̃ is non-zero on a few dozen of
    the 2,016 cells (building and multiplying the matrix took a quarter of a block batch's least
    squares)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros((x.shape[0], spec.size))
    cols = np.flatnonzero(np.any(x != 0.0, axis=0))
    if cols.size == 0:
        return out
    labels = spec.cell_index[cols]
    order = np.argsort(labels, kind="stable")
    labels = labels[order]
    starts = np.flatnonzero(np.concatenate([[True], labels[1:] != labels[:-1]]))
    out[:, labels[starts]] = np.add.reduceat(x[:, cols[order]], starts, axis=1)
    return out


def family_objective(batch: FamilyBatch, x: np.ndarray, pass_queries: Sequence[int]) -> np.ndarray:
    """Σ_c Σ_q w_{c,q} ‖A_q x_c − m̃_{c,q}‖² of each family (the objective of eq. 7.5)."""
    per_child = np.zeros(batch.n_children)
    for q in pass_queries:
        w = batch.weight[:, q]
        if not np.any(w > 0):
            continue
        resid = _partition_answer(batch.queries[q], x) - batch.noisy[q]
        per_child += w * np.sum(resid**2, axis=1)
    return np.bincount(batch.child_family, weights=per_child, minlength=batch.n_families)


def minimal_slack(batch: FamilyBatch, bands: Sequence[Band]) -> np.ndarray:
    """τ̂ of TDA eq. 7.6 for each family: the smallest τ with |B^(j)(x − x̃^(j))| ≤ τ for all j."""
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
    raw = _solve(p, c, builder, batch, what)
    return np.maximum(raw[n_x:], 0.0)


def multipass_least_squares(
    batch: FamilyBatch, passes: Sequence[Sequence[int]], *, method: str = "auto"
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Run the passes of TDA eq. 7.5–7.6; return x̃^(K) ``(K, n_cells)`` and each pass's objective.

    Passes whose queries have no noisy answers in this batch are skipped; ``method`` is handed to
    :func:`solve_pass`. The answers of every
    earlier pass are held within τ̂ + 0.1 (τ̂ from eq. 7.6; 0 for the first pass, which attains it).
    """
    held: list[list[Band]] = []  # bands of each solved pass, in order
    x: np.ndarray | None = None
    objectives: list[np.ndarray] = []
    for pass_queries in passes:
        measured = [q for q in pass_queries if np.any(batch.weight[:, q] > 0)]
        if not measured:
            continue
        if len(held) >= 2:
            # τ̂ of the latest pass from eq. 7.6 (over all passes so far); pass 1's is 0.
            exact = [Band(b.query, b.target, np.zeros(batch.n_families)) for p in held for b in p]
            scale = _scale_of(batch)
            tau = scale * minimal_slack(_scaled(batch, scale), _scaled_bands(exact, scale))
            held[-1] = [Band(b.query, b.target, tau + PASS_TOLERANCE) for b in held[-1]]
        solution = solve_pass(batch, measured, [b for p in held for b in p], method=method)
        x = solution.x
        objectives.append(solution.objective)
        held.append(
            [
                Band(q, batch.queries[q].answer(x), np.full(batch.n_families, PASS_TOLERANCE))
                for q in measured
            ]
        )
    if x is None:
        x = _split_parent_evenly(batch)
    return x, objectives


def _split_parent_evenly(batch: FamilyBatch) -> np.ndarray:
    """Without any noisy answer the children share the parent equally (any split is optimal)."""
    if batch.parent is None:
        raise TopDownInfeasible(
            "the root geounit has no noisy measurement and no invariant to estimate it from; "
            "give its level a positive share"
        )
    sizes = np.diff(batch.child_ptr)
    return batch.parent[batch.child_family] / sizes[batch.child_family, None]
