"""The Results page's tables of a TopDown run: MAE by geolevel × query, predicted vs measured, Blau bias.

TDA's error definitions (docs/science.md §5) as recorded in the run's metrics; tables download as CSV.
"""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from pages.results_parts.common import LAYOUT, chart, csv_download
from phexplore import api as R
from phexplore.app.naming import display_frame


def mae_section(record: R.RunRecord) -> None:
    mae = record.tables["mae"]
    order = list(dict.fromkeys(record.tidy["geolevel"]))
    pivot = mae.pivot_table(index="geolevel", columns="query", values="mae", sort=False)
    pivot = pivot.reindex([lv for lv in order if lv in pivot.index])
    fig = go.Figure(
        go.Heatmap(
            z=pivot.to_numpy(float),
            x=list(pivot.columns),
            y=list(pivot.index),
            text=[[f"{v:,.2f}" for v in row] for row in pivot.to_numpy(float)],
            texttemplate="%{text}",
            colorscale="Blues",
            colorbar={"title": {"text": "MAE (persons)"}},
        )
    )
    fig.update_yaxes(autorange="reversed", title="Geolevel")
    fig.update_xaxes(title="Query group")
    fig.update_layout(
        title=f"{record.scenario}: mean absolute error by geolevel × query (run #{record.id})",
        **LAYOUT,
    )
    chart(fig, f"run{record.id}_mae")
    st.dataframe(display_frame(mae), hide_index=True, width="stretch")
    csv_download(mae, f"run{record.id}_mae", f"mae_{record.id}")
    prediction_section(record)


def prediction_section(record: R.RunRecord) -> None:
    """Predicted RMSE of the published counts (docs/science.md §7, before the run) beside the
    measured one, each row flagged where it is outside the validated range."""
    pred = record.tables.get("prediction")
    st.subheader("Predicted vs measured RMSE of the published counts")
    if pred is None or pred.empty:
        st.caption(
            "No prediction for this run's spine (the prediction covers the conventional one)."
        )
        return
    st.caption(
        "Predicted before any run from the allocation, the spine's fan-outs and the data's counts "
        "(exact least-squares covariance, corrected for non-negativity and rounding; "
        "docs/prediction.md). One run is one draw: levels with few geounits scatter around the "
        "prediction. 'Model holds' is False where the row lies outside the range where the "
        "prediction was validated against repeated runs (allocation, ρ, level, mean count per "
        "cell); 'Why not validated' says why."
    )
    sample = R.prediction_sample_sentence(pred)
    if sample:
        st.caption(sample)
    fig = go.Figure()
    x = pred["geolevel"] + " · " + pred["query"]
    fig.update_xaxes(title="Geolevel · query group")
    fig.add_trace(go.Bar(x=x, y=pred["measured_rmse"], name="measured (this run)"))
    fig.add_trace(go.Bar(x=x, y=pred["predicted_rmse"], name="predicted"))
    fig.update_layout(
        title=f"{record.scenario}: RMSE of published counts, predicted vs measured (run #{record.id})",
        barmode="group",
        yaxis={"title": "RMSE (persons)", "type": "log"},
        **LAYOUT,
    )
    chart(fig, f"run{record.id}_prediction")
    st.dataframe(
        display_frame(
            pred,
            extra={
                "model_holds": "Model holds (validated range)",
                "sigma": "Noisy-measurement σ (persons)",
            },
        ),
        hide_index=True,
        width="stretch",
    )
    csv_download(pred, f"run{record.id}_prediction", f"pred_{record.id}")
    entities = record.tables.get("entity_prediction")
    if entities is not None and not entities.empty:
        st.caption(
            "Off-spine entities (pooled over each set's entities; a set of one entity gives one "
            "error per run):"
        )
        st.dataframe(entities, hide_index=True, width="stretch")


def blau_section(record: R.RunRecord) -> None:
    bias = record.tables.get("blau_bias")
    if bias is None or bias.empty:
        st.info("Blau-index bias needs the race-ethnicity attribute (RACEETH) in the data.")
        return
    st.caption(
        "Blau index = 1 − Σ p² over eight race-ethnicity groups, computed on the true data; "
        "quintile 1 = most homogeneous. TDA Table 13 found homogeneous areas biased up and "
        "diverse areas biased down. Levels are the run's spine levels and the tabulation "
        "geographies summed from its blocks (block groups, tracts …): on an optimized or "
        "AIAN-style spine, `Block_Group` (tabulation) sits beside `Optimized_Block_Group` "
        "(spine); the column *geography* says which."
    )
    index = ["geolevel", "geography"] if "geography" in bias.columns else ["geolevel"]
    table = bias.pivot_table(
        index=index, columns="quintile", values="mean_signed_error", sort=False
    )
    table.columns = [f"Q{int(c)}" for c in table.columns]
    fig = go.Figure()
    for geolevel, part in bias.groupby("geolevel", sort=False):
        fig.add_trace(
            go.Bar(
                x=[f"Q{int(q)}" for q in part["quintile"]],
                y=part["mean_signed_error"],
                name=str(geolevel),
            )
        )
    fig.update_layout(
        title=f"{record.scenario}: mean signed error of total population by Blau quintile (run #{record.id})",
        barmode="group",
        xaxis_title="Blau-index quintile (1 = homogeneous)",
        yaxis_title="Mean signed error (persons)",
        **LAYOUT,
    )
    chart(fig, f"run{record.id}_blau")
    st.dataframe(display_frame(table.reset_index()), hide_index=True, width="stretch")
    csv_download(bias, f"run{record.id}_blau_bias", f"blau_{record.id}")
