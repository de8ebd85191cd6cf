"""``phexplore run phsafe``: official outputs, metrics.json and summary on the official fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.metrics import validate_metrics_json
from phexplore.cli import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "phsafe_official"


def _sorted_lines(path: Path) -> tuple[str, list[str]]:
    lines = path.read_text().splitlines()
    return lines[0], sorted(lines[1:])


@pytest.mark.parametrize(("case", "flags"), [("e2e_test1", ["--non-private"]), ("e2e_test2", [])])
def test_cli_reproduces_fixture(case: str, flags: list[str], tmp_path: Path, capsys) -> None:
    data = FIXTURES / case
    out = tmp_path / "out"
    code = main(
        ["run", "phsafe", "--data", str(data), "--config", str(data / "config.json"), "--seed", "7"]
        + flags
        + ["--out", str(out)]
    )
    assert code == 0
    for expected in sorted((data / "expected_outputs").iterdir()):
        assert _sorted_lines(out / expected.name) == _sorted_lines(expected), expected.name
    metrics = json.loads((out / "metrics.json").read_text())
    validate_metrics_json(metrics)
    assert metrics["engine"] == "phsafe" and metrics["seed"] == 7
    assert metrics["non_private"] is bool(flags)
    assert (out / "summary.txt").read_text().startswith("PHSafe run")
    assert "PHSafe run" in capsys.readouterr().out


def test_cli_reports_bad_config(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "config.json"
    bad.write_text('{"privacy_budget": {"PH3": {"usa_*": 1}}, "tau": {}, "state_filter": ["06"]}')
    code = main(
        ["run", "phsafe", "--data", str(FIXTURES / "e2e_test1"), "--config", str(bad)]
        + ["--out", str(tmp_path / "o")]
    )
    assert code != 0
    assert "tau is missing for PH3" in capsys.readouterr().err


def test_cli_tau_override(tmp_path: Path) -> None:
    out = tmp_path / "o"
    data = FIXTURES / "e2e_test1"
    args = ["run", "phsafe", "--data", str(data), "--non-private", "--out", str(out)]
    assert main([*args, "--tau", "PH3=2,PH7=3"]) == 0
    tau = json.loads((out / "metrics.json").read_text())["tau"]
    assert tau["PH3"] == 2 and tau["PH7"] == 3 and tau["PH2"] == 10
    assert main([*args, "--tau", "4"]) == 0
    assert set(json.loads((out / "metrics.json").read_text())["tau"].values()) == {4}


@pytest.mark.parametrize("spec", ["PH5=3", "PH3=x", "abc", "PH3"])
def test_parse_tau_rejects_bad_specs(spec: str) -> None:
    from phexplore.cli.run_phsafe import parse_tau
    from phexplore.errors import ValidationError

    with pytest.raises(ValidationError, match="--tau"):
        parse_tau(spec)
