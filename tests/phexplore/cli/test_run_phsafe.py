"""``phexplore run phsafe``: official outputs, metrics.json and summary on the official fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.metrics.metrics_json import validate_metrics_json
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
    assert main([*args, "--tau", "4", "--overwrite"]) == 0
    assert set(json.loads((out / "metrics.json").read_text())["tau"].values()) == {4}


@pytest.mark.parametrize("spec", ["PH5=3", "PH3=x", "abc", "PH3"])
def test_parse_tau_rejects_bad_specs(spec: str) -> None:
    from engine.core.errors import ValidationError
    from phexplore.cli.run_phsafe import parse_tau

    with pytest.raises(ValidationError, match="--tau"):
        parse_tau(spec)


def _no_engine_runs(monkeypatch) -> None:
    def boom(*args, **kwargs):
        raise AssertionError("the engine ran before the options were validated")

    monkeypatch.setattr("engine.phsafe.release.run_phsafe", boom)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--max-bytes", "0"], "--max-bytes: 0 is out of range; it must be at least 1"),
        (["--max-bytes", "-5"], "--max-bytes: -5 is out of range; it must be at least 1"),
        (["--trials", "0"], "--trials: 0 is out of range; it must be at least 1"),
    ],
)
def test_cli_rejects_bad_numbers(tmp_path: Path, capsys, monkeypatch, extra, message) -> None:
    _no_engine_runs(monkeypatch)
    data = FIXTURES / "e2e_test1"
    code = main(["run", "phsafe", "--data", str(data), "--out", str(tmp_path / "o"), *extra])
    assert code == 1
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("spec", ["/nonexistent", "some/relative/dir"])
def test_cli_missing_data_folder_is_named(tmp_path: Path, capsys, spec: str) -> None:
    code = main(["run", "phsafe", "--data", spec, "--out", str(tmp_path / "o")])
    assert code == 1
    err = capsys.readouterr().err
    assert f"--data {spec}: no such folder" in err and "unknown sample" not in err


def test_cli_data_file_is_not_a_folder(tmp_path: Path, capsys) -> None:
    path = tmp_path / "persons.csv"
    path.write_text("x")
    assert main(["run", "phsafe", "--data", str(path), "--out", str(tmp_path / "o")]) == 1
    assert "not a folder" in capsys.readouterr().err


def test_cli_bad_out_fails_before_the_run(tmp_path: Path, capsys, monkeypatch) -> None:
    _no_engine_runs(monkeypatch)
    out = tmp_path / "taken"
    out.write_text("x")
    data = FIXTURES / "e2e_test1"
    assert main(["run", "phsafe", "--data", str(data), "--out", str(out)]) == 1
    assert f"--out {out}: a file is in the way" in capsys.readouterr().err


def test_truncation_is_compared_with_noise_at_one_scale(tmp_path, capsys):
    """The 1/1000 sample: truncation per 1,000 persons and projected ×1,000 beside the MOE."""
    out = tmp_path / "ph"
    argv = ["run", "phsafe", "--data", "phsafe_synthetic_us", "--seed", "1", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "projected ×1,000" in printed and "PROJECTION" in printed
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["scale"]["sample_fraction"] == 0.001
    nation = metrics["truncation_at_scale"]["PH1_num"]["usa_*"]
    assert nation["mean_truncation_error_projected"] == pytest.approx(
        1000 * nation["mean_truncation_error"]
    )
    assert nation["projected_bias_over_moe"] > 10  # far from "small next to the MOE of 500"
    assert (out / "details" / "truncation_at_scale.csv").is_file()
    assert main([*argv[:-1], str(tmp_path / "bad"), "--scale", "2"]) == 1
    assert "--scale: 2 is out of range" in capsys.readouterr().err


@pytest.fixture(scope="module")
def small_cef(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2,000 synthetic persons in Rhode Island (runs under any state filter in a second)."""
    from engine.data.cef_writer import write_cef_extract
    from engine.data.synthetic import generate_households

    folder = tmp_path_factory.mktemp("cef")
    write_cef_extract(generate_households(2_000, seed=8, states=["RI"]), folder)
    return folder


def _run_cli(data: Path, out: Path, *extra: str) -> dict:
    argv = ["run", "phsafe", "--data", str(data), "--seed", "3", "--out", str(out), *extra]
    assert main(argv) == 0
    return json.loads((out / "metrics.json").read_text())


def test_cli_metrics_carry_the_budget_fingerprint_the_app_records(
    small_cef: Path, tmp_path: Path
) -> None:
    """A PHSafe run saved from the CLI names the exact budget it used, with
    the key names, value and origin rule of the app's runs, so a scenario attributes it rightly."""
    from dataclasses import replace

    from engine.dp.budget.fingerprint import budget_fingerprint
    from engine.dp.presets import load_phsafe_preset
    from engine.runs.spec import RunSpec
    from phexplore.api.runs import SessionRun
    from phexplore.planning.scenarios import Scenario

    production = load_phsafe_preset("phsafe-2020")
    metrics = _run_cli(small_cef, tmp_path / "a", "--config", "phsafe-2020")
    validate_metrics_json(metrics)
    session = SessionRun(run_id=1, scenario="s", data_label="x", budget=production)
    app = session.provenance(RunSpec.from_dict(metrics["run"]))  # the one provenance builder
    assert metrics["budget_fingerprint"] == app.budget_fingerprint
    assert metrics["budget_fingerprint"] == budget_fingerprint(production)
    assert metrics["budget_origin"] == "phsafe-2020" == app.budget_origin
    mine = Scenario(name="prod", kind="phsafe", phsafe=production)
    assert mine.matching_runs([metrics]) == [metrics]
    # ... and the CLI report names its budget (it said "budget not recorded" before).
    report = tmp_path / "report.html"
    argv = ["report", "--preset", "phsafe-2020", "--results", str(tmp_path / "a" / "metrics.json")]
    assert main([*argv, "--out", str(report)]) == 0
    page = report.read_text()
    assert f"budget={metrics['budget_fingerprint'][:12]}" in page and "not recorded" not in page
    # --tau changes a number: another budget, "modified from" the preset (as in the planner)
    tau = _run_cli(small_cef, tmp_path / "b", "--config", "phsafe-2020", "--tau", "PH3=5")
    assert tau["budget_fingerprint"] == budget_fingerprint(
        replace(production, tau={**production.tau, "PH3": 5})
    )
    assert tau["budget_origin"] == "modified from phsafe-2020"
    assert mine.matching_runs([tau]) == []
    # A config.json exported from an edited planner budget gets the planner's fingerprint.
    edited = production.without_levels(["usa_A-G"]).with_rho("PH2", "state_*", 0.5)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(edited.to_official_config()))
    from_file = _run_cli(small_cef, tmp_path / "c", "--config", str(path))
    assert from_file["budget_fingerprint"] == budget_fingerprint(edited)
    assert from_file["budget_origin"] == "edited.json"
    # The same numbers under another file name are recognised as the preset.
    same = tmp_path / "copy.json"
    same.write_text(json.dumps(production.to_official_config()))
    assert (
        _run_cli(small_cef, tmp_path / "d", "--config", str(same))["budget_origin"] == "phsafe-2020"
    )


def test_cli_non_private_run_records_no_budget(small_cef: Path, tmp_path: Path) -> None:
    metrics = _run_cli(small_cef, tmp_path / "a", "--config", "phsafe-2020", "--non-private")
    assert "budget_fingerprint" not in metrics
