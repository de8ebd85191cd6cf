"""PPMF person records read in chunks as (block, cell, count) triples (TDA §5.1; docs/data.md,
"Sparse block histograms").

A TopDown block histogram on the 2,016-cell redistricting schema
(:data:`~engine.schema.attributes.REDISTRICTING_SCHEMA`: HHGQ × VOTINGAGE × HISPANIC × CENRACE) is
almost all zeros — a generated 10,000,000-person Ohio has 292,120 blocks × 2,016 cells = 589 M
cells, of which a few million are non-zero — so the production path never builds it dense. Persons
are read chunk by chunk (Arrow's streaming CSV reader), each chunk turned into the triples of its
non-zero (block, cell) pairs, and the triples of all chunks summed into one SciPy CSR matrix:

* :func:`record_cells` — one Arrow record batch (or table) of PPMF columns → each record's block id
  and cell (codes checked against their domains, the first bad row named);
  :func:`batch_block_cells` the same summed into :class:`BlockCells`. Both take whatever batches a
  reader hands them, e.g. the batches of Spark's ``mapInArrow`` (:meth:`BlockCells.to_arrow` gives
  the triples back as a record batch);
* :func:`iter_block_cells` — a ``ppmf.csv`` (or ``.csv.gz``) file, chunk by chunk;
* :func:`block_cell_matrix` — triples → int64 CSR ``(n_blocks, n_cells)`` with the rows of a given
  block frame (every block of a generated population, also the empty ones) or of the sorted blocks
  with persons.

Columns read: ``TABBLKST`` ``TABBLKCOU`` ``TABTRACTCE`` ``TABBLK`` (the 15-character block id),
``RTYPE`` (3 household, 5 group quarters), ``GQTYPE_PL`` (0–7), ``VOTING_AGE`` (1–2), ``CENHISP``
(1–2), ``CENRACE`` (1–63). This is the fast reader of our own generated files; uploads go through
:func:`engine.data.ppmf.load_ppmf`, which validates row by row with located messages (and accepts
the MDF variants ``GQTYPE``/``QAGE``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import scipy.sparse as sp

from engine.core.errors import ValidationError
from engine.schema.attributes import REDISTRICTING_SCHEMA

GEO_COLUMNS: tuple[str, ...] = ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK")
"""Columns whose concatenation is the 15-character block id (state, county, tract, block)."""

CODE_RANGES: dict[str, tuple[int, int]] = {
    "RTYPE": (3, 5),
    "GQTYPE_PL": (0, 7),
    "VOTING_AGE": (1, 2),
    "CENHISP": (1, 2),
    "CENRACE": (1, 63),
}
"""Integer columns and their ranges (RTYPE is 3 or 5 only)."""

COLUMNS: tuple[str, ...] = (*GEO_COLUMNS, *CODE_RANGES)
"""Every column :func:`batch_block_cells` reads."""

DEFAULT_BLOCK_BYTES = 8 << 20
"""Bytes of CSV text per chunk (≈ 240,000 generated person records); why this size:
docs/topdown.md, "Sparse block histograms from the file"."""

TRIPLES_SCHEMA = pa.schema([("block", pa.string()), ("cell", pa.int32()), ("count", pa.int64())])
"""The Arrow layout of :meth:`BlockCells.to_arrow`."""


@dataclass(frozen=True)
class BlockCells:
    """The non-zero (block, cell, count) triples of some persons.

    ``blocks`` holds the distinct block ids (str) of the chunk; triple ``i`` is block
    ``blocks[block_code[i]]``, histogram cell ``cell[i]`` (C order of the schema), ``count[i]``
    persons. Triples are sorted by (block code, cell) and distinct; ``persons`` is their sum.
    """

    blocks: np.ndarray
    block_code: np.ndarray
    cell: np.ndarray
    count: np.ndarray
    persons: int

    def to_arrow(self) -> pa.RecordBatch:
        """The triples as an Arrow record batch of :data:`TRIPLES_SCHEMA` (block id per row)."""
        block = pa.array(self.blocks, type=pa.string()).take(pa.array(self.block_code))
        return pa.RecordBatch.from_arrays(
            [block, pa.array(self.cell, type=pa.int32()), pa.array(self.count, type=pa.int64())],
            schema=TRIPLES_SCHEMA,
        )


def _codes(batch: pa.RecordBatch | pa.Table, file: str, first_row: int) -> dict[str, np.ndarray]:
    """The integer columns of ``batch`` as int64 arrays, each value checked against its range."""
    values: dict[str, np.ndarray] = {}
    for column, (low, high) in CODE_RANGES.items():
        array = batch.column(column)
        if array.null_count:
            row = int(np.flatnonzero(pc.is_null(array).to_numpy(zero_copy_only=False))[0])
            raise ValidationError(f"{file} row {first_row + row}: {column} is empty")
        if not pa.types.is_integer(array.type):
            try:
                array = pc.cast(array, pa.int64())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise ValidationError(
                    f"{file}: {column} is not an integer column ({exc})"
                ) from None
        value = np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.int64)
        bad = (value != 3) & (value != 5) if column == "RTYPE" else (value < low) | (value > high)
        if np.any(bad):
            row = int(np.flatnonzero(bad)[0])
            raise ValidationError(
                f"{file} row {first_row + row}: {column} {value[row]} is out of range"
            )
        values[column] = value
    disagree = (values["RTYPE"] == 5) != (values["GQTYPE_PL"] > 0)
    if np.any(disagree):
        row = int(np.flatnonzero(disagree)[0])
        raise ValidationError(f"{file} row {first_row + row}: RTYPE and GQTYPE_PL disagree")
    return values


def record_cells(
    batch: pa.RecordBatch | pa.Table, *, file: str = "ppmf.csv", first_row: int = 2
) -> tuple[pa.Array, np.ndarray]:
    """Each record's block id (Arrow strings) and its 2,016-cell index (int64), one per record.

    ``batch`` must hold :data:`COLUMNS` (geography as strings, codes as integers or integer
    strings); ``first_row`` is the file row of its first record (2 after the header), for
    messages. Raises :class:`~engine.core.errors.ValidationError` naming the first bad row.
    """
    missing = [c for c in COLUMNS if c not in batch.schema.names]
    if missing:
        raise ValidationError(f"{file} lacks column(s) {', '.join(missing)}")
    values = _codes(batch, file, first_row)
    geo = []
    for column in GEO_COLUMNS:
        array = batch.column(column)
        if array.null_count:
            row = int(np.flatnonzero(pc.is_null(array).to_numpy(zero_copy_only=False))[0])
            raise ValidationError(f"{file} row {first_row + row}: {column} is empty")
        geo.append(array if pa.types.is_string(array.type) else pc.cast(array, pa.string()))
    block = pc.binary_join_element_wise(*geo, "")
    if isinstance(block, pa.ChunkedArray):
        block = block.combine_chunks()
    cell = np.ravel_multi_index(
        (
            values["GQTYPE_PL"],
            values["VOTING_AGE"] - 1,
            values["CENHISP"] - 1,
            values["CENRACE"] - 1,
        ),
        REDISTRICTING_SCHEMA.shape,
    )
    return block, cell.astype(np.int64)


def batch_block_cells(
    batch: pa.RecordBatch | pa.Table, *, file: str = "ppmf.csv", first_row: int = 2
) -> BlockCells:
    """The (block, cell, count) triples of one batch of PPMF person records (checked as
    :func:`record_cells` checks them)."""
    block, cell = record_cells(batch, file=file, first_row=first_row)
    encoded = pc.dictionary_encode(block)  # distinct ids only become Python strings
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    blocks = encoded.dictionary.to_numpy(zero_copy_only=False)
    n_cells = REDISTRICTING_SCHEMA.size
    key, count = np.unique(codes.astype(np.int64) * n_cells + cell, return_counts=True)
    return BlockCells(
        blocks=np.asarray(blocks, dtype=object),
        block_code=(key // n_cells).astype(np.int64),
        cell=(key % n_cells).astype(np.int64),
        count=count.astype(np.int64),
        persons=int(codes.size),
    )


def iter_block_cells(
    path: str | os.PathLike[str], *, block_bytes: int = DEFAULT_BLOCK_BYTES
) -> Iterator[BlockCells]:
    """The triples of a PPMF ``path`` (``.csv`` or ``.csv.gz``), one :class:`BlockCells` per
    chunk of about ``block_bytes`` bytes of text; only :data:`COLUMNS` are parsed."""
    path = Path(path)
    try:
        reader = pacsv.open_csv(
            path,
            read_options=pacsv.ReadOptions(block_size=int(block_bytes)),
            convert_options=pacsv.ConvertOptions(
                include_columns=list(COLUMNS),
                column_types={
                    **{c: pa.string() for c in GEO_COLUMNS},
                    **{c: pa.int16() for c in CODE_RANGES},
                },
            ),
        )
    except (pa.ArrowInvalid, KeyError) as exc:
        raise ValidationError(f"{path.name}: not a readable PPMF person file ({exc})") from None
    row = 2
    with reader:
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                return
            except pa.ArrowInvalid as exc:
                raise ValidationError(f"{path.name} after row {row - 1}: {exc}") from None
            if batch.num_rows:
                yield batch_block_cells(batch, file=path.name, first_row=row)
            row += batch.num_rows


@dataclass(frozen=True)
class BlockCellMatrix:
    """Triples summed into a block histogram: ``counts`` int64 CSR ``(n_blocks, n_cells)`` (sorted
    indices, no stored zeros), its rows' block ids ``blocks`` and the ``persons`` read."""

    counts: sp.csr_matrix
    blocks: np.ndarray
    persons: int


def block_cell_matrix(
    chunks: Iterable[BlockCells],
    *,
    blocks: pd.Index | None = None,
    n_cells: int = REDISTRICTING_SCHEMA.size,
    file: str = "ppmf.csv",
) -> BlockCellMatrix:
    """Sum the triples of ``chunks`` into one CSR block histogram.

    With ``blocks`` (a unique index of block ids: a block frame) row ``i`` is ``blocks[i]`` and a
    person in a block outside it is an error; without, the rows are the blocks with persons, sorted.
    """
    rows: list[np.ndarray] = []
    cells: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    persons = 0
    seen: dict[str, int] = {}
    for chunk in chunks:
        if blocks is not None:
            where = blocks.get_indexer(chunk.blocks)
            if np.any(where < 0):
                bad = chunk.blocks[where < 0][0]
                raise ValidationError(
                    f"{file} has persons in block {bad}, which the block frame lacks"
                )
        else:
            where = np.fromiter(
                (seen.setdefault(b, len(seen)) for b in chunk.blocks),
                dtype=np.int64,
                count=len(chunk.blocks),
            )
        rows.append(where.astype(np.int64)[chunk.block_code])
        cells.append(chunk.cell)
        counts.append(chunk.count)
        persons += chunk.persons
    row = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    cell = np.concatenate(cells) if cells else np.zeros(0, dtype=np.int64)
    count = np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64)
    del rows, cells, counts
    if blocks is None:
        ids = np.array(list(seen), dtype=object)
        order = np.argsort(ids, kind="stable")
        rank = np.empty(order.size, dtype=np.int64)
        rank[order] = np.arange(order.size)
        row = rank[row]
        ids = ids[order]
    else:
        ids = np.asarray(blocks, dtype=object)
    matrix = sp.csr_matrix((count, (row, cell)), shape=(len(ids), int(n_cells)), dtype=np.int64)
    matrix.sum_duplicates()
    matrix.eliminate_zeros()
    matrix.sort_indices()
    return BlockCellMatrix(matrix, ids, persons)


def read_block_cells(
    path: str | os.PathLike[str],
    *,
    blocks: pd.Index | None = None,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> BlockCellMatrix:
    """A PPMF file's block histogram, read chunk by chunk (:func:`iter_block_cells` then
    :func:`block_cell_matrix`); peak memory is one chunk plus the triples, never dense."""
    return block_cell_matrix(
        iter_block_cells(path, block_bytes=block_bytes), blocks=blocks, file=Path(path).name
    )
