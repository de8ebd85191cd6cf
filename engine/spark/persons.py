"""TopDown's person records read by Spark: persons → cells on the executors → ``groupBy`` (TDA §5.1).

On the Spark backend the person file of a TopDown run — a PPMF/MDF file or sample
(:mod:`engine.data.ppmf`) or the ``ppmf.csv`` of a generated population
(:mod:`engine.data.generated`) — is never read by the driver. Spark reads its lines
(``spark.read.text``, any path Spark can read, ``.gz`` too) and a ``mapInArrow`` task turns every
Arrow batch of lines into records with the local loader's own functions — the same parsing
(:func:`engine.data.validate.lines_table`), the same checks and the same recode to schema cells
(:func:`engine.data.ppmf.ppmf_records`, :func:`engine.data.generated.generated_cells`) — and
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

import gzip
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from engine.core.errors import DataValidationError, Problem, ValidationError
from engine.core.sniff import GZIP_MAGIC, check_content, check_path
from engine.data.generated import PPMF_TYPES, _find, generated_cells, generated_histogram
from engine.data.geography import ID_LENGTHS
from engine.data.histogram import BlockHistogram
from engine.data.population import read_manifest
from engine.data.ppmf import COLUMNS, not_usable, ppmf_histogram, ppmf_records
from engine.data.validate import CsvLayout, csv_layout, lines_table
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


def _recode_ppmf(
    layout: CsvLayout,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of a PPMF/MDF file: :func:`engine.data.ppmf.ppmf_records` on
    each batch of lines (row numbers counted from the batch's split)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for item in _split_batches(batches):
            if isinstance(item, tuple):
                yield _one_row(LINES, item[0], 0, item[1], None)
                continue
            try:
                table = lines_table(layout, item.lines, item.first)
            except DataValidationError as exc:
                summary = str(exc).split(":\n", 1)[0]
                payload = _problems_payload(summary, exc.problems)
                yield _one_row(PROBLEMS, item.start, item.first, 0, payload)
                continue
            if table is None:
                continue
            records, problems = ppmf_records(table)
            if problems or records is None:
                payload = _problems_payload(not_usable(layout.file), problems)
                yield _one_row(PROBLEMS, item.start, item.first, 0, payload)
                continue
            geography, cell = records
            block = pc.cast(pa.array(geography["Block"].to_numpy(dtype=object)), pa.int64())
            yield _cells_batch(item.start, item.first, block.to_numpy(), cell)

    return run


def _recode_generated(
    name: str, header: list[str]
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of a generated ``ppmf.csv``: Arrow's CSV parse of each batch
    of lines, then :func:`engine.data.generated.generated_cells`."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for item in _split_batches(batches):
            if isinstance(item, tuple):
                yield _one_row(LINES, item[0], 0, item[1], None)
                continue
            text = "\n".join(item.lines).encode("utf-8")
            try:
                table = pacsv.read_csv(
                    pa.py_buffer(text),
                    read_options=pacsv.ReadOptions(column_names=header),
                    convert_options=pacsv.ConvertOptions(
                        include_columns=list(PPMF_TYPES), column_types=PPMF_TYPES
                    ),
                )
                block, cell = generated_cells(table, name, first_line=item.first + 1)
            except (pa.ArrowInvalid, ValidationError) as exc:
                message = str(exc) if isinstance(exc, ValidationError) else _unreadable(item, exc)
                yield _one_row(PROBLEMS, item.start, item.first, 0, json.dumps({"text": message}))
                continue
            ids = pc.cast(block, pa.int64()).to_numpy()
            yield _cells_batch(item.start, item.first, ids, cell)

    def _unreadable(item: _Batch, exc: Exception) -> str:
        """The first value that is not a whole number, else the batch's first row."""

        try:
            text = pacsv.read_csv(
                pa.py_buffer("\n".join(item.lines).encode("utf-8")),
                read_options=pacsv.ReadOptions(column_names=header),
                convert_options=pacsv.ConvertOptions(
                    include_columns=list(PPMF_TYPES),
                    column_types=dict.fromkeys(PPMF_TYPES, pa.string()),
                ),
            )
        except pa.ArrowInvalid:
            text = None
        if text is not None:
            for column, kind in PPMF_TYPES.items():
                if kind == "string":
                    continue
                values = text.column(column)
                whole = pc.match_substring_regex(values, r"^\s*[+-]?[0-9]+\s*$")
                bad = np.flatnonzero(~whole.to_numpy(zero_copy_only=False))
                if bad.size:
                    at = int(bad[0])
                    return (
                        f"{name} row {item.first + 1 + at}: {column} "
                        f"{values[at].as_py()!r} is not a whole number"
                    )
        return (
            f"{name} row {item.first + 1}: the records from this row on (one batch of up to "
            f"{BATCH_ROWS:,}) are not readable as generated person records ({exc})"
        )

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


def _header_line(path: Path) -> str:
    """The first line of a local file (plain or gzip), byte-order mark and line end removed."""

    check_path(path, path.name, 1 << 62)
    with path.open("rb") as handle:
        gz = handle.read(2) == GZIP_MAGIC
    opener: Any = gzip.open if gz else open
    try:
        with opener(path, "rb") as handle:
            raw = handle.readline(1 << 20)
    except (OSError, EOFError) as exc:
        raise DataValidationError(
            [Problem(path.name, f"cannot read the file: {getattr(exc, 'strerror', None) or exc}")]
        ) from None
    check_content(raw, path.name)
    return raw.decode("utf-8-sig", errors="replace").rstrip("\r\n")


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


def _raise_problems(table: pa.Table, file: str, generated: bool) -> None:
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
    later = ""
    if len(rows) > 1:
        later = (
            f"… and problems in {len(rows) - 1:,} later batch(es) of up to {BATCH_ROWS:,} rows: "
            "the Spark backend reports the first batch of the file that has any; fix these and run "
            "again (or check the whole file with --backend local)"
        )
    data = json.loads(payload)
    if generated:  # "ppmf.csv row N: …", N counted from the split's line 0
        text = re.sub(
            r" row (\d+):",
            lambda m: f" row {int(m.group(1)) + offset}:",
            data["text"],
            count=1,
        )
        raise ValidationError(text + (f"\n{later}" if later else ""))
    problems = [
        Problem(f, message, None if row is None else int(row) + offset, column)
        for f, message, row, column in data["problems"]
    ]
    if later:
        problems.append(Problem(file, later))
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
        layout = csv_layout(_header_line(path), COLUMNS, label=path.name)
        grouped, table = _recoded(spark, path, _recode_ppmf(layout))
        _raise_problems(table, path.name, generated=False)
        if SparkBlockCells(grouped).cells().limit(1).count() == 0:  # as the local reader says
            raise DataValidationError(
                [Problem(path.name, "the file has a header but no data rows")]
            )
        held = SparkBlockCells(grouped, block_filter)
        blocks, index, cell, count = _block_cells(held.cells().toArrow())
        hist = ppmf_histogram(blocks, index, cell, count)
    elif kind == "generated":
        manifest = read_manifest(path)
        persons = _find(path, "ppmf")
        header = [h.strip() for h in _header_line(persons).split(",")]
        missing = [c for c in PPMF_TYPES if c not in header]
        if missing:
            raise ValidationError(f"{persons} lacks column(s) {missing}")
        grouped, table = _recoded(spark, persons, _recode_generated(persons.name, header))
        _raise_problems(table, persons.name, generated=True)
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
