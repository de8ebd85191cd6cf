"""Block-level histograms: the input of the TopDown engine (TDA §5.1, docs/science.md §4).

A :class:`Schema` is a list of (attribute, levels); the histogram of a geounit is the flattened
(C-order) array of counts over the Cartesian product of the attributes' levels, so a marginal query
group is a reshape and a sum over the dropped attributes (Kronecker structure, SPN §2.3).

A :class:`BlockHistogram` holds one row of counts per tabulation block plus the block's geography:
one column per geolevel (root first, block last) holding the full geounit identifier at that level,
e.g. ``State="44"``, ``County="44007"``, ``Tract="44007000100"``, ``Block_Group="440070001001"``,
``Block="440070001001000"``. The spine builder adds the ``US`` root.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from engine.core.errors import DataValidationError, Problem, ValidationError
from engine.schema.attributes import Schema

MAX_DENSE_BLOCK_CELLS = 1 << 28
"""Largest ``n_blocks × n_cells`` a sparse :class:`BlockHistogram` is densified for (2 GB of
int64: a generated 1,000,000-person state on the 2,016-cell schema is 46.6 M cells, the generated
10,000,000-person Ohio 589 M). Above it :attr:`BlockHistogram.counts` refuses with a message and
the sparse form (:attr:`BlockHistogram.sparse_counts`) is the way to read the blocks."""
MAX_TOTAL_COUNT = 10**10
"""Most persons (or units) an input may count in all: 10 billion, more than the world's population.
Beyond it counts are not a census (a typo, a column of ids read as counts) and the least-squares
solve in float64 cannot keep them exact; int64 sums overflow near 9.2 × 10¹⁸."""


class BlockHistogram:
    """True block-level counts over ``schema`` with the blocks' geography.

    The counts are ``(n_blocks, schema.size)`` int64, held either dense (a NumPy array: the shipped
    samples, block CSVs, P.L. 94-171) or sparse (a SciPy CSR matrix of the non-zero cells: PPMF
    persons and generated populations, whose 2,016-cell blocks are almost all zeros: docs/data.md,
    "Sparse block histograms").
    :attr:`sparse_counts` is the CSR form either way (what the engine reads: SciPy CSR, sorted
    indices, no stored zeros); :attr:`counts` the dense form, built on each use from a sparse
    histogram and refused above :data:`MAX_DENSE_BLOCK_CELLS` cells — for small data (samples,
    experiments, the app's small runs). :attr:`block_totals`, :attr:`total` and :attr:`nnz` never
    densify.

    ``geography`` has one row per block (same order) and one string column per entry of
    ``levels``. ``units`` optionally holds housing-unit counts per block (occupied, vacant) and
    ``extra`` per-block arrays of the unit frame (housing units, GQ facilities, …).
    """

    def __init__(
        self,
        schema: Schema,
        levels: tuple[str, ...],
        geography: pd.DataFrame,
        counts: np.ndarray | sp.spmatrix,
        source: str = "",
        licence: str = "",
        units: np.ndarray | None = None,
        extra: dict[str, object] | None = None,
    ) -> None:
        self.schema = schema
        self.levels = tuple(levels)
        self.geography = geography
        self.source = source
        self.licence = licence
        self.units = units
        self.extra: dict[str, object] = {} if extra is None else extra
        self._dense: np.ndarray | None = None
        self._sparse: sp.csr_matrix | None = None
        self._read_only = False
        self._is_sparse = bool(sp.issparse(counts))
        if self._is_sparse:
            matrix = sp.csr_matrix(counts, dtype=np.int64)
            matrix.sum_duplicates()
            matrix.eliminate_zeros()
            matrix.sort_indices()
            self._sparse = matrix
            shape = matrix.shape
        else:
            self._dense = np.asarray(counts)
            shape = self._dense.shape
        if len(shape) != 2 or shape[1] != self.schema.size:
            raise ValueError(f"counts must have shape (n_blocks, {self.schema.size}); got {shape}")
        if len(self.geography) != shape[0]:
            raise ValueError(f"geography has {len(self.geography)} rows but counts has {shape[0]}")
        missing = [lv for lv in self.levels if lv not in self.geography.columns]
        if missing:
            raise ValueError(f"geography lacks level column(s) {missing}")
        self._shape = (int(shape[0]), int(shape[1]))

    def __repr__(self) -> str:
        form = "sparse" if self.is_sparse else "dense"
        return (
            f"BlockHistogram({self.schema.name!r}, {self.n_blocks:,} blocks × "
            f"{self.schema.size:,} cells, {form})"
        )

    def replace(self, **changes: Any) -> BlockHistogram:
        """A copy with ``changes`` (constructor arguments; the counts keep their form)."""
        args: dict[str, Any] = {
            "schema": self.schema,
            "levels": self.levels,
            "geography": self.geography,
            "counts": self._sparse if self._is_sparse else self._dense,
            "source": self.source,
            "licence": self.licence,
            "units": self.units,
            "extra": self.extra,
        }
        args.update(changes)
        return BlockHistogram(**args)

    # -- the counts ----------------------------------------------------------------------------
    @property
    def is_sparse(self) -> bool:
        """Whether the counts were given sparse (CSR; a dense copy exists only once
        :attr:`counts` was asked for) rather than as a dense array."""
        return self._is_sparse

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_blocks, n_cells)``."""
        return self._shape

    @property
    def counts(self) -> np.ndarray:
        """The dense ``(n_blocks, n_cells)`` counts (int64 unless the loader chose another integer
        type). A sparse histogram builds a new dense array on each use (not kept: a cached
        histogram would otherwise hold both forms; bind it to a name when reading it often), read-
        only when the histogram is; refused with a :class:`~engine.core.errors.ValidationError`
        above :data:`MAX_DENSE_BLOCK_CELLS` cells."""
        if not self._is_sparse:
            assert self._dense is not None
            return self._dense
        n_blocks, n_cells = self._shape
        if n_blocks * n_cells > MAX_DENSE_BLOCK_CELLS:
            raise ValidationError(
                f"the block histogram has {n_blocks:,} blocks × {n_cells:,} cells = "
                f"{n_blocks * n_cells:,} cells, too many for one dense array (limit "
                f"{MAX_DENSE_BLOCK_CELLS:,}); this step needs a smaller area — subset the data "
                "(--filter County=…) — while the TopDown run itself reads the sparse blocks"
            )
        assert self._sparse is not None
        dense = self._sparse.toarray()
        if self._read_only:
            dense.setflags(write=False)
        return dense

    @property
    def sparse_counts(self) -> sp.csr_matrix:
        """The counts as int64 CSR ``(n_blocks, n_cells)``: sorted indices, no stored zeros."""
        if self._sparse is None:
            assert self._dense is not None
            matrix = sp.csr_matrix(self._dense, dtype=np.int64)
            matrix.eliminate_zeros()
            matrix.sort_indices()
            self._sparse = matrix
        return self._sparse

    @property
    def nnz(self) -> int:
        """Non-zero cells of the block histogram."""
        if self._sparse is not None:
            return int(self._sparse.nnz)
        return int(np.count_nonzero(self._dense))

    @property
    def block_totals(self) -> np.ndarray:
        """``(n_blocks,)`` int64: the persons of each block."""
        if self._sparse is not None:
            return np.asarray(self._sparse.sum(axis=1), dtype=np.int64).reshape(-1)
        return np.asarray(self._dense).sum(axis=1).astype(np.int64)

    @property
    def n_blocks(self) -> int:
        return self._shape[0]

    @property
    def total(self) -> int:
        if self._sparse is not None:
            return int(self._sparse.data.sum())
        return int(np.asarray(self._dense).sum())

    def first_negative_block(self) -> int | None:
        """Row of the first block with a negative count, or None."""
        if self._sparse is not None:
            negative = self._sparse.data < 0
            if not negative.any():
                return None
            rows = np.repeat(np.arange(self.n_blocks), np.diff(self._sparse.indptr))
            return int(rows[negative].min())
        dense = np.asarray(self._dense)
        if not np.any(dense < 0):
            return None
        return int(np.flatnonzero(np.any(dense < 0, axis=1))[0])

    def dense_row_chunks(self, rows_per_chunk: int = 4096) -> Iterator[np.ndarray]:
        """The dense int64 counts in consecutive chunks of at most ``rows_per_chunk`` blocks,
        without densifying the whole histogram (same bytes as ``counts`` in row order)."""
        step = max(1, int(rows_per_chunk))
        for start in range(0, self.n_blocks, step):
            stop = min(start + step, self.n_blocks)
            if self._dense is not None:
                yield np.ascontiguousarray(self._dense[start:stop], dtype=np.int64)
            else:
                assert self._sparse is not None
                yield self._sparse[start:stop].toarray()

    def set_read_only(self) -> None:
        """Make the count arrays read-only (a histogram shared by every app session)."""
        self._read_only = True
        if self._dense is not None:
            self._dense.setflags(write=False)
        if self._sparse is not None:
            for array in (self._sparse.data, self._sparse.indices, self._sparse.indptr):
                array.setflags(write=False)
        if self.units is not None:
            self.units.setflags(write=False)


def subset_histogram(hist: BlockHistogram, level: str, units: Sequence[str]) -> BlockHistogram:
    """The blocks of ``hist`` inside the geounits ``units`` of ``level`` (for quick experiments)."""
    if level not in hist.levels:
        raise ValidationError(f"unknown geolevel {level!r}; the data has {list(hist.levels)}")
    wanted = {str(u) for u in units}
    ids = hist.geography[level].astype(str)
    unknown = sorted(wanted - set(ids))
    if unknown:
        raise ValidationError(f"{level} {unknown[:5]} not in the data; e.g. {sorted(set(ids))[:5]}")
    keep = ids.isin(wanted).to_numpy()
    return keep_blocks(hist, keep)


def keep_blocks(hist: BlockHistogram, keep: np.ndarray) -> BlockHistogram:
    """The blocks ``keep`` (bool mask) of ``hist``, with every per-block array of ``extra`` (unit
    frame: housing units, GQ facilities, …) subset alike."""
    extra = {
        k: (v[keep] if isinstance(v, np.ndarray) and v.shape[:1] == (hist.n_blocks,) else v)
        for k, v in hist.extra.items()
    }
    counts = hist.sparse_counts[np.flatnonzero(keep)] if hist.is_sparse else hist.counts[keep]
    return BlockHistogram(
        schema=hist.schema,
        levels=hist.levels,
        geography=hist.geography[keep].reset_index(drop=True),
        counts=counts,
        source=hist.source,
        licence=hist.licence,
        units=None if hist.units is None else hist.units[keep],
        extra=extra,
    )


def tree_levels(tree: Any, hist: BlockHistogram) -> tuple[str, ...]:
    """The spine's levels that are geography columns of the data (SRS tabulates those)."""
    return tuple(lv for lv in tree.levels if lv in hist.levels)


def check_count_magnitude(hist: BlockHistogram, label: str) -> None:
    """Refuse counts no census has, before any noise or solve: a negative count (a sum that
    overflowed int64 while the input was read) or counts totalling more than
    :data:`MAX_TOTAL_COUNT`. The :class:`DataValidationError` names ``label`` (the input), the
    block (its geography), the cell and the count; without this check such input ended as "weighted
    least squares failed numerically" or "invariant TOTAL is negative". Sums are taken in float64,
    which cannot overflow."""
    matrix = hist.sparse_counts
    if matrix.nnz == 0:
        return
    blocks = hist.geography.iloc[:, -1].astype(str).to_numpy() if len(hist.geography) else None

    def where(row: int, col: int) -> str:
        block = f"block {blocks[row]}" if blocks is not None else f"block number {row + 1}"
        index = np.unravel_index(col, hist.schema.shape)
        cell = ", ".join(
            f"{a.name}={a.levels[int(i)]}"
            for a, i in zip(hist.schema.attributes, index, strict=True)
        )
        return f"{block}, cell {cell}"

    if matrix.data.min() < 0:
        k = int(np.argmin(matrix.data))
        row = int(np.searchsorted(matrix.indptr, k, side="right") - 1)
        raise DataValidationError(
            [
                Problem(
                    label,
                    f"{where(row, int(matrix.indices[k]))}: count {int(matrix.data[k]):,} is "
                    "negative — the input's counts overflow the int64 range when added; check the "
                    "count columns for values that are not counts",
                )
            ],
            summary="counts out of range",
        )
    totals = np.asarray(matrix.sum(axis=1, dtype=np.float64)).ravel()
    grand = float(totals.sum())
    if grand > MAX_TOTAL_COUNT:
        row = int(np.argmax(totals))
        start, stop = matrix.indptr[row], matrix.indptr[row + 1]
        k = start + int(np.argmax(matrix.data[start:stop]))
        raise DataValidationError(
            [
                Problem(
                    label,
                    f"{where(row, int(matrix.indices[k]))}: count {int(matrix.data[k]):,} — the "
                    f"input counts {grand:,.0f} in all, more than {MAX_TOTAL_COUNT:,} (more than "
                    "the world's population; no census has it); check the count columns",
                )
            ],
            summary="counts out of range",
        )
