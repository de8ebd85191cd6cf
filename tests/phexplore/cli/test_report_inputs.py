"""``phexplore report --results`` reports only runs that are what they say (docs/reliability.md).

A PHSafe run of ``phsafe-2020`` on the shipped synthetic sample is reported; the same metrics.json
with every ρ of its run description ×50 (the run description's own fingerprint removed, so that
check cannot catch it) still claims ``phsafe-2020``'s budget fingerprint: refused, as are an empty
JSON object and JSON naming no run. No report file is written for a refused input.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phexplore.cli import main


@pytest.fixture(scope="module")
def phsafe_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report-inputs") / "ph"
    argv = ["run", "phsafe", "--data", "phsafe_synthetic_us", "--config", "phsafe-2020"]
    assert main([*argv, "--seed", "1", "--trials", "1", "--out", str(out)]) == 0
    return out


def _report(results: Path, out: Path) -> int:
    argv = ["report", "--preset", "phsafe-2020", "--results", str(results), "--out", str(out)]
    return main(argv)


def test_a_phsafe_2020_run_is_reported(phsafe_run: Path, tmp_path: Path) -> None:
    assert _report(phsafe_run, tmp_path / "r.html") == 0
    assert "phsafe-2020" in (tmp_path / "r.html").read_text(encoding="utf-8")


def test_a_times_fifty_budget_claiming_phsafe_2020_is_refused(
    phsafe_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    metrics = json.loads((phsafe_run / "metrics.json").read_text())
    assert metrics["budget_origin"] == "phsafe-2020"
    for row in metrics["run"]["config"]["privacy_budget"].values():
        for level in row:
            row[level] *= 50
    metrics["run"].pop("fingerprint")
    forged = tmp_path / "metrics.json"
    forged.write_text(json.dumps(metrics))
    capsys.readouterr()
    assert _report(forged, tmp_path / "r.html") == 1
    err = capsys.readouterr().err
    assert "claims budget" in err and "phsafe-2020" in err and "configured with budget" in err
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("text", ["{}", '{"mae": {}}', '{"engine": "other"}'])
def test_json_naming_no_run_is_refused(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    given = tmp_path / "results.json"
    given.write_text(text)
    assert _report(given, tmp_path / "r.html") == 1
    assert "names no run" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()
