"""Budget shares are read exactly as written, in the CLI and the app alike (docs/reliability.md).

A JSON number is its decimal (``0.19999999999999998`` is not snapped to 1/5), so five level shares
missing 1 by 2e-17 are refused like shares missing it by 0.1 — by the allocation reader every
input goes through (``run topdown --config``, a scenario loaded on the Scenarios page) and by the
TopDown planner's check of typed shares — with a message saying by how much and to write
fractions.
"""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from engine.core.errors import ValidationError
from engine.dp.budget import TopDownAllocation
from engine.dp.budget.allocation import locate_share_problems
from engine.dp.budget.fractions_io import parse_share
from phexplore.planning.scenarios import Scenario, scenario_from_preset

LEVELS = ["State", "County", "Tract", "Block_Group", "Block"]
NEAR = 0.19999999999999998  # the five shares sum to 1 − 2e-17


def _allocation(block_share: object) -> dict[str, object]:
    shares: dict[str, object] = dict.fromkeys(LEVELS, 0.2)
    shares["Block"] = block_share
    return {
        "name": "near",
        "mechanism": "zcdp",
        "rho": "1",
        "geolevels": LEVELS,
        "level_shares": shares,
        "query_shares": {lv: {"TOTAL": 0.5, "DETAILED": 0.5} for lv in LEVELS},
    }


def test_a_float_share_is_its_decimal() -> None:
    assert parse_share(0.1, where="x") == Fraction(1, 10)
    assert parse_share(NEAR, where="x") == Fraction(19999999999999998, 10**17)
    assert parse_share("1/3", where="x") == Fraction(1, 3)


def test_shares_missing_one_by_2e17_are_refused_by_the_reader() -> None:
    TopDownAllocation.from_dict(_allocation(0.2))  # exact decimals summing to 1 are fine
    with pytest.raises(ValidationError, match="1 − 2e-17") as refused:
        TopDownAllocation.from_dict(_allocation(NEAR))
    assert "'1/3'" in str(refused.value)


def test_the_app_refuses_them_too() -> None:
    scenario = scenario_from_preset("ri2010-production-like").to_dict()
    scenario["topdown"] = {"runs": {"persons": _allocation(NEAR)}}
    with pytest.raises(ValidationError, match="1 − 2e-17"):
        Scenario.from_dict(json.loads(json.dumps(scenario)))  # a scenario file, as uploaded
    problems = locate_share_problems(
        {
            **_allocation(str(NEAR)),
            "level_shares": {**dict.fromkeys(LEVELS, "0.2"), "Block": str(NEAR)},
        }
    )  # the planner's typed shares
    assert [p.message for p in problems if "1 − 2e-17" in p.message]
