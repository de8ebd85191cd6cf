"""--rho's meaning stated, --rho-persons / --rho-units, and the held-exact note.

Before, ``phexplore moe topdown --rho 1.095`` on topdown-2021-04 set the persons *and* the units
run to 1.095 (2.19 in all) while its help said "scale every run to this total ρ"; TDA §8.1's 1.095
is persons 1.05 + units 0.045. ``run topdown`` and ``experiment`` run the persons allocation only,
which their help did not say.
"""

from __future__ import annotations

import json

import pytest

from phexplore.cli import main


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_moe_sets_the_paper_total_by_run(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["moe", "topdown", "--preset", "topdown-2021-04", "--format", "json"]
    split = _json(capsys, *base, "--rho-persons", "1.05", "--rho-units", "0.045")
    runs = split["summary"]["runs"]
    assert runs["persons"]["rho"] == pytest.approx(1.05) and runs["units"]["rho"] == 0.045
    assert split["summary"]["rho_total"] == pytest.approx(1.095)
    every = _json(capsys, *base, "--rho", "1.095")
    assert every["summary"]["rho_total"] == pytest.approx(2.19)  # --rho sets every run
    only = _json(capsys, *base, "--rho-persons", "1.05")
    assert only["summary"]["runs"]["units"]["rho"] == pytest.approx(0.045)  # the preset's
    assert main([*base, "--rho", "1", "--rho-units", "0.1"]) != 0
    err = capsys.readouterr().err
    assert "--rho" in err


def test_held_exact_state_total_says_split_states_spent_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = _json(capsys, "moe", "topdown", "--preset", "topdown-2020-production", "--format", "json")
    notes = out["summary"]["runs"]["persons"]["held_exact_notes"]
    assert len(notes) == 1 and "AIAN" in notes[0] and "did spend it" in notes[0]


def test_help_states_what_rho_means(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["moe", "topdown"], ["run", "topdown"], ["experiment"]):
        with pytest.raises(SystemExit):
            main([*argv, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "1.05" in text and "0.045" in text, argv
    with pytest.raises(SystemExit):
        main(["run", "topdown", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--rho-persons" in text and "PERSONS run" in text and "--error-universe" in text


def test_run_topdown_takes_rho_persons(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "run", "topdown", "--data", "ri2010", "--filter", "Tract=44001030100",
        "--preset", "ri2010-production-like", "--seed", "1", "--quiet", "--no-microdata",
    ]  # fmt: skip
    assert main([*args, "--rho-persons", "1.5", "--out", str(tmp_path / "a")]) == 0
    metrics = json.loads((tmp_path / "a" / "metrics.json").read_text())
    assert metrics["rho"] == 1.5
    with pytest.raises(SystemExit):  # argparse: one or the other
        main([*args, "--rho", "1", "--rho-persons", "1.5", "--out", str(tmp_path / "b")])
    assert "not allowed with argument --rho" in capsys.readouterr().err


def test_experiment_rho_persons_is_for_topdown(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["experiment", "--engine", "phsafe", "--rho-persons", "1", "--seeds", "1"]
    assert main([*argv, "--out", str(tmp_path / "x")]) == 1
    assert "--rho-persons is for --engine topdown" in capsys.readouterr().err
    both = ["experiment", "--rho", "1", "--rho-persons", "1", "--seeds", "1"]
    assert main([*both, "--out", str(tmp_path / "y")]) == 1
    assert "not both" in capsys.readouterr().err
