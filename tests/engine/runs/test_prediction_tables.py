"""Run pipeline: predicted vs measured RMSE tables for TopDown runs (docs/science.md §7)."""

from __future__ import annotations

from typing import Any

from engine.dp.presets import load_topdown_preset
from engine.runs.data_source import BlockFilter, DataSource
from engine.runs.options import TopDownRunOptions
from engine.runs.pipeline import execute
from engine.runs.spec import RunSpec


def _providence(**options: Any) -> RunSpec:
    """Providence County (RI 2010, ``ri2010-production-like`` at ρ = 1, seed 3)."""
    alloc = load_topdown_preset("ri2010-production-like")["persons"].with_rho(1)
    return RunSpec(
        engine="topdown",
        data=DataSource(source="ri2010", filter=BlockFilter("County", ("44007",))),
        config=alloc.to_dict(),
        seed=3,
        options=TopDownRunOptions(**options),
    )


def test_conventional_run_with_wards_has_both_prediction_tables() -> None:
    spec = _providence(spine="conventional", entities=["providence-wards"])
    out = execute(spec, tables=True)
    pred = out.tables["prediction"]
    block = pred[(pred["geolevel"] == "Block") & (pred["query"] == "TOTAL")].iloc[0]
    assert 0.7 < block["ratio"] < 1.4  # 13,000+ blocks: one run already pins it down
    assert any(r["query"] == "TOTAL" for r in out.metrics["prediction"])
    # every row says whether it lies in the validated range, and why not
    for r in out.metrics["prediction"]:
        assert {"model_holds", "validity"} <= set(r)
        assert (r["model_holds"] is False) == bool(r["validity"]), r
    entities = out.tables["entity_prediction"]
    wards = entities[
        (entities["entity_set"] == "providence_wards") & (entities["query"] == "TOTAL")
    ]
    assert len(wards) == 1 and wards.iloc[0]["entities"] == 15
    assert 0.4 < wards.iloc[0]["ratio"] < 2.5  # 15 wards, one run


def test_the_run_table_evaluates_a_stated_sample_of_families() -> None:
    """The app's table evaluates the correction on whole families of at most about
    RUN_TABLE_MAX_UNITS geounits per level (every k-th family) and says so: per row the level's
    geounits and those evaluated, in metrics.json the method; the Results page's sentence."""
    from engine.prediction import RUN_TABLE_MAX_UNITS
    from phexplore.api import prediction_sample_sentence

    out = execute(_providence(), tables=True)
    pred = out.tables["prediction"]
    block = pred[pred["geolevel"] == "Block"].iloc[0]
    assert block["units"] > 10_000  # Providence County's blocks
    assert 0 < block["units_evaluated"] <= 1.1 * RUN_TABLE_MAX_UNITS
    tract = pred[pred["geolevel"] == "Tract"].iloc[0]
    assert tract["units_evaluated"] == tract["units"]  # fewer than the cap: all of them
    rows = out.metrics["prediction"]
    assert all("units_evaluated" in r and "units" in r for r in rows)
    assert out.metrics["prediction_sampling"]["max_units_per_level"] == RUN_TABLE_MAX_UNITS
    sentence = prediction_sample_sentence(pred)
    assert sentence is not None and f"Block {int(block['units_evaluated']):,} of" in sentence
    assert prediction_sample_sentence(pred.drop(columns=["units_evaluated"])) is None
