"""TopDown's person records read by Spark: persons → cells on the executors → ``groupBy`` (TDA §5.1).

On the Spark backend the person file of a TopDown run — a PPMF/MDF file or sample
(:mod:`engine.data.ppmf`) or the ``ppmf.csv`` of a generated population
(:mod:`engine.data.generated`) — is never read by the driver. Spark reads its lines
(``spark.read.text``, any path Spark can read, ``.gz`` too) and a ``mapInArrow`` task turns every
Arrow batch of lines into records with the local loader's own functions — the same parsing
(:class:`engine.data.csv_reader.CsvReader` on the lines), the same checks and the same recode to
schema cells (:func:`engine.data.ppmf.ppmf_cells`) — and
sums the batch's persons per (block, cell). A ``groupBy(block, cell)`` adds the batches up: the
result is the long sparse block histogram ``(block, cell, count)`` of the non-zero cells, which
stays in Spark (persisted) and is what :func:`engine.spark.histograms.level_truth` sums up the
spine (:func:`block_node_cells` maps each block to its leaf geounit).

What the driver still needs comes back as small aggregates, never the person rows: the non-zero
block cells (one row per populated block and cell present: 97,099 for a generated
1,000,000-person Rhode Island), from which it builds the :class:`~engine.data.histogram.BlockHistogram`
the rest of the run reads (the geography from the block ids, the GQ types present, the persons
read); a generated population's block frame (``blocks.csv``, one row per block: housing units and
GQ facilities for the structural zeros) is read on the driver as the local loader reads it.

Problems are found on the executors with the local loader's checks and messages. Each task also
counts the lines of each file split it reads (``_metadata.file_block_start``), so the driver turns
a batch's row numbers into the file's row numbers. The problems of the first batch of the file
that has any (:data:`BATCH_ROWS` lines) are reported, as the local loader reports them; problems
further on are summarised in one line. Only the DataFrame API is used, so this runs over Spark
Connect too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.core.errors import DataValidationError, Problem
from engine.data.csv_layout import CsvLayout
from engine.data.csv_reader import CsvReader
from engine.data.generated import find_file, generated_histogram
from engine.data.geography import ID_LENGTHS
from engine.data.histogram import BlockHistogram
from engine.data.population import read_manifest
from engine.data.ppmf import COLUMNS, not_usable, ppmf_cells, ppmf_histogram
from engine.schema.attributes import REDISTRICTING_SCHEMA

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import DataFrame, SparkSession

    from engine.topdown.geography import GeoTree

CELLS, PROBLEMS, LINES = 0, 1, 2
"""Kinds of the rows a recode task returns: block cells, a batch's problems, a split's lines."""
OUT_SCHEMA = "kind int, start long, first long, block long, cell int, count long, payload string"
BATCH_ROWS = 10_000
"""Lines per Arrow batch a recode task reads (``spark.sql.execution.arrow.maxRecordsPerBatch``)."""
SPARK_CELLS = "spark_block_cells"
"""Key of ``BlockHistogram.extra`` holding the Spark DataFrame ``(block, cell, count)``."""


@dataclass(frozen=True)
class _Batch:
    """Lines of one file split read by a task: ``first`` is the line index (in the split) of
    ``lines[0]``; the split starting at byte 0 has the header as its line 0."""

    start: int
    first: int
    lines: list[str]


def _split_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[_Batch | tuple[int, int]]:
    """The data lines of a task's Arrow batches per file split, header left out, then one
    ``(split start, lines)`` per split read (counted with the header)."""
    seen: dict[int, int] = {}
    for batch in batches:
        values = batch.column("value").to_pylist()
        starts = batch.column("start").to_numpy(zero_copy_only=False)
        if not values:
            continue
        cuts = np.flatnonzero(np.diff(starts)) + 1
        for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(values)], strict=True):
            start = int(starts[a])
            first = seen.get(start, 0)
            seen[start] = first + int(b - a)
            lines = values[a:b]
            if start == 0 and first == 0:  # the header: checked by the driver
                lines, first = lines[1:], 1
            if lines:
                yield _Batch(start, first, lines)
    for start, n in seen.items():
        yield start, n


def _cells_batch(start: int, first: int, block: np.ndarray, cell: np.ndarray) -> pa.RecordBatch:
    """The batch's persons summed per (block, cell), as :data:`OUT_SCHEMA` rows."""
    n_cells = REDISTRICTING_SCHEMA.size
    key, count = np.unique(block.astype(np.int64) * n_cells + cell, return_counts=True)
    n = key.size
    return pa.RecordBatch.from_arrays(
        [
            pa.array(np.full(n, CELLS, dtype=np.int32)),
            pa.array(np.full(n, start, dtype=np.int64)),
            pa.array(np.full(n, first, dtype=np.int64)),
            pa.array(key // n_cells),
            pa.array((key % n_cells).astype(np.int32)),
            pa.array(count.astype(np.int64)),
            pa.nulls(n, pa.string()),
        ],
        schema=_ARROW_OUT,
    )


def _one_row(kind: int, start: int, first: int, count: int, payload: str | None) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [
            pa.array([kind], pa.int32()),
            pa.array([start], pa.int64()),
            pa.array([first], pa.int64()),
            pa.array([-1], pa.int64()),
            pa.array([-1], pa.int32()),
            pa.array([count], pa.int64()),
            pa.array([payload], pa.string()),
        ],
        schema=_ARROW_OUT,
    )


_ARROW_OUT = pa.schema(
    [
        ("kind", pa.int32()),
        ("start", pa.int64()),
        ("first", pa.int64()),
        ("block", pa.int64()),
        ("cell", pa.int32()),
        ("count", pa.int64()),
        ("payload", pa.string()),
    ]
)


def _problems_payload(summary: str, problems: list[Problem]) -> str:
    return json.dumps(
        {"summary": summary, "problems": [[p.file, p.message, p.row, p.column] for p in problems]}
    )


def _recode(
    layout: CsvLayout,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of a PPMF/MDF file or a generated ``ppmf.csv``: the local
    loader's reader and :func:`engine.data.ppmf.ppmf_cells` on each batch of lines (row numbers
    counted from the batch's split)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for item in _split_batches(batches):
            if isinstance(item, tuple):
                yield _one_row(LINES, item[0], 0, item[1], None)
                continue
            data = "\n".join(item.lines).encode("utf-8")
            if not data.strip():
                continue
            try:
                reader = CsvReader(
                    data,
                    layout=layout,
                    first_row=item.first,
                    max_bytes=len(data) + 1,
                    require_rows=False,
                )
                parts = list(ppmf_cells(reader))
            except DataValidationError as exc:
                summary = str(exc).split(":\n", 1)[0]
                payload = _problems_payload(summary, exc.problems)
                yield _one_row(PROBLEMS, item.start, item.first, 0, payload)
                continue
            if reader.problems:
                payload = _problems_payload(not_usable(layout.file), reader.problems.result())
                yield _one_row(PROBLEMS, item.start, item.first, 0, payload)
                continue
            for numbers, cell in parts:
                yield _cells_batch(item.start, item.first, numbers, cell)

    return run


def _text_frame(spark: SparkSession, path: Path | str) -> DataFrame:
    """The file's lines with the start of the split each was read from."""
    # optional dependency (the spark extra): imported where Spark runs
    from pyspark.sql import functions as F

    text = str(path)
    location = Path(text).resolve().as_uri() if "://" not in text else text
    frame = spark.read.text(location)
    return frame.select(
        F.col("value"), F.col("_metadata.file_block_start").cast("long").alias("start")
    )


def _layout(path: Path) -> CsvLayout:
    """The layout of a local PPMF/MDF file (plain or gzip) as the local loader reads it: its
    header checked (a missing column refused) on the driver."""
    reader = CsvReader(path, COLUMNS, max_bytes=1 << 62)
    reader.close()
    return reader.layout


def _recoded(
    spark: SparkSession, path: Path, fn: Callable[..., Iterator[pa.RecordBatch]]
) -> tuple[DataFrame, pa.Table]:
    """Run the recode over the file's lines; ``(persisted sums, the rows that are not cells)``.

    The sums are one row per (block, cell) with persons (kind :data:`CELLS`), one per batch with
    problems and one per file split with its number of lines: the batches are added up by
    ``groupBy``. Only the few rows of problems and split lengths are collected here."""
    # optional dependency (the spark extra): imported where Spark runs
    from pyspark.sql import functions as F

    lines = _text_frame(spark, path)
    mapped = lines.mapInArrow(fn, OUT_SCHEMA)
    keys = ["kind", "block", "cell", "start", "first", "payload"]
    data = F.col("kind") == CELLS
    # cells: summed over batches; problems and split lengths: one row each
    grouped = (
        mapped.withColumn("start", F.when(data, F.lit(-1)).otherwise(F.col("start")))
        .withColumn("first", F.when(data, F.lit(-1)).otherwise(F.col("first")))
        .groupBy(*keys)
        .agg(F.sum("count").alias("count"))
        .persist()
    )
    return grouped, grouped.filter(F.col("kind") != CELLS).toArrow()


def _split_offsets(table: pa.Table) -> dict[int, int]:
    """Row number of line 0 of each file split (the header is row 0 of the split at byte 0)."""
    lines = table.filter(pc.equal(table["kind"], LINES))
    starts = lines["start"].to_numpy()
    counts = lines["count"].to_numpy()
    order = np.argsort(starts)
    offsets = np.r_[0, np.cumsum(counts[order])[:-1]]
    return {int(starts[order][i]): int(offsets[i]) for i in range(order.size)}


def _raise_problems(table: pa.Table, file: str) -> None:
    """Raise the problems of the file's first batch with any, at the file's row numbers."""
    found = table.filter(pc.equal(table["kind"], PROBLEMS))
    if found.num_rows == 0:
        return
    offsets = _split_offsets(table)
    rows = sorted(
        zip(
            found["start"].to_pylist(),
            found["first"].to_pylist(),
            found["payload"].to_pylist(),
            strict=True,
        )
    )
    start, first, payload = rows[0]
    offset = offsets.get(int(start), 0)
    data = json.loads(payload)
    problems = [
        Problem(f, message, None if row is None else int(row) + offset, column)
        for f, message, row, column in data["problems"]
    ]
    if len(rows) > 1:
        problems.append(
            Problem(
                file,
                f"… and problems in {len(rows) - 1:,} later batch(es) of up to {BATCH_ROWS:,} "
                "rows: the Spark backend reports the first batch of the file that has any; fix "
                "these and run again (or check the whole file with `phexplore data check` or "
                "--backend local)",
            )
        )
    raise DataValidationError(problems, summary=data["summary"])


def _block_cells(cells: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(sorted 15-digit block ids, block index, cell, count)`` of the collected cells."""
    block = cells["block"].to_numpy()
    ids, index = np.unique(block, return_inverse=True)
    text = pc.utf8_lpad(pc.cast(pa.array(ids), pa.string()), width=15, padding="0")
    return (
        np.asarray(text.to_numpy(zero_copy_only=False), dtype=object),
        index.astype(np.int64),
        cells["cell"].to_numpy().astype(np.int64),
        cells["count"].to_numpy().astype(np.int64),
    )


def _block_filter(frame: DataFrame, block_filter: Mapping[str, Any] | None) -> DataFrame:
    """Keep the block cells inside ``--filter LEVEL=ID,…`` (ids as full geocodes), in Spark."""
    # optional dependency (the spark extra): imported where Spark runs
    from pyspark.sql import functions as F

    if not block_filter:
        return frame
    length = ID_LENGTHS.get(str(block_filter.get("level")))
    units = [str(u).strip() for u in block_filter.get("units", ())]
    if length is None or not units or not all(u.isdigit() and len(u) == length for u in units):
        return frame  # the driver's filter reports what is wrong
    scale = 10 ** (15 - length)
    keep = F.lit(False)
    for unit in units:
        low = int(unit) * scale
        keep = keep | F.col("block").between(low, low + scale - 1)
    return frame.filter(keep)


def read_person_records(
    spark: SparkSession,
    kind: str,
    path: Path,
    *,
    block_filter: Mapping[str, Any] | None = None,
    extra: Mapping[str, object] | None = None,
) -> BlockHistogram:
    """The block histogram of a person-record input (``kind`` ``"ppmf"``: a PPMF/MDF file;
    ``"generated"``: a generated population folder), recoded on the executors (module docstring).

    ``block_filter`` (the run's ``--filter``) keeps only those blocks' cells (the driver applies
    the filter to the histogram afterwards, as for local data). The long block cells stay in
    Spark under ``extra[SPARK_CELLS]`` for :func:`engine.runs.topdown.true_histograms`.
    Raises the local loader's errors for bad input.
    """
    if kind == "ppmf":
        grouped, table = _recoded(spark, path, _recode(_layout(path)))
        _raise_problems(table, path.name)
        if SparkBlockCells(grouped).cells().limit(1).count() == 0:  # as the local reader says
            raise DataValidationError(
                [Problem(path.name, "the file has a header but no data rows")]
            )
        held = SparkBlockCells(grouped, block_filter)
        blocks, index, cell, count = _block_cells(held.cells().toArrow())
        hist = ppmf_histogram(blocks, index, cell, count)
    elif kind == "generated":
        manifest = read_manifest(path)
        persons = find_file(path, "ppmf")
        grouped, table = _recoded(spark, persons, _recode(_layout(persons)))
        _raise_problems(table, persons.name)
        held = SparkBlockCells(grouped)  # every block: the frame's persons are checked
        blocks, index, cell, count = _block_cells(held.cells().toArrow())
        hist = generated_histogram(path, manifest, blocks, index, cell, count)
    else:
        raise ValueError(f"unknown person-record format {kind!r}")
    hist.extra[SPARK_CELLS] = held
    hist.extra.update(extra or {})
    return hist


@dataclass(frozen=True)
class SparkBlockCells:
    """The recoded person records held in Spark (persisted): :meth:`cells` is the long sparse
    block histogram ``(block, cell, count)`` (15-digit block ids as numbers), :meth:`release`
    frees it once the true histograms are summed."""

    frame: DataFrame
    block_filter: Mapping[str, Any] | None = None

    def cells(self) -> DataFrame:
        # optional dependency (the spark extra): imported where Spark runs
        from pyspark.sql import functions as F

        cells = self.frame.filter(F.col("kind") == CELLS).select("block", "cell", "count")
        return _block_filter(cells, self.block_filter)

    def release(self) -> None:
        self.frame.unpersist()


def block_node_cells(
    spark: SparkSession, tree: GeoTree, block_ids: np.ndarray, cells: DataFrame
) -> DataFrame:
    """The long block cells ``(block, cell, count)`` as ``(node, cell, count)``, ``node`` the
    block's leaf geounit in ``tree`` (``block_ids``: the tree's blocks in order, 15-digit ids);
    cells of blocks outside the tree (a filtered run) are dropped by the join."""
    # optional dependency (the spark extra): imported where Spark runs
    from pyspark.sql import functions as F

    ids = pc.cast(pa.array(np.asarray(block_ids, dtype=object), pa.string()), pa.int64())
    leaf = pa.array(np.asarray(tree.block_node, dtype=np.int64))
    nodes = spark.createDataFrame(pa.table({"block": ids, "node": leaf}))
    return cells.join(F.broadcast(nodes), "block").select(
        "node", F.col("cell").cast("int").alias("cell"), "count"
    )
