"""``phexplore compare`` (the committee's table from the command line) and ``phexplore report
--compare-with`` (a two-scenario report that says what changed).

On the folded Rhode Island schema (``ri2010-production-like``, 16 cells: a second per budget). The
numbers are checked against the planning functions the app's table uses
(:func:`phexplore.planning.committee.published_rows` / ``committee_rows``), so the CLI, the app and
the report give one answer; bad input gets one line naming the option.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from engine.dp.presets import load_topdown_preset
from phexplore.cli import main
from phexplore.planning.committee import committee_rows, published_rows
from phexplore.planning.scaling import scale_topdown_runs
from phexplore.planning.scenarios import Scenario

PRESET = "ri2010-production-like"
ERR = "published error"


@pytest.fixture(scope="module")
def expected() -> dict[tuple[str, str], dict]:
    """The committee rows of the preset against its persons run cut by 30%."""
    base = load_topdown_preset(PRESET)
    cut = scale_topdown_runs(base, -30, only="persons")
    rows = committee_rows(base, published_rows(base)[0], cut, published_rows(cut)[0], delta=1e-10)
    return {(r["section"], r["geolevel"] or r["quantity"], r["query"] or ""): r for r in rows}


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["compare", *argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_scale_minus_30_gives_the_planning_functions_numbers(
    capsys: pytest.CaptureFixture[str], expected: dict
) -> None:
    out = _json(capsys, "--baseline", PRESET, "--scale", "-30")
    rows = out["rows"]
    assert out["summary"]["baseline"] == PRESET
    assert out["summary"]["working"] == f"{PRESET} (total ρ −30%)"
    assert "keeps every share" in out["summary"]["changes"]
    rho = next(r for r in rows if r["quantity"] == "ρ of the persons run")
    assert rho["a"] == pytest.approx(2.56) and rho["b"] == pytest.approx(1.792)
    assert rho["relative"] == pytest.approx(-0.30)
    got = {(r["section"], r["geolevel"] or r["quantity"], r["query"] or ""): r for r in rows}
    assert got.keys() == expected.keys()
    for key, want in expected.items():
        for field in ("a", "b", "difference", "relative"):
            if want[field] is None:
                assert got[key][field] is None, key
            else:
                assert got[key][field] == pytest.approx(want[field], rel=1e-9), key
    # Less budget: the published county, tract and block totals get less accurate.
    for level in ("County", "Tract", "Block"):
        total = got[(ERR, level, "TOTAL")]
        assert total["b"] > total["a"] > 0, total
        assert 0.10 < total["relative"] < 0.25, total
    # Geolevels from the root down; the State total is held exact (no noise).
    levels = list(dict.fromkeys(r["geolevel"] for r in rows if r["section"] == ERR))
    assert levels == ["State", "County", "Tract", "Block_Group", "Block"]
    assert got[(ERR, "State", "TOTAL")]["a_note"] == "held exact — no noise"


def test_the_readable_table_and_csv_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, expected: dict
) -> None:
    assert main(["compare", "--baseline", PRESET, "--scale", "-30"]) == 0
    text = capsys.readouterr().out
    block = expected[(ERR, "Block", "TOTAL")]
    assert f"{block['a']:.3g} → {block['b']:.3g} (+{block['relative'] * 100:.1f}%)" in text
    assert "ρ of the persons run: 2.56 → 1.792 (-30.0%)" in text
    out = tmp_path / "committee.csv"
    assert main(["compare", "--baseline", PRESET, "--scale", "-30", "--format", "csv",
                 "--out", str(out)]) == 0  # fmt: skip
    with out.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    block_row = next(r for r in rows if r["geolevel"] == "Block" and r["query"] == "TOTAL")
    assert float(block_row["b"]) == pytest.approx(block["b"], rel=1e-6)
    # An existing file that PHExplore did not write is never replaced.
    mine = tmp_path / "mine.csv"
    mine.write_text("my notes\n", encoding="utf-8")
    assert main(["compare", "--scale", "-30", "--format", "csv", "--out", str(mine)]) != 0
    assert mine.read_text(encoding="utf-8") == "my notes\n"


def test_one_level_scaled_moves_only_that_level(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _json(capsys, "--baseline", PRESET, "--scale-level", "Block=-50")["rows"]
    rho = next(r for r in rows if r["quantity"] == "ρ of the persons run")
    assert -0.50 < rho["relative"] < 0  # only the block level's part of ρ was halved
    total = {r["geolevel"]: r for r in rows if r["section"] == ERR and r["query"] == "TOTAL"}
    assert total["Block"]["relative"] > 0.05
    assert abs(total["County"]["relative"]) < total["Block"]["relative"]


def test_working_budget_from_a_scenario_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, expected: dict
) -> None:
    cut = scale_topdown_runs(load_topdown_preset(PRESET), -30, only="persons")
    path = tmp_path / "cut.json"
    path.write_text(Scenario(name="Cut 30", kind="topdown", topdown=cut).to_json(), "utf-8")
    out = _json(capsys, "--baseline", PRESET, "--working", str(path))
    assert out["summary"]["working"] == "Cut 30"
    block = next(r for r in out["rows"] if r["geolevel"] == "Block" and r["query"] == "TOTAL")
    assert block["b"] == pytest.approx(expected[(ERR, "Block", "TOTAL")]["b"], rel=1e-9)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--scale", "-100"], "--scale"),
        (["--scale", "thirty"], "--scale"),
        (["--scale-level", "County"], "must look like County=-30"),
        (["--baseline", "no-such-budget"], "neither a file nor a TopDown preset"),
        (["--baseline", "phsafe-2020"], "neither a file nor a TopDown preset"),
        (["--format", "table", "--out", "x.csv"], "--out writes CSV or JSON"),
    ],
)
def test_bad_input_is_one_clear_line(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = [a if a != "x.csv" else str(tmp_path / "x.csv") for a in argv]
    assert main(["compare", *argv]) != 0
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err
    assert not (tmp_path / "x.csv").exists()


def test_report_compare_with_says_what_changed(tmp_path: Path, expected: dict) -> None:
    cut = scale_topdown_runs(load_topdown_preset(PRESET), -30, only="persons")
    scenario = tmp_path / "cut.json"
    scenario.write_text(Scenario(name="Cut 30", kind="topdown", topdown=cut).to_json(), "utf-8")
    out = tmp_path / "report.html"
    argv = ["report", "--scenario", str(scenario), "--compare-with", PRESET, "--out", str(out)]
    assert main(argv) == 0
    page = out.read_text(encoding="utf-8")
    assert f"Compared with “{PRESET}”" in page
    assert "What changed:" in page and "keeps every share" in page
    assert "id='committee-table'" in page and "class='ph-committee'" in page
    block = expected[(ERR, "Block", "TOTAL")]
    assert f"+{block['relative'] * 100:.1f}%" in page
    # A PHSafe preset is no TopDown budget's comparison: refused before anything is written.
    bad = tmp_path / "bad.html"
    argv = ["report", "--scenario", str(scenario), "--compare-with", "phsafe-2020"]
    assert main([*argv, "--out", str(bad)]) != 0
    assert not bad.exists()
