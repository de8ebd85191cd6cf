"""``phexplore experiment`` end to end on one real tract of ri2010 (fast)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
import pytest

from phexplore.cli import main
from phexplore.cli.experiment import parse_seeds


def test_experiment_writes_tables(tmp_path, capsys) -> None:
    out = tmp_path / "exp"
    code = main(
        [
            "experiment",
            "--engine",
            "topdown",
            "--data",
            "ri2010",
            "--within",
            "Tract:44007001000",
            "--rho",
            "1,10",
            "--seeds",
            "1",
            "--srs",
            "0.5,1",
            "--n-boot",
            "5",
            "--tradeoff",
            "Block:TOTAL",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "Blau quintile" in printed and "trade-off" in printed
    runs = pd.read_csv(out / "runs.csv")
    assert sorted(runs["rho"].unique()) == [1.0, 10.0]
    meta = json.loads((out / "experiment.json").read_text())
    assert meta["data"] == "ri2010 (Tract:44007001000)" and meta["seeds"] == [0]
    tradeoff = pd.read_csv(out / "tradeoff.csv")
    assert set(tradeoff["design"]) == {"topdown", "srs"}


@pytest.mark.parametrize(
    "argv",
    [
        ["--within", "Tract"],
        ["--within", "Tract:00000000000"],
        ["--tradeoff", "Block"],
        ["--srs", "half"],
    ],
)
def test_bad_options_fail_cleanly(tmp_path, capsys, argv) -> None:
    code = main(["experiment", "--rho", "1", "--seeds", "1", "--out", str(tmp_path), *argv])
    assert code == 1
    assert capsys.readouterr().err.startswith("error:")


def test_parse_seeds() -> None:
    assert parse_seeds("3") == [0, 1, 2]
    assert parse_seeds("4,9") == [4, 9]
    with pytest.raises(argparse.ArgumentTypeError):
        parse_seeds("x")
    with pytest.raises(argparse.ArgumentTypeError):
        parse_seeds("0")


def test_phsafe_experiment(tmp_path, capsys) -> None:
    out = tmp_path / "ph"
    code = main(
        [
            "experiment",
            "--engine",
            "phsafe",
            "--rho",
            "2",
            "--seeds",
            "1",
            "--n-boot",
            "0",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "state_* / PH1_num" in printed and "Blau" not in printed
    runs = pd.read_csv(out / "runs.csv")
    assert "PH7" in set(runs["query"])
    code = main(["experiment", "--engine", "phsafe", "--within", "County:44001", "--out", str(out)])
    assert code == 1


def _no_engine_runs(monkeypatch) -> None:
    """Fail the test if an engine run starts (the options must be checked before)."""

    def boom(*args, **kwargs):
        raise AssertionError("the engine ran before the options were validated")

    monkeypatch.setattr("engine.runs.experiments.execute", boom)
    monkeypatch.setattr("engine.phsafe.release.run_phsafe", boom)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rho", "-1,2"], "ρ values must be positive: -1"),
        (["--rho", "0"], "ρ values must be positive: 0"),
        (["--rho", "1,x"], "--rho"),
        (["--srs", "2"], "sampling fractions must be in (0, 1]: 2"),
        (["--srs", "0,0.5"], "sampling fractions must be in (0, 1]: 0"),
        (["--seeds", "1,1"], "--seeds must be distinct"),
        (["--tradeoff", "Foo:RACEETH"], "trade-off geolevel 'Foo'"),
        (["--tradeoff", "Tract:BAR"], "trade-off query 'BAR'"),
    ],
)
def test_options_checked_before_any_run(tmp_path, capsys, monkeypatch, argv, message) -> None:
    _no_engine_runs(monkeypatch)
    code = main(["experiment", "--rho", "1", "--seeds", "1", "--out", str(tmp_path), *argv])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("error:") and message in err


def test_phsafe_tradeoff_checked_before_any_run(tmp_path, capsys, monkeypatch) -> None:
    _no_engine_runs(monkeypatch)
    argv = ["experiment", "--engine", "phsafe", "--rho", "1", "--seeds", "1"]
    code = main([*argv, "--tradeoff", "state_*:PH9", "--out", str(tmp_path)])
    assert code == 1
    assert "trade-off query 'PH9'" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["file", "proc"])
def test_bad_out_fails_before_any_run(tmp_path, capsys, monkeypatch, kind) -> None:
    _no_engine_runs(monkeypatch)
    if kind == "file":
        out = tmp_path / "taken"
        out.write_text("x")
    else:
        out = Path("/proc/phexplore-no-such/dir")
    code = main(["experiment", "--rho", "1", "--seeds", "1", "--out", str(out)])
    assert code == 1
    err = capsys.readouterr().err
    assert f"--out {out}" in err


def test_experiment_tables_as_parquet_hold_the_csv_content(tmp_path, capsys) -> None:
    """--output-format parquet writes every table as Parquet (same rows as CSV)."""
    from engine.runs.table_files import read_table

    base = [
        "experiment", "--engine", "topdown", "--data", "ri2010", "--within", "Tract:44007001000",
        "--rho", "1", "--seeds", "1", "--srs", "none", "--n-boot", "3",
        "--tradeoff", "Block:TOTAL",
    ]  # fmt: skip
    assert main([*base, "--out", str(tmp_path / "csv")]) == 0
    assert main([*base, "--output-format", "parquet", "--out", str(tmp_path / "pq")]) == 0
    capsys.readouterr()
    meta = json.loads((tmp_path / "pq" / "experiment.json").read_text())
    assert meta["output_format"] == "parquet" and "runs.parquet" in meta["files"]
    assert json.loads((tmp_path / "csv" / "experiment.json").read_text())["output_format"] == "csv"
    for stem in ("runs", "summary", "tradeoff"):
        a = read_table(tmp_path / "csv" / f"{stem}.csv").drop(columns="runtime_s", errors="ignore")
        b = read_table(tmp_path / "pq" / f"{stem}.parquet").drop(
            columns="runtime_s", errors="ignore"
        )
        assert a.shape == b.shape and list(a.columns) == list(b.columns)
        pd.testing.assert_frame_equal(
            a.reset_index(drop=True), b.reset_index(drop=True), check_dtype=False
        )
    assert not list((tmp_path / "pq").glob("*.csv"))


def test_experiment_on_the_2016_cell_schema_with_the_production_preset(tmp_path, capsys) -> None:
    """PPMF Perry County with topdown-2020-production: the schema's default queries and
    trade-off (not RACEETH, which that schema has not), the SRS baseline included."""
    out = tmp_path / "perry"
    argv = ["experiment", "--engine", "topdown", "--data", "ppmf_perry_al"]
    argv += ["--preset", "topdown-2020-production", "--rho", "2", "--seeds", "1"]
    argv += ["--srs", "0.5", "--n-boot", "5", "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "trade-off at Block / TOTAL" in printed
    runs = pd.read_csv(out / "runs.csv")
    assert set(runs["query"]) == {"TOTAL", "VOTINGAGE", "HISPANIC", "HISPANIC*CENRACE"}
    assert len(pd.read_csv(out / "srs.csv")) > 0
    assert len(pd.read_csv(out / "tradeoff.csv")) == 2  # the budget and the SRS fraction


def test_default_queries_and_tradeoff_per_schema() -> None:
    from engine.runs.experiments import default_queries, default_tradeoff
    from engine.schema.attributes import REDISTRICTING_SCHEMA, RI2010_SCHEMA

    assert "RACEETH" in default_queries(RI2010_SCHEMA)
    production = default_queries(REDISTRICTING_SCHEMA)
    assert "DETAILED" not in production and "HISPANIC*CENRACE" in production
    levels = ["State", "County", "Tract", "Block_Group", "Block"]
    few_tracts = {"State": 1, "County": 1, "Tract": 3, "Block_Group": 12, "Block": 511}
    assert default_tradeoff(REDISTRICTING_SCHEMA, levels, production, few_tracts) == (
        "Block",
        "TOTAL",
    )
    many = {lv: 100 for lv in levels}
    assert default_tradeoff(RI2010_SCHEMA, levels, ["TOTAL", "RACEETH"], many) == (
        "Tract",
        "RACEETH",
    )
