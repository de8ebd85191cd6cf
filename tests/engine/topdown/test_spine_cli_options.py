"""The spine options of ``phexplore run topdown`` resolve to a plan (SPN §1, §4–§7): parsed into the
run's TopDownRunOptions (as ``run topdown`` does), then planned by the run pipeline."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from engine.core.errors import ValidationError
from engine.runs.topdown import spine_plan_of
from phexplore.cli.run_topdown import options_of
from phexplore.cli.spine_options import add_spine_arguments

_spec = importlib.util.spec_from_file_location(
    "spine_toy", Path(__file__).with_name("spine_toy.py")
)
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)  # type: ignore[union-attr]


def apply_spine_options(args: argparse.Namespace, hist, allocation):  # type: ignore[no-untyped-def]
    """``run topdown``'s way: the parsed arguments → TopDownRunOptions → the run's spine plan."""
    from phexplore.cli.run_topdown import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    defaults = parser.parse_args(["topdown", "--data", "x", "--preset", "x", "--out", "x"])
    merged = argparse.Namespace(**{**vars(defaults), **vars(args)})
    return spine_plan_of(options_of(merged), hist, allocation)


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
    summary = plan.summary()  # the metrics.json "spine" section
    assert summary["kind"] == "optimized" and summary["special_areas"] is None
    assert summary["entity_sets"] == {s.name: s.n_entities for s in plan.entity_sets}
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
