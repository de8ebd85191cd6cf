"""The plain-language reading of ε and the guided start's worked example."""

from __future__ import annotations

import math

import pytest

from engine.dp.presets import load_phsafe_preset
from phexplore.app.guide import GLOSSARY, epsilon_reading, guided_steps, worked_example
from phexplore.planning.moe_tables import epsilons


@pytest.mark.parametrize(
    ("epsilon", "factor"),
    [(17.0, "24 million"), (0.5, "1.65"), (2.47, "12"), (9.0, "8,100"), (12.71, "330,000")],
)
def test_epsilon_reading_states_the_likelihood_ratio_bound(epsilon: float, factor: str) -> None:
    text = epsilon_reading(epsilon, 1e-10)
    assert f"≈ {factor}" in text  # e^ε, computed from the number
    assert "δ = 1e-10" in text and "not the chance that someone is identified" in text


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
