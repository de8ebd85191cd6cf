"""Scenarios: JSON round trip, duplication, comparison, and the HTML report."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.core.errors import ValidationError
from phexplore.app.report import build_report_html
from phexplore.planning.scenarios import Scenario, compare, scenario_from_preset


def test_round_trip_and_duplicate(tmp_path: Path) -> None:
    for preset in ("phsafe-2020", "topdown-2020-production", "e2e-2018-1940"):
        base = scenario_from_preset(preset)
        s = base.with_result({"engine": base.kind, "mae": {"County": {"TOTAL": 1}}})
        path = tmp_path / f"{preset}.json"
        path.write_text(s.to_json() + "\n", encoding="utf-8")
        again = Scenario.load(path)
        assert again.to_dict() == s.to_dict()
        dup = again.duplicate("copy")
        assert dup.name == "copy" and dup.results == ()


def test_compare_shows_differences() -> None:
    a = scenario_from_preset("phsafe-2020")
    b = Scenario(name="b", kind="phsafe", phsafe=a.phsafe.with_rho("PH3", "state_A-G", 1.0))
    cmp = compare(a, b)
    diff = [r for r in cmp["moe"] if r["difference"]]
    assert len(diff) == 1 and diff[0]["table"] == "PH3" and diff[0]["difference"] < 0
    assert cmp["totals"][0]["difference"] > 0


def test_bad_scenarios() -> None:
    with pytest.raises(ValidationError, match="not a PHExplore scenario"):
        Scenario.from_dict({"name": "x"})
    with pytest.raises(ValidationError, match="not valid JSON"):
        Scenario.from_json("{oops", source="upload.json")
    with pytest.raises(ValidationError, match="a scenario needs a non-empty name"):
        Scenario(name=" ", kind="phsafe")


def test_report_contains_tables_and_chart() -> None:
    html = build_report_html(scenario_from_preset("topdown-2020-production"))
    assert html.startswith("<!DOCTYPE html>") and "Provenance" in html
    assert "Block_Group" in html and "plotly" in html.lower()
    # Both accuracies: the noisy measurement's σ/MOE and the predicted published count's.
    assert "Published count RMSE (predicted, persons)" in html and "90% MOE (persons)" in html
    assert "published counts" in html
    # the prediction's count profile is named as it is: the generated national population on
    # the production schema (before: "the Rhode Island 2010 spine and counts" for every schema)
    assert "on a generated national population (20,000,000 persons, 51 states" in html
    assert "Rhode Island 2010 spine" not in html
    assert "Rhode Island 2010 blocks" in build_report_html(
        scenario_from_preset("ri2010-production-like")
    )
    # TDA §5.2: the report shows the ρ spent beside the nominal ρ and labels the invariant
    assert "ρ spent on noisy measurements" in html and "held exact — no noise" in html
    ri = scenario_from_preset("ri2010-production-like")
    scenario = ri.with_result(
        {
            "engine": "topdown",
            "data": "ri2010",
            "rho": 2.56,
            "rho_spent": 1.7283,
            "mae": {},
            "budget_fingerprint": next(iter(ri.fingerprints())),
        }
    )
    assert "ρ spent on noisy measurements = 1.728" in build_report_html(scenario)


def test_report_carries_predicted_vs_measured_of_a_run() -> None:
    scenario = scenario_from_preset("ri2010-production-like")
    metrics = {
        "engine": "topdown",
        "budget_fingerprint": next(iter(scenario.fingerprints())),
        "data": "ri2010",
        "mae": {"Block": {"TOTAL": 6.1}},
        "prediction": [
            {"geolevel": "Block", "query": "TOTAL", "sigma": 82.4, "predicted_rmse": 9.2,
             "measured_rmse": 9.1, "ratio": 1.01},
        ],
    }  # fmt: skip
    html = build_report_html(scenario, [metrics])
    assert "Predicted (before the run) vs measured RMSE" in html
    assert "Measured RMSE (persons)" in html


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"schema": "phexplore-scenario/1", "name": "x", "kind": "phsafe", "phsafe": [1]}', "scenario: phsafe: expected a JSON object, got list"),
        ('{"schema": "phexplore-scenario/1", "name": "x", "kind": "topdown", "topdown": {"runs": []}}', "scenario: topdown.runs: expected a JSON object"),
        ('{"schema": "phexplore-scenario/1", "name": "x", "kind": "phsafe", "phsafe": {"privacy_budget": {}}, "delta": "abc"}', "scenario: delta: expected a number"),
        ("[]", "a scenario file must hold a JSON object"),
    ],
)  # fmt: skip
def test_malformed_scenarios_have_clear_errors(text: str, message: str) -> None:
    with pytest.raises(ValidationError) as err:
        Scenario.from_json(text, source="upload.json")
    assert message in str(err.value)


def test_report_shows_epl_with_its_settings() -> None:
    epl = {"Tract": {"TOTAL": {"epl": 0.33, "epl_low": 0.26, "epl_high": 0.67, "n_residuals": 244}}}
    base = {"engine": "topdown", "data": "ri2010", "mae": {"Tract": {"TOTAL": 1.9}}, "epl": epl}
    pf = {
        "percentile": 95.0,
        "multiplier": 1.0,
        "pf_published": True,
        "label": "±1 × max(|P5|, |P95|)",
    }
    scenario = scenario_from_preset("ri2010-production-like")
    base["budget_fingerprint"] = next(iter(scenario.fingerprints()))
    html = build_report_html(scenario.with_result({**base, "epl_settings": pf}))
    assert "Empirical privacy loss" in html and "comparable with PF" in html and "0.33" in html
    from engine.runs.schema_note import schema_note_section

    note = schema_note_section("ri2010", scenario.topdown["persons"])
    folded = build_report_html(scenario.with_result({**base, "schema_note": note}))
    assert "overstates production" in folded and "Two or more races (57 cells)" in folded
    legacy = build_report_html(scenario.with_result(base))
    assert "EPL settings not recorded" in legacy and "P1|, |P99|" in legacy


def _run(scenario: Scenario, **extra: object) -> dict[str, object]:
    return {
        "engine": scenario.kind,
        "budget_fingerprint": next(iter(scenario.fingerprints())),
        "data": "phsafe_synthetic_us [states 44]",
        "seed": 2020,
        "run_id": 1,
        "run_token": "t1",
        "mae": {"State": {"PH1_num": 2.0}},
        **extra,
    }


def test_report_keeps_only_runs_of_this_budget_once_with_number_data_and_seed() -> None:
    """The report: no "phsafe on ?", no duplicates, no run of another scenario's budget."""
    mine = scenario_from_preset("phsafe-2020")
    other_budget = mine.phsafe.with_tau("PH3", 4)  # type: ignore[union-attr]
    other = Scenario(name="other", kind="phsafe", phsafe=other_budget)
    own = _run(mine)
    foreign = _run(other, run_id=2, run_token="t2")
    topdown = {**_run(mine, run_id=3, run_token="t3"), "engine": "topdown"}
    runs = mine.matching_runs([own, own, foreign, topdown])
    assert runs == [own]
    html = build_report_html(mine.with_result(own), [own, foreign])
    assert html.count("Run #1: PHSafe on phsafe_synthetic_us [states 44], seed 2020") == 1
    assert "Run #2" not in html and " on ?" not in html
    assert next(iter(mine.fingerprints())) in html  # the budget's fingerprint in the provenance
    assert "Budget: <b>phsafe-2020</b>" in html
    edited = Scenario(name="e", kind="phsafe", phsafe=other_budget)
    assert "Budget: <b>modified from phsafe-2020</b>" in build_report_html(edited)


def test_budget_origin_says_modified_after_any_edit() -> None:
    from engine.dp.origin import budget_origin
    from engine.dp.presets import load_phsafe_preset, load_topdown_preset

    budget = load_phsafe_preset("phsafe-2020")
    assert budget_origin(budget) == "phsafe-2020"
    edited = budget.with_moe_target("PH3", "state_A-G", 40)
    assert budget_origin(edited) == "modified from phsafe-2020"
    runs = load_topdown_preset("topdown-2020-production")
    assert budget_origin(runs, "topdown-2020-production") == "topdown-2020-production"
    changed = {**runs, "persons": runs["persons"].with_rho(1)}
    assert budget_origin(changed, "topdown-2020-production") == (
        "modified from topdown-2020-production"
    )


def test_an_attached_result_must_name_a_run() -> None:
    base = scenario_from_preset("phsafe-2020")
    for result in ({}, {"seed": 1}, {"engine": "x"}):
        with pytest.raises(ValidationError, match="names no run"):
            base.with_result(result)
        data = {**base.to_dict(), "results": [result]}
        with pytest.raises(ValidationError, match=r"attached run 1 \(results\[0\]\).*names no run"):
            Scenario.from_dict(data)
