"""The layout of a delimited file: its header (or fixed field names), delimiter and wanted columns.

Part of the one reader of delimited inputs (:mod:`engine.data.csv_reader`). The header line is
parsed by Arrow's CSV parser (quotes honoured) with each of comma, tab, semicolon and pipe; the
delimiter whose split finds most of the requested column names wins. Column names match after
stripping blanks, case-insensitively; alternatives (``("GQTYPE_PL", "GQTYPE")``) take the first
present. A missing column, or a requested column repeated in the header, is refused naming what
the header holds (row 0). A header-less layout (P.L. 94-171) gives its field names and delimiter;
a first line without that delimiter is refused with the delimiter it does hold.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.csv as pacsv

from engine.core.errors import DataValidationError, Problem
from engine.data.sources import TextStream

DELIMITERS = (",", "\t", ";", "|")
DELIMITER_NAMES = {",": "comma", "\t": "tab", ";": "semicolon", "|": "pipe"}
ColumnSpec = str | tuple[str, ...]
"""A requested column, or a tuple of alternative names of which the first present is used."""


def _alternatives(spec: ColumnSpec) -> tuple[str, ...]:
    return (spec,) if isinstance(spec, str) else tuple(spec)


def key_of(spec: ColumnSpec) -> str:
    """The name a requested column is known by: its first alternative."""
    return _alternatives(spec)[0]


def split_fields(line: bytes, delimiter: str) -> list[str] | None:
    """The fields of one line as Arrow's CSV parser splits them (quotes honoured), stripped;
    None when the line does not parse."""
    fields = _split(line, delimiter)
    return None if fields is None else list(fields)


@functools.lru_cache(maxsize=64)
def _split(line: bytes, delimiter: str) -> tuple[str, ...] | None:
    """:func:`split_fields`, remembered: a header is split once to find its delimiter and once
    more to read it (and the files of one extract share their headers)."""
    if not line.strip():
        return None
    try:
        table = pacsv.read_csv(
            io.BytesIO(line + b"\n"),
            read_options=pacsv.ReadOptions(use_threads=False),
            parse_options=pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=False),
        )
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return None
    return tuple(name.strip() for name in table.column_names)


def detect_delimiter(header_line: str, wanted: Sequence[str]) -> str:
    """The delimiter among :data:`DELIMITERS` whose split of the header finds most wanted names
    (ties: more fields, then the order of :data:`DELIMITERS`)."""
    wanted_lower = {w.lower() for w in wanted}
    line = header_line.encode("utf-8")

    def score(delimiter: str) -> tuple[int, int]:
        # a delimiter absent from the line splits nothing: no need to ask the parser
        split = split_fields(line, delimiter) if delimiter in header_line else None
        fields = split or [header_line.strip()]
        return (sum(f.strip('"').lower() in wanted_lower for f in fields), len(fields))

    return max(DELIMITERS, key=score)


@dataclass(frozen=True)
class CsvLayout:
    """A file's record layout: the delimiter, the header (or the field names of a header-less
    layout) and where each requested column is (``wanted``: key → field index; ``found``: key →
    the name in the header)."""

    file: str
    delimiter: str
    header: tuple[str, ...]
    wanted: dict[str, int]
    found: dict[str, str]
    has_header: bool = True


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


def resolve_layout(
    label: str,
    header: tuple[str, ...],
    delimiter: str,
    columns: Sequence[ColumnSpec],
    optional: Sequence[str] = (),
    *,
    has_header: bool = True,
) -> CsvLayout:
    """Match the requested ``columns`` (and any present ``optional`` ones) to ``header``; a
    missing column, or a requested column repeated in the header, is refused (row 0)."""
    index_of: dict[str, int] = {}
    duplicated: set[str] = set()
    for i, h in enumerate(header):
        if h.lower() in index_of:
            duplicated.add(h)
        index_of.setdefault(h.lower(), i)
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
    used = {f.lower() for f in found.values()}
    for h in sorted(duplicated):
        if h.lower() in used:
            problems.append(Problem(label, "the column appears more than once in the header", 0, h))
    if problems:
        raise DataValidationError(problems, summary=f"{label}: the header is not usable")
    return CsvLayout(label, delimiter, header, wanted, found, has_header)


def header_layout(
    stream: TextStream, label: str, columns: Sequence[ColumnSpec], optional: Sequence[str] = ()
) -> CsvLayout:
    """The layout of a file whose first line is its header; the header line is consumed."""
    first = stream.first_line()
    try:
        header_line = first.decode("utf-8")
    except UnicodeDecodeError:  # a Latin-1 header transcoded is UTF-8; never here
        header_line = first.decode("latin-1")
    all_names = [n for spec in columns for n in _alternatives(spec)]
    all_names += list(optional)
    if not header_line.strip():
        if not stream.first_line() and not _rest_has_content(stream):
            raise DataValidationError([Problem(label, "the file is empty")])
        raise DataValidationError(
            [
                Problem(
                    label,
                    "the first line is blank: it must be the header naming the columns",
                    0,
                )
            ]
        )
    delimiter = detect_delimiter(header_line, all_names)
    fields = split_fields(first, delimiter)
    if fields is None:
        raise DataValidationError(
            [Problem(label, "cannot parse the header line (check its quotes)", 0)]
        )
    layout = resolve_layout(label, tuple(fields), delimiter, columns, optional)
    stream.skip_first_line()
    return layout


def _rest_has_content(stream: TextStream) -> bool:
    while piece := stream.read(8 << 20):
        if not piece.isspace():
            return True
    return False


def record_layout(
    first: bytes,
    label: str,
    field_names: Sequence[str],
    columns: Sequence[ColumnSpec],
    delimiter: str,
) -> CsvLayout:
    """The layout of a header-less file of records with ``field_names`` (``first``: its first
    line, to check the delimiter)."""
    names = tuple(field_names)
    if not first.strip():
        raise DataValidationError([Problem(label, "the file is empty")])
    if delimiter.encode() not in first:
        seen = [DELIMITER_NAMES[d] for d in DELIMITERS if d != delimiter and d.encode() in first]
        hint = f"; it contains {', '.join(seen)} characters instead" if seen else ""
        raise DataValidationError(
            [
                Problem(
                    label,
                    f"expected {DELIMITER_NAMES[delimiter]}-separated records "
                    f"({len(names)} fields) but the first line has no {delimiter!r}{hint}",
                    1,
                )
            ]
        )
    index = {n: i for i, n in enumerate(names)}
    wanted = {key_of(c): index[key_of(c)] for c in columns}
    return CsvLayout(label, delimiter, names, wanted, {k: k for k in wanted}, has_header=False)
