"""One budget, one identity (engine.dp.origin, engine.dp.budget.fingerprint): a preset keeps its
name and fingerprint however it is loaded; any edit of any universe gives "modified from" the
preset, with what differs; number inputs keep a preset's exact fractions."""

from __future__ import annotations

from fractions import Fraction

from engine.dp.budget.fingerprint import budget_fingerprint
from engine.dp.budget.fractions_io import exact_from_input
from engine.dp.origin import describe_origin
from engine.dp.presets import load_phsafe_preset, load_topdown_preset

PRESET = "topdown-2020-production"


def test_an_unedited_preset_is_itself() -> None:
    budget = load_topdown_preset(PRESET)
    origin = describe_origin(budget)
    assert origin.label == PRESET and not origin.modified and origin.changes == ()
    assert budget_fingerprint(budget) == budget_fingerprint(load_topdown_preset(PRESET))


def test_an_edit_of_any_universe_is_modified_and_named() -> None:
    budget = dict(load_topdown_preset(PRESET))
    base = budget_fingerprint(budget)
    edited = {**budget, "units": budget["units"].with_rho(Fraction(1, 10))}
    origin = describe_origin(edited, PRESET)
    assert origin.label == f"modified from {PRESET}"
    assert [c.item for c in origin.changes] == ["units · total ρ"]
    assert origin.changes[0].value == "1/10 (= 0.1)"
    assert budget_fingerprint(edited) != base
    # undoing the edit gives the preset's name and fingerprint back
    undone = {**edited, "units": budget["units"]}
    assert describe_origin(undone, PRESET).label == PRESET
    assert budget_fingerprint(undone) == base


def test_phsafe_edit_is_listed() -> None:
    preset = load_phsafe_preset("phsafe-2020")
    edited = preset.with_rho("PH3", "state_A-G", 1.0)
    origin = describe_origin(edited, "phsafe-2020")
    assert origin.label == "modified from phsafe-2020" and len(origin.changes) == 1
    assert "PH3" in origin.changes[0].item


def test_number_inputs_keep_exact_fractions() -> None:
    rho = Fraction(293764, 114921)
    assert exact_from_input(float(rho), rho, where="ρ") == rho  # left as shown: the preset's
    assert exact_from_input(2.5, rho, where="ρ") == Fraction(5, 2)  # typed: the decimal shown
    assert exact_from_input("293764/114921", Fraction(1), where="ρ") == rho
