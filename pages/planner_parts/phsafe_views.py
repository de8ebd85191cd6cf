"""The PHSafe planner's views: the table of noise and margins of error with the baseline's MOE and
Δ beside each, and the MOE-vs-ρ chart with the working and the baseline levels marked.

Numbers from :func:`phexplore.app.planner_tables.phsafe_frames` (PHS §7.1: σ = Δ/√(2ρ), MOE bound ⌊zσ⌋,
exact discrete-Gaussian MOE); deltas from :func:`phexplore.api.planning.with_baseline`.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from phexplore.api.budgets import PHSAFE_DENOMINATOR_TABLES, PHSafeBudget
from phexplore.api.planning import with_baseline
from phexplore.app import planner_tables as T
from phexplore.app.charts import chart_title, readable
from phexplore.app.naming import table_label

KEYS = ("table", "level_key")
VALUES = ("moe_exact", "moe_bound", "rho_unbounded")
KEY_COLUMNS = [
    "Table",
    "Geography",
    "Population group",
    "MOE exact (90%)",
    "moe_exact_baseline",
    "moe_exact_delta",
    "moe_exact_delta_pct",
    "ρ (unbounded)",
    "rho_unbounded_delta_pct",
    "MOE target (90%)",
]


def compared(rows: pd.DataFrame, base_rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with the baseline's MOE and ρ, Δ and Δ% per (table, level)."""
    merged = with_baseline(rows.to_dict("records"), base_rows.to_dict("records"), KEYS, VALUES)
    return pd.DataFrame(merged)


def moe_table(rows: pd.DataFrame, base_rows: pd.DataFrame, baseline: str, details: bool) -> None:
    """Key columns by default (MOE working, baseline, Δ, Δ%; ρ and its Δ%); σ, bound, bounded ρ,
    τ and Δ on demand."""
    both = compared(rows, base_rows)
    shown = T.phsafe_display(both)
    for col in (
        "moe_exact_baseline",
        "moe_exact_delta",
        "moe_exact_delta_pct",
        "rho_unbounded_delta_pct",
    ):
        shown[col] = both[col].to_numpy()
    shown["moe_exact_delta_pct"] = shown["moe_exact_delta_pct"] * 100
    shown["rho_unbounded_delta_pct"] = shown["rho_unbounded_delta_pct"] * 100
    order = [c for c in KEY_COLUMNS if c in shown.columns]
    if details:
        order += [c for c in shown.columns if c not in order]
    st.dataframe(
        shown,
        hide_index=True,
        width="stretch",
        height=320,
        column_order=order,
        alt="Noise and 90% margins of error per table and population-group level, with the "
        "baseline's MOE and the difference",
        column_config={
            "Population group": st.column_config.TextColumn("Group"),
            "MOE exact (90%)": st.column_config.NumberColumn(
                "MOE", help="Exact 90% MOE of the working budget (discrete Gaussian).", format="%d"
            ),
            "moe_exact_baseline": st.column_config.NumberColumn(
                "Baseline", help=f"The same MOE under the baseline ({baseline}).", format="%d"
            ),
            "moe_exact_delta": st.column_config.NumberColumn(
                "Δ", help="Working − baseline MOE (persons or households).", format="%+d"
            ),
            "moe_exact_delta_pct": st.column_config.NumberColumn(
                "Δ%", help="(working − baseline) / baseline MOE, in percent.", format="%+.1f%%"
            ),
            "ρ (unbounded)": st.column_config.NumberColumn("ρ", format="%.6f"),
            "rho_unbounded_delta_pct": st.column_config.NumberColumn(
                "ρ Δ%",
                help="(working − baseline) / baseline ρ of the cell, in percent.",
                format="%+.1f%%",
            ),
            "MOE target (90%)": st.column_config.NumberColumn("Target", format="%.0f"),
            "ρ (bounded, 2×)": st.column_config.NumberColumn(format="%.6f"),
            "σ (persons)": st.column_config.NumberColumn(format="%.2f"),
        },
    )


def moe_vs_rho_figure(
    budget: PHSafeBudget,
    table: str,
    rows: pd.DataFrame,
    base_rows: pd.DataFrame,
    origin: str,
    baseline: str,
) -> go.Figure:
    """MOE bound against ρ for the table's sensitivity, the working levels and the baseline's."""
    delta_sens = budget.sensitivity(table)
    curve = T.moe_curve(float(delta_sens), budget.confidence)
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=curve["rho"], y=curve["moe_bound"], mode="lines", name=f"MOE bound, Δ = {delta_sens}"
        )
    )
    for frame, name, symbol in (
        (base_rows, f"baseline ({baseline})", "circle-open"),
        (rows, "working levels", "circle"),
    ):
        sel = frame[frame["table"] == table] if not frame.empty else frame
        if sel.empty:
            continue
        fig.add_trace(
            go.Scatter(
                x=sel["rho_unbounded"],
                y=sel["moe_bound"],
                mode="markers",
                hovertext=[
                    f"{g} · {it}: ρ = {r:.6f}, MOE = {m:,} persons"
                    for g, it, r, m in zip(
                        sel["geo_level"],
                        sel["iteration_level"],
                        sel["rho_unbounded"],
                        sel["moe_bound"],
                        strict=True,
                    )
                ],
                marker={"size": 11 if symbol == "circle" else 15, "symbol": symbol,
                        "line": {"width": 2}},
                name=name,
            )
        )  # fmt: skip
    fig.update_xaxes(type="log", title="ρ of one level (unbounded zCDP budget, unitless)")
    unit = "households" if table in PHSAFE_DENOMINATOR_TABLES else "persons"
    fig.update_yaxes(type="log", title=f"90% MOE ({unit})")
    fig.update_layout(title=chart_title(f"MOE vs ρ for {table_label(table)}", origin), height=400)
    return readable(fig)
