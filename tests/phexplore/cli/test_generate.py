"""Tests of ``phexplore generate households`` (phexplore.cli.generate)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from phexplore.cli import main


def test_generate_households_writes_extract(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "cef"
    code = main(
        [
            "generate",
            "households",
            "--persons",
            "4000",
            "--seed",
            "3",
            "--states",
            "RI",
            "VT",
            "--include-pr",
            "--out",
            str(out),
            "--format",
            "json",
        ]
    )
    assert code == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["summary"]["persons"] == 4000
    assert payload["summary"]["states"] == 3
    persons = pd.read_csv(out / "persons.csv", dtype=str)
    geo = pd.read_csv(out / "geo.csv", dtype=str)
    assert len(persons) == 4000
    assert set(geo["TABBLKST"]) == {"44", "50", "72"}
    assert {row["table"]: row["rows"] for row in payload["rows"]}["persons"] == 4000


def test_generate_is_deterministic_and_compresses(tmp_path: Path) -> None:
    for name in ("a", "b"):
        args = ["generate", "households", "--persons", "2000", "--seed", "9", "--compress"]
        assert main([*args, "--out", str(tmp_path / name)]) == 0
    for table in ("persons", "units", "geo"):
        a = (tmp_path / "a" / f"{table}.csv.gz").read_bytes()
        assert a == (tmp_path / "b" / f"{table}.csv.gz").read_bytes()


def test_generate_rejects_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = str(tmp_path / "x")
    assert main(["generate", "households", "--persons", "10", "--seed", "1", "--out", out]) == 1
    assert "--persons: 10 is out of range; it must be at least 1,000" in capsys.readouterr().err
    args = ["generate", "households", "--persons", "5000", "--seed", "1", "--out", out]
    assert main([*args, "--states", "ZZ"]) == 1
    assert "unknown state" in capsys.readouterr().err
    assert main([*args, "--vacancy-rate", "2"]) == 1
    assert "vacancy" in capsys.readouterr().err
    assert main(["generate", "households", "--persons", "many", "--seed", "1", "--out", out]) == 1
    assert "expected a whole number" in capsys.readouterr().err


def test_generate_checks_out_before_generating(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*args, **kwargs):
        raise AssertionError("generated before --out was checked")

    monkeypatch.setattr("engine.data.synthetic.generate_households", boom)
    out = tmp_path / "taken"
    out.write_text("x")
    argv = ["generate", "households", "--persons", "1000", "--seed", "1", "--out", str(out)]
    assert main(argv) == 1
    assert f"--out {out}: a file is in the way" in capsys.readouterr().err


def test_generate_population_feeds_both_engines(tmp_path: Path, capsys: pytest.CaptureFixture):
    import json

    out = tmp_path / "pop"
    args = ["generate", "population", "--persons", "12000", "--seed", "2", "--states", "RI"]
    assert main([*args, "--out", str(out), "--format", "json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["summary"]["persons"] == 12000
    assert {p.name for p in out.iterdir()} >= {
        "ppmf.csv",
        "persons.csv",
        "units.csv",
        "geo.csv",
        "blocks.csv",
        "population.json",
        "manifest.json",
    }
    # a second run into the same folder is refused unless --overwrite is given
    assert main([*args, "--out", str(out)]) == 1
    assert "--overwrite" in capsys.readouterr().err
    assert main([*args, "--out", str(out), "--overwrite"]) == 0
    assert (
        main(
            [
                "generate",
                "population",
                "--persons",
                "5",
                "--seed",
                "1",
                "--out",
                str(tmp_path / "x"),
            ]
        )
        == 1
    )


def test_generate_population_help_states_the_range_its_validator_accepts(
    capsys: pytest.CaptureFixture,
) -> None:
    """--help's ranges are the validator's: the largest documented --persons parses, one more is
    refused naming --persons; an out-of-range --chunk-persons is reported as --chunk-persons."""
    from engine.core.numbers import RANGES
    from phexplore.cli import build_parser

    with pytest.raises(SystemExit):
        main(["generate", "population", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert str(RANGES["population_persons"]) in help_text  # at least 1,000 and at most 400,000,000
    assert str(RANGES["chunk_persons"]) in help_text
    base = ["generate", "population", "--seed", "1", "--out", "unused"]
    parsed = build_parser().parse_args([*base, "--persons", "400000000"])  # parsed, not run
    assert parsed.persons == 400_000_000
    parsed = build_parser().parse_args([*base, "--persons", "1000", "--chunk-persons", "50000000"])
    assert parsed.chunk_persons == 50_000_000
    assert main([*base, "--persons", "400000001"]) == 1
    assert "--persons: 400000001 is out of range" in capsys.readouterr().err
    assert main([*base, "--persons", "1000", "--chunk-persons", "9999"]) == 1
    err = capsys.readouterr().err
    assert "--chunk-persons: 9999 is out of range" in err and "--persons:" not in err
