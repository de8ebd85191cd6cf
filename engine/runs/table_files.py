"""Run tables as CSV or Parquet files, written from chunks and read back with checks (docs/topdown.md "Outputs").

A run's large tables (TopDown estimates, measurements, microdata) are written from an *iterator of
chunks* (:mod:`engine.topdown.export`), one chunk at a time, so a production-scale run never holds
one giant frame: :func:`write_table` appends each chunk to a CSV file (header once) or writes it as
one row group of a Parquet file (``pyarrow.parquet.ParquetWriter``, zstd compression) and lets it go
before asking for the next. A Parquet file carries its own description in its key-value metadata
under ``phexplore`` (table name, whether it is sparse and what was left out, the dense row count).

Formats (:func:`resolve_format`): ``csv``, ``parquet``, or ``auto`` — CSV when the run's dense
estimates table has at most :data:`AUTO_CSV_MAX_ROWS` rows (every shipped sample on its own schema,
e.g. Rhode Island 2010 on the RI schema: 708,642 rows), Parquet above it (e.g. the 2,016-cell
production schema on more than a few hundred geounits).

Reading (:func:`read_table`, :func:`iter_table`) refuses, with a message naming the file, a
Parquet file that is truncated, damaged or not a PHExplore table, and one whose row count differs
from the count recorded when it was written. Each reader takes an already opened ``source`` (a
binary file object) besides the path: a run folder passes the handle whose bytes it has just checked
against the manifest (:meth:`engine.core.manifest.Manifest.open`), so what is parsed is what was
verified (the path then only names the file and its format).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from engine.core.csv_cells import frame_to_csv
from engine.core.errors import OutputError, ValidationError
from engine.runs.output_options import AUTO_CSV_MAX_ROWS, FORMATS

SUFFIX = {"csv": ".csv", "parquet": ".parquet"}
METADATA_KEY = b"phexplore"
"""Key of a PHExplore Parquet table's description in the file's key-value metadata."""
COMPRESSION = "zstd"
STRING_COLUMNS = frozenset(
    {"geolevel", "geounit", "query", "cell", "parent", "GEOID", "RACEETH", "CENRACE"}
)
"""Columns read back as text from CSV (identifiers and labels, never numbers)."""


def check_format(value: str, where: str = "--output-format") -> str:
    """``value`` if it is one of :data:`FORMATS`, else a :class:`ValidationError` naming them."""
    if value not in FORMATS:
        raise ValidationError(f"{where}: expected one of {', '.join(FORMATS)}; got {value!r}")
    return value


def resolve_format(requested: str, dense_rows: int) -> str:
    """The file format of a run: ``requested``, or for ``auto`` CSV up to
    :data:`AUTO_CSV_MAX_ROWS` dense estimate rows and Parquet above."""
    check_format(requested)
    if requested != "auto":
        return requested
    return "csv" if dense_rows <= AUTO_CSV_MAX_ROWS else "parquet"


@dataclass(frozen=True)
class TableFile:
    """What :func:`write_table` wrote: file name, format, rows, chunks and the largest chunk."""

    name: str
    file: str
    format: str
    rows: int
    chunks: int
    max_chunk_rows: int
    columns: tuple[str, ...]
    description: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    """Wall seconds of the write, chunk building included."""

    def as_dict(self, folder: Path | None = None) -> dict[str, Any]:
        """The ``outputs`` entry of metrics.json and the manifest (with ``bytes`` given the folder)."""
        out: dict[str, Any] = {
            "file": self.file,
            "format": self.format,
            "rows": self.rows,
            "columns": list(self.columns),
            "chunks": self.chunks,
            "max_chunk_rows": self.max_chunk_rows,
            "seconds": round(self.seconds, 3),
            **self.description,
        }
        if folder is not None:
            out["bytes"] = (folder / self.file).stat().st_size
        return out


def text_type() -> pa.DataType:
    """The Parquet type of text columns: dictionary-encoded strings (int32 indices).

    Identifiers and labels repeat (every cell of a geounit names it), so chunks carry them as
    pandas categoricals and the file as dictionaries: cheap to write and to read; pandas reads
    them back as categoricals (:func:`read_table` gives plain text unless asked).
    """
    return pa.dictionary(pa.int32(), pa.string())


def _arrow_schema(frame: pd.DataFrame, schema: pa.Schema | None) -> pa.Schema:
    """The explicit ``schema``, or text for object columns and pandas' types for the rest."""
    if schema is not None:
        return schema
    fields = []
    for name, dtype in frame.dtypes.items():
        if pd.api.types.is_object_dtype(dtype) or isinstance(
            dtype, pd.StringDtype | pd.CategoricalDtype
        ):
            fields.append(pa.field(str(name), text_type()))
        else:
            fields.append(pa.field(str(name), pa.from_numpy_dtype(dtype)))
    return pa.schema(fields)


def write_table(
    chunks: Iterable[pd.DataFrame],
    folder: str | Path,
    name: str,
    fmt: str,
    *,
    schema: pa.Schema | None = None,
    description: Mapping[str, Any] | None = None,
) -> TableFile:
    """Write ``chunks`` (frames with the same columns) as ``folder/name.csv`` or ``.parquet``.

    Chunks are consumed one at a time and not kept: each is appended to the CSV (header with the
    first) or written as one Parquet row group. ``schema`` fixes the Parquet column types (default:
    text for object columns, pandas' types otherwise, from the first chunk). ``description`` is
    stored in the Parquet metadata (:data:`METADATA_KEY`) and returned in the :class:`TableFile`.
    """
    if fmt not in SUFFIX:
        raise ValidationError(f"table format must be csv or parquet; got {fmt!r}")
    started = time.perf_counter()
    path = Path(folder) / f"{name}{SUFFIX[fmt]}"
    info = {"table": name, **dict(description or {})}
    rows = n_chunks = largest = 0
    columns: tuple[str, ...] = tuple(schema.names) if schema is not None else ()
    writer: pq.ParquetWriter | None = None
    try:
        with open(path, "w", encoding="utf-8", newline="") if fmt == "csv" else _nothing() as out:
            for chunk in chunks:
                if not columns:
                    columns = tuple(str(c) for c in chunk.columns)
                if fmt == "csv":
                    frame_to_csv(chunk, out, header=n_chunks == 0)  # formula-like text made inert
                else:
                    if writer is None:
                        arrow = _arrow_schema(chunk, schema).with_metadata(
                            {METADATA_KEY: json.dumps(info, sort_keys=True).encode("utf-8")}
                        )
                        writer = pq.ParquetWriter(path, arrow, compression=COMPRESSION)
                    table = pa.Table.from_pandas(chunk, preserve_index=False)
                    table = table.select(writer.schema.names).cast(writer.schema)
                    writer.write_table(table, row_group_size=max(1, len(chunk)))
                rows += len(chunk)
                largest = max(largest, len(chunk))
                n_chunks += 1
                del chunk
            if n_chunks == 0:
                if fmt == "csv":
                    out.write(",".join(columns) + "\n")
                else:
                    empty = pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
                    arrow = _arrow_schema(empty, schema).with_metadata(
                        {METADATA_KEY: json.dumps(info, sort_keys=True).encode("utf-8")}
                    )
                    writer = pq.ParquetWriter(path, arrow, compression=COMPRESSION)
    finally:
        if writer is not None:
            writer.close()
    return TableFile(
        name=name,
        file=path.name,
        format=fmt,
        rows=rows,
        chunks=n_chunks,
        max_chunk_rows=largest,
        columns=columns,
        description=dict(description or {}),
        seconds=time.perf_counter() - started,
    )


class _nothing:
    """A context manager doing nothing (the Parquet branch opens its own file)."""

    def __enter__(self) -> Any:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


# ------------------------------------------------------------------ reading


def _parquet(path: Path, source: IO[bytes] | None = None) -> pq.ParquetFile:
    """The opened Parquet file, or an :class:`OutputError` saying it is truncated or damaged."""
    try:
        return pq.ParquetFile(source if source is not None else path)
    except (pa.ArrowException, OSError) as exc:
        raise OutputError(
            f"{path}: not a complete Parquet file ({str(exc).strip() or type(exc).__name__}); "
            "the run that wrote it was interrupted or the file was damaged — rerun the command"
        ) from None


def table_description(path: str | Path, source: IO[bytes] | None = None) -> dict[str, Any]:
    """The PHExplore description stored in a Parquet table's metadata (``{}`` for CSV)."""
    p = Path(path)
    if p.suffix != ".parquet":
        return {}
    meta = _parquet(p, source).schema_arrow.metadata or {}
    raw = meta.get(METADATA_KEY)
    if raw is None:
        raise OutputError(f"{p}: a Parquet file without PHExplore's table description")
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise OutputError(f"{p}: its PHExplore table description is not valid JSON") from None
    if not isinstance(value, dict):
        raise OutputError(f"{p}: its PHExplore table description is not a JSON object")
    return value


def check_table(
    path: str | Path, *, rows: int | None = None, source: IO[bytes] | None = None
) -> int:
    """Check that ``path`` is a readable table (and has ``rows`` rows when given); its row count.

    Parquet: the footer must be readable (a truncated file is refused) and carry PHExplore's
    description; every row group is read, so a damaged page is found here, not halfway through a
    reader. CSV: the file must exist and its row count (lines after the header) is returned.
    """
    p = Path(path)
    if source is None and not p.is_file():
        raise OutputError(f"{p}: missing; the run folder is incomplete — rerun the command")
    if p.suffix == ".parquet":
        table_description(p, source)
        handle = _parquet(p, source)
        counted = 0
        try:
            for i in range(handle.num_row_groups):
                counted += handle.read_row_group(i).num_rows
        except (pa.ArrowException, OSError) as exc:
            raise OutputError(
                f"{p}: row group {i + 1} of {handle.num_row_groups} cannot be read ({exc}); the file "
                "is damaged — rerun the command"
            ) from None
    elif source is not None:
        counted = max(0, sum(1 for _ in source) - 1)
        source.seek(0)
    else:
        with open(p, "rb") as handle_csv:
            counted = max(0, sum(1 for _ in handle_csv) - 1)
    if rows is not None and counted != rows:
        raise OutputError(
            f"{p}: holds {counted:,} rows but {rows:,} were written; the file is incomplete or "
            "was altered — rerun the command"
        )
    return counted


def _csv_dtypes(
    path: Path, columns: Sequence[str] | None, source: IO[bytes] | None = None
) -> dict[str, Any]:
    header = pd.read_csv(source if source is not None else path, nrows=0).columns
    if source is not None:
        source.seek(0)
    if "RTYPE" in header or "GEOID" in header:  # microdata: every column is a code
        return dict.fromkeys(header, str)
    return {c: str for c in header if c in STRING_COLUMNS and (columns is None or c in columns)}


def _plain_text(frame: pd.DataFrame) -> pd.DataFrame:
    """Categorical (dictionary-encoded) columns of a Parquet table as plain text, like CSV's."""
    for column in frame.columns:
        if isinstance(frame[column].dtype, pd.CategoricalDtype):
            frame[column] = frame[column].astype(str)
    return frame


def read_table(
    path: str | Path,
    *,
    columns: Sequence[str] | None = None,
    categorical: bool = False,
    source: IO[bytes] | None = None,
) -> pd.DataFrame:
    """A whole table file (CSV or Parquet) as a frame; identifiers and labels as text
    (``categorical=True``: Parquet text columns stay categoricals, much smaller in memory).
    ``source``: the file already opened (and verified) — read instead of ``path``."""
    p = Path(path)
    if p.suffix == ".parquet":
        handle = _parquet(p, source)
        try:
            frame = handle.read(columns=list(columns) if columns else None).to_pandas()
        except (pa.ArrowException, OSError) as exc:
            raise OutputError(f"{p}: cannot be read ({exc}); rerun the command") from None
        return frame if categorical else _plain_text(frame)
    if source is None and not p.is_file():
        raise OutputError(f"{p}: missing; the run folder is incomplete — rerun the command")
    return pd.read_csv(
        source if source is not None else p,
        dtype=_csv_dtypes(p, columns, source),
        usecols=list(columns) if columns else None,
        keep_default_na=False,
        na_values=[""],
    )


def iter_table(
    path: str | Path,
    *,
    chunk_rows: int = 500_000,
    columns: Sequence[str] | None = None,
    source: IO[bytes] | None = None,
) -> Iterator[pd.DataFrame]:
    """A table file in frames of at most ``chunk_rows`` rows (bounded memory for large runs);
    ``source``: the file already opened (and verified) — read instead of ``path``."""
    p = Path(path)
    if p.suffix == ".parquet":
        handle = _parquet(p, source)
        try:
            for batch in handle.iter_batches(
                batch_size=chunk_rows, columns=list(columns) if columns else None
            ):
                yield _plain_text(batch.to_pandas())
        except (pa.ArrowException, OSError) as exc:
            raise OutputError(f"{p}: cannot be read ({exc}); rerun the command") from None
        return
    yield from pd.read_csv(
        source if source is not None else p,
        dtype=_csv_dtypes(p, columns, source),
        usecols=list(columns) if columns else None,
        chunksize=chunk_rows,
        keep_default_na=False,
        na_values=[""],
    )
