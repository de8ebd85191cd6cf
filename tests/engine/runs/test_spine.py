"""The spine sections of the metrics stage (SPN §7): a TopDown run on each spine of a toy state."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from engine.core.errors import ValidationError
from engine.runs.spine import spine_report, spine_sections
from engine.topdown.spine.build import build_spine
from engine.topdown.spine.plan import plan_spine
from tests.engine.topdown.helpers import spine_run

_spec = importlib.util.spec_from_file_location(
    "spine_toy", Path(__file__).parents[1] / "topdown" / "spine_toy.py"
)
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", ["conventional", "aian", "optimized"])
def test_run_on_each_spine_reports_comparable_metrics(kind):
    hist = cases.toy_histogram()
    options = {
        "aian": {"special_areas": cases.CITY},
        "optimized": {"special_areas": cases.CITY, "entities": [cases.CITY, cases.WARDS]},
    }
    built = build_spine(hist, kind, cases.ALLOCATION, **options.get(kind, {}))
    result = spine_run(hist, cases.ALLOCATION, built, seed=11)
    blocks = result.block_histogram()
    assert blocks.sum() == hist.counts.sum()  # the state total is invariant on every spine
    assert (blocks >= 0).all()
    report = spine_report(result, hist, [cases.CITY, cases.WARDS], built)
    assert list(report) == ["conventional_mae", "entity_mae", "osed"]
    assert list(report["conventional_mae"]) == ["State", "County", "Tract", "Block_Group", "Block"]
    assert report["conventional_mae"]["State"] == 0.0
    assert set(report["entity_mae"]) == set(report["osed"]) == {"city", "wards"}
    if kind != "conventional":
        assert report["osed"]["city"] == 1.0
    assert result.diagnostics["spine"]["kind"] == kind


def test_a_result_of_another_spine_is_refused():
    hist = cases.toy_histogram()
    built = build_spine(hist, "conventional", cases.ALLOCATION)
    other = build_spine(hist, "aian", cases.ALLOCATION, special_areas=cases.CITY)
    result = spine_run(hist, cases.ALLOCATION, other, seed=11)
    with pytest.raises(ValidationError, match="not produced on this spine"):
        spine_report(result, hist, [cases.CITY], built)


def test_spine_sections_add_the_plan_summary():
    hist = cases.toy_histogram()
    plan = plan_spine(hist, cases.ALLOCATION, "conventional")
    result = spine_run(hist, cases.ALLOCATION, plan.built, seed=3)
    sections = spine_sections(plan, result, hist)
    assert list(sections) == ["conventional_mae", "entity_mae", "osed", "spine"]
    assert sections["spine"] == plan.summary()
    assert sections["spine"]["entity_sets"] == {} and sections["entity_mae"] == {}
