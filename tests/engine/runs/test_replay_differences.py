"""What a replay says when its numbers are not the recorded ones (engine/runs/replay.py): how much
the MAE table differs, and whether TopDown's least-squares routes changed since the recording
(docs/metrics.md "Replays of runs recorded before the routing table")."""

from __future__ import annotations

import math

from engine.runs.replay import difference_sentence, mae_differences, reproduction

MAE = {"Block": {"TOTAL": 4.0, "DETAILED": 0.5}, "Tract": {"TOTAL": 2.0, "DETAILED": math.nan}}
ROUTES = {"Tract": {"closed_form": 3, "piqp": 3}, "Block": {"admm": 9}}


def _topdown(mae: dict, routes: dict | None) -> dict:
    diagnostics = {"milp_fallbacks": 0, **({"routes": routes} if routes is not None else {})}
    return {"engine": "topdown", "mae": mae, "diagnostics": diagnostics}


def test_the_same_table_is_reproduced_and_says_nothing_more() -> None:
    same = {lv: dict(q) for lv, q in MAE.items()}  # NaN equals NaN as written (null)
    assert reproduction(_topdown(MAE, None), _topdown(same, ROUTES)) == {"reproduced": True}
    assert reproduction({}, _topdown(MAE, ROUTES)) == {"reproduced": None}


def test_a_recording_without_routes_says_the_routes_changed_and_how_much_moved() -> None:
    moved = {
        "Block": {"TOTAL": 4.0, "DETAILED": 0.5},
        "Tract": {"TOTAL": 2.1, "DETAILED": math.nan},
    }
    of = reproduction(_topdown(MAE, None), _topdown(moved, ROUTES))
    assert of["reproduced"] is False and of["routes_changed"] is True
    diff = of["mae_differences"]
    assert diff["entries"] == 4 and diff["differing"] == 1
    assert diff["largest"]["level"] == "Tract" and diff["largest"]["query"] == "TOTAL"
    assert math.isclose(diff["largest"]["difference"], 0.1)
    sentence = difference_sentence(of)
    assert "1 of 4 entries" in sentence and "Tract TOTAL 2 → 2.1" in sentence
    assert "other least-squares routes" in sentence and "a person or two" in sentence


def test_the_same_routes_and_other_numbers_blame_the_code_or_the_data() -> None:
    moved = {"Block": {"TOTAL": 5.0, "DETAILED": 0.5}, "Tract": MAE["Tract"]}
    of = reproduction(_topdown(MAE, ROUTES), _topdown(moved, ROUTES))
    assert of["routes_changed"] is False
    assert difference_sentence(of).endswith("the code or the data changed since the original run")
    other = {"Tract": {"piqp": 6}, "Block": {"admm": 9}}
    assert reproduction(_topdown(MAE, other), _topdown(moved, ROUTES))["routes_changed"] is True


def test_changed_data_is_named_before_the_routes_and_phsafe_has_no_routes() -> None:
    moved = {"Block": {"TOTAL": 5.0}}
    of = {**reproduction(_topdown(MAE, None), _topdown(moved, ROUTES)), "inputs_changed": ["x"]}
    assert difference_sentence(of).endswith("the data changed since the original run")
    phsafe = reproduction({"engine": "phsafe", "mae": MAE}, {"engine": "phsafe", "mae": moved})
    assert "routes_changed" not in phsafe and phsafe["reproduced"] is False
    # an entry only one side has counts as differing, its difference unknown
    assert mae_differences({"A": {"q": 1.0}}, {"A": {"r": 1.0}}) == {
        "entries": 2,
        "differing": 2,
        "largest": {
            "level": "A",
            "query": "q",
            "recorded": 1.0,
            "replayed": None,
            "difference": None,
        },
    }
