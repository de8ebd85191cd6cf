"""Non-negativity correction and spine profiles (phexplore.prediction.correction, .spine)."""

from __future__ import annotations

import numpy as np

from phexplore.prediction.correction import clipped_moments, water_fill_shift
from phexplore.prediction.spine import SpineProfile, aggregate_counts, shipped_profile


def test_clipped_moments_match_simulation() -> None:
    rng = np.random.default_rng(1)
    y = np.array([[0.0, 1.0, 3.0, 40.0]])
    s = np.array([[2.0]])
    lam = np.array([[0.7, 0.7, 0.7, 0.7]])
    m = clipped_moments(y, s, lam)
    d = rng.normal(0.0, 2.0, size=(400_000, 4))
    e = np.maximum(-y, d - lam)
    np.testing.assert_allclose(m.mean[0], e.mean(axis=0), atol=0.01)
    np.testing.assert_allclose(m.var[0], e.var(axis=0), rtol=0.01)
    np.testing.assert_allclose(m.p[0], (e > -y).mean(axis=0), atol=0.005)


def test_water_fill_keeps_the_family_sum_in_expectation() -> None:
    y = np.array([[0.0, 5.0], [2.0, 0.0], [10.0, 0.0], [1.0, 3.0], [0.0, 0.0]])
    family = np.array([0, 0, 0, 1, 1])
    s = np.full((5, 1), 1.5)
    lam = water_fill_shift(y, s, family, 2)
    m = clipped_moments(y, s, lam[family])
    sums = np.array([m.mean[:3].sum(axis=0), m.mean[3:].sum(axis=0)])
    np.testing.assert_allclose(sums, 0.0, atol=1e-4)
    assert np.all(lam[np.isfinite(lam)] >= 0)


def test_restrict_merges_a_dropped_level_and_counts_aggregate() -> None:
    fanouts = (np.array([1]), np.array([2]), np.array([2, 1]), np.array([1, 2, 3]))
    leaf = np.arange(12).reshape(6, 2)
    profile = SpineProfile(
        "toy", ("A", "B", "C", "D"), fanouts, (("X", ("a", "b")),), aggregate_counts(fanouts, leaf)
    )
    merged = profile.restrict(["A", "B", "D"])
    assert merged.levels == ("A", "B", "D")
    np.testing.assert_array_equal(merged.fanouts[2], [3, 3])
    np.testing.assert_array_equal(merged.counts[1], [leaf[:3].sum(0), leaf[3:].sum(0)])


def test_shipped_profile_is_rhode_island() -> None:
    profile = shipped_profile("ri2010")
    assert profile.levels == ("State", "County", "Tract", "Block_Group", "Block")
    assert [profile.n_units(k) for k in range(5)] == [1, 5, 244, 815, 25181]
    assert int(profile.counts[0].sum()) == 1_052_567
    assert "CC BY-SA" in profile.licence


def test_a_query_the_level_does_not_determine_has_no_prediction() -> None:
    import math

    from phexplore.budget import TopDownAllocation
    from phexplore.prediction import predict_topdown
    from phexplore.presets import load_topdown_preset

    data = load_topdown_preset("ri2010-production-like")["persons"].to_dict()
    data["query_shares"]["Block"] = {"TOTAL": "1/2", "VOTINGAGE": "1/2"}
    pred = predict_topdown(TopDownAllocation.from_dict(data, name="x"), shipped_profile("ri2010"))
    assert math.isnan(pred.row("Block", "DETAILED").post_processed_rmse)
    assert pred.row("Block", "DETAILED").model_holds is False
    assert pred.row("Block", "TOTAL").post_processed_rmse > 0
    assert not math.isnan(pred.row("Block_Group", "DETAILED").post_processed_rmse)
