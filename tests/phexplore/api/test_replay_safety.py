"""The app's replay checks what it replays (docs/reliability.md "Replays"): where it runs is the
app's choice, never the file's; data changed since the run are refused (or, with the user's consent,
reported and recorded)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.core.errors import PHExploreError
from phexplore.api.jobs import RunJob
from phexplore.api.replay import recorded_in_file, replay_note, replay_outcome, replay_work
from phexplore.api.run_choices import SPARK_MASTER_ENV, SPARK_REMOTE_ENV
from phexplore.cli import main

RI_HEADER = (
    "GEOID,pop,pop_white,pop_black,pop_hisp,pop_aian,pop_asian,pop_nhpi,pop_other,pop_two,"
    "vap,vap_white,vap_black,vap_hisp,vap_aian,vap_asian,vap_nhpi,vap_other,vap_two"
)
ROWS = [
    "440010301001000,23,19,0,4,0,0,0,0,0,12,8,0,4,0,0,0,0,0",
    "440010301001001,17,17,0,0,0,0,0,0,0,14,14,0,0,0,0,0,0,0",
    "440010301001002,5,5,0,0,0,0,0,0,0,5,5,0,0,0,0,0,0,0",
]


def _cli_run(folder: Path) -> Path:
    """``phexplore run topdown`` on a block CSV of the user's; its metrics.json."""
    (folder / "blocks.csv").write_text("\n".join([RI_HEADER, *ROWS]) + "\n", encoding="utf-8")
    argv = ["run", "topdown", "--data", str(folder / "blocks.csv"), "--preset"]
    argv += ["ri2010-production-like", "--seed", "2", "--quiet", "--out", str(folder / "out")]
    assert main(argv) == 0
    return folder / "out" / "metrics.json"


def test_data_changed_since_the_run_are_refused_unless_the_user_agrees(tmp_path: Path) -> None:
    metrics = _cli_run(tmp_path)
    changed = ROWS[0].replace(",23,19,", ",24,20,", 1)
    (tmp_path / "blocks.csv").write_text(
        "\n".join([RI_HEADER, changed, *ROWS[1:]]) + "\n", encoding="utf-8"
    )
    (run,) = recorded_in_file(metrics.read_bytes(), "metrics.json")
    with pytest.raises(PHExploreError) as refused:
        replay_work(run, run_id=2, scenario="s")  # before any job starts
    assert "data/blocks.csv (content differs)" in str(refused.value)
    assert "Replay on the data as they are now" in str(refused.value)
    record = replay_work(run, run_id=2, scenario="s", allow_changed=True)(RunJob("topdown", "x"))
    assert record.metrics["replay_of"]["inputs_changed"] == ["data/blocks.csv (content differs)"]
    # the new run records the data it really read, not the recorded hashes
    recorded = json.loads(metrics.read_text())["run"]["data"]["inputs"]
    assert record.metrics["run"]["data"]["inputs"] != recorded
    kind, text = replay_outcome(record) or ("", "")
    assert kind == "warning" and "data that changed since the run was recorded" in text


@pytest.mark.timeout(300)
def test_the_file_never_says_where_a_replay_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file naming a Spark Connect server: the app (with a Spark of its own configured) replays
    on this machine unless the user picks the app's Spark; the file's server is only shown."""
    metrics = json.loads(_cli_run(tmp_path).read_text())
    metrics["run"]["backend"] = "spark"
    metrics["run"]["backend_options"] = {"remote": "sc://127.0.0.1:9"}
    monkeypatch.setenv(SPARK_MASTER_ENV, "local[2]")
    monkeypatch.delenv(SPARK_REMOTE_ENV, raising=False)
    (run,) = recorded_in_file(json.dumps(metrics).encode(), "metrics.json")
    assert run.recorded.placement_text == "spark (remote sc://127.0.0.1:9)"
    note = replay_note(run)
    assert "It ran on spark (remote sc://127.0.0.1:9); it replays on this machine" in note
    record = replay_work(run, run_id=2, scenario="s")(RunJob("topdown", "x"))
    assert record.metrics["run"]["backend"] == "local"
    assert "backend_options" not in record.metrics["run"]
    assert record.metrics["replay_of"]["recorded_placement"] == "spark (remote sc://127.0.0.1:9)"
    assert record.metrics["replay_of"]["reproduced"] is True
