"""The Results page's on/off-spine MAE (SPN §7) and PHSafe's noise vs truncation error (PHS §7.1)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from pages.results_parts.common import LAYOUT, chart, csv_download, run_title
from phexplore import api as R
from phexplore.app.naming import cell_label, display_frame


def spine_section(record: R.RunRecord) -> None:
    conv = record.metrics.get("conventional_mae")
    ent = record.metrics.get("entity_mae")
    if not conv and not ent:
        st.info(
            "Run with off-spine entities (Run page: Providence wards, with Providence County 44007 "
            "in the subset) to compare on-spine and off-spine MAE (SPN Tables 2–3)."
        )
        return
    rows = [
        {"kind": "on-spine", "unit": str(k), "mae": v}
        for k, v in (conv or {}).items()
        if isinstance(v, int | float)
    ]
    osed = record.metrics.get("osed") or {}
    for name, value in (ent or {}).items():
        if isinstance(value, dict):
            rows += [
                {"kind": "off-spine", "unit": f"{name}: {k}", "mae": v}
                for k, v in value.items()
                if isinstance(v, int | float)
            ]
        elif isinstance(value, int | float):
            label = f"{name} (mean OSED {osed[name]:.1f})" if name in osed else str(name)
            rows.append({"kind": "off-spine", "unit": label, "mae": value})
    frame = pd.DataFrame(rows)
    if frame.empty:
        st.json({"conventional_mae": conv, "entity_mae": ent})
        return
    fig = go.Figure()
    for kind, part in frame.groupby("kind", sort=False):
        fig.add_trace(go.Bar(x=part["unit"], y=part["mae"], name=str(kind)))
    fig.update_layout(
        title=run_title("Total-population MAE on and off the spine", record),
        xaxis_title="Geounit",
        yaxis_title="MAE (persons)",
        **LAYOUT,
    )
    chart(fig, f"run{record.id}_spine")
    csv_download(frame, f"run{record.id}_spine_mae", f"spine_{record.id}")


def phsafe_sections(record: R.RunRecord) -> None:
    le = record.tables["level_errors"]
    if le.empty or "mae_noise" not in le:
        st.info("This PHSafe run measured nothing with noise (non-private run).")
        return
    le = le.assign(
        cell=[cell_label(t, str(lv)) for t, lv in zip(le["table"], le["level"], strict=True)]
    )
    scale = record.settings.get("scale")
    trunc = le["mae_truncation"] / scale if scale else le["mae_truncation"]
    trunc_name = (
        f"truncation (τ), PROJECTED to full scale (×{1 / scale:,.0f})"
        if scale
        else "truncation (τ)"
    )
    st.caption(
        "Noise vs truncation at one scale: noise does not grow with population, truncation error "
        "does. "
        + (
            f"The data hold {scale:g} of the full population (declared by the sample), so "
            f"truncation error is projected ×{1 / scale:,.0f} to full scale — a projection that "
            "assumes the same household-size mix."
            if scale
            else "No scale is declared for these data: they are taken as the full population."
        )
    )
    # Horizontal bars: the 46 table · level names read unrotated, one row each (full width).
    fig = go.Figure()
    fig.add_trace(go.Bar(y=le["cell"], x=le["mae_noise"], name="noise", orientation="h"))
    fig.add_trace(go.Bar(y=le["cell"], x=trunc, name=trunc_name, orientation="h"))
    fig.update_layout(
        title=run_title("Noise vs truncation error by table and level", record),
        barmode="group",
        yaxis={"title": "Table · level", "autorange": "reversed"},
        xaxis_title="Mean absolute error (persons or households)",
        height=140 + 26 * len(le),
    )
    chart(fig, f"run{record.id}_noise_vs_truncation")
    c1, c2 = st.columns(2)
    with c2:
        fig2 = go.Figure()
        fig2.add_trace(
            go.Scatter(
                x=le["analytic_moe"],
                y=le["empirical_moe"],
                mode="markers",
                text=le["cell"],
                name="table · level",
            )
        )
        top = float(max(le["analytic_moe"].max(), le["empirical_moe"].max())) * 1.1
        fig2.add_trace(
            go.Scatter(
                x=[0, top],
                y=[0, top],
                mode="lines",
                name="empirical = analytic",
                line={"dash": "dot", "color": "gray"},
            )
        )
        fig2.update_layout(
            title=run_title(
                f"Empirical vs analytic 90% MOE ({record.settings.get('trials')} trials)", record
            ),
            xaxis_title="Analytic 90% MOE (persons or households)",
            yaxis_title="Empirical 90% MOE (persons or households)",
            **LAYOUT,
        )
        chart(fig2, f"run{record.id}_moe_check", half=True)
    st.dataframe(
        display_frame(le, drop=["cell"]),
        hide_index=True,
        width="stretch",
        alt=f"Noise and truncation error by table and level, run #{record.id}",
    )
    scaled = record.tables.get("truncation_scale")
    if scaled is not None and not scaled.empty:
        st.markdown("**Truncation error per 1,000 persons and projected to full scale**")
        st.dataframe(
            display_frame(scaled),
            hide_index=True,
            width="stretch",
            alt="Truncation error per 1,000 persons and projected to full scale",
        )
    csv_download(record.tables["level_errors"], f"run{record.id}_level_errors", f"le_{record.id}")
