"""The Results page opens a run folder written by the command line: CSV or Parquet."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from engine.core.errors import PHExploreError
from phexplore import api as R
from phexplore.app import state as S
from phexplore.cli import main

APP = str(Path(__file__).resolve().parents[2] / "app.py")
BASE = [
    "run", "topdown", "--data", "ri2010", "--filter", "Tract=44001030100",
    "--preset", "ri2010-production-like", "--seed", "2", "--quiet",
]  # fmt: skip


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("folders")
    assert main([*BASE, "--out", str(root / "csv")]) == 0
    assert main([*BASE, "--output-format", "parquet", "--out", str(root / "parquet")]) == 0
    return root


def _results_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    at.switch_page("pages/results.py").run()
    assert not at.exception
    return at


def _open(at: AppTest, folder: Path) -> None:
    at.text_input(key="res_folder_path").set_value(str(folder))
    at.button(key="res_open_folder").click().run()
    assert not at.exception, [e.message for e in at.exception]


def test_results_page_opens_a_parquet_folder_like_the_csv_one(folders):
    at = _results_page()
    _open(at, folders / "parquet")
    assert not at.error, [e.value for e in at.error]
    runs = at.session_state[S.RUNS]
    assert len(runs) == 1 and runs[0].settings["outputs"]["format"] == "parquet"
    captions = " ".join(c.value for c in at.caption)
    assert "tables as parquet" in captions and "estimates are sparse" in captions
    assert "MAE" in [t.label for t in at.tabs]
    _open(at, folders / "csv")
    csv_record, parquet_record = at.session_state[S.RUNS][1], runs[0]
    pd.testing.assert_frame_equal(csv_record.tidy, parquet_record.tidy)
    pd.testing.assert_frame_equal(csv_record.tables["mae"], parquet_record.tables["mae"])
    assert at.session_state["res_run"] == csv_record.id


def test_folder_downloads_in_the_written_format_with_csv_copies(folders):
    record = R.folder_record(folders / "parquet", 1, "s")
    files = {f.name: f for f in R.folder_files(record)}
    assert {"estimates.parquet", "measurements.parquet", "microdata.parquet"} <= set(files)
    assert {"estimates.csv", "measurements.csv", "metrics.json"} <= set(files)
    stored = pd.read_parquet(io.BytesIO(files["estimates.parquet"].data()))
    converted = pd.read_csv(io.BytesIO(files["estimates.csv"].data()), dtype={"geounit": str})
    assert len(stored) == len(converted) == record.settings["outputs"]["files"]["estimates"]["rows"]
    csv_files = {f.name for f in R.folder_files(R.folder_record(folders / "csv", 2, "s"))}
    assert csv_files == {"estimates.csv", "measurements.csv", "microdata.csv", "metrics.json"}


def test_large_runs_keep_their_smallest_queries(folders, monkeypatch):
    monkeypatch.setattr("phexplore.api.limits.APP_MAX_ROWS", 200)
    record = R.folder_record(folders / "parquet", 1, "s")
    assert set(record.tidy["query"]) == {"TOTAL"}
    assert set(record.settings["queries_left_out"]) == {"RACEETH", "VOTINGAGE", "DETAILED"}
    with pytest.raises(PHExploreError, match="more than the app holds"):
        R.folder_record(folders / "csv", 2, "s")


def test_a_damaged_folder_is_refused_on_the_page(folders, tmp_path):
    copy = tmp_path / "damaged"
    shutil.copytree(folders / "parquet", copy)
    path = copy / "measurements.parquet"
    path.write_bytes(path.read_bytes()[:200])
    at = _results_page()
    _open(at, copy)
    assert [e.value for e in at.error] and "measurements.parquet" in at.error[0].value
    assert at.session_state[S.RUNS] == []
    _open(at, tmp_path / "nowhere")
    assert "not a folder" in at.error[0].value


def test_an_opened_folder_is_labelled_with_the_budget_the_cli_recorded(folders):
    from engine.dp.budget.fingerprint import short_fingerprint
    from phexplore.api.run_folders import folder_record

    record = folder_record(folders / "csv", 4, "Default")
    fingerprint = record.metrics["budget_fingerprint"]
    assert record.settings["budget_fingerprint"] == fingerprint
    assert record.settings["budget_origin"] == "ri2010-production-like"
    assert f"ri2010-production-like [{short_fingerprint(fingerprint)}]" in record.label
    assert record.label.startswith("#4 · TopDown · folder ")


def test_a_metrics_json_without_the_tda_keys_still_opens(folders):
    """Files written before tda_mae, error_universe and spine_used: the page derives TDA's
    figure from the per-cell MAE and says so, and names no spine it cannot know."""
    at = _results_page()
    _open(at, folders / "csv")
    record = at.session_state[S.RUNS][-1]
    assert "tda_mae" in record.metrics and "spine_used" in record.metrics
    for key in ("tda_mae", "error_universe", "spine_used", "tda_size_classes"):
        record.metrics.pop(key)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    captions = " ".join(c.value for c in at.caption)
    assert "predates tda_mae" in captions and "Spine: not recorded" in captions
    view = R.tda_view(record.metrics)
    assert not view.tda_mae.empty
