"""Results page: what the runs of this session did — error, bias, empirical privacy loss.

Thin page: every statistic comes from :mod:`engine.metrics` (MAE tables, Blau-quintile bias, EPL
with its interval and curves, the ρ sweep and SRS trade-off) or from the PHSafe engine's error
analysis, as kept by the Run page in :class:`phexplore.api.RunRecord`. Charts are Plotly
(download with the camera icon) and labelled with the scenario; tables download as CSV. A run of
the session, or one recorded in a metrics.json or scenario file, can be replayed here
(:mod:`pages.run_parts.replay`, :mod:`phexplore.api.replay`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from pages.run_parts import replay
from pages.run_parts.jobs import next_run_id
from phexplore import api as R
from phexplore.api.budgets import PHExploreError, epsilon_for_delta
from phexplore.app import state as S
from phexplore.app.charts import readable
from phexplore.app.naming import cell_label, display_frame

LAYOUT = {"height": 420}


def _most_residuals(tidy: pd.DataFrame) -> str:
    """The geolevel whose TOTAL query has the most geounits (EPL is steadier with more residuals)."""
    part = tidy[tidy["query"] == "TOTAL"] if (tidy["query"] == "TOTAL").any() else tidy
    return str(part.groupby("geolevel", sort=False).size().idxmax())


def _chart(fig: go.Figure, name: str, *, half: bool = False) -> None:
    """A readable chart; ``half``: it shares the row with another (titles wrap sooner)."""
    st.plotly_chart(
        readable(fig, title_chars=42 if half else 70),
        config={"toImageButtonOptions": {"filename": name}},
    )


def _csv(frame: pd.DataFrame, name: str, key: str) -> None:
    st.download_button(
        f"Download {name} (CSV)",
        R.tidy_bytes(frame, "csv"),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=key,
    )


def _mae_section(record: R.RunRecord) -> None:
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
    _chart(fig, f"run{record.id}_mae")
    st.dataframe(display_frame(mae), hide_index=True, width="stretch")
    _csv(mae, f"run{record.id}_mae", f"mae_{record.id}")
    _prediction_section(record)


def _prediction_section(record: R.RunRecord) -> None:
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
    _chart(fig, f"run{record.id}_prediction")
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
    _csv(pred, f"run{record.id}_prediction", f"pred_{record.id}")
    entities = record.tables.get("entity_prediction")
    if entities is not None and not entities.empty:
        st.caption(
            "Off-spine entities (pooled over each set's entities; a set of one entity gives one "
            "error per run):"
        )
        st.dataframe(entities, hide_index=True, width="stretch")


def _blau_section(record: R.RunRecord) -> None:
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
    _chart(fig, f"run{record.id}_blau")
    st.dataframe(display_frame(table.reset_index()), hide_index=True, width="stretch")
    _csv(bias, f"run{record.id}_blau_bias", f"blau_{record.id}")


def _epl_section(record: R.RunRecord) -> None:
    tidy = record.tidy
    c1, c2 = st.columns(2)
    levels = list(dict.fromkeys(tidy["geolevel"]))
    default_level = _most_residuals(record.tidy)
    geolevel = c1.selectbox(
        "Geolevel",
        levels,
        index=levels.index(default_level),
        key=f"epl_lv_{record.id}",
        help="Level whose geounits give the residuals (estimate − true).",
    )
    queries = list(dict.fromkeys(tidy.loc[tidy["geolevel"] == geolevel, "query"]))
    query = c2.selectbox(
        "Query",
        queries,
        index=queries.index("TOTAL") if "TOTAL" in queries else 0,
        key=f"epl_q_{record.id}",
        help="The query group whose cells give the residuals.",
    )
    settings = R.run_epl_settings(record)
    d = R.epl_curves(
        record.token,
        int(record.settings.get("seed", 0)),
        geolevel,
        query,
        tidy,
        float(settings["percentile"]),
        float(settings["multiplier"]),
    )
    st.caption(f"EPL density range: {settings['label']} (set on the Run page).")
    m = st.columns(3)
    m[0].metric(
        "EPL",
        "undefined" if np.isnan(d["value"]) else f"{d['value']:.2f}",
        help="Empirical privacy loss (PF): max over x of |ln f(x)/f(x+1)| for the smoothed "
        "density f of the residuals. A noisy statistic: read it with its interval.",
    )
    m[1].metric(
        "95% bootstrap interval",
        "—" if np.isnan(d["low"]) else f"[{d['low']:.2f}, {d['high']:.2f}]",
    )
    m[2].metric("Residuals", f"{d['n']:,}")
    if d["reason"]:
        st.info(f"EPL is undefined here: {d['reason']}")
        return
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("Residuals and smoothed density", "EPL(x) = ln f(x)/f(x+1)")
    )
    fig.add_trace(
        go.Histogram(
            x=d["residuals"],
            histnorm="probability density",
            name="residuals",
            marker_color="#9ecae1",
        ),
        1,
        1,
    )
    fig.add_trace(
        go.Scatter(
            x=d["x"], y=d["density"], mode="lines", name="KDE density", line={"color": "#08519c"}
        ),
        1,
        1,
    )
    fig.add_trace(
        go.Scatter(
            x=d["x"][:-1], y=d["curve"], mode="lines", name="EPL(x)", line={"color": "#cb181d"}
        ),
        1,
        2,
    )
    fig.update_xaxes(title_text="estimate − true (persons)", row=1, col=1)
    fig.update_yaxes(title_text="density (per person)", row=1, col=1)
    fig.update_xaxes(title_text="x (persons)", row=1, col=2)
    fig.update_yaxes(title_text="EPL(x) (nats)", row=1, col=2)
    fig.update_layout(
        title=f"{record.scenario}: EPL of {query} at {geolevel} (run #{record.id}; PF Fig. 1)",
        **LAYOUT,
    )
    _chart(fig, f"run{record.id}_epl_{geolevel}_{query}")
    _csv(record.tables["epl"], f"run{record.id}_epl", f"epl_{record.id}")


def _sweep_section(record: R.RunRecord, runs: list[R.RunRecord]) -> None:
    exp = record.experiment
    peers = [
        r for r in runs if r.engine == "topdown" and r.settings["data"] == record.settings["data"]
    ]
    if exp is None and len(peers) < 2:
        st.info(
            "Run a budget sweep (Run page → 'Also run a budget sweep') or several runs on the "
            "same data at different budgets to see EPL and error against ρ."
        )
        return
    c1, c2 = st.columns(2)
    levels = list(dict.fromkeys(record.tidy["geolevel"]))
    default_level = _most_residuals(record.tidy)
    geolevel = c1.selectbox(
        "Geolevel",
        levels,
        index=levels.index(default_level),
        key=f"sw_lv_{record.id}",
        help="Level whose geounits give the residuals (estimate − true).",
    )
    queries = list(dict.fromkeys(record.tidy["query"]))
    query = c2.selectbox(
        "Query",
        queries,
        index=queries.index("TOTAL") if "TOTAL" in queries else 0,
        key=f"sw_q_{record.id}",
        help="The query group whose cells give the residuals.",
    )
    what = "ε" if record.settings.get("mechanism") == "puredp" else "ρ"
    to_x, x_title, line_name = _budget_axis(record.settings.get("mechanism"))
    trade = None
    if exp is not None:
        try:
            trade = exp.tradeoff(geolevel, query, error="mae")
        except Exception as exc:  # a ValidationError naming the missing level/query
            st.info(str(exc))
    fig = go.Figure()
    xs: list[float] = []
    if trade is not None:
        # Intervals as the engine defines them: across-seed range with several seeds, else the
        # bootstrap interval (ExperimentResult.tradeoff).
        part = trade[trade["design"] == exp.engine]
        x = [to_x(float(b)) for b in part["parameter"]]
        xs += x
        fig.add_trace(
            go.Scatter(
                x=x,
                y=part["epl"],
                mode="lines+markers",
                name="sweep (mean over seeds)",
                error_y=_epl_bars(part),
                text=[
                    f"{what} = {b:g}, n = {n:,} residuals"
                    for b, n in zip(part["parameter"], part["n_residuals"], strict=True)
                ],
            )
        )
    peers = [r for r in peers if r.settings.get("mechanism") == record.settings.get("mechanism")]
    if len(peers) >= 2:
        rows = []
        for r in peers:
            e = r.tables["epl"]
            row = e[(e["geolevel"] == geolevel) & (e["query"] == query)]
            if not row.empty:
                rows.append({"budget": r.rho, "run": r.id, **row.iloc[0].to_dict()})
        pts = pd.DataFrame(rows)
        if not pts.empty:
            x = [to_x(float(b)) for b in pts["budget"]]
            xs += x
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=pts["epl"],
                    mode="markers",
                    error_y=_epl_bars(pts),
                    text=[
                        f"run #{i}: {what} = {b:g}, n = {n:,} residuals"
                        for i, b, n in zip(
                            pts["run"], pts["budget"], pts["n_residuals"], strict=True
                        )
                    ],
                    name="session runs",
                    marker={"size": 10},
                )
            )
    finite = [v for v in xs if np.isfinite(v) and v > 0]
    if finite:
        lo, hi = min(finite) / 2, max(finite) * 2
        fig.add_trace(
            go.Scatter(
                x=[lo, hi],
                y=[lo, hi],
                mode="lines",
                name=line_name,
                line={"dash": "dot", "color": "gray"},
            )
        )
    reference, note = R.pf_reference_epl(R.run_epl_settings(record))
    if reference is not None:
        for (ref_level, part), dash in zip(
            reference.groupby("geolevel", sort=False), ("dash", "dot"), strict=False
        ):
            fig.add_trace(
                go.Scatter(
                    x=part["epsilon"],
                    y=part["epl"],
                    mode="lines+markers",
                    name=f"PF 1940 published: {ref_level} total (ε)",
                    line={"color": "#969696", "dash": dash},
                    marker={"symbol": "diamond-open"},
                )
            )
    fig.update_xaxes(type="log", title=x_title + ", unitless")
    fig.update_yaxes(type="log", title="EPL (nats; bars: interval)")
    fig.update_layout(title=f"{record.scenario}: EPL vs {what} — {query} at {geolevel}", **LAYOUT)
    _chart(fig, f"run{record.id}_epl_vs_budget")
    st.caption(note)
    if trade is not None:
        fig2 = go.Figure()
        for design, part in trade.groupby("design", sort=False):
            fig2.add_trace(
                go.Scatter(
                    x=part["epl"],
                    y=part["error"],
                    mode="lines+markers",
                    name=str(design).upper(),
                    error_x=_epl_bars(part),
                    text=[
                        f"{'fraction' if design == 'srs' else what} = {p:g}, n = {n:,} residuals"
                        for p, n in zip(part["parameter"], part["n_residuals"], strict=True)
                    ],
                )
            )
        fig2.update_xaxes(title="EPL (empirical privacy loss, nats; bars: interval)")
        fig2.update_yaxes(title="MAE (persons)")
        fig2.update_layout(
            title=f"{record.scenario}: error–privacy trade-off, TopDown vs simple random sampling (PF Fig. 2)",
            **LAYOUT,
        )
        _chart(fig2, f"run{record.id}_tradeoff_srs")
        _csv(trade, f"run{record.id}_tradeoff", f"trade_{record.id}")


def _epl_bars(part: pd.DataFrame) -> dict[str, object]:
    """Asymmetric error bars from an EPL table's ``epl_low``/``epl_high`` (engine intervals)."""
    epl = part["epl"].to_numpy(float)
    return {
        "type": "data",
        "symmetric": False,
        "array": part["epl_high"].to_numpy(float) - epl,
        "arrayminus": epl - part["epl_low"].to_numpy(float),
    }


def _budget_axis(mechanism: str | None) -> tuple[Callable[[float], float], str, str]:
    """x of the EPL-vs-budget chart: ε itself for pure DP, else ε at the session's δ of each ρ.

    EPL is comparable to ε, not ρ (docs/science.md §5): a zCDP run's ρ is converted with the session's δ and
    conversion so the diagonal is the same reference in both cases.
    """
    if mechanism == "puredp":
        return float, "Budget ε (pure DP)", "EPL = ε"
    s = st.session_state
    delta, conversion = float(s[S.DELTA]), str(s[S.CONVERSION])

    def to_x(rho: float) -> float:
        return float(epsilon_for_delta(rho, delta, conversion))

    title = f"ε at δ = {S.fmt_delta(delta)} of the run's ρ ({S.conversion_label(conversion)})"
    return to_x, title, f"EPL = ε (δ = {S.fmt_delta(delta)})"


def _spine_section(record: R.RunRecord) -> None:
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
        title=f"{record.scenario}: total-population MAE on and off the spine (run #{record.id})",
        xaxis_title="Geounit",
        yaxis_title="MAE (persons)",
        **LAYOUT,
    )
    _chart(fig, f"run{record.id}_spine")
    _csv(frame, f"run{record.id}_spine_mae", f"spine_{record.id}")


def _phsafe_sections(record: R.RunRecord) -> None:
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
        title=f"{record.scenario}: noise vs truncation error by table and level (run #{record.id})",
        barmode="group",
        yaxis={"title": "Table · level", "autorange": "reversed"},
        xaxis_title="Mean absolute error (persons or households)",
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
        height=140 + 26 * len(le),
    )
    _chart(fig, f"run{record.id}_noise_vs_truncation")
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
            title=f"{record.scenario}: empirical vs analytic 90% MOE ({record.settings.get('trials')} trials)",
            xaxis_title="Analytic 90% MOE (persons or households)",
            yaxis_title="Empirical 90% MOE (persons or households)",
            **LAYOUT,
        )
        _chart(fig2, f"run{record.id}_moe_check", half=True)
    st.dataframe(display_frame(le, drop=["cell"]), hide_index=True, width="stretch")
    scaled = record.tables.get("truncation_scale")
    if scaled is not None and not scaled.empty:
        st.markdown("**Truncation error per 1,000 persons and projected to full scale**")
        st.dataframe(display_frame(scaled), hide_index=True, width="stretch")
    _csv(record.tables["level_errors"], f"run{record.id}_level_errors", f"le_{record.id}")


FOLDER_PATH = "res_folder_path"
FOLDER_PROBLEM = "res_folder_problem"


def _open_folder_clicked() -> None:
    """Open the typed run folder as a run of this session (refused folders leave a message)."""
    s = st.session_state
    runs: list[R.RunRecord] = s[S.RUNS]
    try:
        record = R.folder_record(
            s.get(FOLDER_PATH, ""), next_run_id(), s.get(S.SCENARIO_NAME, "Folder")
        )
    except PHExploreError as exc:
        s[FOLDER_PROBLEM] = str(exc)
        return
    s[FOLDER_PROBLEM] = None
    runs.append(record)
    s["res_run"] = record.id


def _open_folder(runs: list[R.RunRecord]) -> None:
    with st.expander("Open a run folder written by the command line", expanded=not runs):
        st.caption(
            "The `--out` folder of `phexplore run topdown` or `run replay`, with CSV or Parquet "
            "tables (dense or sparse). It is checked first: an incomplete, altered or truncated "
            f"folder is refused. At most {R.APP_MAX_ROWS:,} dense estimate rows are kept; a larger "
            "run keeps its smallest queries (TOTAL first) and says which were left out."
        )
        st.text_input("Run folder", key=FOLDER_PATH, placeholder="out/td")
        st.button(
            "Open folder",
            key="res_open_folder",
            on_click=S.guarded(_open_folder_clicked, "results: open_folder"),
        )
        problem = st.session_state.get(FOLDER_PROBLEM)
        if problem:
            st.error(problem)


def _left_out_caption(record: R.RunRecord) -> None:
    """Which queries the record's dense table leaves out (over the app's row limit)."""
    left_out = record.settings.get("queries_left_out")
    if left_out:
        st.caption(
            "Queries left out of the residual charts and the estimates download (more dense rows "
            "than the app holds; their MAE and EPL are in metrics.json): " + ", ".join(left_out)
        )


def _folder_section(record: R.RunRecord) -> None:
    """What an opened folder holds, its files in the format written, CSV copies of small tables."""
    settings = record.settings
    outputs = settings.get("outputs") or {}
    st.caption(
        f"Opened from {settings['folder']}: tables as {outputs.get('format', 'csv')}"
        + (
            "; " + str(outputs.get("note", "estimates are sparse"))
            if outputs.get("sparse_estimates")
            else ""
        )
        + "."
    )
    with st.expander("Files of this run folder"):
        files = R.folder_files(record)
        cols = st.columns(3)
        for i, item in enumerate(files):
            cols[i % 3].download_button(
                item.label,
                item.data,
                file_name=item.name,
                mime=item.mime,
                key=f"folder_dl_{record.id}_{i}",
                on_click="ignore",
            )


def render() -> None:
    """Draw the page."""
    S.init_state()
    s = st.session_state
    st.title("Results")
    replay.show_new_replay()
    replay.messages()
    runs: list[R.RunRecord] = s[S.RUNS]
    _open_folder(runs)
    if not runs:
        st.info(
            "No runs yet. Start one on the Run page, or open a run folder written by "
            "`phexplore run topdown` above; results stay in this session."
        )
        st.page_link("pages/run.py", label="Go to the Run page", icon=":material/play_arrow:")
        replay.replay_from_file()
        replay.replay_progress()
        return
    st.warning(R.TRUTH_NOTE, icon=":material/shield:")
    labels = {r.id: r.label for r in runs}
    run_id = st.selectbox(
        "Run",
        list(labels)[::-1],
        format_func=labels.get,
        key="res_run",
        help="Runs of this session, newest first.",
    )
    record = next(r for r in runs if r.id == run_id)
    replay.replay_session_run(record)
    replay.replay_from_file()
    replay.replay_progress()
    replay.replay_outcome(record)
    if record.settings.get("folder"):
        _folder_section(record)
    _left_out_caption(record)
    if record.engine == "phsafe":
        _phsafe_sections(record)
        return
    spent = R.budget_caption(record)
    if spent:
        st.caption(spent)
    structural = (record.metrics or {}).get("structural_zeros") or {}
    if structural.get("note"):
        held = structural.get("structural_zeros_held")
        st.caption(("Constraints: " if held else "Not held: ") + str(structural["note"]))
    folded = (record.metrics or {}).get("schema_note") or {}
    if folded.get("note"):
        st.info(str(folded["note"]), icon=":material/info:")
        if folded.get("sigma_comparison"):
            with st.expander(
                f"σ on RI vs production's HISPANIC × CENRACE at ρ = {folded['rho']:g}"
            ):
                st.dataframe(
                    display_frame(pd.DataFrame(folded["sigma_comparison"])),
                    hide_index=True,
                    width="stretch",
                )
    tabs = st.tabs(["MAE", "Blau-index bias", "EPL", "EPL vs budget · SRS", "On/off spine"])
    with tabs[0]:
        _mae_section(record)
    with tabs[1]:
        _blau_section(record)
    with tabs[2]:
        _epl_section(record)
    with tabs[3]:
        _sweep_section(record, runs)
    with tabs[4]:
        _spine_section(record)


render()
