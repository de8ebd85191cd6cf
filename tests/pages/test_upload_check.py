"""AppTest: the Run page checks uploads as ``phexplore data check`` does and shows the same list,
sorted by file and row, with what the input is and the seconds reading it took."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from engine.runs.data_check import check_files

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
CEF = ROOT / "tests" / "fixtures" / "phsafe_official" / "e2e_test1"
PERRY = ROOT / "data" / "samples" / "ppmf_perry_al" / "ppmf_perry_al_persons.csv"


class _Upload:
    """What the page hands the API: a named binary file (Streamlit's UploadedFile)."""

    def __init__(self, name: str, data: bytes) -> None:
        import io

        self.name = name
        self._io = io.BytesIO(data)

    def read(self, size: int = -1) -> bytes:
        return self._io.read(size)

    def seek(self, offset: int) -> int:
        return self._io.seek(offset)

    def seekable(self) -> bool:
        return True


def _edit(text: str, row: int, column: str, value: str) -> str:
    lines = text.splitlines()
    header = lines[0].split(",")
    fields = lines[row].split(",")
    fields[header.index(column)] = value
    lines[row] = ",".join(fields)
    return "\n".join(lines) + "\n"


@pytest.fixture()
def run_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    at.switch_page("pages/run.py").run()
    assert not at.exception
    return at


def _validate(at: AppTest, key: str, button: str | None = None) -> None:
    if button:
        at.button(key=button).click().run()
    else:
        next(b for b in at.button if b.label == "Validate upload").click().run()
    assert not at.exception, [e.message for e in at.exception]


def test_topdown_upload_lists_every_problem_sorted_like_the_cli(run_page: AppTest) -> None:
    at = run_page
    at.radio(key="run_td_source").set_value("upload").run()
    at.selectbox(key="run_upload_kind").set_value("ppmf").run()
    text = _edit(PERRY.read_text(), 40, "CENRACE", "7x")
    text = _edit(text, 9, "RTYPE", "5")  # a group-quarters person without a type: no unit
    data = text.encode()
    at.file_uploader(key="run_upload_files").set_value([("persons.csv", data, "text/csv")]).run()
    _validate(at, "run_upload_files")
    (error,) = [e.value for e in at.error]
    expected = check_files("topdown", [_Upload("persons.csv", data)], kind="ppmf")
    lines = expected.problem_lines()
    assert len(lines) == 2 and "row 9" in lines[0] and "row 40" in lines[1]
    assert f"({len(lines)} problem(s))" in error
    assert error.index(lines[0]) < error.index(lines[1])
    assert any("read and checked in" in c.value for c in at.caption)


def test_cef_upload_lists_problems_of_every_file_by_file_and_row(run_page: AppTest) -> None:
    at = run_page
    at.radio(key="run_engine").set_value("phsafe").run()
    at.radio(key="run_ph_source").set_value("upload").run()
    persons = _edit((CEF / "persons.csv").read_text(), 5, "CENRACE", "99").encode()
    persons = _edit(persons.decode(), 2, "QAGE", "130").encode()
    units = _edit((CEF / "units.csv").read_text(), 3, "HHT", "9").encode()
    geo = (CEF / "geo.csv").read_bytes()
    files = [
        ("units.csv", units, "text/csv"),
        ("persons.csv", persons, "text/csv"),
        ("geo.csv", geo, "text/csv"),
    ]
    at.file_uploader(key="run_cef_files").set_value(files).run()
    _validate(at, "run_cef_files", button="run_cef_validate")
    (error,) = [e.value for e in at.error]
    check = check_files("phsafe", [_Upload(n, d) for n, d, _ in files])
    lines = check.problem_lines()
    files_named = [line.split(",")[0] for line in lines]
    assert files_named[:3] == ["persons.csv", "persons.csv", "units.csv"]
    assert files_named == sorted(files_named)
    assert "row 2" in lines[0] and "row 5" in lines[1] and "row 3" in lines[2]
    positions = [error.index(line) for line in lines]
    assert positions == sorted(positions)
    # the fixture's units repeat a MAFID outside its config's state filter: leave that row out
    unique = (CEF / "units.csv").read_text().splitlines()
    del unique[6]  # the second record of MAFID 100000002
    good = [
        ("persons.csv", (CEF / "persons.csv").read_bytes(), "text/csv"),
        ("units.csv", ("\n".join(unique) + "\n").encode(), "text/csv"),
        files[2],
    ]
    at.file_uploader(key="run_cef_files").set_value(good).run()
    _validate(at, "run_cef_files", button="run_cef_validate")
    assert not at.error
    assert any("Loaded" in s.value for s in at.success)
    captions = [c.value for c in at.caption]
    assert any("persons: 10" in c and "read and checked in" in c for c in captions), captions
