"""The analytic CLI contracts: privacy, moe phsafe/topdown, presets, plan, report (issues 2, 10)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phexplore.cli import main


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_privacy_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, "privacy", "--rho", "1.095", "--delta", "1e-10", "--format", "json")
    assert out["rho"] == 1.095
    assert set(out["conversions"]) == {"bun_steinke", "cks", "gaussian"}
    assert round(out["conversions"]["bun_steinke"]["epsilon"], 2) == 11.14
    out = _json(capsys, "privacy", "--rho", "0.1885", "--format", "json")
    assert round(out["conversions"]["bun_steinke"]["epsilon"], 2) == 4.36
    out = _json(capsys, "privacy", "--rho", "1", "--epsilon", "10", "--format", "json")
    assert 0 < out["conversions"]["cks"]["delta"] < 1e-9
    # Bun–Steinke is what the TDA paper quotes; the production certificates use CKS.
    assert "TDA paper" in out["labels"]["bun_steinke"]
    assert "production privacy-loss certificates" in out["labels"]["cks"]
    assert "Census Bureau convention" not in out["labels"]["bun_steinke"]


def test_moe_topdown_cells_from_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, "moe", "topdown", "--preset", "ri2010-production-like", "--format", "json")
    cells = {r["query"]: r["cells"] for r in out["rows"]}
    assert cells == {"TOTAL": 1, "VOTINGAGE": 2, "RACEETH": 8, "DETAILED": 16}
    out = _json(capsys, "moe", "topdown", "--preset", "topdown-2020-production", "--format", "json")
    detailed = {r["cells"] for r in out["rows"] if r["query"] == "DETAILED"}
    assert detailed == {2016}


def test_moe_phsafe_contract(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, "moe", "phsafe", "--preset", "phsafe-2020", "--format", "json")
    keys = {
        "table", "geo_level", "iteration_level", "tau", "sensitivity", "rho_unbounded",
        "rho_bounded", "sigma", "moe_target", "moe_bound", "moe_exact",
    }  # fmt: skip
    assert keys <= set(out["rows"][0])
    assert round(out["summary"]["rho_total_unbounded"], 6) == 1.257281
    assert set(out["summary"]["epsilon_bounded"]) == {"bun_steinke", "cks", "gaussian"}


def test_moe_phsafe_overrides(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(
        capsys, "moe", "phsafe", "--tau", "PH3=8", "--drop-level", "Nation",
        "--rho", "PH1_num:State:A-G=0.5", "--confidence", "0.95", "--format", "json",
    )  # fmt: skip
    assert all(r["geo_level"] == "State" for r in out["rows"])
    ph3 = next(r for r in out["rows"] if r["table"] == "PH3")
    assert ph3["tau"] == 8 and ph3["sensitivity"] == 18
    ph1 = next(r for r in out["rows"] if r["table"] == "PH1_num" and r["iteration_level"] == "A-G")
    assert ph1["rho_unbounded"] == 0.5


def test_moe_topdown_contract(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, "moe", "topdown", "--preset", "topdown-2020-production", "--format", "json")
    assert {"run", "geolevel", "query", "cells", "rho_query", "sigma", "moe90"} <= set(
        out["rows"][0]
    )
    levels = {r["geolevel"] for r in out["rows"]}
    assert levels == {"US", "State", "County", "Tract", "Block_Group", "Block"}
    state_total = next(
        r
        for r in out["rows"]
        if (r["run"], r["geolevel"], r["query"]) == ("persons", "State", "TOTAL")
    )
    assert round(state_total["sigma"], 2) == 1.10
    assert round(out["summary"]["runs"]["persons"]["epsilon"]["cks"], 2) == 17.14
    # TDA §5.2: the State TOTAL is invariant, so its share is nominal only
    assert state_total["status"] == "held exact — no noise"
    assert out["summary"]["runs"]["persons"]["rho_spent"] == pytest.approx(1.7292, abs=1e-4)
    assert out["summary"]["rho_spent"] < out["summary"]["rho_total"]


def test_moe_topdown_marks_held_exact_and_spreads_on_request(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from phexplore.cli import main

    assert main(["moe", "topdown", "--preset", "ri2010-production-like"]) == 0
    table = capsys.readouterr().out
    line = next(x for x in table.splitlines() if "State" in x and "TOTAL" in x)
    assert "held exact — no noise" in line and "1.0965" not in line
    assert "rho_spent: 1.728" in table
    out = _json(
        capsys, "moe", "topdown", "--preset", "ri2010-production-like", "--spread-invariant-share",
        "--format", "json",
    )  # fmt: skip
    assert out["summary"]["rho_spent"] == pytest.approx(out["summary"]["rho_total"])
    assert "departure from production" in out["summary"]["allocation_note"]
    one = _json(
        capsys, "moe", "topdown", "--preset", "topdown-2020-production", "--states", "1",
        "--run", "persons", "--format", "json",
    )  # fmt: skip
    assert one["summary"]["rho_spent"] == pytest.approx(one["summary"]["rho_total"])
    assert main(["moe", "topdown", "--states", "0"]) == 1
    assert "--states must be 1 or more" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["privacy", "--rho", "0"], "--rho: 0 is out of range; it must be greater than 0"),
        (
            ["privacy", "--rho", "1", "--delta", "2"],
            "--delta: 2 is out of range; it must be greater than 0 and less than 1",
        ),
        (["moe", "phsafe", "--tau", "PH3=x"], "--tau 'PH3=x': τ must be a whole number"),
        (["moe", "phsafe", "--drop-level", "County"], "unknown level 'County'"),
        (["moe", "phsafe", "--preset", "nope"], "unknown preset 'nope'"),
        (["moe", "topdown", "--config", "missing.json"], "missing.json: file not found"),
    ],
)
def test_cli_errors_are_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err


def test_plan_commands(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = _json(capsys, "plan", "phsafe", "--targets", "phsafe-2020", "--format", "json")
    assert round(out["summary"]["rho_total_unbounded_rounded"], 6) == 1.257281
    out = _json(
        capsys, "plan", "phsafe", "--targets", "phsafe-2020", "--rho-cap", "0.6", "--format", "json"
    )
    assert out["summary"]["rho_total_unbounded"] == pytest.approx(0.6)
    out = _json(
        capsys, "plan", "topdown", "--targets", "topdown-2020-production", "--denominator", "4097",
        "--format", "json",
    )  # fmt: skip
    assert out["summary"]["shares_sum_to_one"] is True
    assert round(out["summary"]["runs"]["persons"]["rho"], 4) == 2.5562
    targets = tmp_path / "t.json"
    targets.write_text(
        json.dumps({"runs": {"persons": {"geolevels": ["State", "County"],
                    "moe90": {"State": {"TOTAL": 5}, "County": {"TOTAL": 10, "DETAILED": 20}}}}})
    )  # fmt: skip
    out = _json(capsys, "plan", "topdown", "--targets", str(targets), "--format", "json")
    moes = {(r["geolevel"], r["query"]): r["moe90"] for r in out["rows"]}
    assert moes[("County", "TOTAL")] == pytest.approx(10)


def test_report_command_writes_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"engine": "phsafe", "data": "synthetic", "seed": 3,
                                   "mae": {"State": {"PH1_num": 1.5}}}))  # fmt: skip
    out = tmp_path / "report.html"
    assert (
        main(["report", "--preset", "phsafe-2020", "--results", str(metrics), "--out", str(out)])
        == 0
    )
    text = out.read_text(encoding="utf-8")
    assert "id='moe-table'" in text and "PH1 numerator" in text and "(ε, δ) curves" in text
    assert "seed=3" in text and "PHExplore version" in text and "budget=not recorded" in text


def test_report_command_refuses_runs_of_another_budget(tmp_path: Path) -> None:
    """A metrics.json of another engine or another budget (fingerprint) is an error, not a row."""
    other = tmp_path / "topdown.json"
    other.write_text(json.dumps({"engine": "topdown", "data": "ri2010", "seed": 3}))
    out = tmp_path / "report.html"
    args = ["report", "--preset", "phsafe-2020", "--out", str(out), "--results"]
    assert main([*args, str(other)]) == 1
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"engine": "phsafe", "budget_fingerprint": "0" * 64, "seed": 1}))
    assert main([*args, str(wrong)]) == 1
    assert not out.exists()


def test_presets_list_and_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["presets", "list"]) == 0
    assert "topdown-2020-production" in capsys.readouterr().out
    shown = _json(capsys, "presets", "show", "topdown-2021-04")
    assert shown["runs"]["persons"]["query_shares"]["Block_Group"]["TOTAL"] == "143/256"


@pytest.mark.parametrize(
    ("content", "argv", "message"),
    [
        ("[]", ["moe", "phsafe", "--config"], "expected a JSON object, got list"),
        ("[]", ["moe", "topdown", "--config"], "expected a JSON object, got list"),
        ("[1]", ["plan", "topdown", "--targets"], "expected a JSON object, got list"),
        (
            '{"tau": {"PH1_num": 10}, "moe_targets": {"PH1_num": {"usa_*": "abc"}}}',
            ["plan", "phsafe", "--targets"],
            "moe_targets['PH1_num']['usa_*']: expected a number, got 'abc'",
        ),
        (
            '{"runs": {"persons": {"sigma": {"State": {"TOTAL": "abc"}}}}}',
            ["plan", "topdown", "--targets"],
            "runs.persons.sigma.State.TOTAL: expected a number, got 'abc'",
        ),
        (
            '{"rho_from": "moe_targets"}',
            ["moe", "phsafe", "--config"],
            "need 'tau' and 'moe_targets'",
        ),
        ("{oops", ["moe", "phsafe", "--config"], "not valid JSON (line 1"),
    ],
)
def test_malformed_json_inputs_are_clear_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, argv: list[str], message: str
) -> None:
    path = tmp_path / "input.json"
    path.write_text(content)
    assert main([*argv, str(path)]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_unwritable_output_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "--preset", "phsafe-2020", "--out", str(tmp_path)]) == 1
    assert "is a folder" in capsys.readouterr().err
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["report", "--preset", "phsafe-2020", "--out", str(blocker / "r.html")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err


def test_privacy_accepts_exact_fractions(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, "privacy", "--rho", "293764/114921", "--format", "json")
    assert round(out["conversions"]["cks"]["epsilon"], 2) == 17.14
