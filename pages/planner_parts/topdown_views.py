"""The TopDown planner's views of per-query accuracy: the geolevel × query heatmap and the table of
every query, each with the working value beside the baseline's (Δ%).

Numbers from :func:`phexplore.app.planner_tables.topdown_frames` / :func:`~phexplore.app.planner_tables.
topdown_post_processed` (noisy-measurement σ and MOE: TDA App. B; published counts: docs/science.md
§7); deltas from :func:`phexplore.api.planning.with_baseline`. Queries held exact (TDA §5.2) are
labelled, never coloured.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from phexplore.api.budgets import HELD_EXACT
from phexplore.api.planning import with_baseline
from phexplore.app.charts import chart_title, log_colorbar, readable
from phexplore.app.committee import percent
from phexplore.app.naming import column_label, display_frame, geolevel_label

HEAT_LABELS = {
    "moe90": "noisy measurement: 90% MOE",
    "sigma": "noisy measurement: σ",
    "post_processed_moe": "published count: 90% MOE",
    "post_processed_rmse": "published count: RMSE",
}
VALUES = ("sigma", "moe90", "post_processed_rmse", "post_processed_moe")
KEYS = ("run", "geolevel", "query")


def compared(rows: pd.DataFrame, base: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with ``<value>_baseline``, ``_delta`` and ``_delta_pct`` for every value column
    (noisy values only where measured: an invariant has no σ)."""

    def records(frame: pd.DataFrame) -> list[dict]:
        measured = frame["status"] == "measured"
        clean = frame.assign(
            sigma=frame["sigma"].where(measured), moe90=frame["moe90"].where(measured)
        )
        return [
            {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
            for r in clean.to_dict("records")
        ]

    values = [v for v in VALUES if v in rows.columns]
    merged = with_baseline(records(rows), records(base) if not base.empty else [], KEYS, values)
    return pd.DataFrame(merged)


def query_order(queries: list[str]) -> list[str]:
    """The committee's queries first (TOTAL, VOTINGAGE, HISPANIC, race), then the others as given."""
    first = [q for q in ("TOTAL", "VOTINGAGE", "HISPANIC", "CENRACE", "RACEETH") if q in queries]
    return first + [q for q in queries if q not in first]


def heatmap(sub: pd.DataFrame, value: str, title: str) -> go.Figure:
    """Query × geolevel heatmap (queries as rows, so every name reads unrotated; geolevels in spine
    order): colour = log₁₀ of the working value, text = the value and its Δ% vs the baseline; a
    published-count prediction outside its validated range is marked ⚠, the reason on hover."""
    levels = list(dict.fromkeys(sub["geolevel"]))
    flag_outside = value.startswith("post_processed") and "post_processed_holds" in sub.columns
    queries = query_order(list(dict.fromkeys(sub["query"])))
    cell = {(r["geolevel"], r["query"]): r for r in sub.to_dict("records")}
    z, text, hover = [], [], []
    for q in queries:
        zr, tr, hr = [], [], []
        for lv in levels:
            r = cell.get((lv, q))
            v = None if r is None else r.get(value)
            v = None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
            held = r is not None and r.get("status") == HELD_EXACT
            zr.append(math.log10(v) if v and v > 0 else np.nan)
            if held:
                tr.append("held exact")
                hr.append(f"{geolevel_label(lv)} · {q}: held exact (invariant)")
            elif v is None:
                tr.append("")
                hr.append(f"{geolevel_label(lv)} · {q}: not measured")
            else:
                rel = percent(r.get(f"{value}_delta_pct"))
                base = r.get(f"{value}_baseline")
                outside = flag_outside and r.get("post_processed_holds") is False
                reason = str(r.get("post_processed_reason") or "outside the validated range")
                tr.append(f"{v:,.1f}{' ⚠' if outside else ''}" + (f"<br>{rel}" if rel else ""))
                hr.append(
                    f"{geolevel_label(lv)} · {q}: {v:,.2f} persons"
                    + ("" if base is None else f" (baseline {float(base):,.2f}; {rel})")
                    + (f"<br>⚠ {reason}" if outside else "")
                )
        z.append(zr)
        text.append(tr)
        hover.append(hr)
    finite = [10**v for row in z for v in row if not math.isnan(v)]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[geolevel_label(lv) for lv in levels],
            y=queries,
            text=text,
            customdata=hover,
            texttemplate="%{text}",
            colorscale="Viridis",
            colorbar=log_colorbar(finite, column_label(value)),
            hovertemplate="%{customdata}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed", title="Query group")
    fig.update_xaxes(title="Geolevel (from the root down)")
    fig.update_layout(title=title, height=120 + 38 * len(queries))
    return readable(fig)


def heatmap_title(label: str, origin: str, universe: str) -> str:
    """Title from what is plotted: the measure, the budget ("modified from …") and the run."""
    return chart_title(
        f"{label[:1].upper()}{label[1:]} by geolevel × query", origin, f"{universe} run"
    )


# Short headers (the full meaning is in each column's help), so the key columns fit at 1366.
SHORT = {
    "Geolevel": ("Geolevel", "The geographic level, from the root down."),
    "Query group": ("Query", "The query group measured (TDA Table 1)."),
    "Noisy-measurement σ (persons)": ("σ noisy", "Standard deviation of the noisy measurement."),
    "Noisy-measurement 90% MOE (persons)": ("MOE noisy", "90% MOE of the noisy measurement."),
    "Published count RMSE (predicted, persons)": (
        "RMSE published",
        "Predicted RMSE of the published count (after least squares, non-negativity, rounding).",
    ),
    "Published count 90% MOE (predicted, persons)": (
        "MOE published",
        "Predicted 90% MOE of the published count.",
    ),
    "Mean count ≥ 1 (model validated)": (
        "Validated",
        "The mean count per cell is at least 1: the prediction's validated range.",
    ),
    "Measured?": ("Measured?", "Measured with noise, or held exact (invariant)."),
}


def queries_table(sub: pd.DataFrame, value: str, baseline: str, all_columns: bool) -> None:
    """Every query of the run: key columns (the four accuracy numbers, the shown one's baseline and
    Δ%) by default; shares, cells and ρ per query on demand."""
    extra = {
        "sigma": "Noisy-measurement σ (persons)",
        "moe90": "Noisy-measurement 90% MOE (persons)",
        f"{value}_baseline": f"{HEAT_LABELS[value]} — baseline",
        f"{value}_delta_pct": f"{HEAT_LABELS[value]} — Δ% vs baseline",
    }
    drop = [c for c in sub.columns if c.endswith(("_baseline", "_delta", "_delta_pct"))]
    drop = [c for c in drop if c not in extra]
    shown = display_frame(sub.drop(columns=drop), extra=extra)
    shown["Geolevel"] = shown["Geolevel"].map(geolevel_label)
    if f"{HEAT_LABELS[value]} — Δ% vs baseline" in shown.columns:
        shown[f"{HEAT_LABELS[value]} — Δ% vs baseline"] *= 100
    key = [
        "Geolevel",
        "Query group",
        "Noisy-measurement σ (persons)",
        "Noisy-measurement 90% MOE (persons)",
        "Published count RMSE (predicted, persons)",
        "Published count 90% MOE (predicted, persons)",
        f"{HEAT_LABELS[value]} — baseline",
        f"{HEAT_LABELS[value]} — Δ% vs baseline",
        "Measured?",
    ]
    order = [c for c in key if c in shown.columns]
    if all_columns:
        order += [c for c in shown.columns if c not in order]
    config = {
        col: st.column_config.NumberColumn(SHORT[col][0], help=SHORT[col][1], format="%.2f")
        for col in order
        if col in SHORT and col not in ("Geolevel", "Query group", "Measured?")
    }
    config.update(
        {
            col: st.column_config.TextColumn(SHORT[col][0], help=SHORT[col][1])
            for col in ("Geolevel", "Query group", "Measured?")
            if col in order
        }
    )
    config[f"{HEAT_LABELS[value]} — baseline"] = st.column_config.NumberColumn(
        "Baseline", help=f"{HEAT_LABELS[value]} of the baseline ({baseline}).", format="%.2f"
    )
    config[f"{HEAT_LABELS[value]} — Δ% vs baseline"] = st.column_config.NumberColumn(
        "Δ% vs baseline",
        help=f"(working − baseline) / baseline of the {HEAT_LABELS[value]}, in percent.",
        format="%+.1f%%",
    )
    st.dataframe(
        shown,
        hide_index=True,
        width="stretch",
        column_order=order,
        column_config=config,
        alt="Every query of the run: noisy-measurement and published-count accuracy, with the "
        "baseline and Δ%",
    )
