"""Multi-pass controlled rounding to non-negative integers (TDA §7.1 eq. 7.3–7.4, §7.3 eq. 7.7).

Given the least-squares solution x̃ of a family, x̂ = ⌊x̃⌋ + y with y ∈ {0, 1}, such that the children
sum to the parent cell by cell, invariants hold, and — pass by pass along a nested chain of
marginals Q^(1) ⊂ … ⊂ Q^(K) = DETAILED (e.g. TOTAL → VOTINGAGE → DETAILED) — the L1 distance
1ᵀ|Q^(k)(x̃ − x̂)| is minimised while the answers Q^(j) x̂^(j) of earlier passes are frozen (eq. 7.7).

Each pass is a linear program over a totally unimodular constraint matrix: the "sum to the parent"
rows form one laminar family, the per-child marginals of a nested chain another, and the union of
two laminar families is a network matrix (TDA §7.3). The L1 objective on a marginal answer
v = Q x̂ (an integer) is replaced by its piecewise-linear interpolation at the integers, written with
unit segment variables v = Q⌊x̃⌋ + Σ_j s_j (0 ≤ s_j ≤ 1, segment j costing |L+j+1−a| − |L+j−a|),
which appends unit columns and keeps the matrix TUM and the objective exact at integer points. For
the DETAILED pass the cost is linear in y: |f − y| = f + (1 − 2f) y for y ∈ {0, 1}. A vertex solution
(HiGHS dual simplex) is therefore integral; we verify it and solve the same model as a MILP if not.

All families of a batch are one block-diagonal LP per pass, and only cells whose least-squares
value is fractional are variables (the others keep their value; x̃ itself lies in the restricted
polytope, so it stays non-empty and TUM): a family with nothing fractional has no variable and no
row. Each pass's matrix is built in one step from index arrays (no stacking of sparse blocks) and
handed to HiGHS directly through ``highspy`` (one solver object per batch, options set once) —
docs/topdown.md "Rounding" has the measurements against SciPy's ``linprog``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp

from engine.topdown import rounding_flow
from engine.topdown.family import FamilyBatch, QuerySpec
from engine.topdown.feasibility import TopDownInfeasible, describe_family_failure

INTEGRALITY_TOL = 1e-6
SNAP_TOL = 1e-6
ROW_TOL = 1e-9
"""A row without a free cell must already hold to this (its right-hand side is 0)."""


class _LPFailed(Exception):
    """The rounding LP (or MILP) reported no solution, or a row cannot hold."""


@dataclass
class _Rows:
    """A pass's constraints as triplets: (row, column, value), lower and upper bounds per row."""

    row: list[np.ndarray]
    col: list[np.ndarray]
    lower: list[np.ndarray]
    upper: list[np.ndarray]
    n: int = 0

    def add(self, row: np.ndarray, col: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        """Rows numbered ``row`` (0-based, dense) over columns ``col``, each with value 1."""
        self.row.append(row + self.n)
        self.col.append(col)
        self.lower.append(lower)
        self.upper.append(upper)
        self.n += lower.size

    def matrix(self, n_cols: int, extra: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None):
        rows = np.concatenate(self.row) if self.row else np.zeros(0, np.int64)
        cols = np.concatenate(self.col) if self.col else np.zeros(0, np.int64)
        vals = np.ones(rows.size)
        if extra is not None:
            rows = np.concatenate([rows, extra[0]])
            cols = np.concatenate([cols, extra[1]])
            vals = np.concatenate([vals, extra[2]])
        a = sp.csc_matrix((vals, (rows, cols)), shape=(self.n, n_cols))
        a.sum_duplicates()
        lower = np.concatenate(self.lower) if self.lower else np.zeros(0)
        upper = np.concatenate(self.upper) if self.upper else np.zeros(0)
        return a, lower, upper


def _grouped(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(dense row of each key, the distinct keys in order): rows of an equality family."""
    used, inverse = np.unique(keys, return_inverse=True)
    return inverse.reshape(-1), used


def _check_empty(rhs: np.ndarray, is_eq: bool, what: str) -> None:
    bad = np.abs(rhs) > ROW_TOL if is_eq else rhs < -ROW_TOL
    if np.any(bad):
        raise _LPFailed(f"{what} has no free cell left but is not yet met")


def _equality(rows: _Rows, keys: np.ndarray, all_rhs: np.ndarray, col: np.ndarray, what: str):
    """Equality rows Σ_{cols with key} y = rhs[key]; keys without a free column must have rhs 0."""
    row, used = _grouped(keys)
    rest = np.ones(all_rhs.size, dtype=bool)
    rest[used] = False
    _check_empty(all_rhs[rest], True, what)
    rhs = all_rhs[used]
    rows.add(row, col, rhs, rhs)


def _solve_lp(
    highs: highspy._Highs,
    cost: np.ndarray,
    a: sp.csc_matrix,
    lower: np.ndarray,
    upper: np.ndarray,
    n_int: int,
) -> tuple[np.ndarray, bool]:
    """min cᵀv, lower ≤ A v ≤ upper, 0 ≤ v ≤ 1 at a vertex (dual simplex); the MILP of the same
    model (the first ``n_int`` columns integer) when the vertex is not integral. Returns the
    solution and whether the MILP was needed."""
    lp = highspy.HighsLp()
    lp.num_col_ = cost.size
    lp.num_row_ = lower.size
    lp.col_cost_ = cost
    lp.col_lower_ = np.zeros(cost.size)
    lp.col_upper_ = np.ones(cost.size)
    lp.row_lower_ = np.where(np.isfinite(lower), lower, -highspy.kHighsInf)
    lp.row_upper_ = upper
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = a.indptr
    lp.a_matrix_.index_ = a.indices
    lp.a_matrix_.value_ = a.data
    highs.clearModel()
    highs.passModel(lp)
    highs.run()
    if highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        raise _LPFailed(highs.modelStatusToString(highs.getModelStatus()))
    v = np.asarray(highs.getSolution().col_value)
    if np.all(np.abs(v - np.round(v)) <= INTEGRALITY_TOL):
        return v, False
    lp.integrality_ = [highspy.HighsVarType.kInteger] * n_int + [
        highspy.HighsVarType.kContinuous
    ] * (cost.size - n_int)
    highs.clearModel()
    highs.passModel(lp)
    highs.run()
    if highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        raise _LPFailed(highs.modelStatusToString(highs.getModelStatus()))
    return np.asarray(highs.getSolution().col_value), True


def _solver() -> highspy._Highs:
    """A quiet HiGHS instance (``highspy._Highs``: the solver object itself, without the
    callback layer of ``highspy.Highs``, whose construction prints HiGHS's banner to stdout)
    set up as SciPy's ``linprog(method="highs-ds")``: dual simplex, presolve on."""
    highs = highspy._Highs()
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("solver", "simplex")
    highs.setOptionValue("simplex_strategy", 1)  # dual
    highs.setOptionValue("presolve", "off")
    return highs


def round_batch(
    batch: FamilyBatch, x_tilde: np.ndarray, chain: Sequence[QuerySpec]
) -> tuple[np.ndarray, int]:
    """Round ``x_tilde`` ``(K, n_cells)`` of every family (TDA eq. 7.7); returns int64 ``(K, n)``
    and the number of passes that needed the MILP (0 when every LP vertex was integral).

    Cells whose least-squares value is already an integer (within 1e-6; most block cells are 0)
    keep it. Should the restricted problem fail numerically, the full problem (every cell free
    to move up by one) is solved instead.
    """
    highs = _solver()
    try:
        return _round(highs, batch, x_tilde, chain, restrict=True)
    except _LPFailed:
        pass
    try:
        return _round(highs, batch, x_tilde, chain, restrict=False)
    except _LPFailed as exc:
        raise TopDownInfeasible(
            describe_family_failure(batch, "controlled rounding (TDA eq. 7.7)", str(exc))
        ) from None


def _fixed_rows(
    batch: FamilyBatch,
    n_cells: int,
    cols: np.ndarray,
    residual: np.ndarray | None,
    answers: Callable[[QuerySpec, bool], np.ndarray],
) -> _Rows:
    """The rows every pass shares: children sum to the parent, invariants, sums of siblings held
    and structural bounds, on the free cells ``cols`` (a row without a free cell must hold)."""
    child, cell = np.divmod(cols, n_cells)
    fixed = _Rows([], [], [], [])
    if residual is not None:
        keys = batch.child_family[child] * n_cells + cell
        _equality(fixed, keys, residual, np.arange(cols.size), "a parent cell")
    for q, target in enumerate(batch.invariant):
        if target is None or not np.isfinite(target).any():
            continue
        flat = target.reshape(-1)
        held = np.isfinite(flat)
        spec = batch.queries[q]
        rhs = np.where(held, flat - answers(spec, False).reshape(-1), 0.0)
        keys = child * spec.size + spec.cell_index[cell]
        on = held[keys]
        row, used = _grouped(keys[on])
        rest = held.copy()
        rest[used] = False
        _check_empty(rhs[rest], True, "an invariant")
        fixed.add(row, np.flatnonzero(on), rhs[used], rhs[used])
    for held_sum in batch.sums:  # a sum of siblings held exact (TDA §7.4)
        spec = batch.queries[held_sum.query]
        rhs = held_sum.target - answers(spec, False)[held_sum.rows].sum(axis=0)
        member = np.isin(child, held_sum.rows)
        row, used = _grouped(spec.cell_index[cell[member]])
        rest = np.ones(spec.size, dtype=bool)
        rest[used] = False
        _check_empty(rhs[rest], True, "a sum of siblings")
        fixed.add(row, np.flatnonzero(member), rhs[used], rhs[used])
    for bound in batch.bounds:  # structural bounds (TDA §5.3): lower ≤ Q(base + y) ≤ upper
        spec = bound.spec
        at_base = answers(spec, False).reshape(-1)
        upper = bound.upper.reshape(-1) - at_base
        lower = bound.lower.reshape(-1) - at_base
        row, used = _grouped(child * spec.size + spec.cell_index[cell])
        rest = np.ones(upper.size, dtype=bool)
        rest[used] = False
        _check_empty(np.nan_to_num(upper[rest], posinf=0.0), False, "a structural bound")
        _check_empty(np.nan_to_num(-lower[rest], posinf=0.0), False, "a structural bound")
        lo, up = lower[used], upper[used]
        live = np.isfinite(lo) | np.isfinite(up)
        keep = live[row]
        renumber = np.cumsum(live) - 1
        fixed.add(
            renumber[row[keep]],
            np.flatnonzero(keep),
            lo[live],
            np.where(np.isfinite(up[live]), up[live], highspy.kHighsInf),
        )
    return fixed


def _lp_pass(
    highs: highspy._Highs,
    fixed: _Rows,
    frozen: Sequence[tuple[np.ndarray, np.ndarray]],
    spec: QuerySpec,
    keys: np.ndarray,
    frac: np.ndarray,
    answers: Callable[[QuerySpec, bool], np.ndarray],
) -> tuple[np.ndarray, bool]:
    """One pass as an LP for HiGHS: (y on the free cells, whether the MILP was needed)."""
    n_free = frac.size
    rows = _Rows(list(fixed.row), list(fixed.col), list(fixed.lower), list(fixed.upper), fixed.n)
    for frozen_keys, rhs in frozen:
        row, used = _grouped(frozen_keys)
        rows.add(row, np.arange(n_free), rhs[used], rhs[used])
    if spec.is_detailed:
        a, lower, upper = rows.matrix(n_free)
        v, milp = _solve_lp(highs, 1.0 - 2.0 * frac, a, lower, upper, n_free)
        return np.round(v[:n_free]), milp
    group, used = _grouped(keys)
    lower_at = answers(spec, False).reshape(-1)[used]  # L per (child, answer cell)
    target = answers(spec, True).reshape(-1)[used]  # a = Q x̃
    count = np.bincount(group, minlength=used.size)  # free cells behind each answer
    owner = np.repeat(np.arange(used.size), count)
    step = np.arange(owner.size) - np.repeat(np.cumsum(count) - count, count)
    level = lower_at[owner] + step
    seg_cost = np.abs(level + 1 - target[owner]) - np.abs(level - target[owner])
    n_s = owner.size
    # Link rows: Q y − Σ segments = 0 for every (child, answer cell) with a free cell.
    first = rows.n
    rows.add(group, np.arange(n_free), np.zeros(used.size), np.zeros(used.size))
    a, lower, upper = rows.matrix(
        n_free + n_s, (first + owner, n_free + np.arange(n_s), -np.ones(n_s))
    )
    cost = np.concatenate([np.zeros(n_free), seg_cost])
    v, milp = _solve_lp(highs, cost, a, lower, upper, cost.size)
    return np.round(v[:n_free]), milp


def _round(
    highs: highspy._Highs,
    batch: FamilyBatch,
    x_tilde: np.ndarray,
    chain: Sequence[QuerySpec],
    *,
    restrict: bool,
) -> tuple[np.ndarray, int]:
    n_children, n_cells = x_tilde.shape
    flat = x_tilde.reshape(-1)
    # The cells that matter: x̃'s non-zero cells (the others are 0 and stay 0), or every cell.
    where = np.flatnonzero(flat > 0.0) if restrict else np.arange(flat.size)
    value = np.maximum(flat[where], 0.0)
    nearest = np.round(value)
    near = np.abs(value - nearest) <= SNAP_TOL
    base = np.where(near, nearest, np.floor(value))
    free = ~near if restrict else np.ones(where.size, dtype=bool)
    cols = where[free]
    frac = (value - base)[free]
    x_hat = np.zeros(flat.size, dtype=np.int64)
    x_hat[where] = base.astype(np.int64)
    if cols.size == 0:
        return x_hat.reshape(n_children, n_cells), 0
    child, cell = np.divmod(cols, n_cells)
    cache: dict[tuple[str, bool], np.ndarray] = {}

    def answers(spec: QuerySpec, tilde: bool) -> np.ndarray:
        """A marginal's answers ``(K, size)`` of ⌊x̃⌋ (or of x̃), from the non-zero cells."""
        key = (spec.name, tilde)
        if key not in cache:
            w_child, w_cell = np.divmod(where, n_cells)
            keys = w_child * spec.size + spec.cell_index[w_cell]
            weights = value if tilde else base
            cache[key] = np.bincount(
                keys, weights=weights, minlength=n_children * spec.size
            ).reshape(n_children, spec.size)
        return cache[key]

    residual = None
    if batch.parent is not None:
        w_child, w_cell = np.divmod(where, n_cells)
        placed = np.bincount(
            batch.child_family[w_child] * n_cells + w_cell,
            weights=base,
            minlength=batch.n_families * n_cells,
        )
        residual = batch.parent.reshape(-1) - placed
    net = rounding_flow.network_of(batch, chain) if restrict else None
    fixed: _Rows | None = None
    if net is not None:
        _bounds_hold(batch, child, cell, answers)
    fallbacks = 0
    frozen: list[tuple[np.ndarray, np.ndarray]] = []  # (keys of each free cell, their answers)
    y = np.zeros(cols.size)
    for k, spec in enumerate(chain):
        keys = child * spec.size + spec.cell_index[cell]
        flow = None
        if net is not None:
            flow = rounding_flow.solve_pass(
                net,
                batch,
                chain,
                k,
                child,
                cell,
                residual,
                answers,
                frac,
                frozen[-1][1] if frozen else None,
            )
        if flow is not None:
            y = flow
        else:
            if fixed is None:
                fixed = _fixed_rows(batch, n_cells, cols, residual, answers)
            y, milp = _lp_pass(highs, fixed, frozen, spec, keys, frac, answers)
            fallbacks += int(milp)
        if not spec.is_detailed:
            frozen.append((keys, np.bincount(keys, weights=y, minlength=n_children * spec.size)))
    x_hat[cols] += y.astype(np.int64)
    return x_hat.reshape(n_children, n_cells), fallbacks


def _bounds_hold(
    batch: FamilyBatch,
    child: np.ndarray,
    cell: np.ndarray,
    answers: Callable[[QuerySpec, bool], np.ndarray],
) -> None:
    """A structural bound over no free cell must already hold (the flow has no row for it)."""
    for bound in batch.bounds:
        spec = bound.spec
        at_base = answers(spec, False).reshape(-1)
        rest = np.ones(at_base.size, dtype=bool)
        rest[child * spec.size + spec.cell_index[cell]] = False
        over = np.nan_to_num(at_base[rest] - bound.upper.reshape(-1)[rest], nan=0.0, neginf=0.0)
        under = np.nan_to_num(bound.lower.reshape(-1)[rest] - at_base[rest], nan=0.0, neginf=0.0)
        if np.any(over > ROW_TOL) or np.any(under > ROW_TOL):
            raise _LPFailed("a structural bound has no free cell left but is not yet met")
