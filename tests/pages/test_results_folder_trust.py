"""The Results page never serves another run's files under an opened run's label.

A run folder is checked when it is opened ("Open a run folder"): a file its manifest does not list
— here a symbolic link to another run's microdata.csv — is refused. The manifest read at open is
kept: when the folder is replaced afterwards (another run written over it with ``--overwrite``),
the page says so on its next rerun and offers none of its files, and a download started anyway
refuses bytes that are not the opened run's (docs/reliability.md, "Outputs").
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from engine.core.errors import PHExploreError
from phexplore import api as R
from phexplore.app import state as S
from phexplore.cli import main

APP = str(Path(__file__).resolve().parents[2] / "app.py")
RUN = [
    "run", "topdown", "--data", "ri2010", "--filter", "Tract=44001030100",
    "--preset", "ri2010-production-like", "--quiet",
]  # fmt: skip


def _cli(*argv: str) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        assert main([*RUN, *argv]) == 0


def _page_with(folder: Path) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    at.switch_page("pages/results.py").run()
    at.text_input(key="res_folder_path").set_value(str(folder))
    at.button(key="res_open_folder").click().run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _folder_buttons(at: AppTest) -> list[str]:
    return [b.proto.label for b in at.get("download_button") if " rows" in b.proto.label]


def test_a_folder_replaced_after_it_was_opened_serves_nothing_of_the_other_run(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "run"
    _cli("--seed", "2", "--out", str(folder))
    first = (folder / "estimates.csv").read_bytes()
    at = _page_with(folder)
    assert not at.error, [e.value for e in at.error]
    assert _folder_buttons(at)  # estimates.csv, measurements.csv, microdata.csv
    record = at.session_state[S.RUNS][0]
    files = {f.name: f for f in R.folder_files(record)}
    assert files["estimates.csv"].data() == first

    _cli("--seed", "3", "--out", str(folder), "--overwrite")  # another run replaces the folder
    assert (folder / "estimates.csv").read_bytes() != first
    at.run()
    errors = " ".join(e.value for e in at.error)
    assert "changed since it was opened" in errors and str(folder) in errors
    assert _folder_buttons(at) == []
    for item in R.folder_files(record):  # a download started before the rerun
        with pytest.raises(PHExploreError, match="does not match the manifest"):
            item.data()


def test_a_file_linked_in_from_another_run_is_refused_on_opening(tmp_path: Path) -> None:
    folder, other = tmp_path / "run", tmp_path / "other"
    _cli("--seed", "2", "--no-microdata", "--out", str(folder))
    _cli("--seed", "3", "--out", str(other))
    os.symlink(other / "microdata.csv", folder / "microdata.csv")
    at = _page_with(folder)
    errors = " ".join(e.value for e in at.error)
    assert "microdata.csv" in errors and "symbolic link" in errors
    assert at.session_state[S.RUNS] == []
