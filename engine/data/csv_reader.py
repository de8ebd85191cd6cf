"""The one reader of delimited inputs: Arrow's streaming CSV reader, typed and checked batch by batch.

Every delimited input — PPMF/MDF persons, block CSVs, P.L. 94-171 segments, CEF persons/units/geo,
a generated population's files, entity CSVs, and the lines a Spark executor reads — goes through
:class:`CsvReader` (docs/data.md "What is checked"):

* the bytes come from a :class:`~engine.data.sources.TextStream` (size limit, gzip, what a binary
  file is, UTF-8 or Latin-1, blank lines noted), never read whole;
* the header is parsed by Arrow, its delimiter (comma, tab, semicolon, pipe) detected from the
  column names, the requested columns matched case-insensitively (a missing or repeated column is
  refused with what the header holds); header-less layouts (P.L. 94-171) give the field names;
* Arrow's streaming reader (``pyarrow.csv.open_csv``, one record per line, serial so that its
  ``invalid_row_handler`` knows each row's line) hands over a batch of about :data:`BLOCK_BYTES`;
  a row with the wrong number of fields is a located problem, never a stop;
* each requested column is typed on the whole batch: whole numbers (:class:`Integers`: one Arrow
  cast when clean), codes (:class:`Codes`: one hash lookup) or text (blanks stripped). Only the
  rows that fail become Python objects, for their messages (:mod:`engine.data.columns`);
* the header line appearing again (two exports concatenated) is found among the rows a typed
  column refuses (or, with text columns only, by one comparison of a column), and left out;
* blank lines are skipped; every other record keeps its row number (the header is row 0, row *n*
  the *n*-th line after it; in a header-less file row *n* is line *n*).

Problems are collected for the whole file (:class:`~engine.data.problems.Problems`) and come back
with the table, so a loader adds its own checks and raises everything at once.
"""

from __future__ import annotations

import array
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from engine.core.errors import DataValidationError, Problem
from engine.data.columns import (
    BLANKS,
    Codes,
    Converted,
    Integers,
    convert_codes,
    convert_integers,
    texts_at,
    trim,
)
from engine.data.csv_layout import (
    DELIMITER_NAMES,
    ColumnSpec,
    CsvLayout,
    header_layout,
    record_layout,
)
from engine.data.csv_records import RECORD_COUNTS, CsvBatch, CsvTable
from engine.data.problems import Problems
from engine.data.sources import (
    DEFAULT_MAX_BYTES,
    DataSource,
    TextStream,
    UnicodeLocated,
    source_name,
)

BLOCK_BYTES = 8 << 20
"""Bytes of text per batch (≈ 240,000 PPMF person records)."""

Kind = Integers | Codes
"""How a column is typed; a column without a kind is text."""


class CsvReader:
    """An open delimited file: its layout is known, its records not yet read (module docstring).

    ``columns``/``optional`` are requested as in :func:`resolve_layout`; ``field_names`` gives a
    header-less layout (with ``delimiter``, required then); ``layout`` reuses one already resolved
    (the lines a Spark task reads, numbered from ``first_row``). ``encodings`` lists what the
    file may be in (``"utf-8"``, ``"latin-1"``): the next is tried when a byte is not the first.
    ``block_bytes`` is the text of a batch (default :data:`BLOCK_BYTES`); with ``require_rows``
    False a file without records is not refused (a Spark task's lines may all be blank). With
    ``large_text`` text is read as Arrow ``large_string`` (what pandas' Arrow-backed strings hold:
    handed over without a copy).
    """

    def __init__(
        self,
        source: DataSource,
        columns: Sequence[ColumnSpec] = (),
        *,
        optional: Sequence[str] = (),
        max_bytes: int = DEFAULT_MAX_BYTES,
        name: str | None = None,
        encodings: Sequence[str] = ("utf-8",),
        field_names: Sequence[str] | None = None,
        delimiter: str | None = None,
        layout: CsvLayout | None = None,
        first_row: int = 1,
        block_bytes: int | None = None,
        require_rows: bool = True,
        large_text: bool = False,
    ) -> None:
        self.label = (
            layout.file if layout is not None and name is None else source_name(source, name)
        )
        self.source, self.max_bytes = source, max_bytes
        self.encodings = tuple("utf-8" if e == "utf-8-sig" else e for e in encodings)
        self.block_bytes = int(block_bytes or BLOCK_BYTES)
        self.first_row = int(first_row)
        self.require_rows = require_rows
        self.text_type = pa.large_string() if large_text else pa.string()
        self.problems = Problems()
        self._columns, self._optional = list(columns), list(optional)
        self._field_names, self._delimiter = field_names, delimiter
        self._given_layout = layout
        self.encoding = self.encodings[0]
        self.stream, self.layout = self._open()

    def close(self) -> None:
        """Close the file (when the records are not to be read)."""
        self.stream.close()

    # ------------------------------------------------------------------ opening

    def _open(self) -> tuple[TextStream, CsvLayout]:
        while True:
            try:
                stream = TextStream(self.source, self.label, self.max_bytes, encoding=self.encoding)
                return stream, self._layout(stream)
            except UnicodeLocated as exc:
                if not self._next_encoding():
                    raise self._located(exc) from None

    def _next_encoding(self) -> bool:
        position = self.encodings.index(self.encoding)
        if position + 1 >= len(self.encodings):
            return False
        self.encoding = self.encodings[position + 1]
        return True

    def _located(self, exc: UnicodeLocated) -> DataValidationError:
        """A bad byte's problem with the row of its line (header-less: line n is row n)."""
        has_header = self._given_layout is None and self._field_names is None
        shift = 0 if has_header else (self.first_row if self._given_layout else 1)
        problem = exc.problems[0]
        names = " or ".join({"utf-8": "UTF-8", "latin-1": "Latin-1"}[e] for e in self.encodings)
        message = problem.message.replace("valid UTF-8 text", f"valid {names} text")
        return DataValidationError([Problem(problem.file, message, exc.line + shift)])

    def _layout(self, stream: TextStream) -> CsvLayout:
        if self._given_layout is not None:
            return self._given_layout
        if self._field_names is not None:
            return record_layout(
                stream.first_line(),
                self.label,
                self._field_names,
                self._columns,
                self._delimiter or ",",
            )
        return header_layout(stream, self.label, self._columns, self._optional)

    # ------------------------------------------------------------------ reading

    def batches(self, kinds: Mapping[str, Kind] | None = None) -> Iterator[CsvBatch]:
        """The records, batch by batch, typed as ``kinds`` says (key → kind; others are text).

        Problems (wrong field counts, bad values, the header repeated) go to :attr:`problems`;
        blank lines and repeated headers are left out. Raises at the end when the file has no
        record at all."""
        yield from _Batches(self, dict(kinds or {})).run()

    def read(self, kinds: Mapping[str, Kind] | None = None) -> CsvTable:
        """The whole file as one :class:`CsvTable` (the batches' columns joined)."""
        kinds = dict(kinds or {})
        while True:
            try:
                return self._collect(kinds)
            except UnicodeLocated as exc:
                if not self._next_encoding():
                    raise self._located(exc) from None
                self.problems = Problems()
                self.stream, self.layout = self._open()

    def _collect(self, kinds: dict[str, Kind]) -> CsvTable:
        text: dict[str, list[pa.Array]] = {k: [] for k in self.layout.wanted if k not in kinds}
        values: dict[str, list[np.ndarray]] = {k: [] for k in kinds}
        valid: dict[str, list[np.ndarray | None]] = {k: [] for k in kinds}
        for k in kinds:
            if _keeps_text(kinds[k]):
                text[k] = []
        rows: list[np.ndarray] = []
        for batch in self.batches(kinds):
            rows.append(batch.rows)
            for k in text:
                text[k].append(batch.text[k])
            for k in values:
                values[k].append(batch.values[k])
                valid[k].append(batch.valid[k])
        invalid: dict[str, np.ndarray] = {}
        for k, masks in valid.items():
            if any(m is not None for m in masks):
                invalid[k] = ~np.concatenate(
                    [
                        np.ones(v.size, dtype=bool) if m is None else m
                        for m, v in zip(masks, values[k], strict=True)
                    ]
                )
        empty_int = np.zeros(0, dtype=np.int64)
        return CsvTable(
            file=self.label,
            delimiter=self.layout.delimiter,
            header=self.layout.header,
            found=dict(self.layout.found),
            rows=np.concatenate(rows) if rows else empty_int,
            text={k: pa.chunked_array(v, self.text_type) for k, v in text.items()},
            values={
                k: np.concatenate(v) if v else np.zeros(0, dtype=np.int64)
                for k, v in values.items()
            },
            invalid=invalid,
            problems=tuple(self.problems.result()),
        )


class _Batches:
    """The batch loop of :meth:`CsvReader.batches` (one pass over the stream)."""

    def __init__(self, reader: CsvReader, kinds: dict[str, Kind]) -> None:
        self.reader, self.kinds = reader, kinds
        self.layout = reader.layout
        self.invalid_lines = array.array("q")  # lines of rows Arrow's handler skipped
        self.records = 0  # records handed out by Arrow so far (blank lines included)
        self.kept = 0
        self.blank_seen = 0
        self.shift = reader.first_row - 1  # row of line 1 (Spark splits start mid-file)

    def run(self) -> Iterator[CsvBatch]:
        try:
            yield from self._run()
        finally:
            self.reader.stream.close()
            # Arrow's allocator keeps the freed batches' memory for reuse: give it back once the
            # pass is over (≈ 88 MB resident after a 1M-person file; docs/topdown.md, memory).
            pa.default_memory_pool().release_unused()

    def _run(self) -> Iterator[CsvBatch]:
        reader, layout = self.reader, self.layout
        names = [f"f{i}" for i in range(len(layout.header))]
        keep = sorted({names[i] for i in layout.wanted.values()}, key=names.index)
        try:
            arrow = pacsv.open_csv(
                reader.stream,
                read_options=pacsv.ReadOptions(
                    use_threads=False, column_names=names, block_size=reader.block_bytes
                ),
                parse_options=pacsv.ParseOptions(
                    delimiter=layout.delimiter,
                    newlines_in_values=False,
                    ignore_empty_lines=False,
                    invalid_row_handler=self._invalid_row,
                ),
                convert_options=pacsv.ConvertOptions(
                    include_columns=keep,
                    column_types={n: reader.text_type for n in keep},
                    strings_can_be_null=False,
                    quoted_strings_can_be_null=False,
                    check_utf8=False,  # the stream has checked (or transcoded) every byte
                ),
            )
        except pa.ArrowInvalid as exc:
            if "Empty CSV file" in str(exc):
                self._finish()
                return
            raise self._unreadable(exc) from None
        while True:
            try:
                batch = arrow.read_next_batch()
            except StopIteration:
                break
            except pa.ArrowInvalid as exc:
                raise self._unreadable(exc) from None
            if batch.num_rows:
                out = self._batch(batch, names)
                if out is not None:
                    yield out
        self._finish()

    def _unreadable(self, exc: Exception) -> DataValidationError:
        """Arrow stopped (a line longer than a batch, a stray quote): the problems so far and
        where reading stopped."""
        row = self.records + len(self.invalid_lines) + 1 + self.shift
        return DataValidationError(
            [
                *self.reader.problems.result(),
                Problem(
                    self.reader.label,
                    f"cannot read the file from this row on ({exc}); a line may be longer than "
                    f"{self.reader.block_bytes:,} bytes or hold a stray quote",
                    row,
                ),
            ]
        )

    def _invalid_row(self, row: Any) -> str:
        """Arrow's handler of a row with the wrong number of fields: located, skipped."""
        line = int(row.number) if row.number is not None else self.records + 1
        self.invalid_lines.append(line)
        text = row.text or ""
        if not text.strip():
            return "skip"  # a line of blanks: a blank line, no record
        layout = self.layout
        what = "the header" if layout.has_header else "the record layout"
        problems = self.reader.problems
        actual, expected = int(row.actual_columns), len(layout.header)
        delim = DELIMITER_NAMES.get(layout.delimiter, repr(layout.delimiter))
        problems.add(
            ("", "fields"),
            self.reader.label,
            None,
            np.asarray([line + self.shift]),
            lambda take: [
                f"the row has {actual} fields but {what} has {expected} ({delim}-separated); "
                "check the delimiter and quoting"
            ],
            "with a wrong field count",
        )
        return "skip"

    def _rows(self, n: int) -> np.ndarray:
        """The line numbers of the next ``n`` records (Arrow's skipped lines in between)."""
        k = np.arange(self.records, self.records + n, dtype=np.int64)
        if len(self.invalid_lines):
            lines = np.frombuffer(self.invalid_lines, dtype=np.int64)
            before = lines - 1 - np.arange(lines.size)  # records before each skipped line
            k = k + np.searchsorted(before, k, side="right")
        return k + 1

    def _batch(self, batch: pa.RecordBatch, names: list[str]) -> CsvBatch | None:
        layout, reader, kinds = self.layout, self.reader, self.kinds
        n = batch.num_rows
        rows = self._rows(n) + self.shift
        self.records += n
        raw = {key: batch.column(names[i]) for key, i in layout.wanted.items()}
        drop = self._blank(rows - self.shift, raw)
        converted: dict[str, Converted] = {}
        for key, kind in kinds.items():
            if isinstance(kind, Integers):
                converted[key] = convert_integers(raw[key], kind)
            else:
                converted[key] = convert_codes(raw[key], kind)
        stream = reader.stream
        blanks = stream.spaces or (stream.tabs and layout.delimiter != "\t")
        text = {key: trim(raw[key]) if blanks else raw[key] for key in raw if key not in kinds}
        header_rows = self._repeated_header(raw, converted, text, drop)
        if header_rows.size:
            drop = np.zeros(n, dtype=bool) if drop is None else drop
            drop[header_rows] = True
            reader.problems.add(
                ("", "header"),
                reader.label,
                None,
                rows[header_rows],
                lambda take: (
                    [
                        "the header line appears again in the data; were two exports concatenated? "
                        "Keep one header and check for repeated records"
                    ]
                    * len(take)
                ),
                "repeating the header line",
            )
        for key, conv in converted.items():
            column = layout.found.get(key, key)
            for check, what, index, describe in conv.failures:
                if drop is not None:
                    index = index[~drop[index]]
                if index.size:

                    def messages(
                        take: np.ndarray, index=index, values=conv.text, describe=describe
                    ) -> list[str]:
                        return [describe(v) for v in texts_at(values, index[take])]

                    reader.problems.add(
                        (column, check), reader.label, column, rows[index], messages, what
                    )
        for key, conv in converted.items():
            if _keeps_text(kinds[key]):
                text[key] = conv.text
        values = {k: c.values for k, c in converted.items()}
        valid = {k: c.valid for k, c in converted.items()}
        if drop is not None and drop.any():
            keep = ~drop
            if not keep.any():
                return None
            mask = pa.array(keep)
            text = {k: v.filter(mask) for k, v in text.items()}
            values = {k: v[keep] for k, v in values.items()}
            valid = {k: None if v is None else v[keep] for k, v in valid.items()}
            rows = rows[keep]
        self.kept += int(rows.size)
        return CsvBatch(text=text, values=values, valid=valid, rows=rows)

    def _blank(self, lines: np.ndarray, raw: dict[str, Any]) -> np.ndarray | None:
        """Records that are blank lines (Arrow gives them as records of empty values)."""
        blank = self.reader.stream.blank_lines
        drop = None
        if len(blank) > self.blank_seen:
            noted = np.asarray(blank[self.blank_seen :], dtype=np.int64)
            inside = np.isin(lines, noted)
            if inside.any():
                drop = inside
            self.blank_seen = len(blank) - int(np.count_nonzero(noted > lines[-1]))
        if len(self.layout.header) == 1 and raw:
            only = next(iter(raw.values()))
            empty = np.asarray(pc.equal(trim(only), "").to_numpy(zero_copy_only=False), dtype=bool)
            if empty.any():
                drop = empty if drop is None else drop | empty
        return drop

    def _repeated_header(
        self,
        raw: dict[str, Any],
        converted: dict[str, Converted],
        text: dict[str, Any],
        drop: np.ndarray | None,
    ) -> np.ndarray:
        """Positions of records that repeat the header (every requested column = its name)."""
        layout = self.layout
        none = np.zeros(0, dtype=np.int64)
        if not layout.has_header or not raw:
            return none
        if converted:  # a header name is never a valid whole number or code
            failures = [f[2] for f in next(iter(converted.values())).failures]
            index = np.unique(np.concatenate(failures)) if failures else none
        else:
            key = next(iter(text))
            same = pc.equal(pc.utf8_lower(text[key]), layout.found[key].lower())
            index = np.flatnonzero(np.asarray(same.to_numpy(zero_copy_only=False), dtype=bool))
        if drop is not None and index.size:
            index = index[~drop[index]]
        if index.size == 0:
            return none
        hits = np.ones(index.size, dtype=bool)
        for key, values in raw.items():
            name = layout.found[key].strip().lower()
            seen = [v.strip(BLANKS).lower() for v in texts_at(values, index)]
            hits &= np.asarray([v == name for v in seen], dtype=bool)
        return index[hits]

    def _finish(self) -> None:
        reader = self.reader
        counts = RECORD_COUNTS.get()
        if counts is not None:
            counts[reader.label] = self.kept
        if not reader.stream.has_content and self.kept == 0 and not len(self.invalid_lines):
            raise DataValidationError([Problem(reader.label, "the file is empty")])
        if self.kept == 0 and not reader.problems and reader.require_rows:
            message = (
                "the file has a header but no data rows" if self.layout.has_header else "no records"
            )
            raise DataValidationError([Problem(reader.label, message)])


def _keeps_text(kind: Kind | None) -> bool:
    return kind is None or bool(getattr(kind, "keep_text", False))


def read_csv_table(
    source: DataSource,
    columns: Sequence[ColumnSpec],
    *,
    optional: Sequence[str] = (),
    max_bytes: int = DEFAULT_MAX_BYTES,
    name: str | None = None,
    encodings: Sequence[str] = ("utf-8",),
    kinds: Mapping[str, Kind] | None = None,
) -> CsvTable:
    """Read the ``columns`` (and any present ``optional`` ones) of a delimited file with a header
    (:class:`CsvReader`), typed as ``kinds`` says."""
    reader = CsvReader(
        source, columns, optional=optional, max_bytes=max_bytes, name=name, encodings=encodings
    )
    return reader.read(kinds)
