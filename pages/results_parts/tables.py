"""The Results page's tables of a TopDown run: absolute error (TDA's and per cell) by geolevel ×
query, TDA Tables 9–12 beside it, predicted vs measured, Blau bias.

TDA's error definitions (docs/science.md §5) as recorded in the run's metrics; tables download as CSV.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from pages.results_parts.common import LAYOUT, chart, csv_download, run_title
from phexplore import api as R
from phexplore.app.naming import display_frame

PREDICTION_KEY_COLUMNS = [
    "geolevel",
    "query",
    "predicted_rmse",
    "measured_rmse",
    "ratio",
    "model_holds",
]
"""The predicted-vs-measured table's columns shown by default (the others behind a toggle)."""
MAE_KEY_COLUMNS = ["geolevel", "query", "mae", "median_ae", "mean_error"]
"""The per-cell error table's columns shown by default (the others behind a toggle)."""


def _heatmap(pivot: pd.DataFrame, colour_title: str, title: str) -> go.Figure:
    fig = go.Figure(
        go.Heatmap(
            z=pivot.to_numpy(float),
            x=list(pivot.columns),
            y=list(pivot.index),
            text=[[f"{v:,.2f}" for v in row] for row in pivot.to_numpy(float)],
            texttemplate="%{text}",
            colorscale="Blues",
            colorbar={"title": {"text": colour_title}},
        )
    )
    fig.update_yaxes(autorange="reversed", title="Geolevel")
    fig.update_xaxes(title="Query group")
    fig.update_layout(title=title, **LAYOUT)
    return fig


def _ordered(pivot: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    known = [lv for lv in order if lv in pivot.index]
    return pivot.reindex(known + [lv for lv in pivot.index if lv not in known])


def mae_section(record: R.RunRecord) -> None:
    """TDA's absolute error first (Tables 9–10), TDA's tables beside it, then the per-cell MAE."""
    view = R.tda_view(record.metrics or {})
    order = list(dict.fromkeys([*(record.settings.get("levels") or []), *record.tidy["geolevel"]]))
    st.subheader("Absolute error, TDA's definition")
    st.caption(R.TDA_DEFINITION + " " + view.note + ".")
    st.caption(R.universe_caption(record))
    if not view.tda_mae.empty:
        pivot = view.tda_mae.pivot_table(
            index="geolevel", columns="query", values="tda_mae", sort=False
        )
        chart(
            _heatmap(
                _ordered(pivot, order),
                "Absolute error (persons)",
                run_title(
                    "Absolute error per geounit (summed over a query's cells; TDA Tables 9–10) "
                    "by geolevel × query",
                    record,
                ),
            ),
            f"run{record.id}_tda_mae",
        )
        st.dataframe(
            display_frame(view.tda_mae),
            hide_index=True,
            width="stretch",
            alt=f"Absolute error per geounit (TDA's definition) by geolevel and query, run #{record.id}",
        )
        csv_download(view.tda_mae, f"run{record.id}_tda_mae", f"tda_{record.id}")
    _tda_reference_section(record, view)
    mae = record.tables["mae"]
    st.subheader("Per-cell error")
    st.caption(R.PER_CELL_DEFINITION)
    pivot = mae.pivot_table(index="geolevel", columns="query", values="mae", sort=False)
    chart(
        _heatmap(
            _ordered(pivot, order),
            "MAE per cell (persons)",
            run_title("Mean absolute error PER CELL by geolevel × query", record),
        ),
        f"run{record.id}_mae",
    )
    # The key columns fit 1366 px without sideways scrolling; the rest on demand.
    every = st.toggle(
        "Show every column (cells, mean error, 95th percentile, maximum, TDA's definition)",
        key=f"mae_all_columns_{record.id}",
        persist_state="session",
    )
    shown = mae if every else mae[[c for c in MAE_KEY_COLUMNS if c in mae.columns]]
    st.dataframe(
        display_frame(shown),
        hide_index=True,
        width="stretch",
        alt=f"Mean absolute error per cell by geolevel and query, run #{record.id}",
    )
    csv_download(mae, f"run{record.id}_mae", f"mae_{record.id}")
    prediction_section(record)


def _tda_reference_section(record: R.RunRecord, view: R.TDAView) -> None:
    """TDA Tables 9–12 beside the run, for production's persons allocation only."""
    st.subheader("Beside TDA's published tables (production settings, 2010 CEF)")
    if not view.comparable:
        st.caption(f"TDA Tables 9–12 are not drawn beside this run: {view.why}.")
        return
    comparison = view.comparison
    if comparison.empty:
        st.caption("This run has none of the levels and queries of TDA Tables 9–10.")
        return
    fig = go.Figure()
    x = comparison["query"] + " · " + comparison["geolevel"]
    fig.add_trace(go.Bar(x=x, y=comparison["this_run"], name=f"this run (#{record.id})"))
    fig.add_trace(
        go.Bar(
            x=x,
            y=comparison["tda"],
            name="TDA published (baseline1)",
            marker={"color": "#969696"},
        )
    )
    fig.update_xaxes(title="Query group · geolevel")
    fig.update_layout(
        title=run_title("Absolute error per geounit, this run vs TDA Tables 9–10", record),
        barmode="group",
        yaxis={"title": "Absolute error (persons; log scale)", "type": "log"},
        **LAYOUT,
    )
    chart(fig, f"run{record.id}_tda_reference")
    st.caption(view.caption)
    st.dataframe(
        display_frame(comparison),
        hide_index=True,
        width="stretch",
        alt=f"Absolute error per geounit, this run beside TDA Tables 9–10, run #{record.id}",
    )
    csv_download(comparison, f"run{record.id}_vs_tda", f"vs_tda_{record.id}")
    if not view.size_classes.empty:
        st.markdown("**TOTAL error by size class of the true count (TDA Tables 11–12)**")
        st.dataframe(
            display_frame(view.size_classes),
            hide_index=True,
            width="stretch",
            alt="TOTAL error by size class of the true count (TDA Tables 11–12)",
        )


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
        title=run_title("RMSE of published counts, predicted vs measured", record),
        barmode="group",
        yaxis={"title": "RMSE (persons)", "type": "log"},
        **LAYOUT,
    )
    chart(fig, f"run{record.id}_prediction")
    # The key columns fit 1366 px without sideways scrolling; the rest on demand.
    every = st.toggle(
        "Show every column (σ, least-squares RMSE, mean count, geounits evaluated)",
        key=f"pred_all_columns_{record.id}",
        persist_state="session",
    )
    shown = pred if every else pred[[c for c in PREDICTION_KEY_COLUMNS if c in pred.columns]]
    st.dataframe(
        display_frame(
            shown,
            extra={
                "model_holds": "Model holds (validated range)",
                "sigma": "Noisy-measurement σ (persons)",
            },
        ),
        hide_index=True,
        width="stretch",
        alt=f"Predicted and measured RMSE of the published counts, run #{record.id}",
    )
    csv_download(pred, f"run{record.id}_prediction", f"pred_{record.id}")
    entities = record.tables.get("entity_prediction")
    if entities is not None and not entities.empty:
        st.caption(
            "Off-spine entities (pooled over each set's entities; a set of one entity gives one "
            "error per run):"
        )
        st.dataframe(
            entities, hide_index=True, width="stretch", alt="Predicted error of off-spine entities"
        )


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
        title=run_title("Mean signed error of total population by Blau quintile", record),
        barmode="group",
        xaxis_title="Blau-index quintile (1 = homogeneous)",
        yaxis_title="Mean signed error (persons)",
        **LAYOUT,
    )
    chart(fig, f"run{record.id}_blau")
    st.dataframe(
        display_frame(table.reset_index()),
        hide_index=True,
        width="stretch",
        alt=f"Mean signed error by Blau-index quintile, run #{record.id}",
    )
    csv_download(bias, f"run{record.id}_blau_bias", f"blau_{record.id}")
