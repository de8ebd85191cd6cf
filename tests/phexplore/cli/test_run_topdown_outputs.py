"""``run topdown --output-format/--estimates/--no-measurements`` and reading the folders back."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from engine.core.errors import OutputError
from engine.runs.output_options import AUTO_CSV_MAX_ROWS
from engine.runs.run_folder import open_run_folder
from phexplore.cli import main

BASE = [
    "run", "topdown", "--data", "ri2010", "--filter", "Tract=44001030100",
    "--preset", "ri2010-production-like", "--seed", "4", "--quiet",
]  # fmt: skip


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("outputs")
    made = {}
    for name, extra in {
        "auto": [],
        "parquet": ["--output-format", "parquet"],
        "dense_parquet": ["--output-format", "parquet", "--estimates", "dense"],
        "sparse_csv": ["--output-format", "csv", "--estimates", "sparse", "--no-measurements"],
    }.items():
        assert main([*BASE, *extra, "--out", str(root / name)]) == 0
        made[name] = root / name
    return made


def test_small_runs_keep_their_csv_files(folders):
    out = folders["auto"]
    names = {p.name for p in out.iterdir()}
    assert {"estimates.csv", "measurements.csv", "microdata.csv", "metrics.json"} <= names
    outputs = json.loads((out / "metrics.json").read_text())["outputs"]
    assert outputs["format"] == "csv" and outputs["requested"] == "auto"
    assert outputs["auto_csv_max_rows"] == AUTO_CSV_MAX_ROWS
    assert outputs["sparse_estimates"] is False
    tidy = pd.read_csv(out / "estimates.csv", dtype={"geounit": str})
    assert outputs["files"]["estimates"]["rows"] == len(tidy)
    assert outputs["files"]["estimates"]["bytes"] == (out / "estimates.csv").stat().st_size
    assert all(entry["seconds"] >= 0 for entry in outputs["files"].values())
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["settings"]["outputs"]["format"] == "csv"


def test_parquet_holds_the_same_tables_and_sparse_estimates_re_expand(folders):
    csv, par = open_run_folder(folders["auto"]), open_run_folder(folders["parquet"])
    assert par.format == "parquet" and par.sparse
    assert {"estimates.parquet", "geounits.parquet", "cells.parquet"} <= set(par.manifest.files)
    dense = csv.estimates()
    pd.testing.assert_frame_equal(par.estimates(), dense)
    stored = par.estimates(dense=False)
    assert len(stored) < len(dense)
    assert ((stored["true"] != 0) | (stored["estimate"] != 0)).all()
    for table in ("measurements", "microdata"):
        pd.testing.assert_frame_equal(par.table(table), csv.table(table))
    entry = par.outputs["files"]["estimates"]
    assert entry["sparse"] is True and entry["dense_rows"] == len(dense)
    assert "both 0" in entry["omitted"] and "sparse" in par.outputs["note"]
    from engine.runs.table_files import table_description

    described = table_description(par.path("estimates"))
    assert described["sparse"] is True and described["dense_rows"] == len(dense)
    pd.testing.assert_frame_equal(open_run_folder(folders["dense_parquet"]).estimates(), dense)
    assert not open_run_folder(folders["dense_parquet"]).sparse


def test_sparse_csv_without_measurements(folders, tmp_path):
    run = open_run_folder(folders["sparse_csv"])
    assert run.format == "csv" and run.sparse and not run.has("measurements")
    assert not (folders["sparse_csv"] / "measurements.csv").exists()
    pd.testing.assert_frame_equal(run.estimates(), open_run_folder(folders["auto"]).estimates())
    with pytest.raises(OutputError, match="wrote no measurements table .*--no-measurements"):
        run.table("measurements")
    metrics = json.loads((folders["sparse_csv"] / "metrics.json").read_text())
    assert metrics["run"]["options"]["measurements"] is False
    assert metrics["outputs"]["measurements_written"] is False
    # replay writes the same kind of folder (the options are part of the run description)
    again = tmp_path / "again"
    assert main(["run", "replay", "--spec", str(folders["sparse_csv"] / "metrics.json"),
                 "--out", str(again), "--quiet"]) == 0  # fmt: skip
    assert (again / "estimates.csv").read_bytes() == (
        folders["sparse_csv"] / "estimates.csv"
    ).read_bytes()
    assert not (again / "measurements.csv").exists()


def test_every_option_is_recorded_with_the_value_used(folders):
    """metrics.json ``run.options`` lists every TopDown option (docs/metrics.md), so a reader
    sees the defaults a run used and a replay writes the same files."""
    from engine.runs.options import TopDownRunOptions

    metrics = json.loads((folders["auto"] / "metrics.json").read_text())
    options = metrics["run"]["options"]
    assert set(options) == set(TopDownRunOptions().to_json())
    assert options["output_format"] == "auto" and options["estimates"] == "auto"
    assert options["measurements"] is True
    assert TopDownRunOptions.from_json(options).to_json() == options


def test_incomplete_or_altered_parquet_is_refused(folders, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(folders["parquet"], copy)
    path = copy / "estimates.parquet"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(OutputError, match=r"estimates\.parquet does not match the manifest"):
        open_run_folder(copy)
    (copy / "estimates.parquet").unlink()
    with pytest.raises(OutputError, match=r"estimates\.parquet is listed in the manifest"):
        open_run_folder(copy)


def test_bad_output_options_are_refused_in_words(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*BASE, "--output-format", "xlsx", "--out", str(tmp_path / "x")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--output-format: invalid choice: 'xlsx'" in err and "auto" in err
    with pytest.raises(SystemExit):
        main([*BASE, "--estimates", "some", "--out", str(tmp_path / "y")])
    assert "--estimates: invalid choice" in capsys.readouterr().err
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_report_reads_a_parquet_run_folder_and_refuses_a_damaged_one(folders, tmp_path, capsys):
    import shutil

    out = tmp_path / "report.html"
    argv = ["report", "--preset", "ri2010-production-like", "--out"]
    assert main([*argv, str(out), "--results", str(folders["parquet"])]) == 0
    assert "seed=4" in out.read_text(encoding="utf-8")
    copy = tmp_path / "copy"
    shutil.copytree(folders["parquet"], copy)
    (copy / "microdata.parquet").write_bytes(b"PAR1")
    assert main([*argv, str(tmp_path / "r2.html"), "--results", str(copy)]) == 1
    assert "microdata.parquet does not match the manifest" in capsys.readouterr().err


def test_metrics_json_beside_parquet_tables_without_manifest_is_refused(folders, tmp_path, capsys):
    import shutil

    copy = tmp_path / "no_manifest"
    shutil.copytree(folders["parquet"], copy)
    (copy / "manifest.json").unlink()
    argv = ["report", "--preset", "ri2010-production-like", "--out", str(tmp_path / "r.html")]
    assert main([*argv, "--results", str(copy / "metrics.json")]) == 1
    assert "looks like a run output but has no manifest.json" in capsys.readouterr().err
