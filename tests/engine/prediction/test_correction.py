"""Non-negativity correction and spine profiles (engine.prediction.correction, .spine)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.prediction.correction import clipped_moments, sample_families, water_fill_shift
from engine.prediction.shipped import shipped_profile
from engine.prediction.spine import SpineProfile, aggregate_counts


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

    from engine.dp.budget import TopDownAllocation
    from engine.dp.presets import load_topdown_preset
    from engine.prediction import predict_topdown

    data = load_topdown_preset("ri2010-production-like")["persons"].to_dict()
    data["query_shares"]["Block"] = {"TOTAL": "1/2", "VOTINGAGE": "1/2"}
    pred = predict_topdown(TopDownAllocation.from_dict(data, name="x"), shipped_profile("ri2010"))
    assert math.isnan(pred.row("Block", "DETAILED").post_processed_rmse)
    assert pred.row("Block", "DETAILED").model_holds is False
    assert pred.row("Block", "TOTAL").post_processed_rmse > 0
    assert not math.isnan(pred.row("Block_Group", "DETAILED").post_processed_rmse)


def _reference_correction(moments, counts, linear_var, cell_var, attributes, query, support, cells):
    """The correction of one query written out on every answer cell with a dense indicator
    (the formula of the module docstring, as the per-query implementation had it)."""
    from engine.schema.marginals import answer_cells, cell_index, parse_marginal

    parse = parse_marginal(query, attributes)
    index = cell_index(parse, attributes)[cells]
    size = answer_cells(parse, attributes)
    ind = np.zeros((index.size, size))
    ind[np.arange(index.size), index] = 1.0
    inside = support
    p_in = np.where(inside, moments.p, 0.0)
    sum_p, sum_p2 = p_in @ ind, (p_in**2) @ ind
    diag_lin = np.where(inside, cell_var, 0.0) @ ind
    lin = linear_var[:, None] if linear_var.ndim == 1 else linear_var
    per_answer = inside.astype(float) @ ind
    pairs = per_answer * (per_answer - 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        weight = np.where(pairs > 0, (sum_p**2 - sum_p2) / np.where(pairs > 0, pairs, 1), 0)
    spread = np.maximum(np.where(inside, moments.var, 0.0) @ ind + weight * (lin - diag_lin), 0)
    outside = np.where(inside, 0.0, moments.var) @ ind
    bias = moments.mean @ ind
    clipped = np.minimum(spread + bias**2, np.broadcast_to(lin, spread.shape)) + outside
    mse = clipped + moments.p_rounded @ ind / 6.0
    return float(np.sqrt(mse.mean())), float((counts @ ind).mean()), bias


def test_level_corrections_match_the_formula_query_by_query(monkeypatch) -> None:
    """All queries of a level at once (only the answer cells some column reaches, in chunks of
    units) give the per-query formula on every answer cell, including cells left out."""
    import engine.prediction.correction as correction
    from engine.schema.marginals import SCHEMA_ATTRIBUTES

    attributes = next(a for a in SCHEMA_ATTRIBUTES.values() if len(a) > 2)
    n_cells = int(np.prod([len(levels) for _, levels in attributes]))
    rng = np.random.default_rng(3)
    cells = np.sort(rng.choice(n_cells, size=min(n_cells, 90), replace=False))
    units = 17
    counts = rng.poisson(0.8, size=(units, cells.size)).astype(float)
    support = counts > 0
    cell_var = rng.uniform(0.2, 3.0, size=(units, cells.size))
    fanouts = np.array([5, 4, 8])
    moments, _ = correction.level_moments(counts, cell_var, fanouts, np.arange(units))
    queries = [
        "TOTAL",
        "DETAILED",
        *(a for a, _ in attributes[:2]),
        f"{attributes[0][0]}*{attributes[1][0]}",
    ]
    from engine.schema.marginals import answer_cells, parse_marginal

    linear = {}
    for i, q in enumerate(queries):
        size = answer_cells(parse_marginal(q, attributes), attributes)
        linear[q] = rng.uniform(0.5, 9.0, size=(units, size)) if i % 2 else rng.uniform(1, 5, units)
    expected = {
        q: _reference_correction(
            moments, counts, linear[q], cell_var, attributes, q, support, cells
        )
        for q in queries
    }
    for chunk in (10**9, 100):  # one chunk, and chunks of a few units
        monkeypatch.setattr(correction, "CHUNK_ELEMENTS", chunk)
        got = correction.level_corrections(
            moments, counts, linear, cell_var, attributes, support=support, cells=cells
        )
        for q in queries:
            rmse, mean_count, bias = expected[q]
            assert got[q].rmse == pytest.approx(rmse, rel=1e-12)
            assert got[q].mean_count == pytest.approx(mean_count, rel=1e-12)
            np.testing.assert_allclose(got[q].unit_bias, bias, rtol=1e-12, atol=1e-14)
        one = correction.level_corrections(
            moments,
            counts,
            {"DETAILED": linear["DETAILED"]},
            cell_var,
            attributes,
            support=support,
            cells=cells,
        )["DETAILED"]
        assert one.rmse == pytest.approx(expected["DETAILED"][0], rel=1e-12)


def test_the_evaluated_sample_is_whole_families_and_reported() -> None:
    from engine.dp.presets import load_topdown_preset
    from engine.prediction import predict_topdown

    alloc = load_topdown_preset("ri2010-production-like")["persons"]
    profile = shipped_profile("ri2010")
    full = predict_topdown(alloc, profile)
    part = predict_topdown(alloc, profile, max_units=2000)
    assert full.evaluated["Block"] == (25_181, 815)
    units, families = part.evaluated["Block"]
    assert units <= 2_100 and 0 < families < 815
    sample = sample_families(profile.fanouts[-1], 2000)
    assert units == sample.size
    # whole families: every block of a sampled block group
    family = np.repeat(np.arange(profile.fanouts[-1].size), profile.fanouts[-1])
    kept = np.unique(family[sample])
    assert sample.size == int(profile.fanouts[-1][kept].sum())
    # the sample moves the block rows by a few percent at most (docs/prediction.md: ≤ 2%)
    for q in ("TOTAL", "DETAILED"):
        a, b = full.row("Block", q).post_processed_rmse, part.row("Block", q).post_processed_rmse
        assert abs(a - b) <= 0.03 * a
