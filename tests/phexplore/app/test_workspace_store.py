"""The workspace on disk: scenarios, runs, uploads and populations survive a new process (a reload,
a restart), deletions are undoable, and corrupt or foreign files get one clear message."""

from __future__ import annotations

import dataclasses
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from engine.core.errors import PHExploreError
from phexplore.app.records import RunRecord
from phexplore.app.workspace.index import INDEX_NAME, SCHEMA_VERSION, WorkspaceError
from phexplore.app.workspace.location import WORKSPACE_ENV, workspace_location
from phexplore.app.workspace.store import Workspace, open_workspace
from phexplore.planning.scenarios import scenario_from_preset


def _record(number: int, token: str) -> RunRecord:
    tidy = pd.DataFrame(
        {"geolevel": ["County"] * 2, "query": ["TOTAL"] * 2, "true": [3, 4], "estimate": [3.5, 4]}
    )
    return RunRecord(
        id=number,
        label=f"#{number} topdown on ri2010",
        engine="topdown",
        scenario="s",
        settings={"rho": 2.5, "seed": 1},
        metrics={"engine": "topdown", "budget_fingerprint": "ab" * 32, "run_token": token},
        tidy=tidy,
        tables={"mae": tidy.assign(mae=[0.5, 0.0])},
        token=token,
    )


def test_location_order(tmp_path: Path) -> None:
    assert (
        workspace_location(tmp_path / "a", {WORKSPACE_ENV: str(tmp_path / "b")}) == tmp_path / "a"
    )
    assert workspace_location(None, {WORKSPACE_ENV: str(tmp_path / "b")}) == tmp_path / "b"
    default = workspace_location(None, {})
    assert default.parts[-2:] == ("phexplore", "workspace") and default.is_absolute()


def test_scenarios_survive_a_new_process_and_deleting_is_undoable(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    ws = Workspace(root)
    one = scenario_from_preset("phsafe-2020", scenario_name="one")
    two = scenario_from_preset("topdown-2020-production", scenario_name="two")
    ws.save_scenario(one)
    ws.save_scenario(two)
    again = Workspace(root)  # a second object on the folder: what a restarted server opens
    saved, problems = again.scenarios()
    assert problems == []
    assert set(saved) == {"one", "two"}
    assert saved["two"].fingerprint() == two.fingerprint()
    assert saved["two"].to_dict() == two.to_dict()
    sid = again.delete_scenario("one")
    assert set(ws.scenarios()[0]) == {"two"}
    assert again.restore_scenario(sid) == "one"
    assert set(ws.scenarios()[0]) == {"one", "two"}
    # a save under a taken name replaces it, and the replaced one can be brought back
    edited = scenario_from_preset("phsafe-2020", scenario_name="one")
    edited = dataclasses.replace(edited, notes="edited")
    ws.save_scenario(edited)
    assert ws.scenarios()[0]["one"].notes == "edited"
    old = next(e for e in ws.scenario_entries(deleted=True) if e.deleted and e.name == "one")
    ws.restore_scenario(old.id)
    assert ws.scenarios()[0]["one"].notes == ""


def test_runs_survive_with_their_tables(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    ws = Workspace(root)
    first = ws.reserve_run("topdown", "#1 topdown on ri2010", "s")
    assert first.number == 1 and first.status == "running"
    ws.save_run(_record(first.number, first.token))
    second = _record(99, "f" * 32)  # a run made elsewhere: numbered on save
    ws.save_run(second)
    assert second.id == 2 and second.label.startswith("#2 ")
    records, problems = Workspace(root).records()
    assert problems == []
    assert [r.id for r in records] == [1, 2]
    assert records[0].metrics["budget_fingerprint"] == "ab" * 32
    assert records[0].tidy["estimate"].tolist() == [3.5, 4.0]
    assert list(records[0].tables) == ["mae"]
    assert records[0].tables["mae"]["mae"].tolist() == [0.5, 0.0]
    ws.delete_run(records[0].token)
    assert [r.id for r in Workspace(root).records()[0]] == [2]
    ws.restore_run(records[0].token)
    assert [r.id for r in Workspace(root).records()[0]] == [1, 2]
    # a number is never given twice, even after a failed run
    third = ws.reserve_run("phsafe", "#3 phsafe", "s")
    ws.end_run(third.token, "failed", "bad data")
    assert ws.reserve_run("topdown", "x", "s").number == 4
    assert ws.run_entry(third.token).status == "failed"


def test_a_run_folder_edited_outside_is_refused_not_crashed(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    ws.save_run(_record(1, "a" * 32))
    entry = ws.run_entries()[0]
    assert entry.folder is not None
    (tmp_path / "ws" / entry.folder / "metrics.json").write_text("{}", encoding="utf-8")
    records, problems = Workspace(tmp_path / "ws").records()
    assert records == []
    assert len(problems) == 1 and problems[0].startswith("run #1 cannot be shown")


def test_a_scenario_edited_outside_is_refused(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    ws.save_scenario(scenario_from_preset("phsafe-2020", scenario_name="one"))
    ws.save_scenario(scenario_from_preset("phsafe-2020", scenario_name="two"))
    file = next((tmp_path / "ws" / "scenarios").glob("*.json"))
    file.write_text(file.read_text(encoding="utf-8").replace('"cks"', '"pld"'), encoding="utf-8")
    saved, problems = ws.scenarios()
    assert len(saved) == 1 and len(problems) == 1
    assert "changed outside PHExplore" in problems[0]
    (tmp_path / "ws" / "stray.txt").write_text("x", encoding="utf-8")
    (tmp_path / "ws" / "scenarios" / "foreign.json").write_text("{}", encoding="utf-8")
    lines = ws.problems()
    assert any("stray.txt: not part of the workspace" in x for x in lines)
    assert any("foreign.json: not a scenario of this workspace" in x for x in lines)


@pytest.mark.parametrize(
    ("prepare", "message"),
    [
        (lambda root: (root / "notes.txt").write_text("x"), "not a PHExplore workspace and not"),
        (lambda root: (root / INDEX_NAME).write_bytes(b"garbage" * 200), "cannot be read"),
        (lambda root: sqlite3.connect(root / INDEX_NAME).execute("CREATE TABLE t(x)"), "another"),
    ],
    ids=["foreign-folder", "damaged-index", "foreign-database"],
)
def test_unusable_folders_get_one_clear_message(tmp_path: Path, prepare, message: str) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    prepare(root)
    with pytest.raises(WorkspaceError, match=message) as info:
        Workspace(root)
    assert str(root) in str(info.value)
    assert isinstance(info.value, PHExploreError)


def test_a_newer_schema_version_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    Workspace(root)
    with sqlite3.connect(root / INDEX_NAME) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(WorkspaceError, match="newer PHExplore"):
        Workspace(root)


def test_index_records_version_and_uses_wal(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    assert ws.index.meta()["schema_version"] == str(SCHEMA_VERSION)
    with sqlite3.connect(tmp_path / "ws" / INDEX_NAME) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    before = ws.generation()
    ws.save_scenario(scenario_from_preset("phsafe-2020", scenario_name="x"))
    assert ws.generation() == before + 1


RESERVE = (
    "import sys; from pathlib import Path; from phexplore.app.workspace.store import Workspace; "
    "ws = Workspace(Path(sys.argv[1])); "
    "print(' '.join(str(ws.reserve_run('topdown', 'x', 's').number) for _ in range(15)))"
)


def test_writers_in_several_processes_never_share_a_number(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    Workspace(root)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RESERVE, str(root)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    numbers = sorted(int(n) for out in outs for n in out.split())
    assert numbers == list(range(1, 31))


def test_uploads_by_content_hash_and_populations(tmp_path: Path) -> None:
    ws = open_workspace(tmp_path / "ws")
    files = [("blocks.csv", b"GEOID,a\n1,2\n"), ("mapping.json", b"{}")]
    one = ws.store_upload("topdown", "block_csv", files)
    two = ws.store_upload("topdown", "block_csv", list(reversed(files)))
    assert one.sha256 == two.sha256 and len(ws.uploads("topdown")) == 1
    assert sorted(ws.upload_files(one)) == sorted(files)
    (tmp_path / "ws" / "uploads" / one.sha256 / "blocks.csv").write_bytes(b"changed")
    with pytest.raises(WorkspaceError, match="changed since it was uploaded"):
        ws.upload_files(one)
    with pytest.raises(WorkspaceError, match="not a plain file name"):
        ws.store_upload("topdown", "block_csv", [("../x.csv", b"1")])
    folder, known = ws.population_folder(1000, ("RI",), 3)
    assert not known
    folder.mkdir(parents=True)
    ws.register_population(1000, ("RI",), 3)
    assert ws.population_folder(1000, ("RI",), 3) == (folder, True)


def test_interrupted_runs_are_marked(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    entry = ws.reserve_run("topdown", "x", "s")
    with ws.index.write() as db:  # a run left running by a process that is gone
        db.execute("UPDATE runs SET owner = ? WHERE token = ?", ("nohost-xyz:1", entry.token))
    assert ws.mark_interrupted() == 0  # another machine's run: not ours to judge
    with ws.index.write() as db:
        db.execute(
            "UPDATE runs SET owner = ? WHERE token = ?",
            (f"{socket.gethostname()}:999999999", entry.token),
        )
    assert ws.mark_interrupted() == 1
    assert ws.run_entry(entry.token).status == "interrupted"
