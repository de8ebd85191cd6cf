"""engine.data.cef: reading and validating the official PHSafe CEF-extract layout."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.core.errors import DataValidationError
from engine.data.cef import load_cef_extract
from engine.data.cef_types import GEO_COLUMNS, PERSON_COLUMNS, UNIT_COLUMNS

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "phsafe_official" / "e2e_test1"


@pytest.fixture
def extract_dir(tmp_path: Path) -> Path:
    for name in ("persons.csv", "units.csv", "geo.csv"):
        shutil.copy(FIXTURE / name, tmp_path / name)
    return tmp_path


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_reads_official_fixture_with_state_filter() -> None:
    ex = load_cef_extract(FIXTURE, state_filter=["06"])
    assert list(ex.persons.columns) == list(PERSON_COLUMNS)
    assert list(ex.units.columns) == list(UNIT_COLUMNS)
    assert list(ex.geo.columns) == list(GEO_COLUMNS)
    assert ex.n_persons == 3 and ex.n_units == 3
    assert ex.persons["CENRACE"].iloc[0] == "01"
    assert ex.geo["TABBLKCOU"].tolist() == ["139", "139", "140"]


def test_whole_fixture_reports_duplicate_unit_mafid() -> None:
    # without the state filter the fixture's state-44 records repeat MAFID 100000002
    with pytest.raises(DataValidationError) as info:
        load_cef_extract(FIXTURE)
    problems = info.value.problems
    assert any(p.file == "units.csv" and p.column == "MAFID" and p.row == 6 for p in problems)
    assert any("duplicate MAFID 100000002" in p.message for p in problems)


@pytest.mark.parametrize(
    ("file", "old", "new", "column", "fragment"),
    [
        (
            "persons.csv",
            "3,100000012,35,1,01,20",
            "3,100000012,3x,1,01,20",
            "QAGE",
            "not a whole number",
        ),
        ("persons.csv", "3,100000012,35,1,01,20", "3,100000012,135,1,01,20", "QAGE", "above 115"),
        (
            "persons.csv",
            "3,100000012,35,1,01,20",
            "3,100000012,35,1,64,20",
            "CENRACE",
            "unknown code",
        ),
        (
            "persons.csv",
            "3,100000012,35,1,01,20",
            "3,100000012,35,1,01,19",
            "RELSHIP",
            "unknown code",
        ),
        (
            "units.csv",
            "2,100000012,3,0,1,01,2,1,09,5",
            "2,100000012,3,0,1,01,7,1,09,5",
            "TEN",
            "unknown",
        ),
        ("geo.csv", "2,100000012,06,139", "2,100000012,6,139", "TABBLKST", "2-digit"),
    ],
)
def test_bad_values_are_located(extract_dir, file, old, new, column, fragment) -> None:
    _edit(extract_dir / file, old, new)
    with pytest.raises(DataValidationError) as info:
        load_cef_extract(extract_dir, state_filter=["06"])
    hits = [p for p in info.value.problems if p.column == column and fragment in p.message]
    assert hits and hits[0].file == file and hits[0].row is not None


def test_person_without_unit_and_unit_without_geo(extract_dir: Path) -> None:
    _edit(extract_dir / "persons.csv", "3,100000012,35", "3,100000099,35")
    with pytest.raises(DataValidationError, match="has no record in units.csv"):
        load_cef_extract(extract_dir)


def test_missing_file_and_missing_column(extract_dir: Path) -> None:
    (extract_dir / "geo.csv").unlink()
    with pytest.raises(DataValidationError, match="missing geo.csv"):
        load_cef_extract(extract_dir)
    shutil.copy(FIXTURE / "geo.csv", extract_dir / "geo.csv")
    _edit(extract_dir / "units.csv", "HHT2,", "HHTX,")
    with pytest.raises(DataValidationError) as info:
        load_cef_extract(extract_dir)
    assert any(p.column == "HHT2" for p in info.value.problems)


def test_size_limit_and_upload_mapping(extract_dir: Path) -> None:
    with pytest.raises(DataValidationError, match="size limit"):
        load_cef_extract(extract_dir, max_bytes=100)
    uploads = {k: (extract_dir / f"{k}.csv").read_bytes() for k in ("persons", "units", "geo")}
    ex = load_cef_extract(uploads, state_filter=["06"])
    assert ex.n_units == 3
