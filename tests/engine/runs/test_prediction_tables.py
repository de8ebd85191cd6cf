"""Run pipeline: predicted vs measured RMSE tables for TopDown runs (SPEC §7, issue 19)."""

from __future__ import annotations

from engine.runs.pipeline import execute
from engine.runs.spec import RunSpec
from phexplore.presets import load_topdown_preset


def test_conventional_run_with_wards_has_both_prediction_tables() -> None:
    alloc = load_topdown_preset("ri2010-production-like")["persons"].with_rho(1)
    spec = RunSpec(
        engine="topdown",
        data={"source": "ri2010", "filter": {"level": "County", "units": ["44007"]}},
        config=alloc.to_dict(),
        seed=3,
        options={"spine": "conventional", "entities": ["providence-wards"]},
    )
    out = execute(spec, tables=True)
    pred = out.tables["prediction"]
    block = pred[(pred["geolevel"] == "Block") & (pred["query"] == "TOTAL")].iloc[0]
    assert 0.7 < block["ratio"] < 1.4  # 13,000+ blocks: one run already pins it down
    assert any(r["query"] == "TOTAL" for r in out.metrics["prediction"])
    entities = out.tables["entity_prediction"]
    wards = entities[
        (entities["entity_set"] == "providence_wards") & (entities["query"] == "TOTAL")
    ]
    assert len(wards) == 1 and wards.iloc[0]["entities"] == 15
    assert 0.4 < wards.iloc[0]["ratio"] < 2.5  # 15 wards, one run
