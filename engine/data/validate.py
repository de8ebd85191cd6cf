"""Shared input checks of every data loader: size limit, encoding, delimiter, columns, integers, codes.

The loaders (``ri2010``, ``ppmf``, ``pl94171``, ``block_csv``, and the CEF-extract reader) accept a
path, raw bytes, or a binary file-like object (what the app receives from an upload). This module
turns such a source into a :class:`CsvTable` holding only the requested columns as strings, and
offers vectorised column checks that return located :class:`~engine.core.errors.Problem` objects
rather than raising, so a loader can gather every problem of a file before raising one
:class:`~engine.core.errors.DataValidationError` (issue 4, item 4).

Nothing here evaluates or unpickles user input: bytes are decoded as text and split by the standard
:mod:`csv` module. Row numbers follow :class:`~engine.core.errors.Problem`: the header is row 0 and
row *n* is the *n*-th line after it (the line a spreadsheet shows as *n* + 1).
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from engine.core.errors import DataValidationError, Problem
from engine.core.sniff import (
    GZIP_MAGIC,
    check_content,
    check_path,
    file_bytes,
    read_path,
    repeated_header_rows,
)

DEFAULT_MAX_BYTES = 200 * 1024 * 1024
"""Default size limit of one input file (200 MB); every loader takes ``max_bytes`` to change it."""

MAX_PROBLEMS_PER_CHECK = 10
"""A check reports at most this many rows, then one summary problem with the remaining count."""

DELIMITERS = (",", "\t", ";", "|")
_DELIMITER_NAMES = {",": "comma", "\t": "tab", ";": "semicolon", "|": "pipe"}
_BLANKS = " \t\r\n\x0b\x0c"
"""Characters stripped from both ends of every value (ASCII white space), by either reader."""
_ENCODING_NAMES = {"utf-8-sig": "UTF-8", "utf-8": "UTF-8", "latin-1": "Latin-1"}

DataSource = str | os.PathLike[str] | bytes | bytearray | memoryview | BinaryIO
"""A path, the bytes of a file, or a binary file-like object (e.g. a Streamlit upload)."""

ColumnSpec = str | tuple[str, ...]
"""A required column, or a tuple of alternative names of which the first present is used."""


def source_name(source: DataSource, name: str | None = None) -> str:
    """A readable name of ``source`` for problem messages."""
    if name:
        return name
    if isinstance(source, str | os.PathLike):
        return Path(source).name
    if isinstance(source, bytes | bytearray | memoryview):
        return "<uploaded data>"
    return Path(str(getattr(source, "name", "<uploaded file>"))).name


def read_source(source: DataSource, *, max_bytes: int, name: str | None = None) -> bytes:
    """Return the bytes of ``source``; raise if it is missing, over ``max_bytes``, empty or binary."""
    label = source_name(source, name)
    if max_bytes <= 0:
        raise ValueError("max_bytes must be positive")
    if isinstance(source, str | os.PathLike):
        data = read_path(Path(source), label, max_bytes)
    elif isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
    else:
        if getattr(source, "seekable", lambda: False)():
            source.seek(0)  # an upload may have been read before (e.g. for a preview)
        parts: list[bytes] = []
        total = 0
        while total <= max_bytes:  # in 1 MiB pieces: never ask for max_bytes at once
            piece = source.read(min(1 << 20, max_bytes + 1 - total))
            if not piece:
                break
            if isinstance(piece, str):
                piece = piece.encode("utf-8")
            parts.append(piece)
            total += len(piece)
        data = b"".join(parts)
    if len(data) > max_bytes:
        _fail(label, _too_large(len(data), max_bytes))
    data = file_bytes(data, label, max_bytes)  # gzip decompressed; zip, UTF-16, binary refused
    if not data.strip():
        _fail(label, "the file is empty")
    return data


def _too_large(size: int, max_bytes: int) -> str:
    return (
        f"the file is {size:,} bytes, over the size limit of {max_bytes:,} bytes; "
        "raise the limit (max_bytes) or upload a smaller extract"
    )


def _fail(label: str, message: str, row: int | None = None, column: str | None = None) -> NoReturn:
    raise DataValidationError([Problem(label, message, row, column)])


def decode_text(data: bytes, label: str, encodings: Sequence[str] = ("utf-8-sig",)) -> str:
    """Decode ``data`` with the first of ``encodings`` that works; else report where it fails."""
    first_error: UnicodeDecodeError | None = None
    for encoding in encodings:
        try:
            return data.decode(encoding)
        except UnicodeDecodeError as exc:
            first_error = first_error or exc
    assert first_error is not None
    line = data.count(b"\n", 0, first_error.start)
    bad = data[first_error.start : first_error.start + 1].hex()
    raise DataValidationError(
        [
            Problem(
                label,
                f"the file is not valid {' or '.join(_ENCODING_NAMES.get(e, e) for e in encodings)} "
                f"text: byte 0x{bad} at offset "
                f"{first_error.start:,}; save it as UTF-8 (e.g. 'CSV UTF-8' in a spreadsheet)",
                row=line,
            )
        ]
    )


@dataclass(frozen=True)
class CsvTable:
    """The requested columns of a delimited text file, as arrays of stripped strings.

    The streaming reader of large files stores text as fixed-width ``'U<n>'`` arrays and the
    columns its caller named as ``integers`` as int64 (see :func:`read_csv_table`); the whole-file
    reader stores object arrays of ``str``. Index a column, or call ``str`` on a value, either way.

    ``columns`` maps each requested name (the first name of an alternatives tuple) to its values;
    ``found`` maps it to the header name actually used; ``rows`` holds each record's row number.
    """

    file: str
    delimiter: str
    header: tuple[str, ...]
    columns: dict[str, np.ndarray]
    found: dict[str, str]
    rows: np.ndarray

    @property
    def n_rows(self) -> int:
        return int(self.rows.size)

    def subset(self, mask: np.ndarray) -> CsvTable:
        """The records selected by the boolean ``mask`` (row numbers kept)."""
        return CsvTable(
            file=self.file,
            delimiter=self.delimiter,
            header=self.header,
            columns={k: v[mask] for k, v in self.columns.items()},
            found=self.found,
            rows=self.rows[mask],
        )


def detect_delimiter(header_line: str, wanted: Iterable[str]) -> str:
    """The delimiter among :data:`DELIMITERS` whose split of the header matches most wanted names."""
    wanted_lower = {w.lower() for w in wanted}

    def score(delim: str) -> tuple[int, int]:
        fields = [f.strip().strip('"').lower() for f in header_line.split(delim)]
        return (sum(f in wanted_lower for f in fields), len(fields))

    return max(DELIMITERS, key=score)


def read_csv_table(
    source: DataSource,
    columns: Sequence[ColumnSpec],
    *,
    optional: Sequence[str] = (),
    max_bytes: int = DEFAULT_MAX_BYTES,
    name: str | None = None,
    encodings: Sequence[str] = ("utf-8-sig",),
    integers: Sequence[str] = (),
) -> CsvTable:
    """Read the ``columns`` (and any present ``optional`` ones) of a delimited text file with a header.

    Raises :class:`DataValidationError` on a size, encoding, delimiter, missing-column, ragged-row or
    empty-data problem. Header names are matched after stripping blanks, case-insensitively.

    ``integers`` names the columns the caller reads with :func:`int_column`: a large file's reader
    (:func:`_stream_table`) converts them to int64 block by block instead of keeping their text.
    """
    label = source_name(source, name)
    all_names = [c for spec in columns for c in _alternatives(spec)] + list(optional)
    if isinstance(source, str | os.PathLike):
        streamed = _stream_table(
            Path(source), label, columns, optional, all_names, max_bytes, frozenset(integers)
        )
        if streamed is not None:
            return _no_repeated_header(streamed)
    text = decode_text(read_source(source, max_bytes=max_bytes, name=label), label, encodings)
    header_line = text.split("\n", 1)[0].rstrip("\r")
    delimiter = detect_delimiter(header_line, all_names)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header = tuple(h.strip() for h in next(reader))
    except csv.Error as exc:
        _fail(label, f"cannot parse the header: {exc}", row=0)
    except StopIteration:  # nothing but a byte-order mark or blanks
        _fail(label, "the file is empty: expected a header line naming the columns", row=0)
    wanted, found = _header_columns(label, header, delimiter, columns, optional)
    fast = _fast_table(label, text, delimiter, header, wanted, found, skip_rows=1)
    if fast is not None and tuple(h.strip() for h in _split_line(header_line, delimiter)) == header:
        table = fast
    else:
        table = _collect_records(
            reader, label, delimiter, header, wanted, found, line_offset=1, what="the header"
        )
    return _no_repeated_header(table)


def _header_columns(
    label: str,
    header: tuple[str, ...],
    delimiter: str,
    columns: Sequence[ColumnSpec],
    optional: Sequence[str] = (),
) -> tuple[dict[str, int], dict[str, str]]:
    """``(wanted, found)``: each requested column's index in ``header`` and the header name used
    (see :class:`CsvTable`); raises a DataValidationError for missing or repeated columns."""
    index_of: dict[str, int] = {}
    duplicated: set[str] = set()
    for i, h in enumerate(header):
        key = h.lower()
        if key in index_of:
            duplicated.add(h)
        index_of.setdefault(key, i)

    problems: list[Problem] = []
    wanted: dict[str, int] = {}
    found: dict[str, str] = {}
    for spec in columns:
        names = _alternatives(spec)
        hit = next((n for n in names if n.lower() in index_of), None)
        if hit is None:
            problems.append(_missing_column(label, names, header, delimiter))
            continue
        wanted[names[0]] = index_of[hit.lower()]
        found[names[0]] = header[index_of[hit.lower()]]
    for opt in optional:
        if opt.lower() in index_of and opt not in wanted:
            wanted[opt] = index_of[opt.lower()]
            found[opt] = header[index_of[opt.lower()]]
    for h in sorted(duplicated):
        if h.lower() in {f.lower() for f in found.values()}:
            problems.append(Problem(label, "the column appears more than once in the header", 0, h))
    if problems:
        raise DataValidationError(problems, summary=f"{label}: the header is not usable")
    return wanted, found


@dataclass(frozen=True)
class CsvLayout:
    """A delimited file's header as :func:`read_csv_table` resolves it: what :func:`lines_table`
    needs to read any run of the file's lines (e.g. one batch on a Spark executor)."""

    file: str
    delimiter: str
    header: tuple[str, ...]
    wanted: dict[str, int]
    found: dict[str, str]


def csv_layout(
    header_line: str,
    columns: Sequence[ColumnSpec],
    *,
    label: str,
    optional: Sequence[str] = (),
) -> CsvLayout:
    """The layout of a file whose first line is ``header_line`` (a byte-order mark and line end
    removed): the delimiter and requested columns found as :func:`read_csv_table` finds them,
    with the same problems (a missing or repeated column) raised."""
    all_names = [c for spec in columns for c in _alternatives(spec)] + list(optional)
    if not header_line.strip():
        _fail(label, "the file is empty: expected a header line naming the columns", row=0)
    delimiter = detect_delimiter(header_line, all_names)
    header = tuple(h.strip() for h in _split_line(header_line, delimiter))
    wanted, found = _header_columns(label, header, delimiter, columns, optional)
    return CsvLayout(label, delimiter, header, wanted, found)


def lines_table(layout: CsvLayout, lines: Sequence[str], first_row: int) -> CsvTable | None:
    """The requested columns of consecutive data ``lines`` of a file (no line ends), the first
    being row ``first_row`` (the header is row 0), as :func:`read_csv_table` reads them: the
    same strings, row numbers, blank-line handling and problems (a wrong field count, the header
    repeated). ``None`` when the lines hold no record (only blank lines)."""
    text = "\n".join(lines)
    if not text.strip():
        return None
    fast = _fast_table(
        layout.file,
        text,
        layout.delimiter,
        layout.header,
        layout.wanted,
        layout.found,
        skip_rows=0,
    )
    if fast is not None:
        table = CsvTable(
            file=fast.file,
            delimiter=fast.delimiter,
            header=fast.header,
            columns=fast.columns,
            found=fast.found,
            rows=fast.rows + (first_row - 1),
        )
    else:
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=layout.delimiter)
        table = _collect_records(
            reader,
            layout.file,
            layout.delimiter,
            layout.header,
            layout.wanted,
            layout.found,
            line_offset=1 - first_row,
            what="the header",
        )
    return _no_repeated_header(table)


def _no_repeated_header(table: CsvTable) -> CsvTable:
    """``table``, unless its header line appears again among the records (two exports joined)."""
    if any(v.dtype.kind == "i" for v in table.columns.values()):
        return table  # a column read as integers cannot hold a header name (see _stream_table)
    repeats = repeated_header_rows(table.columns, table.found, table.rows)
    if repeats:
        _fail(
            table.file,
            "the header line appears again in the data (row "
            + ", ".join(map(str, repeats))
            + "); were two exports concatenated? Keep one header and check for repeated records",
            row=repeats[0],
        )
    return table


STREAM_BYTES = 32 * 1024 * 1024
"""Plain-text files at least this large are read in blocks (:func:`_stream_table`)."""
STREAM_BLOCK = 4 * 1024 * 1024
"""Bytes per block of the streaming reader."""
_CANONICAL_INT = r"^(0|[1-9][0-9]{0,17})$"
"""Whole numbers the streaming reader converts as it reads (their int64 prints back unchanged)."""


def _arrow_parse_options(delimiter: str) -> pacsv.ParseOptions:
    """Arrow's CSV parsing as our readers need it: one record per line, blank lines kept (so row
    numbers in messages match the file)."""
    return pacsv.ParseOptions(
        delimiter=delimiter, newlines_in_values=False, ignore_empty_lines=False
    )


def _arrow_text_columns(keep: Sequence[str]) -> pacsv.ConvertOptions:
    """Read only the ``keep`` columns, as text (never null): values are validated by our code."""
    return pacsv.ConvertOptions(
        include_columns=list(keep),
        column_types={n: pa.string() for n in keep},
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
    )


def _stream_table(
    path: Path,
    label: str,
    columns: Sequence[ColumnSpec],
    optional: Sequence[str],
    all_names: Sequence[str],
    max_bytes: int,
    integers: frozenset[str] = frozenset(),
) -> CsvTable | None:
    """Read the wanted columns of a large, regular, uncompressed file block by block.

    Each block is converted to compact arrays as it is read, so peak memory is a small multiple of
    the data kept, not of the file: the ``integers`` columns become int64 (8 bytes a value) and the
    others fixed-width numpy text (``'U<n>'``, 4 bytes a character), never Python string objects.
    Returns ``None`` (the caller then reads the whole file and locates any problem) for small or
    compressed files, a header that lacks a column, any irregularity Arrow's reader stops at (a
    blank line, a wrong field count, text that is not UTF-8), a value of an ``integers`` column that
    is not a plain canonical whole number (``0`` or 1–18 digits without a leading zero or sign, so
    that its int64 prints back as the same text), or a NUL character (which ``'U'`` would drop).
    """
    check_path(path, label, max_bytes)
    if path.stat().st_size < STREAM_BYTES:
        return None
    with path.open("rb") as handle:
        head = handle.read(64 * 1024)
    if head.startswith(GZIP_MAGIC) or b"\n" not in head:
        return None
    check_content(head, label)
    first = head.split(b"\n", 1)[0].rstrip(b"\r")
    try:
        header_line = first.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    delimiter = detect_delimiter(header_line, all_names)
    header = tuple(h.strip() for h in _split_line(header_line, delimiter))
    index_of: dict[str, int] = {}
    for i, h in enumerate(header):
        if h.lower() in index_of:
            return None  # a duplicated column: the full reader reports it
        index_of[h.lower()] = i
    wanted: dict[str, int] = {}
    found: dict[str, str] = {}
    for spec in columns:
        names = _alternatives(spec)
        hit = next((n for n in names if n.lower() in index_of), None)
        if hit is None:
            return None
        wanted[names[0]] = index_of[hit.lower()]
        found[names[0]] = header[index_of[hit.lower()]]
    for opt in optional:
        if opt.lower() in index_of and opt not in wanted:
            wanted[opt] = index_of[opt.lower()]
            found[opt] = header[index_of[opt.lower()]]
    if len(header) < 2:
        return None
    names = [f"f{i}" for i in range(len(header))]
    keep = sorted({names[i] for i in wanted.values()})
    parts: dict[str, list[np.ndarray]] = {k: [] for k in wanted}
    n_rows = 0
    try:
        reader = pacsv.open_csv(
            str(path),
            read_options=pacsv.ReadOptions(
                skip_rows=1, column_names=names, block_size=STREAM_BLOCK
            ),
            parse_options=_arrow_parse_options(delimiter),
            convert_options=_arrow_text_columns(keep),
        )
        for batch in reader:
            if batch.num_rows == 0:
                continue
            for key, i in wanted.items():
                column = batch.column(batch.schema.get_field_index(names[i]))
                trimmed = pc.utf8_trim(column, characters=_BLANKS)
                if key in integers:
                    if not pc.all(pc.match_substring_regex(trimmed, _CANONICAL_INT)).as_py():
                        return None  # the whole-file reader quotes the text of each problem
                    parts[key].append(pc.cast(trimmed, pa.int64()).to_numpy())
                else:
                    if pc.any(pc.match_substring(trimmed, "\x00")).as_py():
                        return None
                    parts[key].append(trimmed.to_numpy(zero_copy_only=False).astype(str))
            n_rows += batch.num_rows
    except (pa.ArrowException, ValueError, OSError):
        return None
    if n_rows == 0:
        return None
    kept: dict[str, np.ndarray] = {}
    for key in list(parts):  # one column at a time: its blocks are freed before the next is joined
        kept[key] = np.concatenate(parts.pop(key))
    return CsvTable(
        file=label,
        delimiter=delimiter,
        header=header,
        columns=kept,
        found=found,
        rows=np.arange(1, n_rows + 1, dtype=np.int64),
    )


def read_headerless_table(
    source: DataSource,
    field_names: Sequence[str],
    wanted: Sequence[str],
    *,
    delimiter: str = "|",
    max_bytes: int = DEFAULT_MAX_BYTES,
    name: str | None = None,
    encodings: Sequence[str] = ("utf-8-sig",),
) -> CsvTable:
    """Read the ``wanted`` fields of a header-less delimited file whose records have ``field_names``.

    Row *n* is the file's *n*-th line. Raises on size, encoding, field-count or empty-file problems;
    a file whose first line does not split on ``delimiter`` gets a delimiter hint.
    """
    label = source_name(source, name)
    text = decode_text(read_source(source, max_bytes=max_bytes, name=label), label, encodings)
    first_line = text.split("\n", 1)[0]
    if delimiter not in first_line:
        seen = [_DELIMITER_NAMES[d] for d in DELIMITERS if d != delimiter and d in first_line]
        hint = f"; it contains {', '.join(seen)} characters instead" if seen else ""
        _fail(
            label,
            f"expected {_DELIMITER_NAMES[delimiter]}-separated records ({len(field_names)} fields) "
            f"but the first line has no {delimiter!r}{hint}",
            row=1,
        )
    header = tuple(field_names)
    index = {n: i for i, n in enumerate(header)}
    columns = {w: index[w] for w in wanted}
    found = {w: w for w in wanted}
    fast = _fast_table(label, text, delimiter, header, columns, found, skip_rows=0)
    if fast is not None:
        return fast
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    return _collect_records(
        reader, label, delimiter, header, columns, found, line_offset=0, what="the record layout"
    )


def _split_line(line: str, delimiter: str) -> list[str]:
    return next(csv.reader([line], delimiter=delimiter), [])


def _fast_table(
    label: str,
    text: str,
    delimiter: str,
    header: tuple[str, ...],
    wanted: dict[str, int],
    found: dict[str, str],
    *,
    skip_rows: int,
) -> CsvTable | None:
    """Read the wanted columns with Arrow's CSV reader, or ``None`` if the file is irregular.

    Any irregularity (a blank line, a wrong field count, a quoted newline, an over-long row) makes
    Arrow fail, and the caller falls back to the row-by-row reader, which locates the problem. On a
    regular file both readers give the same strings and row numbers (row *n* = *n*-th record).
    """
    if len(header) < 2 or text.startswith(("\n", "\r\n")) or "\n\n" in text or "\n\r\n" in text:
        return None  # blank lines: Arrow would read them as records; the fallback skips them
    names = [f"f{i}" for i in range(len(header))]
    keep = sorted({names[i] for i in wanted.values()})
    try:
        arrow = pacsv.read_csv(
            io.BytesIO(text.encode("utf-8")),
            read_options=pacsv.ReadOptions(skip_rows=skip_rows, column_names=names),
            parse_options=_arrow_parse_options(delimiter),
            convert_options=_arrow_text_columns(keep),
        )
    except (pa.ArrowException, ValueError):
        return None
    if arrow.num_rows == 0:
        return None
    columns = {
        key: pc.utf8_trim(arrow.column(names[i]), characters=_BLANKS).to_numpy(zero_copy_only=False)
        for key, i in wanted.items()
    }
    return CsvTable(
        file=label,
        delimiter=delimiter,
        header=header,
        columns={k: np.asarray(v, dtype=object) for k, v in columns.items()},
        found=found,
        rows=np.arange(1, arrow.num_rows + 1, dtype=np.int64),
    )


def _collect_records(
    reader: Any,
    label: str,
    delimiter: str,
    header: tuple[str, ...],
    wanted: dict[str, int],
    found: dict[str, str],
    *,
    line_offset: int,
    what: str,
) -> CsvTable:
    """Collect the ``wanted`` fields of every record; report records with the wrong field count."""
    n_fields = len(header)
    values: dict[str, list[str]] = {k: [] for k in wanted}
    rows: list[int] = []
    ragged: list[Problem] = []
    n_ragged = 0
    try:
        for record in reader:
            row_no = reader.line_num - line_offset
            if not record or (len(record) == 1 and not record[0].strip()):
                continue  # blank line
            if len(record) != n_fields:
                n_ragged += 1
                if n_ragged <= MAX_PROBLEMS_PER_CHECK:
                    ragged.append(
                        Problem(
                            label,
                            f"the row has {len(record)} fields but {what} has {n_fields} "
                            f"({_DELIMITER_NAMES[delimiter]}-separated); check the delimiter and "
                            "quoting",
                            row_no,
                        )
                    )
                continue
            rows.append(row_no)
            for key, idx in wanted.items():
                values[key].append(record[idx].strip(_BLANKS))
    except csv.Error as exc:
        ragged.append(Problem(label, f"cannot parse the row: {exc}", reader.line_num - line_offset))
    if n_ragged > MAX_PROBLEMS_PER_CHECK:
        ragged.append(
            _more(label, n_ragged - MAX_PROBLEMS_PER_CHECK, None, "with a wrong field count")
        )
    if ragged:
        raise DataValidationError(ragged, summary=f"{label}: rows do not match {what}")
    if not rows:
        _fail(label, "the file has a header but no data rows" if line_offset else "no records")
    return CsvTable(
        file=label,
        delimiter=delimiter,
        header=header,
        columns={k: np.asarray(v, dtype=object) for k, v in values.items()},
        found=found,
        rows=np.asarray(rows, dtype=np.int64),
    )


def explain_value(value: str) -> str:
    """Why a text is not a plain whole number, as a clause to append (or "")."""
    v = value.strip().lstrip("+-")
    if v == "":
        return " (empty)"
    if v.isdigit() and not v.isascii():
        return " (it has digits that are not ASCII 0-9)"
    if v.isascii() and v.isdigit() and len(v) > 18:
        return " (too large: counts and ids are limited to 18 digits, the int64 range)"
    import re

    if re.fullmatch(r"[0-9]+(\.[0-9]*)?[eE][+-]?[0-9]+", v):
        return (
            " (scientific notation: a spreadsheet turned it into a number; format the column as "
            "text and export again)"
        )
    if re.fullmatch(r"[0-9]+\.0+", v):
        return " (a decimal point: export whole numbers without decimals)"
    return ""


def clip(value: str, limit: int = 40) -> str:
    """``value`` cut to ``limit`` characters (with an ellipsis) for quoting in a problem message."""
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _alternatives(spec: ColumnSpec) -> tuple[str, ...]:
    return (spec,) if isinstance(spec, str) else tuple(spec)


def _missing_column(
    label: str, names: tuple[str, ...], header: tuple[str, ...], delimiter: str
) -> Problem:
    wanted = " or ".join(repr(n) for n in names)
    shown = ", ".join(header[:12]) + (" …" if len(header) > 12 else "")
    hint = ""
    if len(header) == 1:
        hint = (
            "; the header has a single field — the file may use a delimiter other than comma, "
            "tab, semicolon or pipe"
        )
    return Problem(label, f"missing column {wanted} (header has: {shown}){hint}", 0, names[0])


def _more(label: str, n: int, column: str | None, what: str) -> Problem:
    return Problem(label, f"… and {n:,} more row(s) {what}", None, column)


def _located(
    table: CsvTable, column: str, mask: np.ndarray, describe: Callable[[str], str], what: str
) -> list[Problem]:
    """Problems for the rows of ``column`` selected by ``mask`` (capped, then summarised)."""
    hits = np.flatnonzero(mask)
    name = table.found.get(column, column)
    out = [
        Problem(table.file, describe(clip(str(table.columns[column][i]))), int(table.rows[i]), name)
        for i in hits[:MAX_PROBLEMS_PER_CHECK]
    ]
    if hits.size > MAX_PROBLEMS_PER_CHECK:
        out.append(_more(table.file, hits.size - MAX_PROBLEMS_PER_CHECK, name, what))
    return out


def int_column(
    table: CsvTable,
    column: str,
    *,
    minimum: int | None = 0,
    maximum: int | None = None,
    what: str = "count",
) -> tuple[np.ndarray, list[Problem]]:
    """Parse ``column`` as int64; report non-integers and values outside [minimum, maximum].

    Invalid entries are returned as 0 alongside their problems. A column the streaming reader
    already read as int64 (all canonical whole numbers) is only range-checked.
    """
    values = table.columns[column]
    problems: list[Problem] = []
    if values.dtype.kind == "i":
        out = values.astype(np.int64, copy=False)  # shared with the table; copied before a change
        ok = np.ones(out.shape, dtype=bool)
    else:
        raw = pa.array(values, type=pa.string())
        valid = pc.match_substring_regex(raw, r"^[+-]?[0-9]{1,18}$")
        ok = valid.to_numpy(zero_copy_only=False).astype(bool)
        digits = pc.replace_substring_regex(pc.if_else(valid, raw, "0"), r"^\+", "")
        out = pc.cast(digits, pa.int64()).to_numpy(zero_copy_only=False).astype(np.int64)
        problems += _located(
            table,
            column,
            ~ok,
            lambda v: f"{v!r} is not a whole number" + explain_value(v),
            "that are not whole numbers",
        )
    if minimum is not None:
        low = ok & (out < minimum)
        if minimum == 0:
            problems += _located(
                table, column, low, lambda v: f"negative {what} {v}", f"with a negative {what}"
            )
        else:
            problems += _located(
                table, column, low, lambda v: f"{what} {v} is below {minimum}", f"below {minimum}"
            )
        if low.any():
            out = np.where(low, 0, out)
    if maximum is not None:
        high = ok & (out > maximum)
        problems += _located(
            table, column, high, lambda v: f"{what} {v} is above {maximum}", f"above {maximum}"
        )
        if high.any():
            out = np.where(high, 0, out)
    return out, problems


def code_column(
    table: CsvTable,
    column: str,
    codes: Sequence[str] | Mapping[str, str],
    *,
    width: int | None = None,
) -> tuple[np.ndarray, list[Problem]]:
    """Map each value of ``column`` to the index of its code in ``codes``; report unknown codes.

    With ``width``, all-digit values are left-padded with zeros first (spreadsheets drop leading
    zeros, turning CENRACE ``"01"`` into ``"1"``). Unknown codes are returned as index 0.
    """
    keys = list(codes)
    lookup = {k: i for i, k in enumerate(keys)}
    raw = pd.Series(table.columns[column], dtype=object).astype(str)
    if width is not None:
        digits = raw.str.fullmatch(r"[0-9]+")
        raw = raw.where(~digits, raw.str.zfill(width))
    idx = raw.map(lookup)
    bad = idx.isna().to_numpy()
    shown = ", ".join(keys[:12]) + (" …" if len(keys) > 12 else "")
    problems = _located(
        table,
        column,
        bad,
        lambda v: f"unknown code {v!r} (expected one of {shown})",
        "with unknown codes",
    )
    return idx.fillna(0).to_numpy(dtype=np.int64), problems


def duplicate_problems(
    table: CsvTable, column: str, values: np.ndarray, what: str
) -> list[Problem]:
    """One problem per repeated value of ``values`` (aligned with the table rows), naming both rows."""
    series = pd.Series(values)
    dup = series.duplicated(keep="first").to_numpy()
    if not dup.any():
        return []
    first_row: dict[object, int] = {}
    for v, r in zip(series.tolist(), table.rows.tolist(), strict=True):
        first_row.setdefault(v, r)
    name = table.found.get(column, column)
    hits = np.flatnonzero(dup)
    out = [
        Problem(
            table.file,
            f"duplicate {what} {values[i]!s} (first seen in row {first_row[values[i]]})",
            int(table.rows[i]),
            name,
        )
        for i in hits[:MAX_PROBLEMS_PER_CHECK]
    ]
    if hits.size > MAX_PROBLEMS_PER_CHECK:
        out.append(
            _more(table.file, hits.size - MAX_PROBLEMS_PER_CHECK, name, f"with a duplicate {what}")
        )
    return out


def raise_if(problems: list[Problem], summary: str | None = None) -> None:
    """Raise :class:`DataValidationError` when ``problems`` is non-empty."""
    if problems:
        raise DataValidationError(problems, summary=summary)
