"""Replay in the app (phexplore.api.replay): the same description, the same pipeline, the same numbers.

Each replay here runs the work a RunJob would run in its thread, synchronously, on small data.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.core.errors import PHExploreError
from engine.dp.budget.fingerprint import budget_fingerprint
from engine.dp.presets import load_phsafe_preset, load_topdown_preset
from phexplore import api as R
from phexplore.api.jobs import RunJob, RunRecord
from phexplore.api.replay import held_data, recorded_in_file, recorded_of, replay_work
from phexplore.cli import main
from tests.phexplore.api.app_runs import phsafe_app_work, topdown_app_work

TRACT = "44001030100"


def _do(work: Callable[[RunJob], RunRecord]) -> RunRecord:
    return work(RunJob(engine="x", label="test"))


@pytest.fixture(scope="module")
def app_run() -> RunRecord:
    """A TopDown run as the Run page starts it: the ri2010 sample, one tract, seed 9."""
    from engine.data.samples import load_topdown_sample

    hist = R.subset(load_topdown_sample("ri2010"), "Tract", [TRACT])
    allocation = load_topdown_preset("ri2010-production-like")["persons"].with_rho(2)
    work = topdown_app_work(
        hist, f"ri2010 [Tract {TRACT}]", allocation, seed=9, epl_boot=20,
        sample="ri2010", level="Tract", units=[TRACT],
    )  # fmt: skip
    return _do(work)


def test_replay_of_a_session_run_gives_the_same_numbers(app_run: RunRecord) -> None:
    run = recorded_of(app_run)
    assert run.held is app_run.data is not None  # the session keeps the run's input
    again = _do(replay_work(run, run_id=2, scenario="s", records=[app_run]))
    assert again.id == 2 and again.label.endswith("replay of #1")
    assert again.tidy.equals(app_run.tidy)
    assert again.metrics["mae"] == app_run.metrics["mae"]
    of = again.metrics["replay_of"]
    assert of["reproduced"] is True and of["run_id"] == 1 and of["seed"] == 9
    assert of["run_fingerprint"] == app_run.metrics["run"]["fingerprint"]
    # Provenance: the original's budget, a new run number and token.
    for key in ("budget_fingerprint", "budget_origin", "data"):
        assert again.metrics[key] == app_run.metrics[key]
    assert again.metrics["run_token"] != app_run.metrics["run_token"]
    kind, text = R.replay_outcome(again)
    assert kind == "success" and "same seed, same numbers" in text


def test_replay_from_a_downloaded_metrics_json_reads_the_data_again(app_run: RunRecord) -> None:
    """No data held: the sample is read again, the subset applied from the recorded filter and
    the content hash checked — the numbers are the original's."""
    raw = R.metrics_bytes(app_run.metrics)
    (run,) = recorded_in_file(raw, "run1_metrics.json")
    assert run.held is None and held_data(run.spec, []) is None
    assert run.spec.numbers_dict()["data"]["filter"] == {"level": "Tract", "units": [TRACT]}
    again = _do(replay_work(run, run_id=5, scenario="s", records=[]))
    assert again.metrics["replay_of"]["reproduced"] is True
    assert again.tidy.equals(app_run.tidy)
    # A loaded file whose data a session run still holds (same content hash) reuses them.
    assert held_data(run.spec, [app_run]) is app_run.data


def test_a_cli_metrics_json_replays_in_the_app_with_its_budget(tmp_path: Path) -> None:
    out = tmp_path / "cli"
    argv = [
        "run", "topdown", "--data", "ri2010", "--filter", f"Tract={TRACT}",
        "--preset", "ri2010-production-like", "--seed", "4", "--no-microdata", "--quiet",
        "--out", str(out),
    ]  # fmt: skip
    assert main(argv) == 0
    cli = json.loads((out / "metrics.json").read_text())
    (run,) = recorded_in_file((out / "metrics.json").read_bytes(), "metrics.json")
    again = _do(replay_work(run, run_id=1, scenario="s"))
    assert again.metrics["replay_of"]["reproduced"] is True
    assert again.metrics["mae"] == cli["mae"]
    preset = load_topdown_preset("ri2010-production-like")["persons"]
    assert again.metrics["budget_fingerprint"] == cli["budget_fingerprint"]
    assert again.metrics["budget_fingerprint"] == budget_fingerprint(preset)
    assert again.settings["data"] == f"ri2010 [Tract {TRACT}]"


def test_bad_or_altered_files_get_one_clear_line(app_run: RunRecord) -> None:
    good = json.loads(R.metrics_bytes(app_run.metrics))

    def refused(payload: bytes | dict, name: str = "m.json") -> str:
        raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        with pytest.raises(PHExploreError) as info:
            runs = recorded_in_file(raw, name)
            replay_work(runs[0], run_id=2, scenario="s")
        text = str(info.value)
        assert "\n" not in text and "Traceback" not in text
        return text

    assert "not valid JSON" in refused(b"{not json", "broken.json")
    assert "no run description" in refused({"mae": {}})
    edited = json.loads(json.dumps(good))
    edited["run"]["seed"] = 10  # a different run than the one recorded
    assert "fingerprint does not match" in refused(edited)
    budget = json.loads(json.dumps(good))
    budget["budget_fingerprint"] = "0" * 64
    assert "does not match the budget" in refused(budget)
    exact = json.loads(json.dumps(good))
    exact["run"]["options"]["noise_method"] = "exact"
    exact["run"].pop("fingerprint")
    assert "no seed reproduces" in refused(exact)
    upload = json.loads(json.dumps(good))
    upload["run"]["data"] = {"source": "my blocks.csv", "label": "my blocks.csv", "upload": True}
    upload["run"].pop("fingerprint")
    assert "not on this machine" in refused(upload)
    relative = json.loads(json.dumps(good))
    relative["run"]["data"] = {"source": "my blocks.csv", "label": "my blocks.csv"}
    relative["run"].pop("fingerprint")
    assert "is a relative path" in refused(relative)
    scenario = {"name": "s", "kind": "topdown", "results": []}
    assert "without attached run results" in refused(scenario, "s.json")


def test_a_scenario_file_offers_each_attached_run(app_run: RunRecord) -> None:
    good = json.loads(R.metrics_bytes(app_run.metrics))
    scenario = {"name": "s", "kind": "topdown", "results": [{"mae": {}}, good]}
    runs = recorded_in_file(json.dumps(scenario).encode(), "s.json")
    assert len(runs) == 1 and runs[0].label.startswith("result 2: run #1 · TopDown")


def test_phsafe_replay_keeps_the_planner_budget_and_numbers(tmp_path: Path) -> None:
    """A PHSafe app run on a generated extract with the Run page's states: replayed from its
    metrics.json (data read again from the folder), the same numbers and budget fingerprint."""
    from engine.data.cef import load_cef_extract
    from engine.data.cef_writer import write_cef_extract
    from engine.data.synthetic import generate_households

    folder = tmp_path / "cef"
    write_cef_extract(generate_households(2_000, seed=3, states=["RI", "CT"]), folder)
    budget = load_phsafe_preset("phsafe-2020")
    first = _do(
        phsafe_app_work(
            load_cef_extract(folder), "gen [states 44]", budget, states=["44"], seed=5, trials=2,
            folder=str(folder),
        )
    )  # fmt: skip
    assert first.metrics["budget_fingerprint"] == budget_fingerprint(budget)
    (run,) = recorded_in_file(R.metrics_bytes(first.metrics), "ph.json")
    again = _do(replay_work(run, run_id=2, scenario="s"))
    assert again.metrics["replay_of"]["reproduced"] is True
    assert again.metrics["mae"] == first.metrics["mae"]
    assert again.metrics["budget_fingerprint"] == budget_fingerprint(budget)
    assert again.metrics["budget_origin"] == "phsafe-2020"
    assert again.settings["states"] == ["44"]


def test_the_cli_replays_an_app_run(app_run: RunRecord, tmp_path: Path) -> None:
    """The app's runs record where their data are (sample + subset filter), so `phexplore run
    replay` repeats one from its downloaded metrics.json with the same numbers and budget."""
    spec = tmp_path / "run1_metrics.json"
    spec.write_bytes(R.metrics_bytes(app_run.metrics))
    out = tmp_path / "again"
    assert main(["run", "replay", "--spec", str(spec), "--quiet", "--out", str(out)]) == 0
    again = json.loads((out / "metrics.json").read_text())
    assert again["mae"] == json.loads(R.metrics_bytes(app_run.metrics))["mae"]
    assert again["budget_fingerprint"] == app_run.metrics["budget_fingerprint"]
    assert again["budget_origin"] == app_run.metrics["budget_origin"]


def test_a_cli_phsafe_run_loaded_in_the_app_belongs_to_its_budget(tmp_path: Path) -> None:
    """End to end: a PHSafe run saved by the CLI, replayed in the app, is a
    run of the planner's phsafe-2020 budget (the Scenarios page and the report attach it)."""
    from engine.data.cef_writer import write_cef_extract
    from engine.data.synthetic import generate_households
    from phexplore.planning.scenarios import Scenario

    folder = tmp_path / "cef"
    write_cef_extract(generate_households(2_000, seed=4, states=["RI"]), folder)
    out = tmp_path / "cli"
    argv = ["run", "phsafe", "--data", str(folder), "--config", "phsafe-2020", "--seed", "6"]
    assert main([*argv, "--out", str(out)]) == 0
    (run,) = recorded_in_file((out / "metrics.json").read_bytes(), "metrics.json")
    record = _do(replay_work(run, run_id=1, scenario="s"))
    assert record.metrics["replay_of"]["reproduced"] is True
    planner = Scenario(name="p", kind="phsafe", phsafe=load_phsafe_preset("phsafe-2020"))
    assert record.metrics["budget_fingerprint"] in planner.fingerprints()
    assert planner.matching_runs([record.metrics]) == [record.metrics]
    assert record.metrics["budget_origin"] == "phsafe-2020"
    assert "phsafe-2020 [" in record.label
