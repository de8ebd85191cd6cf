"""Sparse ``(n_nodes × n_cells)`` histograms of a TopDown run (docs/science.md §4; docs/topdown.md,
"Sparse histograms and lazy keyed measurements").

On the 2,016-cell schema almost every cell of every geounit is 0 (a generated 1,000,000-person RI:
132,187 non-zero cells of 48.6 M), so the true and estimated histograms of all geounits are kept as
SciPy CSR matrices holding the non-zero cells only:

* :func:`aggregate_sparse` sums the block histograms up the spine (every node is the sum of the
  blocks below it, TDA §5) with one sparse product by the node-from-block indicator matrix;
* :class:`SparseRows` collects the estimates as the estimation phase produces them, level by level
  (TDA §7), hands a batch of families its parents' rows as a small dense array, and assembles the
  run's CSR matrix at the end;
* :func:`dense_rows` gives chosen rows of a CSR (or dense) histogram as a dense array, and
  :func:`densify` a whole histogram for small runs, refusing sizes that would exhaust memory.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from engine.core.errors import ValidationError
from engine.topdown.geography import GeoTree

MAX_DENSE_CELLS = 1 << 28
"""Largest ``n_nodes × n_cells`` a whole histogram is densified for (2 GB of int64); above it the
sparse matrices and the chunked iterators of :class:`~engine.topdown.result.TopDownResult` are
the way to read a run."""


def aggregate_sparse(tree: GeoTree, block_counts: np.ndarray | sp.spmatrix) -> sp.csr_matrix:
    """int64 CSR ``(n_nodes, n_cells)``: every node's counts summed from ``block_counts``.

    Same numbers as :meth:`GeoTree.aggregate`, without an ``(n_nodes, n_cells)`` dense array.
    """
    if block_counts.shape[0] != tree.n_blocks:
        raise ValidationError(
            f"expected counts for {tree.n_blocks} blocks, got {block_counts.shape[0]}"
        )
    blocks = sp.csr_matrix(block_counts, dtype=np.int64)
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    node = np.asarray(tree.block_node, dtype=np.int64)
    block = np.arange(tree.n_blocks, dtype=np.int64)
    while node.size:  # each block, then its parent, … up to the root (parent −1)
        rows.append(node)
        cols.append(block)
        up = tree.parent[node]
        keep = up >= 0
        node, block = up[keep], block[keep]
    ancestor = sp.csr_matrix(
        (
            np.ones(sum(r.size for r in rows), dtype=np.int64),
            (np.concatenate(rows), np.concatenate(cols)),
        ),
        shape=(tree.n_nodes, tree.n_blocks),
    )
    out = sp.csr_matrix(ancestor @ blocks, dtype=np.int64)
    out.eliminate_zeros()
    out.sort_indices()
    return out


def dense_rows(hist: np.ndarray | sp.spmatrix, rows: np.ndarray) -> np.ndarray:
    """Rows ``rows`` of a dense or sparse histogram as a dense array."""
    if sp.issparse(hist):
        return sp.csr_matrix(hist)[np.asarray(rows, dtype=np.int64)].toarray()
    return np.asarray(hist)[rows]


def densify(hist: sp.spmatrix, what: str) -> np.ndarray:
    """The whole histogram as a dense array, refused above :data:`MAX_DENSE_CELLS` cells."""
    check_dense_size(hist.shape[0], hist.shape[1], what)
    return hist.toarray()


def check_dense_size(n_rows: int, n_cols: int, what: str) -> None:
    """Refuse a dense ``(n_rows, n_cols)`` array above :data:`MAX_DENSE_CELLS` cells."""
    if n_rows * n_cols > MAX_DENSE_CELLS:
        raise ValidationError(
            f"{what} has {n_rows:,} geounits × {n_cols:,} cells = {n_rows * n_cols:,} cells, too "
            f"many for one dense array (limit {MAX_DENSE_CELLS:,}); read it sparse "
            "(TopDownResult.estimates_sparse / truth_sparse) or in chunks "
            "(iter_estimate_frames, iter_measurement_frames)"
        )


class SparseRows:
    """Rows of an ``(n_rows, n_cols)`` int64 histogram set batch by batch (estimation, TDA §7).

    Each :meth:`set` keeps its rows as one CSR piece; :meth:`dense` reads rows back (a batch's
    parents), :meth:`matrix` assembles the whole CSR matrix in row order. Rows never set are
    reported by :meth:`matrix` as an error, so a bug cannot silently publish empty geounits.
    """

    def __init__(self, n_rows: int, n_cols: int) -> None:
        self.shape = (int(n_rows), int(n_cols))
        self._pieces: list[sp.csr_matrix] = []
        self._piece = np.full(self.shape[0], -1, dtype=np.int64)
        self._row = np.full(self.shape[0], -1, dtype=np.int64)

    def set(self, rows: np.ndarray, values: np.ndarray | sp.spmatrix) -> None:
        """Rows ``rows`` get ``values`` (dense or sparse, one row per entry of ``rows``)."""
        rows = np.asarray(rows, dtype=np.int64)
        piece = sp.csr_matrix(values, dtype=np.int64)
        if piece.shape != (rows.size, self.shape[1]):
            raise ValueError(f"expected {(rows.size, self.shape[1])} values, got {piece.shape}")
        piece.eliminate_zeros()
        self._piece[rows] = len(self._pieces)
        self._row[rows] = np.arange(rows.size)
        self._pieces.append(piece)

    def sparse(self, rows: np.ndarray) -> sp.csr_matrix:
        """Rows ``rows`` (all set) as a CSR matrix, in the given order."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size and np.any(self._piece[rows] < 0):
            raise ValueError("reading histogram rows that were never set")
        if rows.size == 0:
            return sp.csr_matrix((0, self.shape[1]), dtype=np.int64)
        pieces = self._piece[rows]
        order = np.argsort(pieces, kind="stable")
        parts = []
        for p in np.unique(pieces):
            sel = order[pieces[order] == p]
            parts.append(self._pieces[int(p)][self._row[rows[sel]]])
        stacked = sp.vstack(parts, format="csr")
        back = np.empty(rows.size, dtype=np.int64)
        back[order] = np.arange(rows.size)
        return sp.csr_matrix(stacked[back], dtype=np.int64)

    def dense(self, rows: np.ndarray) -> np.ndarray:
        """Rows ``rows`` (all set) as a dense int64 array."""
        return self.sparse(rows).toarray()

    def matrix(self) -> sp.csr_matrix:
        """The whole histogram as CSR ``(n_rows, n_cols)``, rows in order."""
        missing = np.flatnonzero(self._piece < 0)
        if missing.size:
            raise ValueError(f"{missing.size} histogram rows were never set (first: {missing[0]})")
        return self.sparse(np.arange(self.shape[0]))
