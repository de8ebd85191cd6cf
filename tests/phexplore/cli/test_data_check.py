"""``phexplore data check`` through the real CLI entry point: what an input is, every problem."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.data.samples import samples_dir
from phexplore.cli import main

ROOT = Path(__file__).resolve().parents[3]
CEF = ROOT / "tests" / "fixtures" / "phsafe_official" / "e2e_test1"
PERRY = samples_dir() / "ppmf_perry_al" / "ppmf_perry_al_persons.csv"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["data", "check", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    code, out, _ = _run(capsys, *argv, "--format", "json")
    return code, json.loads(out)


def _edit(path: Path, row: int, column: str, value: str) -> None:
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    fields = lines[row].split(",")
    fields[header.index(column)] = value
    lines[row] = ",".join(fields)
    path.write_text("\n".join(lines) + "\n")


def test_a_sample_says_what_it_is(capsys) -> None:
    code, report = _json(capsys, "ri2010")
    assert code == 0 and report["ok"] and report["problems"] == []
    assert report["engines"] == ["topdown"] and report["rows"] == {"ri2010_blocks.csv": 25_181}
    facts = report["topdown"]
    assert facts["blocks"] == 25_181 and facts["persons"] == 1_052_567
    assert facts["states"] == ["44"] and facts["geography"]["County"] == 5
    assert facts["schema"].startswith("ri2010 (16 cells")
    assert facts["unit_frame"] is False and facts["structural_zeros"].startswith("none")
    assert report["load_s"] > 0


def test_every_problem_of_every_file_and_stage_sorted_by_file_and_row(
    capsys, tmp_path: Path
) -> None:
    folder = tmp_path / "cef"
    shutil.copytree(CEF, folder)
    _edit(folder / "persons.csv", 3, "CENRACE", "99")
    _edit(folder / "units.csv", 2, "HHT", "9")
    units = (folder / "units.csv").read_text().splitlines()
    kept = [line for line in units if ",100000012," not in line]  # geography without its unit
    (folder / "units.csv").write_text("\n".join(kept) + "\n")
    code, report = _json(capsys, str(folder), "--engine", "phsafe")
    assert code == 1 and not report["ok"]
    places = [(p["file"], p["row"], p["column"]) for p in report["problems"]]
    assert places == sorted(places, key=lambda p: (p[0], -1 if p[1] is None else p[1]))
    messages = {(p["file"], p["column"]): p["message"] for p in report["problems"]}
    assert "unknown code '99'" in messages[("persons.csv", "CENRACE")]
    assert "unknown code '9'" in messages[("units.csv", "HHT")]
    assert "MAFID 100000012 has no record in units.csv" in messages[("geo.csv", "MAFID")]
    run = main(["run", "phsafe", "--data", str(folder), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert run == 1
    for problem in report["problems"]:  # the run stops on the very same problems
        assert problem["message"] in err


def test_ppmf_value_and_unit_problems_come_together(capsys, tmp_path: Path) -> None:
    path = tmp_path / "persons.csv"
    shutil.copy(PERRY, path)
    _edit(path, 4, "CENRACE", "7x")
    _edit(path, 9, "RTYPE", "5")  # a group-quarters person without a GQ type: no unit
    code, out, _ = _run(capsys, str(path))
    assert code == 1
    assert "2 problem(s) a run would hit:" in out
    assert "persons.csv, row 4, column 'CENRACE': unknown code '7x'" in out
    assert "persons.csv, row 9, column 'GQTYPE_PL'" in out and "has no unit" in out
    assert out.index("row 4") < out.index("row 9")
    assert "read and checked in" in out


def test_a_generated_population_is_checked_for_both_engines(capsys, tmp_path: Path) -> None:
    assert (
        main(
            [
                "generate",
                "population",
                "--persons",
                "2000",
                "--seed",
                "2",
                "--states",
                "RI",
                "--out",
                str(tmp_path / "pop"),
            ]
        )
        == 0
    )
    capsys.readouterr()
    code, report = _json(capsys, str(tmp_path / "pop"))
    assert code == 0 and report["engines"] == ["topdown", "phsafe"]
    assert report["format"] == "generated population"
    assert set(report["rows"]) == {
        "ppmf.csv",
        "blocks.csv",
        "places.csv",
        "persons.csv",
        "units.csv",
        "geo.csv",
    }
    assert report["topdown"]["persons"] == report["phsafe"]["persons"] == 2000
    assert report["topdown"]["unit_frame"] is True
    assert report["topdown"]["places"] >= 1  # written with places.csv
    assert "held from the housing units and GQ facilities" in report["topdown"]["structural_zeros"]
    assert report["phsafe"]["states"] == ["44"]


def test_a_block_csv_with_its_mapping_and_a_missing_one(capsys, tmp_path: Path) -> None:
    (tmp_path / "b.csv").write_text("GEOID,kids\n440010301001000,3\n440010301001001,x\n")
    mapping = {
        "schema": {"attributes": [{"name": "AGE", "levels": ["child"]}]},
        "geography": {"geoid": "GEOID"},
        "cells": {"kids": {"AGE": "child"}},
    }
    (tmp_path / "m.json").write_text(json.dumps(mapping))
    code, report = _json(capsys, str(tmp_path / "b.csv"), "--mapping", str(tmp_path / "m.json"))
    assert code == 1 and report["format"] == "block CSV with a mapping"
    ((problem),) = report["problems"]
    assert (problem["row"], problem["column"]) == (2, "kids")
    code, report = _json(capsys, str(tmp_path / "b.csv"))
    assert code == 1 and "--mapping" in report["problems"][0]["message"]


def test_data_check_help_imports_no_heavy_module() -> None:
    """The command module registers and prints its help without NumPy, pandas, SciPy, pyarrow
    or plotly (they are imported in the handler)."""
    code = (
        "import argparse, sys\n"
        "from phexplore.cli import data\n"
        "parser = argparse.ArgumentParser(prog='phexplore')\n"
        "data.register(parser.add_subparsers())\n"
        "try:\n"
        "    parser.parse_args(['data', 'check', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ('numpy', 'pandas', 'scipy', 'pyarrow', 'plotly')\n"
        "print('HEAVY', [m for m in heavy if m in sys.modules])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert "PATH" in done.stdout and "--engine" in done.stdout
    assert "HEAVY []" in done.stdout


def test_help_through_the_entry_point(capsys) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["data", "check", "--help"])
    assert caught.value.code == 0
    out = capsys.readouterr().out
    assert "every problem" in out and "--format" in out and "{topdown,phsafe}" in out
