"""Property-based malformed inputs (Hypothesis): loaders never crash, and errors are located.

For arbitrary bytes every loader either loads or raises :class:`DataValidationError`; a bad token
placed in one cell is reported at exactly that row and column; a row with a wrong field count is
reported at its row.
"""

from __future__ import annotations

import io
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.errors import DataValidationError
from engine.data.block_csv import load_block_csv, parse_mapping
from engine.data.pl94171 import read_pl94171_csv
from engine.data.ppmf import load_ppmf
from engine.data.ri2010 import COLUMNS, load_ri2010

RI_ROWS = [
    "440010301001000,3,2,0,1,0,0,0,0,0,2,1,0,1,0,0,0,0,0",
    "440010301001001,1,1,0,0,0,0,0,0,0,1,1,0,0,0,0,0,0,0",
    "440010301002000,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0",
]
PPMF_HEADER = (
    "TABBLKST,TABBLKCOU,TABTRACTCE,TABBLKGRPCE,TABBLK,RTYPE,GQTYPE_PL,VOTING_AGE,CENHISP,CENRACE"
)
PPMF_ROWS = [
    "01,105,686800,1,1000,3,0,2,1,01",
    "01,105,686800,1,1003,5,5,2,2,07",
    "01,105,686800,2,2001,3,0,1,1,63",
]
MAPPING = {
    "schema": "ri2010",
    "geography": {"geoid": "GEOID"},
    "cells": {"pop_white": {"VOTINGAGE": "18_plus", "RACEETH": "white"}},
    "allow_unmapped": True,
}
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SAFE_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters=',"\r\n\x00'),
    max_size=12,
)


def _loads_or_raises_typed(load, data: bytes) -> None:
    try:
        load(data)
    except DataValidationError as exc:
        assert exc.problems and all(p.file and p.message for p in exc.problems)


@SETTINGS
@given(st.binary(max_size=600))
def test_arbitrary_bytes_never_crash_any_loader(data: bytes):
    _loads_or_raises_typed(load_ri2010, data)
    _loads_or_raises_typed(load_ppmf, data)
    _loads_or_raises_typed(read_pl94171_csv, data)
    _loads_or_raises_typed(lambda d: load_block_csv(d, MAPPING), data)


@SETTINGS
@given(st.text(max_size=400).map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_arbitrary_text_after_a_valid_header_never_crashes(tail: bytes):
    _loads_or_raises_typed(load_ri2010, (",".join(COLUMNS) + "\n").encode() + tail)
    _loads_or_raises_typed(load_ppmf, (PPMF_HEADER + "\n").encode() + tail)


def _valid_count(token: str) -> bool:
    value = token.strip()
    return bool(re.fullmatch(r"[+-]?[0-9]{1,18}", value)) and int(value) >= 0


@SETTINGS
@given(
    row=st.integers(0, len(RI_ROWS) - 1),
    column=st.integers(1, len(COLUMNS) - 1),
    token=SAFE_TEXT.filter(lambda t: not _valid_count(t)),
)
def test_a_bad_count_is_reported_at_its_row_and_column(row: int, column: int, token: str):
    rows = [r.split(",") for r in RI_ROWS]
    rows[row][column] = token
    data = "\n".join([",".join(COLUMNS), *(",".join(r) for r in rows)]) + "\n"
    try:
        load_ri2010(io.BytesIO(data.encode()))
    except DataValidationError as exc:
        located = {(p.row, p.column) for p in exc.problems}
        assert (row + 1, COLUMNS[column]) in located, [str(p) for p in exc.problems]
    else:
        raise AssertionError(f"{token!r} in {COLUMNS[column]} was accepted")


def _valid_cenrace(token: str) -> bool:
    value = token.strip()
    if re.fullmatch(r"[0-9]+", value):
        value = value.zfill(2)
    return value in {f"{k:02d}" for k in range(1, 64)}


@SETTINGS
@given(
    row=st.integers(0, len(PPMF_ROWS) - 1), token=SAFE_TEXT.filter(lambda t: not _valid_cenrace(t))
)
def test_an_unknown_cenrace_is_reported_at_its_row(row: int, token: str):
    rows = [r.split(",") for r in PPMF_ROWS]
    rows[row][9] = token
    data = "\n".join([PPMF_HEADER, *(",".join(r) for r in rows)]) + "\n"
    try:
        load_ppmf(data.encode())
    except DataValidationError as exc:
        assert any(
            p.row == row + 1 and p.column == "CENRACE" and "unknown code" in p.message
            for p in exc.problems
        ), [str(p) for p in exc.problems]
    else:
        raise AssertionError(f"CENRACE {token!r} was accepted")


@SETTINGS
@given(row=st.integers(0, len(RI_ROWS) - 1), extra=st.integers(-3, 3).filter(bool))
def test_a_row_with_the_wrong_field_count_is_reported(row: int, extra: int):
    rows = [r.split(",") for r in RI_ROWS]
    rows[row] = rows[row][:extra] if extra < 0 else rows[row] + ["0"] * extra
    data = "\n".join([",".join(COLUMNS), *(",".join(r) for r in rows)]) + "\n"
    try:
        load_ri2010(data.encode())
    except DataValidationError as exc:
        assert any(
            p.row == row + 1 and "fields but the header has 19" in p.message for p in exc.problems
        )
    else:
        raise AssertionError("a ragged row was accepted")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "schema",
                    "geography",
                    "cells",
                    "allow_unmapped",
                    "geoid",
                    "levels",
                    "attributes",
                    "name",
                    "VOTINGAGE",
                    "x",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@SETTINGS
@given(JSON)
def test_arbitrary_mappings_never_crash(mapping):
    try:
        parse_mapping(mapping if isinstance(mapping, dict) else {"schema": mapping})
    except DataValidationError as exc:
        assert exc.problems


@SETTINGS
@given(st.permutations(RI_ROWS))
def test_row_order_does_not_change_the_totals(rows):
    data = "\n".join([",".join(COLUMNS), *rows]).encode()
    histogram = load_ri2010(data)
    assert histogram.total == 4 and histogram.n_blocks == 3
    assert sorted(histogram.geography["Block"]) == sorted(r.split(",")[0] for r in RI_ROWS)
