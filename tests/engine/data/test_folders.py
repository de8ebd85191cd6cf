"""Which file of a folder is which: one candidate per role, or a refusal naming the conflict."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.core.errors import DataValidationError
from engine.data.cef import load_cef_extract
from engine.data.folders import one_file
from engine.data.inputs import load_topdown_input
from engine.data.pl94171 import file_set
from engine.data.samples import samples_dir

ROOT = Path(__file__).resolve().parents[3]
CEF = ROOT / "tests" / "fixtures" / "phsafe_official" / "e2e_test1"
PL = samples_dir() / "pl94171_ri2018"


def _messages(fn) -> str:
    with pytest.raises(DataValidationError) as caught:
        fn()
    return str(caught.value)


def test_one_candidate_is_used_and_other_files_are_ignored(tmp_path: Path) -> None:
    (tmp_path / "persons.csv.gz").write_bytes(b"")
    (tmp_path / "persons_notes.md").write_text("about the persons file")
    (tmp_path / "config.json").write_text("{}")
    assert one_file(tmp_path, "persons", what="x", fix="y").name == "persons.csv.gz"


def test_two_candidates_are_refused_naming_both(tmp_path: Path) -> None:
    (tmp_path / "persons.csv").write_text("a\n")
    (tmp_path / "persons.csv.gz").write_bytes(b"")
    text = _messages(lambda: one_file(tmp_path, "persons", what="CEF extract", fix="-"))
    assert "persons.csv and persons.csv.gz" in text and "stale copy" in text
    (tmp_path / "persons.csv.gz").unlink()
    (tmp_path / "Persons (1).csv").write_text("a\n")
    text = _messages(lambda: one_file(tmp_path, "persons", what="CEF extract", fix="-"))
    assert "Persons (1).csv" in text and "persons.csv" in text and "unclear" in text


def test_a_missing_file_says_what_the_folder_needs(tmp_path: Path) -> None:
    text = _messages(lambda: one_file(tmp_path, "geo", what="CEF extract", fix="add it"))
    assert "missing geo.csv (or geo.csv.gz)" in text and "add it" in text


def test_a_cef_folder_lists_every_file_problem(tmp_path: Path) -> None:
    folder = tmp_path / "cef"
    shutil.copytree(CEF, folder)
    shutil.copy(folder / "units.csv", folder / "units_old.csv")
    (folder / "geo.csv").unlink()
    text = _messages(lambda: load_cef_extract(folder))
    assert "units.csv and units_old.csv" in text and "missing geo.csv" in text


def test_pl94171_segments_are_known_by_their_records(tmp_path: Path) -> None:
    """Uploads may be named anything: a segment says which it is in its CIFSN field."""
    names = {
        "rigeo2018_2020Style.pl": "geo.pl",
        "ri000012018_2020Style.pl": "part_a.pl",
        "ri000022018_2020Style.pl": "part_c.pl",
        "ri000032018_2020Style.pl": "part_b.pl",
    }
    for old, new in names.items():
        shutil.copy(PL / old, tmp_path / new)
    geo, one, two, three = file_set(sorted(tmp_path.iterdir()))
    assert [p.name for p in (geo, one, two, three)] == [
        "geo.pl",
        "part_a.pl",
        "part_c.pl",
        "part_b.pl",
    ]
    loaded = load_topdown_input(tmp_path)
    assert loaded.total == 29_225
    (tmp_path / "readme.pl").write_text("not a segment\n")
    text = _messages(lambda: load_topdown_input(tmp_path))
    assert "readme.pl" in text and "not a file of a P.L. 94-171 set" in text
