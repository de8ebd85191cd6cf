"""``phexplore run replay``: a run's metrics.json replays it with the same numbers."""

from __future__ import annotations

import json
from pathlib import Path

from phexplore.cli import main


def _tract_run(out: Path, *, seed: int) -> Path:
    """``run topdown`` on one RI tract (no microdata) into ``out``."""
    argv = [
        "run", "topdown", "--data", "ri2010", "--filter", "Tract=44001030100",
        "--preset", "ri2010-production-like", "--seed", str(seed), "--no-microdata", "--quiet",
        "--out", str(out),
    ]  # fmt: skip
    assert main(argv) == 0
    return out


def test_replay_reproduces_a_topdown_run(tmp_path, capsys):
    first = tmp_path / "first"
    argv = [
        "run", "topdown", "--data", "ri2010", "--filter", "Tract=44001030100",
        "--preset", "ri2010-production-like", "--rho", "3", "--seed", "12", "--no-microdata",
        "--quiet", "--out", str(first),
    ]  # fmt: skip
    assert main(argv) == 0
    again = tmp_path / "again"
    spec = str(first / "metrics.json")
    assert (
        main(["run", "replay", "--spec", spec, "--workers", "2", "--quiet", "--out", str(again)])
        == 0
    )
    assert "Replayed topdown run" in capsys.readouterr().out
    for name in ("estimates.csv", "measurements.csv"):
        assert (first / name).read_bytes() == (again / name).read_bytes()
    a, b = (json.loads((d / "metrics.json").read_text()) for d in (first, again))
    assert a["run"]["fingerprint"] == b["run"]["fingerprint"] and a["mae"] == b["mae"]
    assert (again / "manifest.json").is_file()


def test_replay_refuses_what_it_cannot_reproduce(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"mae": {}}')
    assert main(["run", "replay", "--spec", str(bad), "--out", str(tmp_path / "x")]) == 1
    assert "no run description found" in capsys.readouterr().err
    edited = tmp_path / "edited.json"
    from engine.dp.presets import load_topdown_preset

    config = load_topdown_preset("ri2010-production-like")["persons"].to_dict()
    spec = {
        "engine": "topdown", "data": {"source": "ri2010"}, "config": config, "seed": 1,
        "options": {"noise_method": "exact"},
    }  # fmt: skip
    edited.write_text(json.dumps(spec))
    assert main(["run", "replay", "--spec", str(edited), "--out", str(tmp_path / "y")]) == 1
    assert "no seed reproduces" in capsys.readouterr().err
    spec["options"] = {}
    spec["fingerprint"] = "0" * 64
    edited.write_text(json.dumps(spec))
    assert main(["run", "replay", "--spec", str(edited), "--out", str(tmp_path / "z")]) == 1
    assert "fingerprint does not match" in capsys.readouterr().err


def test_replay_a_run_saved_in_a_scenario(tmp_path, capsys):
    """A scenario keeps its runs' metrics.json, so each attached run is replayable."""
    first = _tract_run(tmp_path / "first", seed=3)
    metrics = json.loads((first / "metrics.json").read_text())
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"name": "s", "kind": "topdown", "results": [metrics]}))
    assert main(["run", "replay", "--spec", str(scenario), "--out", str(tmp_path / "x")]) == 1
    assert "choose one with --result N (1 – 1)" in capsys.readouterr().err
    again = tmp_path / "again"
    assert main(["run", "replay", "--spec", str(scenario), "--result", "1", "--quiet",
                 "--out", str(again)]) == 0  # fmt: skip
    assert (first / "estimates.csv").read_bytes() == (again / "estimates.csv").read_bytes()


def test_replay_keeps_the_budget_provenance_and_refuses_an_altered_one(tmp_path, capsys):
    """The replayed metrics.json names the same budget as the original; a budget fingerprint
    edited by hand (the run's description left intact) is refused in one line."""
    first = _tract_run(tmp_path / "first", seed=4)
    again = tmp_path / "again"
    spec = str(first / "metrics.json")
    assert main(["run", "replay", "--spec", spec, "--quiet", "--out", str(again)]) == 0
    a, b = (json.loads((d / "metrics.json").read_text()) for d in (first, again))
    assert b["budget_fingerprint"] == a["budget_fingerprint"]
    assert b["budget_origin"] == a["budget_origin"] == "ri2010-production-like"
    # Like the app's replay: it records what it repeated and says the numbers are the same.
    assert b["replay_of"]["reproduced"] is True and b["replay_of"]["seed"] == 4
    assert b["replay_of"]["run_fingerprint"] == a["run"]["fingerprint"]
    assert "same seed, same numbers" in capsys.readouterr().out
    a["budget_fingerprint"] = "f" * 64
    altered = tmp_path / "altered.json"
    altered.write_text(json.dumps(a))
    assert main(["run", "replay", "--spec", str(altered), "--out", str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err
    assert "does not match the budget" in err and "Traceback" not in err
