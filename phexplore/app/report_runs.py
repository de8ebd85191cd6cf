"""The report's sections for one run (docs/app.md, "Budget session"): what a run did, as HTML.

A TopDown run's errors — TDA's absolute error first (TDA §9, Tables 9–10) with TDA's published
Tables 9–12 beside production runs and what differs, the block universe, then the per-cell MAE
labelled per cell — its spine MAE by geography, its EPL settings and interval (PF), its notes,
and the small HTML tables the whole report uses. :mod:`phexplore.app.report` assembles the file.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from engine.metrics.tda_reference import (
    comparability,
    comparison_caption,
    size_class_comparison,
    tda_comparison,
    tda_mae_of_metrics,
)
from engine.metrics.universe import universe_of_metrics
from phexplore.app.charts import for_report
from phexplore.app.naming import (
    display_frame,
    geolevel_label,
    level_label,
    spine_order,
    table_label,
)


def table_html(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    if not rows:
        return "<p><em>none</em></p>"
    frame = pd.DataFrame(list(rows))
    if columns:
        frame = frame[[c for c in columns if c in frame.columns]]
    return display_frame(frame).to_html(
        index=False, float_format=lambda v: f"{v:.6g}", na_rep="—", border=0
    )


def run_levels(metrics: Mapping[str, Any]) -> list[str] | None:
    """The geolevels of a TopDown run's allocation (its spine, root first), when recorded."""
    run = metrics.get("run")
    config = run.get("config") if isinstance(run, Mapping) else None
    levels = config.get("geolevels") if isinstance(config, Mapping) else None
    return [str(lv) for lv in levels] if isinstance(levels, list) else None


def spine_sorted(
    rows: Sequence[Mapping[str, Any]], metrics: Mapping[str, Any]
) -> list[Mapping[str, Any]]:
    """``rows`` with a ``geolevel`` key ordered from the root down (stable within a level)."""
    order = spine_order([str(r.get("geolevel")) for r in rows], run_levels(metrics))
    rank = {lv: i for i, lv in enumerate(order)}
    return sorted(rows, key=lambda r: rank.get(str(r.get("geolevel")), len(rank)))


def mae_rows(metrics: Mapping[str, Any]) -> list[dict[str, Any]]:
    """MAE rows of a run: geolevel × query (TopDown, root first) or table × level (PHSafe)."""
    mae = metrics.get("mae") or {}
    if metrics.get("engine") == "phsafe":
        return [
            {"table": t, "level": lv, "mae": v}
            for t, levels in mae.items()
            if isinstance(levels, Mapping)
            for lv, v in levels.items()
            if not isinstance(v, Mapping)
        ]
    rows = [
        {"geolevel": lv, "query": q, "mae": v}
        for lv, qs in mae.items()
        if isinstance(qs, Mapping)
        for q, v in qs.items()
        if not isinstance(v, Mapping)
    ]
    return spine_sorted(rows, metrics)


def mae_figure(
    metrics: Mapping[str, Any], title: str, section: str = "mae", y_title: str = ""
) -> go.Figure | None:
    """Grouped bars of a run's MAE (or another geolevel × query ``section``): geolevels from the
    root down (TopDown) or tables with their population-group levels in words (PHSafe)."""
    mae = metrics.get(section)
    if not isinstance(mae, Mapping) or not mae:
        return None
    phsafe = metrics.get("engine") == "phsafe"
    groups = list(mae) if phsafe else spine_order(mae, run_levels(metrics))
    fig = go.Figure()
    series: list[str] = []
    for group in groups:
        values = mae.get(group)
        if isinstance(values, Mapping):
            series.extend(k for k in values if k not in series)
    for key in series:
        present = [g for g in groups if isinstance(mae[g], Mapping) and key in mae[g]]
        fig.add_trace(
            go.Bar(
                name=level_label(key) if phsafe else key,
                x=[table_label(g) if phsafe else geolevel_label(g) for g in present],
                y=[mae[g][key] for g in present],
            )
        )
    unit = "persons or households" if phsafe else "persons"
    fig.update_layout(
        title=title,
        barmode="group",
        xaxis_title="Table" if phsafe else "Geolevel",
        yaxis_title=y_title
        or (
            f"Mean absolute error ({unit})" if phsafe else "Mean absolute error per cell (persons)"
        ),
        height=420,
    )
    return for_report(fig)


def spine_html(metrics: Mapping[str, Any]) -> list[str]:
    """The spine a TopDown run measured on (metrics.json ``spine_used``; older files: not
    recorded)."""
    used = metrics.get("spine_used")
    if isinstance(used, Mapping) and used.get("label"):
        return [f"<p class='spine'>Spine: {html.escape(str(used['label']))}.</p>"]
    return [
        "<p class='spine'>Spine: not recorded (this metrics.json predates the record; runs then "
        "used the conventional spine unless --spine was given).</p>"
    ]


def tda_error_html(metrics: Mapping[str, Any], title: str) -> list[str]:
    """A TopDown run's errors as the report shows them: TDA's absolute error first (table and
    chart), the block universe, TDA's published Tables 9–12 beside it for production runs (with
    what differs), then the per-cell MAE, labelled per cell."""
    parts: list[str] = []
    section, note = tda_mae_of_metrics(metrics)
    parts.append(
        "<h4>Absolute error, TDA's definition (per geounit: |error| summed over the query's "
        "cells; mean over geounits — TDA Tables 9–10)</h4>"
    )
    parts.append(f"<p>{html.escape(note)}.</p>")
    if section:
        rows = [
            {"geolevel": lv, "query": q, "tda_mae": v}
            for lv, per_query in section.items()
            for q, v in per_query.items()
        ]
        parts.append(f"<div class='tda-mae'>{table_html(rows)}</div>")
        fig = mae_figure(
            {"tda_mae": section},
            f"Absolute error per geounit (TDA's definition) — {title}",
            "tda_mae",
            "Absolute error per geounit (persons)",
        )
        if fig is not None:
            parts.append(fig.to_html(full_html=False, include_plotlyjs=False))
    universe = universe_of_metrics(metrics)
    parts.append(f"<p class='note'>Block figures: {html.escape(str(universe.get('note')))}</p>")
    ok, why = comparability(metrics)
    if ok:
        table = tda_comparison(metrics)
        if not table.empty:
            parts.append("<h4>Beside TDA's published Tables 9–10 (production, 2010 CEF)</h4>")
            parts.append(f"<div class='tda-reference'>{table_html(table.to_dict('records'))}</div>")
            sizes = size_class_comparison(metrics)
            if not sizes.empty:
                parts.append(
                    "<p>TOTAL error by size class of the true count (TDA Tables 11–12):</p>"
                )
                parts.append(table_html(sizes.to_dict("records")))
            parts.append(f"<p class='note'>{html.escape(comparison_caption(metrics))}</p>")
    else:
        parts.append(f"<p>TDA Tables 9–12 are not shown beside this run: {html.escape(why)}.</p>")
    return parts


def interval_text(metrics: Mapping[str, Any]) -> str:
    """How a run's EPL intervals were made: shifted by the bootstrap's median bias (files written
    since that change say so per EPL) or, in older files, the plain percentile interval."""
    entries = [
        v
        for qs in (metrics.get("epl") or {}).values()
        if isinstance(qs, Mapping)
        for v in qs.values()
        if isinstance(v, Mapping)
    ]
    if any(e.get("interval") for e in entries):
        return (
            "95% interval: the bootstrap percentile interval (200 resamples of the residuals) "
            "shifted by the resamples' median bias, so it contains the EPL; it covers the spread "
            "of the EPL of this many residuals, not its bias as an estimate of the privacy loss "
            "(docs/metrics.md, “The interval”)."
        )
    return (
        "95% interval: the plain bootstrap percentile interval of an older file, which need not "
        "contain the EPL (replay the run for the shifted interval; docs/metrics.md)."
    )


def epl_settings_text(metrics: Mapping[str, Any]) -> str:
    """What EPL density range a run's metrics.json used, and whether PF's numbers compare.

    Files written before ``epl_settings`` was recorded used ±1.5 × max(|P1|, |P99|) (PF's function
    defaults, not their published settings).
    """
    settings = metrics.get("epl_settings")
    if not isinstance(settings, Mapping):
        return (
            "EPL settings not recorded: this file predates them and used ±1.5 × max(|P1|, |P99|) "
            "(the defaults of Petti & Flaxman's function, not their published settings); do not "
            "compare these EPLs with PF's published values."
        )
    label = str(settings.get("label", ""))
    if settings.get("pf_published"):
        return f"EPL density range {label}: comparable with PF's published EPLs."
    return (
        f"EPL density range {label}: not comparable with PF's published EPLs, which used "
        "±1 × max(|P5|, |P95|)."
    )


def run_notes_html(metrics: Mapping[str, Any]) -> list[str]:
    """Notes beside a run's numbers: RI's folded schema (with σ), and the EPL table with its settings."""
    parts: list[str] = []
    note = metrics.get("schema_note")
    if isinstance(note, Mapping) and note.get("note"):
        parts.append(f"<p class='note'>{html.escape(str(note['note']))}</p>")
        rows = note.get("sigma_comparison") or []
        if rows:
            parts.append(
                f"<p>Noisy-measurement σ at ρ = {float(note.get('rho', 0)):g}: RI's RACEETH per "
                f"group vs production's HISPANIC × CENRACE ({html.escape(str(note.get('production_preset')))} "
                "shares) per cell and summed over a group's cells.</p>"
            )
            parts.append(table_html(list(rows)))
    epl = metrics.get("epl")
    if isinstance(epl, Mapping) and epl:
        rows = [
            {
                "geolevel": lv,
                "query": q,
                "EPL": v.get("epl"),
                "95% low": v.get("epl_low"),
                "95% high": v.get("epl_high"),
                "residuals": v.get("n_residuals"),
                "undefined because": v.get("reason") or "",
            }
            for lv, qs in epl.items()
            if isinstance(qs, Mapping)
            for q, v in qs.items()
            if isinstance(v, Mapping)
        ]
        rows = spine_sorted(rows, metrics)
        parts.append("<h4>Empirical privacy loss (PF), with its bootstrap interval</h4>")
        parts.append(f"<p class='note'>{html.escape(epl_settings_text(metrics))}</p>")
        parts.append(f"<p>{html.escape(interval_text(metrics))}</p>")
        parts.append(table_html(rows))
    return parts


def run_title(metrics: Mapping[str, Any]) -> str:
    """``"Run #3: PHSafe on synthetic_us [states 44], seed 2020"`` (run number, data and seed)."""
    engine = {"phsafe": "PHSafe", "topdown": "TopDown"}.get(str(metrics.get("engine")), "run")
    return (
        f"Run #{metrics.get('run_id', '?')}: {engine} on {metrics.get('data', 'unnamed data')}, "
        f"seed {metrics.get('seed', '?')}"
    )
