"""Validation and round-trips of engine.dp.budget and the preset registry (docs/science.md
§3–§4)."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from engine.core.errors import ValidationError
from engine.dp.budget import PHSafeBudget, TopDownAllocation
from engine.dp.presets import (
    list_presets,
    load_phsafe_preset,
    load_topdown_preset,
    topdown_from_dict,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"


def _alloc(**overrides: object) -> dict:
    base = {
        "name": "test",
        "rho": "1",
        "geolevels": ["State", "County"],
        "level_shares": {"State": "1/2", "County": "1/2"},
        "query_shares": {"State": {"TOTAL": "1"}, "County": {"TOTAL": "1/4", "DETAILED": "3/4"}},
    }
    base.update(overrides)
    return base


def test_every_preset_loads_and_sums_to_one() -> None:
    names = {p.name for p in list_presets()}
    assert {"phsafe-2020", "topdown-2020-production", "topdown-2021-04", "e2e-2018-1940"} <= names
    for info in list_presets():
        assert info.citation, f"{info.name} lacks a citation"
        if info.kind == "topdown":
            for alloc in load_topdown_preset(info.name).values():
                assert sum(alloc.level_shares.values(), Fraction(0)) == 1
        else:
            load_phsafe_preset(info.name)


@pytest.mark.parametrize(
    ("run", "level", "printed", "column_sum"),
    [
        ("persons", "County", "104/4099", "3756/4099"),
        ("units", "Tract", "346/1025", "1007/1025"),
    ],
)
def test_table_6_typos_are_caught(run: str, level: str, printed: str, column_sum: str) -> None:
    data = json.loads(
        (Path("engine/dp/presets") / "topdown-2020-production.json").read_text(encoding="utf-8")
    )
    data["runs"][run]["level_shares"][level] = printed
    with pytest.raises(ValidationError) as err:
        topdown_from_dict(data)
    assert "geolevel shares must sum to exactly 1" in str(err.value)
    assert column_sum in str(err.value)


def test_table_4_typo_names_the_level() -> None:
    data = json.loads(
        (Path("engine/dp/presets") / "topdown-2021-04.json").read_text(encoding="utf-8")
    )
    data["runs"]["persons"]["query_shares"]["Block_Group"]["TOTAL"] = "527/1024"
    with pytest.raises(ValidationError, match=r"query shares at level Block_Group .* 979/1024"):
        topdown_from_dict(data)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            {"level_shares": {"State": "1/2", "County": "1/3"}},
            "test: geolevel shares must sum to exactly 1 along the spine; they sum to 5/6",
        ),
        (
            {"level_shares": {"State": "3/2", "County": "-1/2"}},
            "test: level County has a negative share -1/2",
        ),
        (
            {
                "query_shares": {
                    "State": {"TOTAL": "1"},
                    "County": {"TOTAL": "-1/4", "DETAILED": "5/4"},
                }
            },
            "test: query TOTAL at level County has a negative share -1/4",
        ),
        (
            {"query_shares": {"State": {"TOTAL": "1"}, "County": {"TOTAL": "1/4"}}},
            "test: query shares at level County must sum to exactly 1; they sum to 1/4",
        ),
        ({"rho": "0"}, "test: total ρ must be a positive number"),
        ({"rho": "-2"}, "test: total ρ must be a positive number"),
        ({"rho": "abc"}, "test: total budget: 'abc' is not a number"),
    ],
)
def test_allocation_validation_messages(override: dict, message: str) -> None:
    with pytest.raises(ValidationError) as err:
        TopDownAllocation.from_dict(_alloc(**override))
    assert message in str(err.value)


def test_allocation_json_round_trip() -> None:
    for alloc in load_topdown_preset("topdown-2020-production").values():
        again = TopDownAllocation.from_dict(alloc.to_dict())
        assert again.level_shares == alloc.level_shares
        assert again.query_shares == alloc.query_shares
        assert again.rho == alloc.rho


def test_ri_preset_folds_us_into_state() -> None:
    ri = load_topdown_preset("ri2010-production-like")["persons"]
    prod = load_topdown_preset("topdown-2020-production")["persons"]
    assert ri.geolevels == ("State", "County", "Tract", "Block_Group", "Block")
    assert ri.level_shares["State"] == prod.level_shares["US"] + prod.level_shares["State"]
    assert set(ri.queries("Block")) == {"TOTAL", "VOTINGAGE", "RACEETH", "DETAILED"}
    assert float(ri.rho) == 2.56


def test_phsafe_official_config_round_trip() -> None:
    budget = load_phsafe_preset("phsafe-2020")
    again = PHSafeBudget.from_official_config(budget.to_official_config())
    assert again.total_unbounded() == pytest.approx(budget.total_unbounded())
    assert dict(again.tau) == dict(budget.tau)
    pr = load_phsafe_preset("phsafe-2020-pr")
    assert pr.state_filter == ("72",)
    assert all(not k.startswith("usa") for t in pr.tables() for k in pr.levels(t))


def test_official_fixture_config_with_infinity_parses() -> None:
    text = '{"privacy_budget": {"PH2": {"usa_*": Infinity, "state_*": Infinity}}, "tau": {"PH2": 10}, "state_filter": ["06"], "privacy_defn": "puredp"}'
    budget = PHSafeBudget.from_official_config(json.loads(text))
    assert budget.total_unbounded() == float("inf")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"privacy_budget": {"PH9": {"usa_*": 1}}}, "unknown table 'PH9'"),
        (
            {"privacy_budget": {"PH2": {"usa_A-G": 1}}, "tau": {"PH2": 5}},
            "PH2 is only tabulated at the Unattributed levels",
        ),
        (
            {"privacy_budget": {"PH3": {"usa_*": -1}}, "tau": {"PH3": 5}},
            "budget of PH3 at usa_* must be ≥ 0",
        ),
        ({"privacy_budget": {"PH3": {"usa_*": 1}}}, "PH3 is measured but has no τ"),
        (
            {"privacy_budget": {"PH3": {"usa_*": 1}}, "tau": {"PH3": 2.5}},
            "tau['PH3']: expected a whole number, got 2.5",
        ),
        (
            {"privacy_budget": {}, "privacy_defn": "laplace"},
            "privacy_defn must be 'zcdp' or 'puredp'",
        ),
        ({"tau": {}}, "missing 'privacy_budget'"),
    ],
)
def test_phsafe_config_errors(config: dict, message: str) -> None:
    with pytest.raises(ValidationError) as err:
        PHSafeBudget.from_official_config(config)
    assert message in str(err.value)


def test_with_tau_keeps_moe_targets() -> None:
    budget = load_phsafe_preset("phsafe-2020").with_tau("PH3", 8)
    assert budget.rho("PH3", "state_A-G") == pytest.approx(1.645**2 * 18**2 / (2 * 20**2))


def test_allocation_schema_round_trips_and_is_inferred() -> None:
    from engine.dp.presets import load_topdown_preset
    from engine.schema.query_cells import allocation_schema

    ri = load_topdown_preset("ri2010-production-like")["persons"]
    assert ri.schema == "ri2010"
    again = TopDownAllocation.from_dict(ri.to_dict())
    assert again.schema == "ri2010"
    prod = load_topdown_preset("topdown-2020-production")["persons"]
    assert prod.schema == "redistricting2020"
    undeclared = {k: v for k, v in ri.to_dict().items() if k != "schema"}
    alloc = TopDownAllocation.from_dict(undeclared)
    assert alloc.schema is None
    assert allocation_schema(alloc.all_queries(), alloc.schema) == "ri2010"
    assert allocation_schema(("TOTAL", "DETAILED")) == "redistricting2020"
    with pytest.raises(ValidationError, match="schema"):
        TopDownAllocation.from_dict({**ri.to_dict(), "schema": 3})


def test_locate_share_problems_names_level_and_query() -> None:
    """The planner marks the offending cell: every share problem comes with its level and query."""
    from engine.dp.budget import locate_share_problems
    from engine.dp.presets import load_topdown_preset

    draft = load_topdown_preset("topdown-2020-production")["persons"].to_dict()
    assert locate_share_problems(draft) == []
    first, second = draft["geolevels"][:2]
    draft["level_shares"][first] = "0"
    query = next(iter(draft["query_shares"][second]))
    draft["query_shares"][second][query] = "abc"
    found = {(p.table, p.level, p.query) for p in locate_share_problems(draft)}
    assert ("levels", None, None) in found  # the level-share column does not sum to 1
    assert ("queries", second, query) in found  # the unreadable cell
