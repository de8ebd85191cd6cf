"""Scaling a budget by a percentage, the committee's table and what changed between two budgets."""

from __future__ import annotations

from fractions import Fraction

import pytest

from engine.core.errors import ValidationError
from engine.dp.presets import load_phsafe_preset, load_topdown_preset
from phexplore.planning.changes import change_sentence, scenario_changes, topdown_changes
from phexplore.planning.committee import (
    committee_queries,
    committee_rows,
    persons_run,
    published_rows,
)
from phexplore.planning.deltas import relative, with_baseline
from phexplore.planning.scaling import (
    format_percent,
    percent_factor,
    scale_phsafe,
    scale_topdown,
    scale_topdown_runs,
)
from phexplore.planning.scenarios import Scenario

PRODUCTION = "topdown-2020-production"


def test_percent_factor_is_exact_and_bounded() -> None:
    assert percent_factor(-30) == Fraction(7, 10)
    assert percent_factor("−30%") == Fraction(7, 10)
    assert percent_factor(-30.0) == Fraction(7, 10)
    assert percent_factor("12.5") == Fraction(9, 8)
    for bad in (-100, 901, "abc", float("nan")):
        with pytest.raises(ValidationError):
            percent_factor(bad, where="Scale")
    assert format_percent(-30) == "−30%" and format_percent(12.5) == "+12.5%"


def test_scale_total_keeps_shares_and_scales_rho_exactly() -> None:
    alloc = load_topdown_preset(PRODUCTION)["persons"]
    cut = scale_topdown(alloc, -30)
    assert cut.rho == alloc.rho * Fraction(7, 10)
    assert cut.level_shares == alloc.level_shares and cut.query_shares == alloc.query_shares
    assert scale_topdown(alloc, 0) is alloc


def test_scale_one_level_leaves_the_other_levels_budgets() -> None:
    alloc = load_topdown_preset(PRODUCTION)["persons"]
    new = scale_topdown(alloc, 0, {"County": -30})
    for level in alloc.geolevels:
        before = alloc.rho * alloc.level_shares[level]
        after = new.rho * new.level_shares[level]
        assert after == (before * Fraction(7, 10) if level == "County" else before)
    assert sum(new.level_shares.values()) == 1
    with pytest.raises(ValidationError, match="no geolevel"):
        scale_topdown(alloc, 0, {"Moon": 5})


def test_scale_runs_only_the_named_run() -> None:
    runs = load_topdown_preset(PRODUCTION)
    cut = scale_topdown_runs(runs, -30, only="persons")
    assert cut["units"] is runs["units"]
    assert float(cut["persons"].rho) == pytest.approx(0.7 * float(runs["persons"].rho))


def test_scale_phsafe_cells_and_levels() -> None:
    budget = load_phsafe_preset("phsafe-2020")
    cut = scale_phsafe(budget, -30)
    assert cut.total_unbounded() == pytest.approx(0.7 * budget.total_unbounded())
    state = scale_phsafe(budget, 0, {"State": 50})
    assert state.rho("PH1_num", "state_*") == pytest.approx(1.5 * budget.rho("PH1_num", "state_*"))
    assert state.rho("PH1_num", "usa_*") == budget.rho("PH1_num", "usa_*")


def test_with_baseline_adds_delta_columns_and_missing_rows() -> None:
    working = [{"k": "a", "v": 12.0}, {"k": "b", "v": 1.0}]
    baseline = [{"k": "a", "v": 10.0}, {"k": "c", "v": 5.0}]
    rows = {r["k"]: r for r in with_baseline(working, baseline, ["k"], ["v"])}
    assert rows["a"]["v_delta"] == pytest.approx(2.0)
    assert rows["a"]["v_delta_pct"] == pytest.approx(0.2)
    assert rows["b"]["v_baseline"] is None and rows["b"]["v_delta"] is None
    assert rows["c"]["v"] is None and rows["c"]["v_baseline"] == 5.0
    assert relative(1.0, 0.0) is None


def test_committee_rows_production_cut_by_30_percent() -> None:
    base = load_topdown_preset(PRODUCTION)
    cut = scale_topdown_runs(base, -30, only="persons")
    ra, _ = published_rows(base)
    rb, _ = published_rows(cut)
    rows = committee_rows(base, ra, cut, rb, delta=1e-10, conversion="cks")
    privacy = {r["quantity"]: r for r in rows if r["section"] == "privacy"}
    assert privacy["ρ of the persons run"]["relative"] == pytest.approx(-0.3)
    assert privacy["ρ of the units run"]["difference"] == 0
    errors = [r for r in rows if r["section"] != "privacy"]
    assert {r["query"] for r in errors} == {"TOTAL", "VOTINGAGE", "HISPANIC", "CENRACE"}
    levels = list(dict.fromkeys(r["geolevel"] for r in errors))
    assert levels == ["US", "State", "County", "Tract", "Block_Group", "Block"]
    by = {(r["geolevel"], r["query"]): r for r in errors}
    for level in ("Tract", "Block_Group", "Block"):
        row = by[(level, "TOTAL")]
        # Less budget, larger predicted error of the published count; B − A and (B − A)/A.
        assert row["b"] > row["a"] > 0
        assert row["difference"] == pytest.approx(row["b"] - row["a"])
        assert row["relative"] == pytest.approx(row["b"] / row["a"] - 1)
        assert 0.05 < row["relative"] < 0.25  # noise grows by 1/√0.7 − 1 ≈ 19.5% at most
    assert by[("State", "TOTAL")]["a_note"].startswith("held exact")


def test_committee_queries_follow_the_schema() -> None:
    assert committee_queries(load_topdown_preset("ri2010-production-like")["persons"]) == [
        "TOTAL",
        "VOTINGAGE",
        "RACEETH",
    ]
    with pytest.raises(ValidationError, match="persons run"):
        persons_run({"units": load_topdown_preset(PRODUCTION)["units"]})


def test_changes_say_a_pure_rho_cut() -> None:
    base = load_topdown_preset(PRODUCTION)
    cut = scale_topdown_runs(base, -30, only="persons")
    rows = topdown_changes(base, cut)
    assert [r["what"] for r in rows] == ["total ρ"]
    a = Scenario(name="Production", kind="topdown", topdown=base)
    b = Scenario(name="Cut", kind="topdown", topdown=cut)
    sentence = change_sentence(a, b)
    assert "scales the total budget" in sentence and "−30%" in sentence
    level = scale_topdown_runs(base, 0, {"County": -30}, only="persons")
    kinds = {
        r["what"] for r in scenario_changes(a, Scenario(name="L", kind="topdown", topdown=level))
    }
    assert kinds == {"total ρ", "level share c"}
