"""Tests of engine.data.cef_writer: the official PHSafe CEF-extract layout, round trips, errors."""

from __future__ import annotations

import gzip
from pathlib import Path

import pandas as pd
import pytest

from engine.core.errors import ValidationError
from engine.data.cef_types import CefExtract
from engine.data.cef_writer import write_cef_extract
from engine.data.synthetic import generate_households

# Header lines of the official PHSafe 3.0.0 fixtures (e2e_test1/{persons,units,geo}.csv).
OFFICIAL_HEADERS = {
    "persons": "RTYPE,MAFID,QAGE,CENHISP,CENRACE,RELSHIP",
    "units": "RTYPE,MAFID,FINAL_POP,NPF,HHSPAN,HHRACE,TEN,HHT,HHT2,CPLT",
    "geo": "RTYPE,MAFID,TABBLKST,TABBLKCOU,TABTRACTCE,TABBLK,TABBLKGRPCE,REGIONCE,DIVISIONCE,"
    "PLACEFP,AIANNHCE",
}
# First data rows of the official e2e_test1 files, to check verbatim round trips of their codes.
OFFICIAL_ROWS = {
    "persons": ["3,100000001,49,1,01,20", "5,100000004,94,1,01,38"],
    "units": ["2,100000001,2,2,1,01,2,1,02,1", "4,100000004,2,0,0,00,2,0,00,0"],
    "geo": [
        "2,100000001,44,055,450200,4069,1,4,2,99999,9999",
        "4,100000004,29,065,960100,1123,1,1,0,99999,9999",
    ],
}


@pytest.fixture(scope="module")
def extract() -> CefExtract:
    return generate_households(3_000, seed=8)


def _official_extract() -> CefExtract:
    frames = {}
    for name, header in OFFICIAL_HEADERS.items():
        columns = header.split(",")
        frames[name] = pd.DataFrame([r.split(",") for r in OFFICIAL_ROWS[name]], columns=columns)
    return CefExtract(**frames)


def test_headers_match_official_files(extract: CefExtract, tmp_path: Path) -> None:
    paths = write_cef_extract(extract, tmp_path)
    for name, path in paths.items():
        assert path.name == f"{name}.csv"
        assert path.read_text().splitlines()[0] == OFFICIAL_HEADERS[name]


def test_official_rows_written_verbatim(tmp_path: Path) -> None:
    paths = write_cef_extract(_official_extract(), tmp_path)
    for name, path in paths.items():
        assert (
            path.read_bytes()
            == ("\n".join([OFFICIAL_HEADERS[name], *OFFICIAL_ROWS[name]]) + "\n").encode()
        )


def test_round_trip_as_strings(extract: CefExtract, tmp_path: Path) -> None:
    paths = write_cef_extract(extract, tmp_path)
    for name, path in paths.items():
        back = pd.read_csv(path, dtype=str, keep_default_na=False)
        pd.testing.assert_frame_equal(back, getattr(extract, name), check_dtype=False)


def test_compressed_output_is_gzip_and_deterministic(extract: CefExtract, tmp_path: Path) -> None:
    first = write_cef_extract(extract, tmp_path / "a", compress=True)
    second = write_cef_extract(extract, tmp_path / "b", compress=True)
    plain = write_cef_extract(extract, tmp_path / "c")
    for name in first:
        assert first[name].name == f"{name}.csv.gz"
        assert first[name].read_bytes() == second[name].read_bytes()
        with gzip.open(first[name], "rb") as handle:
            assert handle.read() == plain[name].read_bytes()


def test_wrong_columns_rejected(extract: CefExtract, tmp_path: Path) -> None:
    swapped = extract.persons[["MAFID", "RTYPE", "QAGE", "CENHISP", "CENRACE", "RELSHIP"]]
    bad = CefExtract(persons=swapped, units=extract.units, geo=extract.geo)
    with pytest.raises(ValidationError, match="expected exactly"):
        write_cef_extract(bad, tmp_path)


def test_numeric_codes_rejected(extract: CefExtract, tmp_path: Path) -> None:
    numeric = extract.persons.assign(CENRACE=extract.persons["CENRACE"].astype(int))
    with pytest.raises(ValidationError, match="code strings"):
        write_cef_extract(CefExtract(numeric, extract.units, extract.geo), tmp_path)


def test_missing_and_delimiter_values_rejected(extract: CefExtract, tmp_path: Path) -> None:
    with_missing = extract.units.copy()
    with_missing.loc[0, "TEN"] = None
    with pytest.raises(ValidationError, match="missing"):
        write_cef_extract(CefExtract(extract.persons, with_missing, extract.geo), tmp_path)
    with_comma = extract.geo.assign(PLACEFP="1,2")
    with pytest.raises(ValidationError, match="comma"):
        write_cef_extract(CefExtract(extract.persons, extract.units, with_comma), tmp_path)


def test_output_path_must_be_directory(extract: CefExtract, tmp_path: Path) -> None:
    target = tmp_path / "file.txt"
    target.write_text("x")
    with pytest.raises(ValidationError, match="not a directory"):
        write_cef_extract(extract, target)
