"""``phexplore scenarios list|show|export``: the app's workspace read from the CLI."""

from __future__ import annotations

import json
from pathlib import Path

from phexplore.app.workspace.store import open_workspace
from phexplore.cli import main
from phexplore.planning.scenarios import Scenario, scenario_from_preset


def _two_scenarios(root: Path) -> tuple[Scenario, Scenario]:
    ws = open_workspace(root)
    phsafe = scenario_from_preset("phsafe-2020", scenario_name="Households A")
    edited = phsafe.phsafe.with_rho("PH3", "state_A-G", 1.0)  # type: ignore[union-attr]
    tighter = Scenario(name="Households B", kind="phsafe", phsafe=edited, notes="PH3 up")
    ws.save_scenario(phsafe)
    ws.save_scenario(tighter)
    return phsafe, tighter


def test_list_show_export(tmp_path: Path, capsys, workspace_dir: Path) -> None:
    a, b = _two_scenarios(workspace_dir)
    assert main(["scenarios", "list", "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["workspace"] == str(workspace_dir)
    assert [r["name"] for r in listed["rows"]] == ["Households A", "Households B"]
    assert listed["rows"][0]["fingerprint"] == a.fingerprint()[:12]
    assert listed["rows"][1]["budget"] == "modified from phsafe-2020"
    assert main(["scenarios", "list"]) == 0
    table = capsys.readouterr().out
    assert "Households B" in table and b.fingerprint()[:12] in table
    assert main(["scenarios", "show", "Households B"]) == 0
    shown = capsys.readouterr().out
    assert "modified from phsafe-2020" in shown and "PH3" in shown and "notes: PH3 up" in shown
    out = tmp_path / "b.json"
    assert main(["scenarios", "export", "Households B", "--out", str(out)]) == 0
    assert Scenario.load(out).to_dict() == b.to_dict()
    # never overwritten
    assert main(["scenarios", "export", "Households A", "--out", str(out)]) == 1
    assert "exists" in capsys.readouterr().err
    assert Scenario.load(out).fingerprint() == b.fingerprint()


def test_other_workspace_and_clear_errors(tmp_path: Path, capsys) -> None:
    other = tmp_path / "other"
    open_workspace(other).save_scenario(scenario_from_preset("phsafe-2020", scenario_name="x"))
    assert main(["scenarios", "list", "--workspace", str(other), "--format", "json"]) == 0
    assert [r["name"] for r in json.loads(capsys.readouterr().out)["rows"]] == ["x"]
    missing = tmp_path / "nothing-here"
    assert main(["scenarios", "list", "--workspace", str(missing)]) == 1
    err = capsys.readouterr().err
    assert f"no PHExplore workspace at {missing}" in err and "Traceback" not in err
    assert not missing.exists()  # the CLI never creates a workspace
    assert main(["scenarios", "show", "nope", "--workspace", str(other)]) == 1
    assert "no scenario 'nope'" in capsys.readouterr().err
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "workspace.sqlite").write_bytes(b"not sqlite at all" * 100)
    assert main(["scenarios", "list", "--workspace", str(foreign)]) == 1
    assert "cannot be read" in capsys.readouterr().err
