"""One budget, one identity: the CLI, a replay, a scenario file and the workspace give the unedited
production preset the same fingerprint and call it by its name; any edit gives another fingerprint
and "modified from" the preset, with what differs in metrics.json."""

from __future__ import annotations

import json
from pathlib import Path

from engine.dp.presets import PRESET_DIR
from phexplore.app.workspace.store import open_workspace
from phexplore.cli import main
from phexplore.planning.scenarios import scenario_from_preset

PRESET = "topdown-2020-production"


def _run(out: Path, *budget: str) -> dict:
    argv = ["run", "topdown", "--data", "ppmf_perry_al", *budget, "--seed", "3"]
    assert main([*argv, "--no-microdata", "--quiet", "--out", str(out)]) == 0
    return json.loads((out / "metrics.json").read_text(encoding="utf-8"))


def test_cli_replay_scenario_and_workspace_agree(tmp_path: Path, capsys, workspace_dir) -> None:
    scenario = scenario_from_preset(PRESET, scenario_name="production")
    run = _run(tmp_path / "preset", "--preset", PRESET)
    assert run["budget_fingerprint"] == scenario.fingerprint()
    assert run["budget_origin"] == PRESET and run.get("budget_changes", []) == []
    assert scenario.origin() == PRESET
    assert scenario.is_mine(run)  # a production run attaches to its scenario
    spec = str(tmp_path / "preset" / "metrics.json")
    assert main(["run", "replay", "--spec", spec, "--quiet", "--out", str(tmp_path / "re")]) == 0
    replayed = json.loads((tmp_path / "re" / "metrics.json").read_text(encoding="utf-8"))
    assert replayed["budget_fingerprint"] == run["budget_fingerprint"]
    assert replayed["budget_origin"] == PRESET
    # the scenario saved in the workspace and read back by the CLI: the same fingerprint
    open_workspace(workspace_dir).save_scenario(scenario)
    capsys.readouterr()
    assert main(["scenarios", "show", "production", "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["budget_fingerprint"] == run["budget_fingerprint"]
    assert shown["budget_origin"] == PRESET and shown["budget_changes"] == []


def test_an_edited_config_is_modified_from_its_preset(tmp_path: Path) -> None:
    config = json.loads((PRESET_DIR / f"{PRESET}.json").read_text(encoding="utf-8"))
    shares = config["runs"]["persons"]["level_shares"]
    shares["Tract"], shares["Block_Group"] = "688/4099", "1255/4099"
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    edited = _run(tmp_path / "edited", "--config", str(path))
    base = scenario_from_preset(PRESET).fingerprint()
    assert edited["budget_fingerprint"] != base
    assert edited["budget_origin"] == f"modified from {PRESET}"
    items = {c["item"]: (c["preset"], c["value"]) for c in edited["budget_changes"]}
    assert items["persons · level share of Tract"][1].startswith("688/4099")
    assert items["persons · level share of Block_Group"][0].startswith("1256/4099")
    assert len(items) == 2
    # an edit of the units universe alone changes the one fingerprint too
    config = json.loads((PRESET_DIR / f"{PRESET}.json").read_text(encoding="utf-8"))
    units = config["runs"]["units"]["level_shares"]
    first, second = list(units)[2:4]
    units[first], units[second] = units[second], units[first]
    path.write_text(json.dumps(config), encoding="utf-8")
    units_edit = _run(tmp_path / "units", "--config", str(path))
    assert units_edit["budget_fingerprint"] not in (base, edited["budget_fingerprint"])
    assert units_edit["budget_origin"] == f"modified from {PRESET}"
    assert all(c["item"].startswith("units") for c in units_edit["budget_changes"])
