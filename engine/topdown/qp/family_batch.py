"""Many small families of one least-squares pass solved together (TDA §7.1–7.2, eq. 7.5; SPEC §4,
§6).

A tract's block groups (2–8 children, a few dozen cells the tract populates) are tiny problems:
solved one at a time (:mod:`engine.topdown.qp.family_admm`) each pays milliseconds of Python fixed
costs — more than its arithmetic. Here every small family of a batch is reduced to the ``n_f``
cells its parent can populate, the families are sorted by ``n_f`` and padded to a common size
(padding cells are empty in the parent, hence held at 0), and each group is ONE call of the batched
primal–dual interior point of :mod:`engine.topdown.qp.batched_qp` (Mehrotra predictor–corrector with
one small dense Newton system per child and one Schur complement per family, vectorised over all
children of the group; Nocedal & Wright §16.6), followed by its exact active-set polish, which
verifies each family's KKT conditions. The constraints are those of the general model: x ≥ 0 on
the cells the parent populates (0 elsewhere), structural zeros held at 0, the structural bounds of
:class:`~engine.topdown.family.ChildBounds` (GQ lower bounds) and the bands that hold earlier
passes, per child as rows ``lo ≤ B_f x_c ≤ hi``; Σ_c x_c = parent, cell by cell.

Families are grouped by the batch's content only (never by the worker that runs it), and a
family's numbers depend only on the families it is grouped with, so results are identical for any
number of workers. A family whose group does not reach the interior point's tolerance is left to
the caller (ADMM, then Clarabel).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from engine.core.blas_threads import single_blas_thread
from engine.topdown.family import FamilyBatch
from engine.topdown.qp.batched_qp import FamilyQP, solve_verified
from engine.topdown.qp.family_admm import FamilyNotSolved, cell_rows, covered

if TYPE_CHECKING:
    from engine.topdown.qp.problem import Band

SMALL_FAMILY_VARIABLES = 1_000
"""A family is small when (children × cells its parent populates) is at most this: a tract's
block groups (at 1M persons 2–8 children, 16–110 cells, at most ≈ 450 variables)."""

MAX_CHILDREN = 8
"""A small family has at most this many children: the interior point inverts one Newton matrix
per child per iteration, while ADMM factorises once per family, so families of many children
(a block group's 20–50 blocks) stay with ADMM (measured: the batched path took 7.5 ms per block
family at 1e5 persons against ADMM's 5.2 ms)."""

MAX_PARENT_COUNT = 20_000.0
"""Families whose parent holds more persons than this in a cell are left to the other solvers
(the interior point works on raw counts; the same limit as the small-schema batched path)."""

GROUP_CHILDREN = 128
"""Children per interior-point call at most (families sorted by size; the iteration count is the
group's worst family, and the Newton matrices are padded to the group's largest family)."""

GROUP_SPREAD = 1.25
"""A group's largest family has at most this many times the cells of its smallest: the Newton
matrices cost (children × cells³) and are padded to the largest (one group of a whole batch, padded
to its one 110-cell family, spent 4/5 of its time inverting padding)."""

HELD_PASSES_ONLY = True
"""Take only passes that hold an earlier pass (bands: the second pass of a tract's block groups).
Without bands — the single pass of a small block group's blocks — ADMM was as fast or faster
(1e5 persons, the 5 block families of ≤ 8 blocks: 3.0 ms per family against 3.1–4.1 ms, CPU);
with the TOTAL band of every child active, ADMM's polish needs several attempts (the rows repeat
the coupling) and the batched path is twice as fast."""

POLISH_FROM = 1e-3
"""Interior-point accuracy from which every iterate is polished (exact active-set solve, then
active-set corrections); a verified family leaves the iteration."""

POLISH_STEPS = 3
"""Active-set steps per polish. On the 205 block-group families of the generated 1M-person RI,
polishing from 1e-3 with 3 steps took 5.9–6.1 ms per family (CPU) against 6.7–6.8 ms from 1e-5
with the interior point's guess alone, and verified every family (one more than the latter);
the objectives agree to 1e-15 (and with a per-family cvxpy model)."""

IPM_TOLERANCE = 1e-9
"""Relative duality gap and feasibility the interior point stops at (then polishes exactly)."""


@dataclass(frozen=True)
class _Small:
    """One family's pass on the ``n`` cells its parent can populate (weights ÷ the largest)."""

    rows: np.ndarray  # (k,) child rows of the batch
    cells: np.ndarray  # (n,) schema cells
    hess: np.ndarray  # (k, n, n)
    grad: np.ndarray  # (k, n)
    constant: np.ndarray  # (k,)
    parent: np.ndarray  # (n,)
    zero: np.ndarray  # (k, n) structural zeros
    b: np.ndarray  # (m, n)
    lo: np.ndarray  # (k, m)
    hi: np.ndarray  # (k, m)


def small_families(batch: FamilyBatch, settings=None) -> np.ndarray:
    """``(F,)`` bool: the families this module takes (see :data:`SMALL_FAMILY_VARIABLES`)."""
    if batch.parent is None:
        return np.zeros(batch.n_families, dtype=bool)
    populated = np.count_nonzero(batch.parent > 0, axis=1)
    sizes = np.diff(batch.child_ptr)
    return (
        (sizes >= 2)
        & (sizes <= MAX_CHILDREN)
        & (populated > 0)
        & (sizes * populated <= SMALL_FAMILY_VARIABLES)
        & (batch.parent.max(axis=1, initial=0.0) <= MAX_PARENT_COUNT)
    )


def _reduce(
    batch: FamilyBatch,
    f: int,
    pass_queries: Sequence[int],
    bands: Sequence[Band],
    zero_cells: Sequence[np.ndarray] | None = None,
    squares: dict[int, np.ndarray] | None = None,
) -> _Small | None:
    """Family ``f`` on its parent's populated cells, or ``None`` when a constraint over cells it
    cannot populate fails (left to the general model, which reports the infeasibility).
    ``zero_cells``: each bound's :meth:`~engine.topdown.family.ChildBounds.zero_cells` for the
    whole batch, and ``squares``: Σ m̃² per child of each pass query (:func:`_squares`), both
    computed once by the caller."""
    lo, hi = int(batch.child_ptr[f]), int(batch.child_ptr[f + 1])
    parent = batch.parent[f]
    cells = np.flatnonzero(parent > 0)
    n, k = cells.size, hi - lo
    weights = batch.weight[lo:hi]
    queries = np.asarray(pass_queries)
    pass_weights = weights[:, queries]
    used = queries[np.any(pass_weights > 0, axis=0)]
    w = pass_weights[:, np.any(pass_weights > 0, axis=0)] / float(pass_weights.max())
    labels = np.stack([batch.queries[q].cell_index[cells] for q in used])  # (queries, n)
    # H_c = 2 Σ_q w_cq A_qᵀA_q on these cells: A_qᵀA_q is 1 where two cells share q's answer
    # cell (the identity for the detailed query) — all queries and children in one product.
    same = (labels[:, :, None] == labels[:, None, :]).reshape(len(used), n * n)
    hess = (2.0 * w @ same).reshape(k, n, n)
    grad = np.zeros((k, n))
    constant = np.zeros(k)
    if squares is None:
        squares = _squares(batch, used)
    for j, q in enumerate(used):
        grad -= 2.0 * w[:, j, None] * batch.noisy[q][lo:hi][:, labels[j]]
        constant += w[:, j] * squares[int(q)][lo:hi]
    try:
        con = cell_rows(batch, f, cells, bands, zero_cells)
    except FamilyNotSolved:
        return None  # left to the general model, which reports the infeasibility
    bound_rows = slice(0, con.n_bound_rows)
    lower = con.lower.copy()
    lower[:, bound_rows] = np.where(lower[:, bound_rows] > 0, lower[:, bound_rows], -np.inf)
    return _Small(
        rows=np.arange(lo, hi),
        cells=cells,
        hess=hess,
        grad=grad,
        constant=constant,
        parent=parent[cells].astype(np.float64),
        zero=con.zero,
        b=con.rows,
        lo=lower,  # a bound's lower 0 is held by x ≥ 0 already
        hi=con.upper,
    )


def _squares(batch: FamilyBatch, queries: Sequence[int]) -> dict[int, np.ndarray]:
    """Σ m̃² of each child's noisy answers to each of ``queries`` (the objective's constant)."""
    return {int(q): np.einsum("ij,ij->i", batch.noisy[q], batch.noisy[q]) for q in queries}


def _group_problem(group: Sequence[_Small]) -> FamilyQP:
    """The families of ``group`` padded to common sizes as one :class:`FamilyQP`."""
    n = max(s.cells.size for s in group)
    m = max(s.b.shape[0] for s in group)
    k = sum(s.rows.size for s in group)
    hess = np.zeros((k, n, n))
    grad = np.zeros((k, n))
    fixed = np.zeros((k, n), dtype=bool)
    b = np.zeros((k, m, n))
    lo = np.full((k, m), -np.inf)
    hi = np.full((k, m), np.inf)
    parent = np.zeros((len(group), n))
    family = np.repeat(np.arange(len(group)), [s.rows.size for s in group])
    constant = np.concatenate([s.constant for s in group])
    start = 0
    for f, s in enumerate(group):
        size, cells, rows = s.rows.size, s.cells.size, s.b.shape[0]
        part = slice(start, start + size)
        hess[part, :cells, :cells] = s.hess
        grad[part, :cells] = s.grad
        fixed[part, :cells] = s.zero
        b[part, :rows, :cells] = s.b[None]
        lo[part, :rows] = s.lo
        hi[part, :rows] = s.hi
        parent[f, :cells] = s.parent
        start += size
    return FamilyQP(
        H=hess,
        g=grad,
        family=family,
        parent=parent,
        B=b,
        lo=lo,
        hi=hi,
        constant=constant,
        fixed=fixed,
    )


def _groups(reduced: Sequence[_Small]) -> list[list[int]]:
    """Positions in ``reduced``, sorted by size (cells, then children; stable), cut into groups of
    at most :data:`GROUP_CHILDREN` children whose cells differ by at most :data:`GROUP_SPREAD`."""
    order = sorted(range(len(reduced)), key=lambda i: (reduced[i].cells.size, reduced[i].rows.size))
    groups: list[list[int]] = []
    count = smallest = 0
    for i in order:
        size, cells = reduced[i].rows.size, reduced[i].cells.size
        if groups and count + size <= GROUP_CHILDREN and cells <= GROUP_SPREAD * smallest:
            groups[-1].append(i)
            count += size
        else:
            groups.append([i])
            count, smallest = size, cells
    return groups


def solve_small_families(
    batch: FamilyBatch, pass_queries: Sequence[int], bands: Sequence[Band], settings=None
) -> tuple[np.ndarray, np.ndarray]:
    """The small families of ``batch`` (:func:`small_families`) for one pass: (x ``(K, n_cells)``,
    solved ``(F,)``); rows of families not solved are 0 (the caller solves them otherwise)."""
    x = np.zeros((batch.n_children, batch.n_cells))
    solved = np.zeros(batch.n_families, dtype=bool)
    if not covered(batch, pass_queries) or (HELD_PASSES_ONLY and not bands):
        return x, solved
    candidates = np.flatnonzero(small_families(batch))
    reduced: list[_Small] = []
    families: list[int] = []
    zero_cells = [bound.zero_cells() for bound in batch.bounds]
    squares = _squares(batch, pass_queries)
    for f in candidates:
        small = _reduce(batch, int(f), pass_queries, bands, zero_cells, squares)
        if small is not None:
            reduced.append(small)
            families.append(int(f))
    with single_blas_thread():  # small dense algebra; results independent of the thread count
        for group in _groups(reduced):
            members = [reduced[i] for i in group]
            try:
                values, verified = solve_verified(
                    _group_problem(members),
                    tol=IPM_TOLERANCE,
                    polish_from=POLISH_FROM,
                    polish_steps=POLISH_STEPS,
                )
            except np.linalg.LinAlgError:
                continue
            start = 0
            for i, s, ok in zip(group, members, verified, strict=True):
                size = s.rows.size
                if ok:  # verified exact by the polish; the others go to ADMM
                    x[np.ix_(s.rows, s.cells)] = values[start : start + size, : s.cells.size]
                    solved[families[i]] = True
                start += size
    return x, solved
