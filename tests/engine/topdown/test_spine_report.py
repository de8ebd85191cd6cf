"""Spine-independent metrics (SPN §7) and a TopDown run on each spine of a toy state."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from engine.topdown.spine.build import build_spine
from engine.topdown.spine.cli_options import add_spine_arguments, apply_spine_options
from engine.topdown.spine.entities import EntitySet
from engine.topdown.spine.levels import SpineLevels
from engine.topdown.spine.report import entity_total_mae, level_total_mae, spine_metrics
from engine.topdown.spine.runner import run_on_spine, spine_report
from phexplore.errors import ValidationError

_spec = importlib.util.spec_from_file_location(
    "spine_toy", Path(__file__).with_name("spine_toy.py")
)
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)  # type: ignore[union-attr]

SPINE = SpineLevels.from_block_labels(
    ("US", "County", "Block"),
    [["US"] * 4, ["A", "A", "B", "B"], ["b0", "b1", "b2", "b3"]],
)


def test_level_and_entity_mae_from_block_errors():
    truth = np.array([10, 0, 5, 5])
    estimate = np.array([12, -1, 5, 2])  # errors +2, −1, 0, −3
    assert level_total_mae(SPINE, truth, estimate) == {"County": (1 + 3) / 2, "Block": 6 / 4}
    pair = EntitySet("pair", ("p", "q"), np.array([0, -1, 0, 1]))
    assert entity_total_mae(pair, truth, estimate) == pytest.approx((2 + 3) / 2)
    metrics = spine_metrics(SPINE, SPINE, [pair], truth, estimate)
    assert metrics["osed"] == {"pair": 1.5}  # {b0, b2} needs 2 blocks, {b3} is a block
    with pytest.raises(ValidationError, match="one true and one estimated total per block"):
        level_total_mae(SPINE, truth[:3], estimate)


@pytest.mark.parametrize("kind", ["conventional", "aian", "optimized"])
def test_run_on_each_spine_reports_comparable_metrics(kind):
    hist = cases.toy_histogram()
    options = {
        "aian": {"special_areas": cases.CITY},
        "optimized": {"special_areas": cases.CITY, "entities": [cases.CITY, cases.WARDS]},
    }
    built = build_spine(hist, kind, cases.ALLOCATION, **options.get(kind, {}))
    result = run_on_spine(hist, cases.ALLOCATION, built, seed=11)
    blocks = result.block_histogram()
    assert blocks.sum() == hist.counts.sum()  # the state total is invariant on every spine
    assert (blocks >= 0).all()
    report = spine_report(result, hist, [cases.CITY, cases.WARDS], built)
    assert set(report) == {"conventional_mae", "entity_mae", "osed"}
    assert list(report["conventional_mae"]) == ["State", "County", "Tract", "Block_Group", "Block"]
    assert report["conventional_mae"]["State"] == 0.0
    assert set(report["entity_mae"]) == set(report["osed"]) == {"city", "wards"}
    if kind != "conventional":
        assert report["osed"]["city"] == 1.0
    assert result.diagnostics["spine"]["kind"] == kind


def test_cli_options_resolve_to_a_plan(tmp_path: Path):
    parser = argparse.ArgumentParser()
    add_spine_arguments(parser)
    csv = tmp_path / "areas.csv"
    rows = [f"{cases.BLOCK_IDS[i]},{'w1' if i < 5 else 'w2'}" for i in (2, 3, 4, 5, 6, 7)]
    csv.write_text("GEOID,entity\n" + "\n".join(rows) + "\n")
    hist = cases.toy_histogram()
    args = parser.parse_args(["--spine", "optimized", "--entities", str(csv)])
    plan = apply_spine_options(args, hist, cases.ALLOCATION)
    # SPN §6: no AIAN-style branch unless the special areas are named (the entities are targets)
    assert plan.built.kind == "optimized" and plan.special_areas is None
    assert not any("|inside" in n for n in plan.built.tree.node_id)
    none = apply_spine_options(
        parser.parse_args(
            ["--spine", "optimized", "--entities", str(csv), "--special-areas", "none"]
        ),
        hist,
        cases.ALLOCATION,
    )
    assert none.built.tree.node_id == plan.built.tree.node_id
    assert np.array_equal(
        none.run_kwargs(cases.ALLOCATION)["node_budgets"],
        plan.run_kwargs(cases.ALLOCATION)["node_budgets"],
    )
    kwargs = plan.run_kwargs(cases.ALLOCATION)
    assert kwargs["node_budgets"].shape[0] == plan.built.tree.n_nodes
    named = apply_spine_options(
        parser.parse_args(
            ["--spine", "optimized", "--entities", str(csv), "--special-areas", str(csv)]
        ),
        hist,
        cases.ALLOCATION,
    )
    assert named.special_areas == str(csv)
    assert any(n.endswith("|inside") for n in named.built.tree.node_id)
    with pytest.raises(ValidationError, match="needs --special-areas"):
        apply_spine_options(parser.parse_args(["--spine", "aian"]), hist, cases.ALLOCATION)
    with pytest.raises(ValidationError, match="--tract-groups applies"):
        apply_spine_options(
            parser.parse_args(["--tract-groups", "--entities", str(csv)]), hist, cases.ALLOCATION
        )
