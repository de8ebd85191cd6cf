"""Many small families of one least-squares pass solved together (TDA §7.1–7.2, eq. 7.5).

A tract's block groups (2–8 children, a few dozen cells the tract populates) are tiny problems:
solved one at a time (:mod:`engine.topdown.qp.family_admm`) each pays milliseconds of Python fixed
costs — more than its arithmetic. Here every small family of a batch is reduced to the ``n_f``
cells its parent can populate, the families are sorted by ``n_f`` and padded to a common size
(padding cells are empty in the parent, hence held at 0), and each group is ONE call of the batched
primal–dual interior point of :mod:`engine.topdown.qp.interior_point` (Mehrotra predictor–corrector with
one small dense Newton system per child and one Schur complement per family, vectorised over all
children of the group; Nocedal & Wright §16.6), followed by its exact active-set polish, which
verifies each family's KKT conditions. The constraints are those of the general model: x ≥ 0 on
the cells the parent populates (0 elsewhere), structural zeros held at 0, the structural bounds of
:class:`~engine.topdown.family.ChildBounds` (GQ lower bounds) and the bands that hold earlier
passes, per child as rows ``lo ≤ B_f x_c ≤ hi``; Σ_c x_c = parent, cell by cell.

Families are grouped by the batch's content only (never by the worker that runs it), and a
family's numbers depend only on the families it is grouped with, so results are identical for any
number of workers. A family whose group does not reach the interior point's tolerance is left to
the caller (the next route).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.core.blas_threads import single_blas_thread
from engine.topdown.family import FamilyBatch
from engine.topdown.qp.interior_point import FamilyQP, solve_verified
from engine.topdown.qp.problem import Band, Family, FamilyNotSolved, reduce
from engine.topdown.qp.settings import SETTINGS, QPSettings


def small_families(batch: FamilyBatch, s: QPSettings = SETTINGS) -> np.ndarray:
    """``(F,)`` bool: the small families (2 to ``small_max_children`` children, at most
    ``small_max_variables`` child × populated-cell variables, parents of at most
    ``dense_max_count`` persons a cell: the interior point works on raw counts)."""
    if batch.parent is None:
        return np.zeros(batch.n_families, dtype=bool)
    populated = np.count_nonzero(batch.parent > 0, axis=1)
    sizes = np.diff(batch.child_ptr)
    return (
        (sizes >= 2)
        & (sizes <= s.small_max_children)
        & (populated > 0)
        & (sizes * populated <= s.small_max_variables)
        & (batch.parent.max(axis=1, initial=0.0) <= s.dense_max_count)
    )


def _group_problem(group: Sequence[Family]) -> FamilyQP:
    """The families of ``group`` padded to common sizes as one :class:`FamilyQP` (padding cells
    are empty in the parent, hence held at 0; a bound row's lower 0 is held by x ≥ 0 already)."""
    n = max(f.cells.size for f in group)
    m = max(f.rows.shape[0] for f in group)
    k = sum(f.children.size for f in group)
    hess = np.zeros((k, n, n))
    grad = np.zeros((k, n))
    fixed = np.zeros((k, n), dtype=bool)
    b = np.zeros((k, m, n))
    lo = np.full((k, m), -np.inf)
    hi = np.full((k, m), np.inf)
    parent = np.zeros((len(group), n))
    family = np.repeat(np.arange(len(group)), [f.children.size for f in group])
    constant = np.concatenate([f.constant for f in group])
    start = 0
    for i, fam in enumerate(group):
        size, cells, rows = fam.children.size, fam.cells.size, fam.rows.shape[0]
        part = slice(start, start + size)
        lower = fam.lower.copy()
        bound = lower[:, : fam.n_bound_rows]
        lower[:, : fam.n_bound_rows] = np.where(bound > 0, bound, -np.inf)
        hess[part, :cells, :cells] = fam.hess
        grad[part, :cells] = fam.grad
        fixed[part, :cells] = fam.zero
        b[part, :rows, :cells] = fam.rows[None]
        lo[part, :rows] = lower
        hi[part, :rows] = fam.upper
        parent[i, :cells] = fam.parent
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


def _groups(reduced: Sequence[Family], s: QPSettings) -> list[list[int]]:
    """Positions in ``reduced``, sorted by size (cells, then children; stable), cut into groups of
    at most ``small_group_children`` children whose cells differ by ``small_group_spread`` at most."""
    order = sorted(
        range(len(reduced)), key=lambda i: (reduced[i].cells.size, reduced[i].children.size)
    )
    groups: list[list[int]] = []
    count = smallest = 0
    for i in order:
        size, cells = reduced[i].children.size, reduced[i].cells.size
        if (
            groups
            and count + size <= s.small_group_children
            and cells <= s.small_group_spread * smallest
        ):
            groups[-1].append(i)
            count += size
        else:
            groups.append([i])
            count, smallest = size, cells
    return groups


def solve_small_families(
    batch: FamilyBatch,
    pass_queries: Sequence[int],
    bands: Sequence[Band],
    s: QPSettings = SETTINGS,
) -> tuple[np.ndarray, np.ndarray]:
    """Every family of ``batch`` (small ones: the route's predicate chose them) for one pass:
    (x ``(K, n_cells)``, solved ``(F,)``); rows of families not verified are 0 ("not mine")."""
    x = np.zeros((batch.n_children, batch.n_cells))
    solved = np.zeros(batch.n_families, dtype=bool)
    reduced: list[Family] = []
    families: list[int] = []
    zero_cells = [bound.zero_cells() for bound in batch.bounds]
    squares = {int(q): np.einsum("ij,ij->i", batch.noisy[q], batch.noisy[q]) for q in pass_queries}
    for f in range(batch.n_families):
        try:
            fam = reduce(
                batch, f, pass_queries, bands, shared=False, zero_cells=zero_cells, squares=squares
            )
        except FamilyNotSolved:
            continue  # left to the general model, which reports an infeasibility in words
        reduced.append(fam)
        families.append(f)
    with single_blas_thread():  # small dense algebra; results independent of the thread count
        for group in _groups(reduced, s):
            members = [reduced[i] for i in group]
            try:
                values, verified = solve_verified(
                    _group_problem(members),
                    tol=s.small_tolerance,
                    polish_from=s.small_polish_from,
                    polish_steps=s.small_polish_steps,
                )
            except np.linalg.LinAlgError:
                continue
            start = 0
            for i, fam, ok in zip(group, members, verified, strict=True):
                size = fam.children.size
                if ok:  # verified exact by the polish; the others go to the next route
                    x[np.ix_(fam.children, fam.cells)] = values[
                        start : start + size, : fam.cells.size
                    ]
                    solved[families[i]] = True
                start += size
    return x, solved
