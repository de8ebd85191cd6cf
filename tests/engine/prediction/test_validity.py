"""The per-row validity flag from the validated range (engine.prediction.validity).

A row holds when the allocation is one of the validated ones up to a factor 2 on every measured
share of ρ at its level and above, its ρ lies in the range its (role, level, query) was measured
at, the measurement there was within 0.8–1.25×, and its mean count is not far below the
validated ones; otherwise it carries the reason. Before, every row carried only the mean-count
rule (mean count ≥ 1).
"""

from __future__ import annotations

import math

import pytest

from engine.dp.budget import TopDownAllocation
from engine.dp.presets import load_topdown_preset
from engine.prediction import DEFAULT_INVARIANTS, QueryPrediction, predict_topdown, shipped_profile
from engine.prediction.validity import (
    ModelUsed,
    ValidatedFamily,
    ValidatedRow,
    allocation_shares,
    assess_rows,
    validated_families,
)

PRODUCTION = load_topdown_preset("topdown-2020-production")["persons"]
SCHEMA = ("HHGQ", "VOTINGAGE", "HISPANIC", "CENRACE")


def _family(ratio: float = 1.0, rhos: tuple[float, ...] = (0.64, 10.0)) -> ValidatedFamily:
    rows = {
        ("root", "", "HISPANIC"): tuple(ValidatedRow(r, 1.0, 400_000.0, 9.0) for r in rhos),
        ("level", "Tract", "HISPANIC"): tuple(ValidatedRow(r, ratio, 2_000.0, 5.0) for r in rhos),
    }
    return ValidatedFamily(
        "production", SCHEMA, "support", allocation_shares(PRODUCTION, DEFAULT_INVARIANTS), rows
    )


def _row(level: str = "Tract", query: str = "HISPANIC", mean: float = 2_000.0) -> QueryPrediction:
    return QueryPrediction(level, query, 2, 200, 40.0, 5.0, 6.0, 9.9, mean, True)


def _assess(row: QueryPrediction, alloc=PRODUCTION, model=ModelUsed.SUPPORT, family=None):
    profile = shipped_profile("generated-ri-100k")
    (out,) = assess_rows(
        [row],
        alloc,
        ("State", "County", "Tract", "Block_Group", "Block"),
        model,
        profile,
        expected=ModelUsed.SUPPORT,
        invariants=DEFAULT_INVARIANTS,
        families=[family or _family()],
    )
    return out


def test_a_row_of_a_validated_allocation_in_range_holds() -> None:
    out = _assess(_row())
    assert out.model_holds is True and out.validity is None
    root = _row(level="State", mean=400_000.0)
    assert _assess(root).model_holds is True  # the root, whatever its name


def test_rho_outside_the_validated_range_is_flagged() -> None:
    out = _assess(_row(), alloc=PRODUCTION.with_rho(20))
    assert out.model_holds is False and "ρ = 20 outside the validated 0.64–10" in out.validity


def test_a_measured_miss_is_flagged_with_its_ratio() -> None:
    out = _assess(_row(), family=_family(ratio=1.6))
    assert out.model_holds is False and "measured 1.60× in validation" in out.validity


def test_shares_far_from_every_validated_allocation_are_flagged() -> None:
    shares = PRODUCTION.to_dict()
    shares["query_shares"]["Tract"] = {"DETAILED": "1"}
    other = TopDownAllocation.from_dict(shares, name="tract detailed only")
    out = _assess(_row(), alloc=other)
    assert out.model_holds is False and "allocation outside the validated ones" in out.validity
    assert "Tract" in out.validity


def test_counts_far_below_the_validated_relative_to_the_noise_are_flagged() -> None:
    out = _assess(_row(mean=100.0))
    assert out.model_holds is False and "mean count per answer cell" in out.validity
    assert _assess(_row(level="State", mean=200_000.0)).model_holds is True


def test_a_level_not_validated_below_its_root_is_flagged() -> None:
    out = _assess(_row(level="County"))
    assert out.model_holds is False and "not validated" in out.validity


def test_fallback_models_and_missing_counts_never_hold() -> None:
    for model in (ModelUsed.DENSE_TOO_LARGE, ModelUsed.LEAST_SQUARES_ONLY):
        out = _assess(_row(), model=model)
        assert out.model_holds is False and out.validity == model.value
    nan = QueryPrediction(
        "Tract", "HISPANIC", 2, 200, 40.0, math.nan, math.nan, math.nan, None, False
    )
    assert "not determined" in _assess(nan).validity
    exact = QueryPrediction("State", "TOTAL", 1, 1, None, 0.0, 0.0, 0.0, None, True, True)
    assert _assess(exact).model_holds is True


def test_the_shipped_validation_covers_the_validated_allocations() -> None:
    """validation.json (written by benchmarks/prediction.py) holds the validated families, and
    production at its preset ρ on the shipped RI profile has rows that hold and rows flagged."""
    names = {f.name for f in validated_families()}
    assert {"topdown-2020-production", "topdown-2021-04", "ri2010-production-like"} <= names
    pred = predict_topdown(PRODUCTION, shipped_profile("generated-ri-100k"), max_families=4)
    flags = {(r.geolevel, r.query): r for r in pred.rows}
    assert flags[("Block", "TOTAL")].model_holds is True
    assert flags[("Block", "TOTAL")].validity is None
    edited = predict_topdown(
        PRODUCTION.with_rho(50), shipped_profile("generated-ri-100k"), max_families=4
    )
    block = edited.row("Block", "TOTAL")
    assert block.model_holds is False and "outside the validated" in block.validity


@pytest.mark.parametrize("rho", [0.185, 1.05])
def test_a_held_total_error_is_not_removed_by_non_negativity(rho: float) -> None:
    """topdown-2021-04 estimates Tract TOTAL alone first (1/1024 of the tract share); its error
    is held in the second pass and spreads to every other tract query. Non-negativity moves it
    between cells but cannot remove it (the held total is published as estimated): the
    published marginals keep at least the least-squares error. Before, the correction clipped it
    away (0.59–0.62× of the least squares at ρ = 0.185; measured 1.0–1.08× on 1,000,000
    persons)."""
    alloc = load_topdown_preset("topdown-2021-04")["persons"].with_rho(rho)
    pred = predict_topdown(alloc, shipped_profile("generated-ri-100k"))
    for q in ("HISPANIC", "VOTINGAGE", "HHGQ"):
        row = pred.row("Tract", q)
        assert row.post_processed_rmse >= 0.9 * row.ls_rmse, (q, row)


def test_pure_dp_noise_is_not_validated() -> None:
    """The validation runs drew discrete-Gaussian noise; the same shares with geometric noise
    (pure DP, ε in place of ρ) are flagged, not taken as validated."""
    data = PRODUCTION.to_dict()
    data["mechanism"] = "puredp"
    pure = TopDownAllocation.from_dict(data, name="production, pure DP")
    assert pure.mechanism == "puredp"
    out = _assess(_row(), alloc=pure)
    assert out.model_holds is False and "puredp noise" in out.validity
