"""The data of a batch of parent→children estimation problems (TDA §6, eq. 7.2; docs/science.md §4).

TopDown estimates the children of each fixed parent jointly (TDA eq. 7.2, 7.4); the families of one
depth of the spine are independent, so the engine batches many of them into one problem (a
block-diagonal system) and hands batches to worker processes. :class:`FamilyBatch` is that unit of
work: the parents' already-rounded histograms, the children's noisy query answers with their
weights (inverse noise variances) and the children's invariants. It is plain data (NumPy arrays)
so it pickles cheaply to a process pool. The root is a batch of one family without a parent
(TDA eq. 7.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class QuerySpec:
    """A query group reduced to what the solvers need: its name and partition index."""

    name: str
    cell_index: np.ndarray
    size: int

    @property
    def n_cells(self) -> int:
        return int(self.cell_index.size)

    @property
    def is_detailed(self) -> bool:
        return self.size == self.n_cells

    def matrix(self) -> sp.csr_matrix:
        """The ``(size, n_cells)`` 0/1 query matrix (one 1 per column: a partition)."""
        n = self.n_cells
        return sp.csr_matrix(
            (np.ones(n), (self.cell_index, np.arange(n))), shape=(self.size, n), dtype=np.float64
        )

    @cached_property
    def _columns(self) -> sp.csc_matrix:
        """:meth:`matrix` by columns, built once (the held answers of every pass slice it)."""
        return self.matrix().tocsc()

    @cached_property
    def _rows(self) -> sp.csr_matrix:
        """:attr:`_columns` by rows, built once (the product when most columns are non-zero)."""
        return self._columns.tocsr()

    @cached_property
    def is_identity(self) -> bool:
        """The detailed query in cell order (its answers are the histogram itself)."""
        return self.is_detailed and bool(np.array_equal(self.cell_index, np.arange(self.n_cells)))

    def answer(self, x: np.ndarray) -> np.ndarray:
        """Answers ``(K, size)`` of histograms ``x`` of shape ``(K, n_cells)``.

        Only the columns of ``x`` that hold a non-zero enter the product (a block's estimate is
        non-zero on a few dozen of 2,016 cells); each answer still sums its cells in cell order
        from 0, as the whole product does, so the values are the same doubles."""
        x = np.asarray(x, dtype=np.float64)
        if self.is_identity:
            return x
        cols = np.flatnonzero(np.any(x != 0.0, axis=0))
        if 2 * cols.size > self.n_cells:
            return np.asarray(self._rows @ x.T).T
        return np.asarray(self._columns[:, cols].tocsr() @ x[:, cols].T).T


@dataclass(frozen=True)
class ChildBounds:
    """The bounds of a batch's children: ``lower``/``upper`` ``(K, spec.size)`` (see
    :class:`CountBounds`; ``lower`` is ``-inf`` where inactive so centring keeps it inactive)."""

    spec: QuerySpec
    lower: np.ndarray
    upper: np.ndarray

    def take(self, rows: np.ndarray) -> ChildBounds:
        return ChildBounds(self.spec, self.lower[rows], self.upper[rows])

    def shifted(self, answers: np.ndarray) -> ChildBounds:
        """Bounds on ``A_q (x − x0)`` given ``answers = A_q x0``."""
        return ChildBounds(self.spec, self.lower - answers, self.upper - answers)

    def scaled(self, scale: float) -> ChildBounds:
        return ChildBounds(self.spec, self.lower / scale, self.upper / scale)

    @property
    def active(self) -> bool:
        return bool(np.any(np.isfinite(self.lower)) or np.any(np.isfinite(self.upper)))

    def zero_cells(self) -> np.ndarray:
        """``(K, n_cells)`` bool: cells held at 0 because their answer cell's upper bound is 0."""
        return (self.upper == 0)[:, self.spec.cell_index]


@dataclass(frozen=True)
class ChildSum:
    """Σ_{c ∈ rows} A_q x_c = ``target``: an invariant held for the *sum* of some siblings.

    TDA §7.4: a state split into an AIAN and a non-AIAN branch estimates each branch from noisy
    measurements; only the sum of the two branches is invariant. ``rows`` are child rows of the
    batch (all in one family), ``target`` the exact answer ``(size_q,)``.
    """

    query: int
    rows: np.ndarray
    target: np.ndarray


@dataclass(frozen=True)
class FamilyBatch:
    """``F`` families with ``K`` children in total; children of family ``f`` are rows
    ``child_ptr[f]:child_ptr[f+1]`` of every per-child array.

    ``parent`` is ``(F, n_cells)`` (non-negative integers) or ``None`` for the root problem.
    ``noisy[q]`` is ``(K, size_q)``: the noisy answers that involve a free cell (one the parent
    can populate that is not a structural zero); an answer over fixed cells only is a constant of
    eq. 7.5 and holds 0 (:mod:`engine.topdown.batch_answers`, which fills ``noisy`` in the unit
    of work; ``()`` before that); ``weight`` is ``(K, n_queries)`` with 0 where a child has no
    noisy answer for the query; ``invariant[q]`` is ``(K, size_q)`` with NaN where the answer is
    free (or ``None`` when query ``q`` is nowhere invariant). ``family_id`` / ``child_id`` /
    ``child_level`` name the geounits for diagnostics. ``bounds`` holds the children's structural
    bounds (:mod:`engine.topdown.constraints`); ``sums`` invariants held for a sum of siblings
    (:class:`ChildSum`).
    """

    queries: tuple[QuerySpec, ...]
    parent: np.ndarray | None
    child_ptr: np.ndarray
    noisy: tuple[np.ndarray, ...]
    weight: np.ndarray
    invariant: tuple[np.ndarray | None, ...]
    family_id: tuple[str, ...]
    child_id: tuple[str, ...]
    family_level: str = ""
    child_level: str = ""
    bounds: tuple[ChildBounds, ...] = ()
    sums: tuple[ChildSum, ...] = ()

    @property
    def n_families(self) -> int:
        return int(self.child_ptr.size - 1)

    @property
    def n_children(self) -> int:
        return int(self.child_ptr[-1])

    @property
    def n_cells(self) -> int:
        return self.queries[0].n_cells

    @property
    def child_family(self) -> np.ndarray:
        """Family index of every child."""
        return np.repeat(np.arange(self.n_families), np.diff(self.child_ptr))

    def sum_matrix(self, held: ChildSum) -> sp.csr_matrix:
        """``(size_q, K·n_cells)``: Σ_{c ∈ held.rows} A_q x_c, the left side of ``held``."""
        a_q = self.queries[held.query].matrix()
        rows = np.asarray(held.rows, dtype=np.int64)
        pick = sp.csr_matrix(
            (np.ones(rows.size), (np.zeros(rows.size, dtype=np.int64), rows)),
            shape=(1, self.n_children),
        )
        return sp.kron(pick, a_q, format="csr")

    def subset(self, families: Sequence[int] | np.ndarray) -> FamilyBatch:
        """The batch restricted to ``families`` (in the given order)."""
        families = np.asarray(families, dtype=np.int64)
        sizes = np.diff(self.child_ptr)[families]
        rows = (
            np.concatenate([np.arange(self.child_ptr[f], self.child_ptr[f + 1]) for f in families])
            if families.size
            else np.zeros(0, dtype=np.int64)
        )
        position = np.full(self.n_children, -1, dtype=np.int64)
        position[rows] = np.arange(rows.size)
        sums = tuple(
            ChildSum(c.query, position[c.rows], c.target)
            for c in self.sums
            if np.all(position[c.rows] >= 0)
        )
        return FamilyBatch(
            queries=self.queries,
            parent=None if self.parent is None else self.parent[families],
            child_ptr=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
            noisy=tuple(m[rows] for m in self.noisy),
            weight=self.weight[rows],
            invariant=tuple(None if t is None else t[rows] for t in self.invariant),
            family_id=tuple(self.family_id[f] for f in families),
            child_id=tuple(self.child_id[r] for r in rows),
            family_level=self.family_level,
            child_level=self.child_level,
            bounds=tuple(b.take(rows) for b in self.bounds),
            sums=sums,
        )

    @property
    def has_bounds(self) -> bool:
        """Whether any child has an active structural bound (:mod:`engine.topdown.constraints`)."""
        return any(b.active for b in self.bounds)

    def structural_zero_cells(self) -> np.ndarray | None:
        """``(K, n_cells)`` bool of cells held at 0 by a bound, or ``None`` if there are none."""
        zero = None
        for b in self.bounds:
            cells = b.zero_cells()
            zero = cells if zero is None else zero | cells
        return zero
