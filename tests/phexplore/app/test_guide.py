"""The plain-language reading of ε and the guided start's worked example."""

from __future__ import annotations

import math

import pytest

from engine.dp.presets import load_phsafe_preset, load_topdown_preset
from phexplore.app.guide import (
    GLOSSARY,
    epsilon_reading,
    exercise_steps,
    guided_steps,
    topdown_exercise,
    worked_example,
)
from phexplore.planning.committee import committee_rows, published_rows
from phexplore.planning.moe_tables import epsilons
from phexplore.planning.scaling import scale_topdown_runs


@pytest.mark.parametrize(
    ("epsilon", "factor"),
    [(17.0, "24 million"), (0.5, "1.65"), (2.47, "12"), (9.0, "8,100"), (12.71, "330,000")],
)
def test_epsilon_reading_states_the_likelihood_ratio_bound(epsilon: float, factor: str) -> None:
    text = epsilon_reading(epsilon, 1e-10)
    assert f"≈ {factor}" in text  # e^ε, computed from the number
    assert "δ = 10⁻¹⁰ (one in 10 billion)" in text  # δ read as a number too
    assert "not the chance that someone is identified" in text


def test_epsilon_reading_edge_cases() -> None:
    assert "no differential-privacy guarantee" in epsilon_reading(math.inf)
    assert "nothing is measured" in epsilon_reading(0.0)


def test_glossary_has_every_term_of_the_issue() -> None:
    terms = " ".join(GLOSSARY)
    for term in ("ρ", "ε", "δ", "MOE", "τ", "Invariant", "Spine", "EPL", "Blau index"):
        assert term in terms


def test_worked_example_numbers_are_the_planner_numbers() -> None:
    e = worked_example()
    budget = load_phsafe_preset("phsafe-2020")
    assert e["rho_before"] == pytest.approx(budget.total_unbounded())
    assert e["epsilon_before"] == pytest.approx(epsilons(budget.total_bounded())["cks"])
    assert e["moe_before"] == 20 and e["rho_after"] < e["rho_before"]
    assert e["epsilon_after"] < e["epsilon_before"]
    steps = guided_steps(e)
    assert [s.stage for s in steps] == ["1. Plan", "2. Test", "3. Decide"]
    assert f"{e['epsilon_after']:.2f}" in steps[0].look_for


def test_topdown_exercise_quotes_the_committee_table() -> None:
    """The exercise's numbers are those of the committee's table (and of ``phexplore compare``):
    the RI preset against its persons ρ cut by 30%, every geounit evaluated."""
    e = topdown_exercise()
    before = load_topdown_preset(e["preset"])
    after = scale_topdown_runs(before, -30, only="persons")
    rows = committee_rows(
        before, published_rows(before)[0], after, published_rows(after)[0], delta=1e-10
    )
    total = {r["geolevel"]: r for r in rows if r["section"] != "privacy" and r["query"] == "TOTAL"}
    assert e["rho_before"] == pytest.approx(2.56) and e["rho_after"] == pytest.approx(1.792)
    for level in ("County", "Tract", "Block"):
        assert e["levels"][level]["a"] == pytest.approx(total[level]["a"], rel=1e-9)
        assert e["levels"][level]["b"] == pytest.approx(total[level]["b"], rel=1e-9)
        assert e["levels"][level]["relative"] > 0.1  # less budget, larger published error
    steps = exercise_steps(e)
    assert [s.stage for s in steps] == [
        "1. Cut ρ by 30%",
        "2. Read county vs block",
        "3. Run it",
        "4. Compare",
    ]
    assert "type -30 in “by %”" in steps[0].action
    assert f"{e['epsilon_before']:.2f} to {e['epsilon_after']:.2f}" in steps[0].look_for
    assert "noise of every measurement grows by +19.5%" in steps[1].look_for
