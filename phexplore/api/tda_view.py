"""What the Results page and the report show of a run's errors, TDA's definition first (TDA §9).

Part of the app-facing API (:mod:`phexplore.api`). :func:`tda_view` gathers, from a run's
metrics.json, the tables the MAE tab draws: TDA's absolute error (``tda_mae``: per geounit the
absolute error summed over the query's cells, averaged over the geounits — TDA Tables 9–10; derived
from the per-cell MAE for files written before it existed, said so), which blocks the block
figures average over (``error_universe``), and — for runs made with production's persons
allocation — TDA's published Tables 9–12 beside them with what differs
(:mod:`engine.metrics.tda_reference`). :func:`universe_tidy` drops the block rows outside the
universe from the dense table the EPL charts read, so they show metrics.json's figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from engine.metrics.tda_reference import (
    comparability,
    comparison_caption,
    size_class_comparison,
    tda_comparison,
    tda_mae_of_metrics,
)
from engine.metrics.universe import universe_of_metrics
from phexplore.api.jobs import RunRecord

TDA_DEFINITION = (
    "Absolute error as TDA defines it (TDA §9, Tables 9–10): for each geounit, |estimate − true| "
    "summed over the query's cells; then the mean over the geounits of the level. For TOTAL it is "
    "the ordinary mean absolute error; for an m-cell query it is m × the per-cell MAE."
)
PER_CELL_DEFINITION = (
    "Per-cell MAE: |estimate − true| averaged over every geounit × query cell — TDA's figure "
    "divided by the query's number of cells (not what TDA's tables print)."
)


@dataclass(frozen=True)
class TDAView:
    """A run's error tables for display: TDA's figure, the universe, TDA's published tables."""

    tda_mae: pd.DataFrame
    """geolevel, query, tda_mae (rows in the metrics.json order)."""
    note: str
    universe: dict[str, Any]
    comparable: bool
    why: str
    comparison: pd.DataFrame = field(default_factory=pd.DataFrame)
    size_classes: pd.DataFrame = field(default_factory=pd.DataFrame)
    caption: str = ""


def tda_view(metrics: Mapping[str, Any]) -> TDAView:
    """The :class:`TDAView` of a TopDown run's metrics.json (old files too)."""
    section, note = tda_mae_of_metrics(metrics)
    rows = [
        {"geolevel": level, "query": query, "tda_mae": value}
        for level, per_query in section.items()
        for query, value in per_query.items()
    ]
    table = pd.DataFrame(rows, columns=["geolevel", "query", "tda_mae"])
    universe = universe_of_metrics(metrics)
    ok, why = comparability(metrics)
    if not ok:
        return TDAView(table, note, universe, False, why)
    return TDAView(
        table,
        note,
        universe,
        True,
        why,
        comparison=tda_comparison(metrics),
        size_classes=size_class_comparison(metrics),
        caption=comparison_caption(metrics),
    )


def universe_tidy(record: RunRecord) -> pd.DataFrame:
    """The record's dense table without the block rows outside its error universe (the blocks
    the block-level figures leave out: ``settings["universe_left_out"]``)."""
    left_out = record.settings.get("universe_left_out")
    tidy = record.tidy
    if not left_out or tidy is None:
        return tidy
    level = str((record.metrics or {}).get("error_universe", {}).get("level", "Block"))
    drop = (tidy["geolevel"].astype(str) == level) & tidy["geounit"].astype(str).isin(set(left_out))
    return tidy[~drop.to_numpy()]


def spine_caption(metrics: Mapping[str, Any]) -> str:
    """The spine a TopDown run measured on (``spine_used``), or that an old file does not say."""
    used = metrics.get("spine_used")
    if isinstance(used, Mapping) and used.get("label"):
        note = f" {used['note']}" if used.get("note") else ""
        return f"Spine: {used['label']}.{note}"
    return (
        "Spine: not recorded (this run predates the record; runs then used the conventional "
        "spine unless another was chosen)."
    )


def universe_caption(record: RunRecord) -> str:
    """What the block rows of the record's charts cover (and, for an opened folder whose file
    cannot tell, that its EPL chart counts every block)."""
    universe = universe_of_metrics(record.metrics or {})
    text = f"Block figures: {universe.get('note')}"
    folder = not record.settings.get("universe_left_out")
    if (
        universe.get("universe") == "housed"
        and folder
        and int(universe.get("blocks_left_out") or 0)
    ):
        text += (
            " The EPL chart of an opened run folder counts every block of its estimates file "
            "(the folder does not list the blocks left out); metrics.json's EPL is the "
            "universe's."
        )
    return text
