"""Target-driven planning: Table 10 from its targets, production shares from their σ."""

from __future__ import annotations

from fractions import Fraction

import pytest

from engine.dp.presets import load_phsafe_preset, load_topdown_preset
from phexplore.planning.targets import (
    plan_phsafe,
    plan_topdown,
    round_shares,
    sigma_targets_of,
    tradeoff_scale_topdown,
)


def test_phsafe_targets_give_table_10() -> None:
    preset = load_phsafe_preset("phsafe-2020")
    plan = plan_phsafe(preset)
    for row in plan["rows"]:
        key = {"Nation": "usa", "State": "state"}[row["geo_level"]]
        level = {"Unattributed": "*", "A-G": "A-G", "H-I": "H,I"}[row["iteration_level"]]
        assert row["rho_unbounded_rounded"] == pytest.approx(
            preset.rho(row["table"], f"{key}_{level}"), abs=1e-12
        )
        assert row["moe_bound"] <= row["moe_target"]
    assert round(plan["summary"]["rho_total_unbounded_rounded"], 6) == 1.257281
    assert plan["summary"]["targets_met"]


def test_phsafe_cap_equalises_ratios() -> None:
    plan = plan_phsafe(load_phsafe_preset("phsafe-2020"), rho_cap=0.5)
    assert plan["summary"]["rho_total_unbounded"] == pytest.approx(0.5)
    ratios = {round(r["ratio"], 9) for r in plan["rows"]}
    assert len(ratios) == 1 and next(iter(ratios)) > 1
    assert all(r["binding"] for r in plan["rows"])
    weighted = plan_phsafe(load_phsafe_preset("phsafe-2020"), rho_cap=0.5, objective="weighted")
    assert weighted["summary"]["rho_total_unbounded"] == pytest.approx(0.5)
    total_w = sum(r["ratio"] for r in weighted["rows"])
    assert total_w <= sum(r["ratio"] for r in plan["rows"]) + 1e-9


def test_topdown_production_sigma_returns_production_shares() -> None:
    prod = load_topdown_preset("topdown-2020-production")
    plan = plan_topdown(sigma_targets_of(prod))
    persons = plan["allocations"]["persons"]
    assert round(float(persons.rho), 4) == 2.5562
    # the State TOTAL target is met by the invariant: its share is nominal (TDA §5.2)
    assert plan["summary"]["runs"]["persons"]["rho_spent"] == pytest.approx(1.7292, abs=1e-4)
    assert plan["summary"]["rho_spent"] < plan["summary"]["rho_total"]
    for level in prod["persons"].geolevels:
        assert persons.level_shares[level] == pytest.approx(prod["persons"].level_shares[level])
        for q in prod["persons"].queries(level):
            assert float(persons.query_share(level, q)) == pytest.approx(
                float(prod["persons"].query_share(level, q)), rel=1e-6
            )
    rounded = plan_topdown(sigma_targets_of(prod), denominator=4097)
    for alloc in rounded["allocations"].values():
        assert sum(alloc.level_shares.values(), Fraction(0)) == 1
        for level in alloc.geolevels:
            assert sum(alloc.query_shares[level].values(), Fraction(0)) == 1
    assert rounded["summary"]["shares_sum_to_one"]


def test_round_shares_sums_exactly_and_keeps_small_shares() -> None:
    out = round_shares({"a": 0.0001, "b": 0.5, "c": 0.4999}, 100)
    assert sum(out.values(), Fraction(0)) == 1
    assert out["a"] == Fraction(1, 100)


def test_tradeoff_scale_topdown() -> None:
    alloc = load_topdown_preset("ri2010-production-like")["persons"]
    rows = tradeoff_scale_topdown(alloc, [0.5, 1.0, 2.0])
    moes = [r["moe90"] for r in rows if r["geolevel"] == "County" and r["query"] == "TOTAL"]
    assert moes[0] > moes[1] > moes[2]
