"""Planning the total ρ from targets on published-count accuracy (docs/science.md §7;
docs/prediction.md)."""

from __future__ import annotations

import pytest

from engine.core.errors import ValidationError
from engine.dp.presets import load_topdown_preset
from engine.prediction import predict_topdown, shipped_profile
from phexplore.planning.targets import parse_published_targets, plan_topdown_published


def test_least_rho_meets_the_targets_and_no_less() -> None:
    alloc = load_topdown_preset("ri2010-production-like")["persons"]
    profile = shipped_profile("ri2010")
    targets = parse_published_targets(["Block:TOTAL=9.2", "Tract:VOTINGAGE=12"])
    plan = plan_topdown_published(alloc, targets, profile)
    rho = plan["summary"]["rho"]
    assert 0.8 < rho < 1.3  # docs/science.md §7: Block TOTAL ≈ 9 and Tract VOTINGAGE ≈ 12 at ρ = 1
    assert all(r["predicted_rmse"] <= r["target"] * (1 + 1e-9) for r in plan["rows"])
    lower = predict_topdown(alloc.with_rho(rho * 0.95), profile)
    assert lower.row("Block", "TOTAL").post_processed_rmse > 9.2 or (
        lower.row("Tract", "VOTINGAGE").post_processed_rmse > 12
    )


def test_unreachable_and_malformed_targets_are_named() -> None:
    alloc = load_topdown_preset("ri2010-production-like")["persons"]
    with pytest.raises(ValidationError, match="cannot be met"):
        plan_topdown_published(alloc, {"Block": {"DETAILED": 0.01}}, shipped_profile("ri2010"))
    with pytest.raises(ValidationError, match="LEVEL:QUERY=VALUE"):
        parse_published_targets(["Block=3"])
    with pytest.raises(ValidationError, match="unknown geolevel"):
        plan_topdown_published(alloc, {"Nowhere": {"TOTAL": 3}}, shipped_profile("ri2010"))
