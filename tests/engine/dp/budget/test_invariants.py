"""Held-exact queries and the budget actually spent (TDA §5.2, §7.4; SPN §5), and the explicit
departure from production that spreads an invariant's share over its level."""

from __future__ import annotations

from fractions import Fraction

import pytest

from engine.core.errors import ValidationError
from engine.dp.budget import HELD_EXACT, budget_use, default_states, spread_invariant_share
from engine.dp.budget.invariants import NOT_USED, spent_label
from engine.dp.presets import load_topdown_preset
from phexplore.planning.moe_tables import topdown_rows, topdown_summary

RI = load_topdown_preset("ri2010-production-like")["persons"]
PRODUCTION = load_topdown_preset("topdown-2020-production")


def test_ri_state_total_share_is_nominal_only():
    use = budget_use(RI.with_rho("2.56"))
    assert use.held == (("State", "TOTAL"),) and use.n_states == 1
    unspent = Fraction(64, 25) * Fraction(1544, 4099) * Fraction(681976, 790721)
    assert use.spent == Fraction(64, 25) - unspent
    assert float(use.spent) == pytest.approx(1.7283, abs=5e-5)  # "about 1.73" of 2.56 spent
    assert use.status("State", "TOTAL") == HELD_EXACT
    assert use.status("County", "TOTAL") == "measured"


def test_production_persons_on_the_us_and_on_one_state():
    persons = PRODUCTION["persons"]
    assert default_states(persons) == 52 and default_states(RI) == 1
    us = budget_use(persons)
    assert us.held == (("State", "TOTAL"),)  # the US level measures no TOTAL (TDA Table 7)
    persons_state_total = (
        persons.rho * persons.level_shares["State"] * persons.query_share("State", "TOTAL")
    )
    assert us.spent == persons.rho - persons_state_total
    assert float(us.spent) == pytest.approx(1.7292, abs=1e-4)
    # one state: the US level is bypassed into it with the US query shares (SPN §5), which
    # have no TOTAL, so nothing is held exact and the State level's shares are not used
    one = budget_use(persons, 1)
    assert one.held == () and one.spent == persons.rho and one.unused_levels == ("State",)
    assert one.status("State", "TOTAL") == NOT_USED
    assert (
        one.level_share(persons, "US") == persons.level_shares["US"] + persons.level_shares["State"]
    )
    assert budget_use(PRODUCTION["units"]).held == ()  # no persons invariant in the units run
    with pytest.raises(ValidationError, match="whole number ≥ 1"):
        budget_use(persons, 0)


def test_planner_rows_and_summary_label_the_invariant():
    rows = topdown_rows({"persons": RI})
    state_total = next(r for r in rows if r["geolevel"] == "State" and r["query"] == "TOTAL")
    assert state_total["status"] == HELD_EXACT
    assert all(r["status"] == "measured" for r in rows if r is not state_total)
    summary = topdown_summary({"persons": RI.with_rho("2.56")})
    assert summary["rho_total"] == pytest.approx(2.56)
    assert summary["rho_spent"] == pytest.approx(1.72832, abs=1e-5)
    assert summary["runs"]["persons"]["held_exact"] == ["State TOTAL"]
    one_state = topdown_rows({"persons": PRODUCTION["persons"]}, n_states=1)
    us_detailed = next(r for r in one_state if r["geolevel"] == "US" and r["query"] == "DETAILED")
    persons = PRODUCTION["persons"]
    share = persons.level_shares["US"] + persons.level_shares["State"]
    assert us_detailed["rho_query"] == pytest.approx(
        float(persons.rho * share * persons.query_share("US", "DETAILED"))
    )


def test_spreading_the_invariant_share_spends_the_whole_budget():
    spread = spread_invariant_share(RI)
    assert "departure from production" in spread.notes["spread_invariant_share"]
    assert spread.query_share("State", "TOTAL") == 0
    assert sum(spread.query_shares["State"].values()) == 1
    ratio = spread.query_share("State", "DETAILED") / RI.query_share("State", "DETAILED")
    assert ratio == 1 / (1 - RI.query_share("State", "TOTAL"))
    assert spread.query_shares["County"] == RI.query_shares["County"]  # other levels unchanged
    assert budget_use(spread).spent == spread.rho == RI.rho
    assert spread_invariant_share(PRODUCTION["units"]) is PRODUCTION["units"]
    only_total = RI.from_dict(
        {
            **RI.to_dict(),
            "query_shares": {**RI.to_dict()["query_shares"], "State": {"TOTAL": "1"}},
        }
    )
    with pytest.raises(ValidationError, match="measures only TOTAL"):
        spread_invariant_share(only_total)


def test_spent_label():
    assert spent_label(2.56, 2.56) == "ρ = 2.56 nominal, ρ spent on noisy measurements = 2.56"
    text = spent_label(2.56, 1.7283)
    assert "1.728" in text and "held exact — no noise" in text and "67.5%" in text
