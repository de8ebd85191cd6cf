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
(file, row, column) and all are raised together as one :class:`DataValidationError`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from engine.core.errors import DataValidationError, Problem
from engine.core.sniff import compressed_pair
from engine.data.cef_types import (
    CEF_FILE_NAMES,
    GEO_COLUMNS,
    PERSON_COLUMNS,
    UNIT_COLUMNS,
    CefExtract,
)
from engine.data.validate import (
    DEFAULT_MAX_BYTES,
    MAX_PROBLEMS_PER_CHECK,
    CsvTable,
    DataSource,
    code_column,
    duplicate_problems,
    int_column,
    read_csv_table,
    read_source,
)

_CODES: dict[str, dict[str, tuple[tuple[str, ...], int | None]]] = {
    "persons": {
        "RTYPE": (("3", "5"), None),
        "CENHISP": (("1", "2"), None),
        "CENRACE": (tuple(f"{i:02d}" for i in range(1, 64)), 2),
        "RELSHIP": (tuple(str(i) for i in range(20, 39)), None),
    },
    "units": {
        "RTYPE": (("2", "4"), None),
        "HHSPAN": (("0", "1", "2"), None),
        "HHRACE": (tuple(f"{i:02d}" for i in range(0, 64)), 2),
        "TEN": (tuple(str(i) for i in range(0, 5)), None),
        "HHT": (tuple(str(i) for i in range(0, 8)), None),
        "HHT2": (tuple(f"{i:02d}" for i in range(0, 13)), 2),
        "CPLT": (tuple(str(i) for i in range(0, 6)), None),
    },
    "geo": {"RTYPE": (("2", "4"), None)},
}
_INTS: dict[str, dict[str, tuple[int, int, str]]] = {
    "persons": {"QAGE": (0, 115, "age")},
    "units": {"FINAL_POP": (0, 100_000, "population"), "NPF": (0, 97, "persons in family")},
}
_GEO_DIGITS: dict[str, int] = {
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
_COLUMNS = {"persons": PERSON_COLUMNS, "units": UNIT_COLUMNS, "geo": GEO_COLUMNS}
MAFID_MIN, MAFID_MAX = 100_000_001, 900_000_000
"""The MAFID domain of the official schema."""

CefSource = str | os.PathLike[str] | Mapping[str, DataSource]
"""A directory holding the three files, or a mapping ``{"persons"|"units"|"geo": source}``."""


def _locate(directory: Path, kind: str) -> Path:
    base = CEF_FILE_NAMES[kind]
    found = compressed_pair(directory, base)  # refuses persons.csv beside persons.csv.gz
    if found is not None:
        return found
    raise DataValidationError(
        [Problem(str(directory), f"missing {base} (or {base}.gz) in the extract directory")],
        summary="the CEF extract is incomplete",
    )


def _bytes_of(source: DataSource, label: str, max_bytes: int) -> bytes:
    """The checked text bytes of one CEF file (gzip decompressed; see :mod:`engine.core.sniff`)."""
    return read_source(source, max_bytes=max_bytes, name=label)


def _read(kind: str, source: DataSource, label: str, max_bytes: int) -> CsvTable:
    data = _bytes_of(source, label, max_bytes)
    return read_csv_table(data, list(_COLUMNS[kind]), max_bytes=max_bytes, name=label)


def _field_problems(kind: str, table: CsvTable) -> tuple[np.ndarray, list[Problem]]:
    problems: list[Problem] = []
    mafid, p = int_column(table, "MAFID", minimum=MAFID_MIN, maximum=MAFID_MAX, what="MAFID")
    problems += p
    for column, (codes, width) in _CODES.get(kind, {}).items():
        problems += code_column(table, column, codes, width=width)[1]
    for column, (low, high, what) in _INTS.get(kind, {}).items():
        problems += int_column(table, column, minimum=low, maximum=high, what=what)[1]
    if kind == "geo":
        for column, width in _GEO_DIGITS.items():
            raw = pd.Series(table.columns[column], dtype=object).astype(str)
            bad = ~raw.str.fullmatch(rf"[0-9]{{{width}}}").to_numpy(dtype=bool)
            hits = np.flatnonzero(bad)
            for i in hits[:MAX_PROBLEMS_PER_CHECK]:
                problems.append(
                    Problem(
                        table.file,
                        f"{raw.iloc[i]!r} is not a {width}-digit code",
                        int(table.rows[i]),
                        column,
                    )
                )
            if hits.size > MAX_PROBLEMS_PER_CHECK:
                problems.append(
                    Problem(
                        table.file,
                        f"… and {hits.size - MAX_PROBLEMS_PER_CHECK:,} more",
                        None,
                        column,
                    )
                )
    return mafid, problems


def _missing_link(
    table: CsvTable, mafid: np.ndarray, keep: np.ndarray, other: np.ndarray, other_name: str
) -> list[Problem]:
    missing = keep & ~np.isin(mafid, other)
    hits = np.flatnonzero(missing)
    out = [
        Problem(
            table.file,
            f"MAFID {mafid[i]} has no record in {other_name}",
            int(table.rows[i]),
            "MAFID",
        )
        for i in hits[:MAX_PROBLEMS_PER_CHECK]
    ]
    if hits.size > MAX_PROBLEMS_PER_CHECK:
        out.append(
            Problem(
                table.file,
                f"… and {hits.size - MAX_PROBLEMS_PER_CHECK:,} more MAFIDs missing from {other_name}",
                None,
                "MAFID",
            )
        )
    return out


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
    if isinstance(path_or_dir, Mapping):
        sources = {kind: path_or_dir[kind] for kind in _COLUMNS if kind in path_or_dir}
        missing = [k for k in _COLUMNS if k not in sources]
        if missing:
            raise DataValidationError(
                [Problem("extract", f"missing the {k} file") for k in missing],
                summary="the CEF extract is incomplete",
            )
        labels = {kind: CEF_FILE_NAMES[kind] for kind in _COLUMNS}
    else:
        directory = Path(path_or_dir)
        if not directory.is_dir():
            raise DataValidationError(
                [
                    Problem(
                        str(directory), "not a directory holding persons.csv, units.csv and geo.csv"
                    )
                ]
            )
        paths = {kind: _locate(directory, kind) for kind in _COLUMNS}
        sources = dict(paths)
        labels = {kind: p.name for kind, p in paths.items()}

    tables = {kind: _read(kind, sources[kind], labels[kind], max_bytes) for kind in _COLUMNS}
    problems: list[Problem] = []
    mafids: dict[str, np.ndarray] = {}
    for kind, table in tables.items():
        mafids[kind], p = _field_problems(kind, table)
        problems += p
    if problems:
        raise DataValidationError(problems, summary="the CEF extract has invalid values")

    geo_state = tables["geo"].columns["TABBLKST"].astype(str)
    if state_filter is not None:
        wanted = {str(s) for s in state_filter}
        geo_keep = np.isin(geo_state, list(wanted))
        state_mafids = mafids["geo"][geo_keep]
        keep = {
            "geo": geo_keep,
            "units": np.isin(mafids["units"], state_mafids),
            "persons": np.isin(mafids["persons"], state_mafids),
        }
    else:
        keep = {kind: np.ones(t.n_rows, dtype=bool) for kind, t in tables.items()}

    for kind in ("units", "geo"):
        t = tables[kind]
        idx = np.flatnonzero(keep[kind])
        sub = CsvTable(
            t.file,
            t.delimiter,
            t.header,
            {c: v[idx] for c, v in t.columns.items()},
            t.found,
            t.rows[idx],
        )
        problems += duplicate_problems(sub, "MAFID", mafids[kind][idx], "MAFID")
    problems += _missing_link(
        tables["persons"], mafids["persons"], keep["persons"], mafids["units"], labels["units"]
    )
    problems += _missing_link(
        tables["units"], mafids["units"], keep["units"], mafids["geo"], labels["geo"]
    )
    problems += _missing_link(
        tables["geo"], mafids["geo"], keep["geo"], mafids["units"], labels["units"]
    )
    if problems:
        raise DataValidationError(problems, summary="the CEF extract files are inconsistent")

    frames = {
        kind: pd.DataFrame(
            {c: np.asarray(t.columns[c], dtype=object)[keep[kind]] for c in _COLUMNS[kind]}
        ).reset_index(drop=True)
        for kind, t in tables.items()
    }
    return CefExtract(persons=frames["persons"], units=frames["units"], geo=frames["geo"])
