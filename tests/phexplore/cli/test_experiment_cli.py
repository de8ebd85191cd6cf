"""``phexplore experiment`` end to end on one real tract of ri2010 (fast)."""

from __future__ import annotations

import argparse
import json

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
