"""Reader and validator of the official PHSafe CEF-extract layout (persons, units, geo).

The layout is PHSafe 3.0.0's input (U.S. Census Bureau ``DAS_2020_SDHC_Production_Code``, schema
files ``persons.json``, ``units.json``, ``geo.json``; summarised in ``/work/shared/data/README.md``,
"PHSafe input record layouts"; PHS §3.1 describes the abstract person_df/unit_df). An extract is a
directory (or a mapping of uploads) with ``persons.csv``, ``units.csv`` and ``geo.csv``, each
optionally gzip-compressed (``.csv.gz``); the delimiter is detected (the fixtures use commas).

Validation follows the official input validation (PHSafe ``input_validation.py``): every column
present; every code in its domain (RTYPE, QAGE 0–115, CENHISP, CENRACE 01–63, RELSHIP 20–38, FINAL_POP,
NPF, HHSPAN, HHRACE 00–63, TEN, HHT, HHT2, CPLT, nine-digit MAFIDs, geography code widths); and,
across files after the optional state filter, no repeated MAFID in units or geo, every person's MAFID
in units, every unit's MAFID in geo and every geo MAFID in units. Every problem is located
(file, row, column) and all are raised together as one :class:`DataValidationError`: the problems
of every file, and the cross-file checks on the records whose MAFIDs are valid.

Each file is read by the one reader (:mod:`engine.data.csv_reader`): codes and numbers are checked
batch by batch on whole columns, and the three tables are kept as Arrow text handed to pandas
(Arrow-backed strings from pandas 3 on), never one Python string per value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from engine.core.errors import DataValidationError, Problem
from engine.data.cef_types import (
    CEF_FILE_NAMES,
    GEO_COLUMNS,
    PERSON_COLUMNS,
    UNIT_COLUMNS,
    CefExtract,
)
from engine.data.columns import Codes, Integers, digit_code_problems, duplicate_problems
from engine.data.csv_reader import CsvReader, Kind
from engine.data.csv_records import CsvTable
from engine.data.folders import one_file
from engine.data.problems import Problems
from engine.data.sources import DEFAULT_MAX_BYTES, DataSource


def _codes(codes: tuple[str, ...], width: int | None = None) -> Codes:
    return Codes(codes, width=width, keep_text=True)


MAFID_MIN, MAFID_MAX = 100_000_001, 900_000_000
"""The MAFID domain of the official schema."""

KINDS: dict[str, dict[str, Kind]] = {
    "persons": {
        "MAFID": Integers(MAFID_MIN, MAFID_MAX, "MAFID", keep_text=True),
        "RTYPE": _codes(("3", "5")),
        "QAGE": Integers(0, 115, "age", keep_text=True),
        "CENHISP": _codes(("1", "2")),
        "CENRACE": _codes(tuple(f"{i:02d}" for i in range(1, 64)), 2),
        "RELSHIP": _codes(tuple(str(i) for i in range(20, 39))),
    },
    "units": {
        "MAFID": Integers(MAFID_MIN, MAFID_MAX, "MAFID", keep_text=True),
        "RTYPE": _codes(("2", "4")),
        "FINAL_POP": Integers(0, 100_000, "population", keep_text=True),
        "NPF": Integers(0, 97, "persons in family", keep_text=True),
        "HHSPAN": _codes(("0", "1", "2")),
        "HHRACE": _codes(tuple(f"{i:02d}" for i in range(0, 64)), 2),
        "TEN": _codes(tuple(str(i) for i in range(0, 5))),
        "HHT": _codes(tuple(str(i) for i in range(0, 8))),
        "HHT2": _codes(tuple(f"{i:02d}" for i in range(0, 13)), 2),
        "CPLT": _codes(tuple(str(i) for i in range(0, 6))),
    },
    "geo": {
        "MAFID": Integers(MAFID_MIN, MAFID_MAX, "MAFID", keep_text=True),
        "RTYPE": _codes(("2", "4")),
    },
}
"""How each file's columns are typed and checked (the official input validation)."""
GEO_DIGITS: dict[str, int] = {
    "TABBLKST": 2,
    "TABBLKCOU": 3,
    "TABTRACTCE": 6,
    "TABBLK": 4,
    "TABBLKGRPCE": 1,
    "REGIONCE": 1,
    "DIVISIONCE": 1,
    "PLACEFP": 5,
    "AIANNHCE": 4,
}
"""Geography codes of the geo file and their exact number of digits."""
_COLUMNS = {"persons": PERSON_COLUMNS, "units": UNIT_COLUMNS, "geo": GEO_COLUMNS}

CefSource = str | os.PathLike[str] | Mapping[str, DataSource]
"""A directory holding the three files, or a mapping ``{"persons"|"units"|"geo": source}``."""


def cef_files(path_or_dir: CefSource) -> tuple[dict[str, DataSource], dict[str, str]]:
    """``(sources, labels)`` of the three files of an extract: a folder's (one candidate per
    file, :func:`engine.data.folders.one_file`) or a mapping's."""
    if isinstance(path_or_dir, Mapping):
        sources = {kind: path_or_dir[kind] for kind in _COLUMNS if kind in path_or_dir}
        missing = [k for k in _COLUMNS if k not in sources]
        if missing:
            raise DataValidationError(
                [Problem("extract", f"missing the {k} file") for k in missing],
                summary="the CEF extract is incomplete",
            )
        return sources, {kind: CEF_FILE_NAMES[kind] for kind in _COLUMNS}
    directory = Path(path_or_dir)
    if not directory.is_dir():
        raise DataValidationError(
            [Problem(str(directory), "not a directory holding persons.csv, units.csv and geo.csv")]
        )
    problems: list[Problem] = []
    paths: dict[str, Path] = {}
    for kind in _COLUMNS:
        try:
            paths[kind] = one_file(
                directory,
                kind,
                what="CEF extract",
                fix="an extract is persons.csv, units.csv and geo.csv (each may be .csv.gz)",
            )
        except DataValidationError as exc:
            problems += exc.problems
    if problems:
        raise DataValidationError(problems, summary="the CEF extract's files are not usable")
    return dict(paths), {kind: p.name for kind, p in paths.items()}


def _read(kind: str, source: DataSource, label: str, max_bytes: int) -> CsvTable:
    reader = CsvReader(
        source, list(_COLUMNS[kind]), max_bytes=max_bytes, name=label, large_text=True
    )
    return reader.read(KINDS[kind])


def load_cef_extract(
    path_or_dir: CefSource,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    state_filter: Sequence[str] | None = None,
) -> CefExtract:
    """Read and validate a CEF extract; raise :class:`DataValidationError` listing every problem.

    ``state_filter`` (FIPS codes) restricts the cross-file checks, and the returned extract, to the
    records of those states — as the official reader does before validating — so records of other
    states (which a run would ignore) cannot block a run.
    """
    sources, labels = cef_files(path_or_dir)
    problems: list[Problem] = []
    tables: dict[str, CsvTable] = {}
    for kind in _COLUMNS:
        try:
            tables[kind] = _read(kind, sources[kind], labels[kind], max_bytes)
        except DataValidationError as exc:  # this file cannot be read: the others still are
            problems += exc.problems
    checks = Problems()
    for kind, table in tables.items():
        checks.extend(table.problems)
        if kind == "geo":
            for column, width in GEO_DIGITS.items():
                digit_code_problems(
                    checks, table.file, column, table.text[column], table.rows, width
                )
    if len(tables) == len(_COLUMNS):
        keep = _kept(tables, state_filter)
        _cross_file_problems(checks, tables, keep, labels)
    problems += checks.result()
    if problems:
        raise DataValidationError(problems, summary="the CEF extract is not usable")
    text = pd.Series(np.array([""], dtype=object)).dtype
    frames = {
        kind: pd.DataFrame({c: _frame_column(t.text[c], keep[kind], text) for c in _COLUMNS[kind]})
        for kind, t in tables.items()
    }
    return CefExtract(persons=frames["persons"], units=frames["units"], geo=frames["geo"])


def _frame_column(values: pa.ChunkedArray, keep: np.ndarray | None, text: object) -> object:
    """A text column for pandas: Arrow-backed strings (pandas ≥ 3) or object strings."""
    if keep is not None:
        values = values.filter(pa.array(keep))
    if isinstance(text, pd.StringDtype) and text.storage == "pyarrow":
        return pd.array(values, dtype=text)
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=object)


def _kept(
    tables: dict[str, CsvTable], state_filter: Sequence[str] | None
) -> dict[str, np.ndarray | None]:
    """The records of the states of ``state_filter`` (all when None), per file."""
    if state_filter is None:
        return dict.fromkeys(tables)
    wanted = pa.array(sorted({str(s) for s in state_filter}), pa.string())
    geo = tables["geo"]
    geo_keep = np.asarray(
        pc.is_in(geo.text["TABBLKST"], value_set=wanted).to_numpy(zero_copy_only=False), bool
    )
    state_mafids = geo.values["MAFID"][geo_keep & geo.ok("MAFID")]
    return {
        "geo": geo_keep,
        "units": _in(tables["units"].values["MAFID"], state_mafids),
        "persons": _in(tables["persons"].values["MAFID"], state_mafids),
    }


def _in(values: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Whether each of ``values`` is among ``others`` (binary search in the sorted MAFIDs: an
    extract's are sorted already, and then nothing is sorted)."""
    if others.size == 0:
        return np.zeros(values.size, dtype=bool)
    if not bool(np.all(others[1:] >= others[:-1])):
        others = np.sort(others)
    position = np.minimum(np.searchsorted(others, values), others.size - 1)
    return others[position] == values


def _cross_file_problems(
    problems: Problems,
    tables: dict[str, CsvTable],
    keep: dict[str, np.ndarray | None],
    labels: dict[str, str],
) -> None:
    """No repeated MAFID in units or geo; every person's MAFID in units, every unit's in geo and
    every geo MAFID in units (the kept records with valid MAFIDs)."""
    usable: dict[str, np.ndarray] = {}
    for kind, table in tables.items():
        ok = table.ok("MAFID")
        usable[kind] = ok if keep[kind] is None else ok & keep[kind]
    for kind in ("units", "geo"):
        t = tables[kind]
        index = np.flatnonzero(usable[kind])
        duplicate_problems(
            problems,
            t.file,
            "MAFID",
            t.values["MAFID"][index],
            t.rows[index],
            lambda mafid, first: f"duplicate MAFID {mafid} (first seen in row {first})",
            "with a duplicate MAFID",
        )
    for kind, other in (("persons", "units"), ("units", "geo"), ("geo", "units")):
        t = tables[kind]
        mafid = t.values["MAFID"]
        others = tables[other].values["MAFID"][tables[other].ok("MAFID")]
        missing = np.flatnonzero(usable[kind] & ~_in(mafid, others))
        problems.add(
            ("MAFID", f"link {kind} {other}"),
            t.file,
            "MAFID",
            t.rows[missing],
            lambda take, missing=missing, mafid=mafid, other=other: [
                f"MAFID {mafid[i]} has no record in {labels[other]}" for i in missing[take]
            ],
            f"whose MAFID has no record in {labels[other]}",
        )
