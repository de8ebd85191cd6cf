"""The error lines of ``phexplore run topdown``'s summary: TDA's definition first (TDA §9).

:func:`error_lines` prints a run's ``tda_mae`` — per geounit the absolute error summed over the
query's cells, averaged over the geounits (TDA Tables 9–10) — then the per-cell MAE, labelled
per cell, then which blocks the block figures average over (``error_universe``), and, for a run
made with production's persons allocation, TDA's published figures beside it with what differs
(:mod:`engine.metrics.tda_reference`). Old metrics.json files (no ``tda_mae``) print the figure
derived from the per-cell MAE, said so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TDA_HEADING = (
    "  Absolute error, TDA's definition (per geounit: |error| summed over the query's cells; "
    "mean over geounits; TDA Tables 9–10):"
)
PER_CELL_HEADING = (
    "  Per-cell MAE (mean over geounit × cell = TDA's figure ÷ the query's cells; not TDA's):"
)


def _cells(per_query: Mapping[str, Any]) -> str:
    return ", ".join(f"{q} {v:.3g}" for q, v in per_query.items() if isinstance(v, int | float))


def error_lines(payload: Mapping[str, Any]) -> list[str]:
    """TDA's absolute error, the per-cell MAE, the block universe and TDA's published figures."""
    # heavy: pandas and the reference tables, loaded when a run's summary is printed
    from engine.metrics.tda_reference import (
        comparability,
        comparison_caption,
        tda_comparison,
        tda_mae_of_metrics,
    )
    from engine.metrics.universe import universe_of_metrics

    lines: list[str] = []
    tda, note = tda_mae_of_metrics(payload)
    if tda:
        lines.append(TDA_HEADING + ("" if note.startswith("TDA's definition") else f" [{note}]"))
        for level, per_query in tda.items():
            lines.append(f"    {level}: {_cells(per_query)}")
    lines.append(PER_CELL_HEADING)
    for level, per_query in (payload.get("mae") or {}).items():
        if isinstance(per_query, Mapping):
            lines.append(f"    {level}: {_cells(per_query)}")
    universe = universe_of_metrics(payload)
    lines.append(f"  block figures: {universe.get('note')}")
    ok, why = comparability(payload)
    if not ok:
        lines.append(f"  TDA Tables 9–10 not shown beside this run: {why}.")
        return lines
    table = tda_comparison(payload)
    if table.empty:
        return lines
    lines.append("  Beside TDA Tables 9–10 (production settings, 2010 CEF, run baseline1):")
    for query, part in table.groupby("query", sort=False):
        cells = ", ".join(
            f"{r.geolevel} {r.this_run:.3g} (TDA {r.tda:.3g})" for r in part.itertuples()
        )
        lines.append(f"    {query}: {cells}")
    lines.append(f"    {comparison_caption(payload)}")
    return lines
