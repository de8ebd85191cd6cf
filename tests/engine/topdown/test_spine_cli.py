"""``phexplore run topdown --spine … --entities …`` writes the spine sections of metrics.json."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import engine.runs.topdown as run_stages
from phexplore.cli import main

_spec = importlib.util.spec_from_file_location(
    "spine_toy", Path(__file__).with_name("spine_toy.py")
)
toy = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(toy)  # type: ignore[union-attr]


@pytest.fixture
def toy_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Serve the toy state as ``--data toy`` and write a two-ward entity CSV."""
    monkeypatch.setattr(run_stages, "load", lambda spec, executor=None: toy.toy_histogram())
    csv = tmp_path / "wards.csv"
    rows = [f"{toy.BLOCK_IDS[i]},{'w1' if i < 5 else 'w2'},wards" for i in (2, 3, 4, 5, 6, 7)]
    rows += [f"{toy.BLOCK_IDS[i]},City,city" for i in (2, 3, 4, 5, 6, 7)]
    csv.write_text("GEOID,entity,entity_set\n" + "\n".join(rows) + "\n")
    return csv


@pytest.mark.parametrize("spine", ["conventional", "aian", "optimized"])
def test_run_topdown_with_a_spine_writes_spine_metrics(
    toy_data: Path, tmp_path: Path, capsys, spine
):
    out = tmp_path / spine
    argv = ["run", "topdown", "--data", "toy", "--preset", "ri2010-production-like", "--seed", "5"]
    argv += ["--spine", spine, "--entities", str(toy_data), "--out", str(out)]
    if spine == "aian":  # the branch only for areas the user names (SPN §6); union = the city
        argv += ["--special-areas", str(toy_data)]
    assert main([*argv, "--no-microdata", "--quiet"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["entity_mae"]) == set(metrics["osed"]) == {"city", "wards"}
    assert list(metrics["conventional_mae"]) == ["State", "County", "Tract", "Block_Group", "Block"]
    assert metrics["conventional_mae"]["State"] == 0.0
    assert metrics["spine"]["kind"] == spine
    assert "mae" in metrics and "runtime_s" in metrics  # the engine's own sections are kept
    if spine == "aian":
        assert metrics["osed"]["city"] == 1.0
    if spine == "optimized":  # default: no branch, so the city is not a state-level geounit
        assert metrics["spine"]["special_areas"] is None
        assert metrics["osed"]["city"] > 1.0
    assert "entity_mae" in capsys.readouterr().out
    # Blau-index bias on the tabulation geographies (summed from blocks) for every spine.
    geography = metrics["blau_bias_geography"]
    assert geography["Block_Group"] in ("tabulation", "spine = tabulation")
    if spine == "aian":  # split block groups are the spine's; the plain name is the published one
        assert geography["Block_Group"] == "tabulation"
        assert geography.get("Block_Group (spine)", "spine") == "spine"
    assert {"Block_Group", "Block"} <= set(metrics["blau_bias"])
    if spine == "optimized":  # TDA Table 13's level beside the optimized block groups
        assert geography["Optimized_Block_Group"] == "spine"
        assert geography["Block_Group"] == "tabulation"
    if spine == "conventional":
        assert set(geography.values()) == {"spine = tabulation"}


def test_spine_option_errors_are_reported(toy_data: Path, tmp_path: Path, capsys):
    argv = ["run", "topdown", "--data", "toy", "--preset", "ri2010-production-like"]
    assert main([*argv, "--spine", "aian", "--out", str(tmp_path / "x"), "--quiet"]) == 1
    assert "needs --special-areas" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("GEOID,entity\n123,a\n")
    assert main([*argv, "--entities", str(bad), "--out", str(tmp_path / "y"), "--quiet"]) == 1
    assert "15-digit block id" in capsys.readouterr().err
