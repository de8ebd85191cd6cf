"""The Results page's empirical privacy loss: EPL with its interval and curves, EPL vs budget, TopDown vs sampling.

Petti & Flaxman's EPL (docs/science.md §5, PF Fig. 1–2) as recorded in the run's metrics. Every
interval contains its EPL — the bootstrap percentile interval shifted by the resamples' median bias
(:func:`engine.metrics.epl.shifted_interval`, docs/metrics.md "The interval") — and a sentence says
what it covers; error bars are two-sided. An older file's plain percentile interval that misses its
point is said so.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from pages.results_parts.common import LAYOUT, chart, csv_download, most_residuals, run_title
from phexplore import api as R
from phexplore.api.budgets import epsilon_for_delta
from phexplore.app import state as S


def epl_section(record: R.RunRecord) -> None:
    tidy = R.universe_tidy(record)
    c1, c2 = st.columns(2)
    levels = list(dict.fromkeys(tidy["geolevel"]))
    default_level = most_residuals(record.tidy)
    geolevel = c1.selectbox(
        "Geolevel",
        levels,
        index=levels.index(default_level),
        key=f"epl_lv_{record.id}",
        persist_state="session",
        help="Level whose geounits give the residuals (estimate − true).",
    )
    queries = list(dict.fromkeys(tidy.loc[tidy["geolevel"] == geolevel, "query"]))
    query = c2.selectbox(
        "Query",
        queries,
        index=queries.index("TOTAL") if "TOTAL" in queries else 0,
        key=f"epl_q_{record.id}",
        persist_state="session",
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
    if geolevel == str((record.metrics or {}).get("error_universe", {}).get("level", "Block")):
        st.caption(R.universe_caption(record))
    m = st.columns(3)
    m[0].metric(
        "EPL",
        "undefined" if np.isnan(d["value"]) else f"{d['value']:.2f}",
        help="Empirical privacy loss (PF): max over x of |ln f(x)/f(x+1)| for the smoothed "
        "density f of the residuals. A noisy statistic: read it with its interval.",
    )
    m[1].metric(
        "95% interval (contains the EPL)",
        "—" if np.isnan(d["low"]) else f"[{d['low']:.2f}, {d['high']:.2f}]",
        help="Bootstrap percentile interval shifted by the resamples' median bias "
        "(docs/metrics.md, “The interval”).",
    )
    m[2].metric("Residuals", f"{d['n']:,}")
    if d["reason"]:
        st.info(f"EPL is undefined here: {d['reason']}")
        return
    if not np.isnan(d["low"]):
        st.markdown(interval_sentence(d))
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
        title=run_title(f"EPL of {query} at {geolevel} (PF Fig. 1)", record),
        **LAYOUT,
    )
    chart(fig, f"run{record.id}_epl_{geolevel}_{query}")
    csv_download(record.tables["epl"], f"run{record.id}_epl", f"epl_{record.id}")


def sweep_section(record: R.RunRecord, runs: list[R.RunRecord]) -> None:
    exp = record.experiment
    missed = False
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
    default_level = most_residuals(record.tidy)
    geolevel = c1.selectbox(
        "Geolevel",
        levels,
        index=levels.index(default_level),
        key=f"sw_lv_{record.id}",
        persist_state="session",
        help="Level whose geounits give the residuals (estimate − true).",
    )
    queries = list(dict.fromkeys(record.tidy["query"]))
    query = c2.selectbox(
        "Query",
        queries,
        index=queries.index("TOTAL") if "TOTAL" in queries else 0,
        key=f"sw_q_{record.id}",
        persist_state="session",
        help="The query group whose cells give the residuals.",
    )
    what = "ε" if record.settings.get("mechanism") == "puredp" else "ρ"
    to_x, x_title, line_name = budget_axis(record.settings.get("mechanism"))
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
        missed |= misses_point(part)
        fig.add_trace(
            go.Scatter(
                x=x,
                y=part["epl"],
                mode="lines+markers",
                name="sweep (mean over seeds)",
                error_y=epl_bars(part),
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
            missed |= misses_point(pts)
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=pts["epl"],
                    mode="markers",
                    error_y=epl_bars(pts),
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
    fig.update_yaxes(type="log", title="EPL (nats; bars: 95% interval)")
    fig.update_layout(title=run_title(f"EPL vs {what}: {query} at {geolevel}", record), **LAYOUT)
    chart(fig, f"run{record.id}_epl_vs_budget")
    st.caption(note)
    st.caption(
        "Bars: the across-seed range (min–max) with several seeds, else the 95% bootstrap "
        "interval, which contains its EPL and covers the spread of the EPL of this many "
        "residuals, not its bias as an estimate of the privacy loss (docs/metrics.md)."
        + (
            " Some bars come from older files whose plain percentile interval misses its point; "
            "they are drawn from the point to the interval's far end."
            if missed
            else ""
        )
    )
    if trade is not None:
        fig2 = go.Figure()
        for design, part in trade.groupby("design", sort=False):
            fig2.add_trace(
                go.Scatter(
                    x=part["epl"],
                    y=part["error"],
                    mode="lines+markers",
                    name=str(design).upper(),
                    error_x=epl_bars(part),
                    text=[
                        f"{'fraction' if design == 'srs' else what} = {p:g}, n = {n:,} residuals"
                        for p, n in zip(part["parameter"], part["n_residuals"], strict=True)
                    ],
                )
            )
        fig2.update_xaxes(title="EPL (empirical privacy loss, nats; bars: interval)")
        fig2.update_yaxes(title="MAE (persons)")
        fig2.update_layout(
            title=run_title(
                "Error–privacy trade-off, TopDown vs simple random sampling (PF Fig. 2)", record
            ),
            **LAYOUT,
        )
        chart(fig2, f"run{record.id}_tradeoff_srs")
        csv_download(trade, f"run{record.id}_tradeoff", f"trade_{record.id}")


def epl_bars(part: pd.DataFrame) -> dict[str, object]:
    """Two-sided error bars from an EPL table's ``epl_low``/``epl_high`` (engine intervals, which
    contain their EPL). An older file's percentile interval that misses its point gives a bar
    from the point to the interval's far end (never a negative length; :func:`misses_point`)."""
    epl = part["epl"].to_numpy(float)
    low, high = part["epl_low"].to_numpy(float), part["epl_high"].to_numpy(float)
    return {
        "type": "data",
        "symmetric": False,
        "array": np.maximum(high - epl, 0.0),
        "arrayminus": np.maximum(epl - low, 0.0),
    }


def misses_point(part: pd.DataFrame) -> bool:
    """Whether some interval of an EPL table lies beside its EPL (older files only)."""
    epl = part["epl"].to_numpy(float)
    return bool(
        np.any((part["epl_low"].to_numpy(float) > epl) | (part["epl_high"].to_numpy(float) < epl))
    )


def interval_sentence(d: dict) -> str:
    """What the interval is and covers, with the resamples' own centre (the bias it removes)."""
    bias = d["boot_median"] - d["value"]
    return (
        f"**The 95% interval [{d['low']:.2f}, {d['high']:.2f}] contains the EPL {d['value']:.2f}.** "
        f"It is the percentile interval of {d['n_boot']} bootstrap resamples of the "
        f"{d['n']:,} residuals ([{d['boot_low']:.2f}, {d['boot_high']:.2f}], centred on "
        f"{d['boot_median']:.2f}) shifted by their median bias ({bias:+.2f}), with the low end "
        "at 0 at most. It covers the spread of the EPL of this many residuals from the same "
        "data and budget — which geounits' errors happen to be drawn — not the EPL's own bias as "
        "an estimate of the privacy loss."
    )


def budget_axis(mechanism: str | None) -> tuple[Callable[[float], float], str, str]:
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
