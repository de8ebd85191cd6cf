"""The shipped national count profile of the 2,016-cell production schema
(engine/prediction/profiles/generated_us_20m_spine.npz, engine.prediction.shipped).

Before, the 2,016-cell prediction without data used a one-county generated Rhode Island: US,
State and County rows all showed that state's root, and County TOTAL read ≈ 0 (1.1e-6) where runs
measure 2.4 persons. The national profile has 51 states and 206 counties of realistic sizes.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from engine.dp.presets import load_topdown_preset
from engine.prediction import (
    PLANNER_MAX_FAMILIES,
    PLANNER_MAX_UNITS,
    predict_topdown,
    shipped_profile,
    shipped_profile_for,
)
from engine.prediction.shipped import NATIONAL, ONE_STATE, one_state_profile
from engine.prediction.spine import (
    SpineProfile,
    aggregate_counts,
    aggregate_zeros,
    profile_from_npz,
    profile_to_npz,
)

PRODUCTION = load_topdown_preset("topdown-2020-production")["persons"]


def test_the_national_profile_has_states_and_counties_of_realistic_sizes() -> None:
    profile = shipped_profile(NATIONAL)
    assert profile.levels == ("US", "State", "County", "Tract", "Block_Group", "Block")
    assert [profile.n_units(k) for k in range(3)] == [1, 51, 206]
    assert len(profile.child_names) == 51 and {"CA", "TX", "RI", "DC"} <= set(profile.child_names)
    assert int(profile.n_persons(0)[0]) == 20_000_000
    counties = profile.n_persons(2)
    assert counties.min() > 1_000 and 20_000 < np.median(counties) < 150_000
    assert int((profile.fanouts[2] > 1).sum()) >= 35  # most states have several counties
    assert sp.issparse(profile.counts[-1])  # ~580,000 blocks: kept sparse
    assert "CC BY-SA" in profile.licence and "--seed 26" in profile.source


def test_production_without_data_predicts_real_state_and_county_rows() -> None:
    profile = shipped_profile_for(PRODUCTION)
    assert profile.name == NATIONAL
    pred = predict_topdown(
        PRODUCTION, profile, max_units=PLANNER_MAX_UNITS, max_families=PLANNER_MAX_FAMILIES
    )
    assert pred.levels[0] == "US" and not pred.folded
    assert pred.row("County", "TOTAL").post_processed_rmse > 0.5  # was 1.1e-6
    for q in ("HISPANIC", "HHGQ", "DETAILED"):
        us, state, county = (
            pred.row(lv, q).post_processed_rmse for lv in ("US", "State", "County")
        )
        assert len({round(us, 6), round(state, 6), round(county, 6)}) == 3, q


def test_one_state_predictions_use_one_state_of_the_national_profile() -> None:
    profile = shipped_profile_for(PRODUCTION, n_states=1)
    assert profile is one_state_profile() and profile.name == f"{NATIONAL}: {ONE_STATE}"
    assert profile.levels[0] == "State" and profile.n_units(1) > 1
    national = shipped_profile(NATIONAL)
    state = national.child_names.index(ONE_STATE)
    np.testing.assert_array_equal(profile.root_counts(), national.unit_counts(1, [state])[0])
    pred = predict_topdown(PRODUCTION, profile, max_units=PLANNER_MAX_UNITS, max_families=4)
    assert pred.folded == ("US",) and pred.row("County", "TOTAL").post_processed_rmse > 0.3
    state_only = load_topdown_preset("ri2010-production-like")["persons"]
    assert shipped_profile_for(state_only).name == "ri2010"  # the folded schema: RI 2010


def test_a_profile_round_trips_through_npz(tmp_path) -> None:
    attrs = (("A", tuple(f"a{i}" for i in range(10))), ("B", tuple(f"b{i}" for i in range(10))))
    fanouts = (np.array([1]), np.array([2]), np.array([2, 1]))
    leaf = sp.csr_matrix(np.array([[0] * 99 + [3], [5] + [0] * 99, [0] * 50 + [2] + [0] * 49]))
    zero = np.zeros((3, 10), dtype=bool)
    zero[0, 5:] = True
    profile = SpineProfile(
        "toy",
        ("US", "State", "County"),
        fanouts,
        attrs,
        aggregate_counts(fanouts, leaf),
        "made up",
        "CC0",
        "B",
        aggregate_zeros(fanouts, zero),
        ("S1", "S2"),
    )
    profile_to_npz(profile, tmp_path / "toy.npz")
    back = profile_from_npz(tmp_path / "toy.npz")
    assert back.child_names == ("S1", "S2") and back.source == "made up"
    np.testing.assert_array_equal(back.unit_counts(2), leaf.toarray())
    np.testing.assert_array_equal(back.unit_counts(0), leaf.toarray().sum(axis=0, keepdims=True))
    np.testing.assert_array_equal(back.zero_answers[-1], zero)
    assert back.unit_cells(2, 0).tolist() == [99]
    sub = back.subtree(0)
    assert sub.levels == ("State", "County") and sub.name == "toy: S1"
    np.testing.assert_array_equal(sub.unit_counts(1), leaf.toarray()[:2])
