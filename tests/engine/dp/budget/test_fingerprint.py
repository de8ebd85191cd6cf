"""Budget fingerprints: equal numbers → equal fingerprint; any edited number → another."""

from __future__ import annotations

from engine.dp.budget.fingerprint import budget_fingerprint, short_fingerprint
from engine.dp.presets import load_phsafe_preset, load_topdown_preset


def test_phsafe_fingerprint_follows_the_numbers_not_the_name() -> None:
    from dataclasses import replace

    budget = load_phsafe_preset("phsafe-2020")
    fp = budget_fingerprint(budget)
    assert len(fp) == 64 and int(fp, 16) >= 0
    assert budget_fingerprint(replace(budget, name="renamed", citation="")) == fp
    assert budget_fingerprint(budget.with_tau("PH3", 5)) != fp
    assert budget_fingerprint(budget.with_rho("PH2", "usa_*", 0.01)) != fp
    assert short_fingerprint(fp) == fp[:12]


def test_topdown_fingerprint_covers_rho_and_shares() -> None:
    runs = load_topdown_preset("topdown-2020-production")
    persons = runs["persons"]
    fp = budget_fingerprint(persons)
    assert budget_fingerprint(load_topdown_preset("topdown-2020-production")["persons"]) == fp
    assert budget_fingerprint(persons.with_rho(1)) != fp
    assert budget_fingerprint(runs) != fp  # the set of universes is a budget of its own
