"""Privacy-loss page: the (ε, δ) curves of the working scenario for all three conversions, each
beside its baseline.

Thin page: curves come from :func:`engine.dp.accounting.epsilon_curves` (cached in
:mod:`phexplore.app.state`), point values from :func:`phexplore.api.budgets.conversions`; reference
points are the shipped presets' ρ converted with the same functions; the baselines are the
planners' (:mod:`phexplore.app.baseline`).
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from phexplore.api.budgets import (
    CONVERSIONS,
    PHSafeBudget,
    TopDownAllocation,
    conversions,
    epsilon_for_delta,
    load_topdown_preset,
)
from phexplore.api.results import tidy_bytes
from phexplore.app import baseline as B
from phexplore.app import planner_tables as T
from phexplore.app import state as S
from phexplore.app.charts import COLORWAY, chart_title, readable
from phexplore.app.guide import epsilon_reading

DASHES = {"bun_steinke": "dot", "cks": "solid", "gaussian": "dash"}
SHORT = {
    "bun_steinke": "Bun–Steinke (TDA paper)",
    "cks": "CKS (production certificates)",
    "gaussian": "Gaussian profile",
}
TINY = {"bun_steinke": "Bun–Steinke", "cks": "CKS", "gaussian": "Gaussian"}


@st.cache_data(show_spinner=False)
def _reference_points() -> list[dict[str, float | str]]:
    """Published reference points: production persons/units (CKS) and April 2021 (Bun–Steinke)."""
    prod = load_topdown_preset("topdown-2020-production")
    april = load_topdown_preset("topdown-2021-04")
    april_total = sum(float(a.rho) for a in april.values())
    points = [
        ("Production persons (certificate)", float(prod["persons"].rho), "cks"),
        ("Production units (certificate)", float(prod["units"].rho), "cks"),
        ("April 2021 demonstration, ρ = 1.095", april_total, "bun_steinke"),
    ]
    return [
        {
            "label": label,
            "rho": rho,
            "conversion": conv,
            "delta": 1e-10,
            "epsilon": float(epsilon_for_delta(rho, 1e-10, conv)),
        }
        for label, rho, conv in points
    ]


def _parts(phsafe: PHSafeBudget | None, runs: dict[str, TopDownAllocation]) -> dict[str, float]:
    """Named ρ values of a PHSafe budget and TopDown allocations (zCDP parts only)."""
    out: dict[str, float] = {}
    if phsafe is not None and phsafe.privacy_defn == "zcdp" and phsafe.total_unbounded() > 0:
        out["PHSafe (bounded ρ)"] = phsafe.total_bounded()
        out["PHSafe (unbounded ρ)"] = phsafe.total_unbounded()
    zcdp = {u: a for u, a in runs.items() if a.mechanism == "zcdp"}
    for universe, alloc in zcdp.items():
        out[f"TopDown {universe}"] = float(alloc.rho)
    if len(zcdp) > 1:
        out["TopDown total"] = sum(float(a.rho) for a in zcdp.values())
    return out


def _sources() -> tuple[dict[str, float], dict[str, float]]:
    """Named ρ values of the working scenario (and of saved scenarios), and the baselines' ρ of
    the same parts."""
    s = st.session_state
    out = _parts(S.effective_phsafe(), s[S.TOPDOWN])
    base = _parts(B.phsafe_baseline().phsafe, dict(B.topdown_baseline().topdown or {}))
    for name, rho in S.saved_rhos().items():
        out[name] = rho
    keep = {k: v for k, v in out.items() if math.isfinite(v) and v > 0}
    return keep, {k: v for k, v in base.items() if k in keep}


def _sync_delta() -> None:
    s = st.session_state
    s[S.DELTA] = float(s["pl_delta"])
    s["sb_delta"] = s[S.DELTA]


def _figure(
    chosen: dict[str, float], baselines: dict[str, float], delta: float, reported: str
) -> go.Figure:
    fig = go.Figure()
    for i, (name, rho) in enumerate(chosen.items()):
        colour = COLORWAY[i % len(COLORWAY)]
        frame = T.epsilon_curve_frame(rho)
        for conv in CONVERSIONS:
            part = frame[frame["conversion"] == conv]
            fig.add_trace(
                go.Scatter(
                    x=part["delta"],
                    y=part["epsilon"],
                    mode="lines",
                    name=f"{name} (ρ={rho:.4g}) · {TINY[conv]}",
                    line={
                        "color": colour,
                        "dash": DASHES[conv],
                        "width": 3.5 if conv == reported else 1.5,
                    },
                )
            )
        base = baselines.get(name)
        if base is not None and not math.isclose(base, rho, rel_tol=1e-12):
            frame = T.epsilon_curve_frame(base)
            part = frame[frame["conversion"] == reported]
            fig.add_trace(
                go.Scatter(
                    x=part["delta"],
                    y=part["epsilon"],
                    mode="lines",
                    name=f"{name}, baseline (ρ={base:.4g}) · {TINY[reported]}",
                    line={"color": colour, "dash": "longdashdot", "width": 2},
                    opacity=0.8,
                )
            )
    # Reference points are markers named in the legend (no text on the plot: labels beside the
    # markers would lie across the curves).
    symbols = ["diamond", "square", "triangle-up"]
    for i, r in enumerate(_reference_points()):
        fig.add_trace(
            go.Scatter(
                x=[r["delta"]],
                y=[r["epsilon"]],
                mode="markers",
                marker={"symbol": symbols[i % len(symbols)], "size": 12, "color": "black"},
                name=f"{r['label']}: ε={r['epsilon']:.2f}",
                hovertemplate=f"{r['label']}<br>ρ = {r['rho']:.4f}, δ = 1e-10, "
                f"ε = {r['epsilon']:.2f}<extra></extra>",
            )
        )
    fig.add_vline(x=delta, line_dash="dot", line_color="#555555")
    fig.update_xaxes(type="log", title="δ (probability the guarantee may fail)", tickangle=0)
    fig.update_yaxes(type="log", title="ε (privacy-loss parameter, unitless)")
    fig.update_layout(
        title=chart_title(
            "(ε, δ) curves: line style = conversion, thick = reported",
            f"PHSafe {S.phsafe_origin()}",
            f"TopDown {S.topdown_origin()}",
        ),
        height=560,
    )
    return readable(fig, title_chars=110, width=1000)


def _table(
    sources: dict[str, float], baselines: dict[str, float], delta: float, reported: str
) -> pd.DataFrame:
    rows = []
    for name, rho in sources.items():
        conv = conversions(rho, delta=delta)
        row: dict[str, object] = {"Scenario": name, "ρ": rho}
        for c in CONVERSIONS:
            row[f"ε {SHORT[c]}"] = conv[c]["epsilon"]
        base = baselines.get(name)
        row["Baseline ρ"] = base
        row["Baseline ε"] = (
            None if base is None else conversions(base, delta=delta)[reported]["epsilon"]
        )
        row["Δε"] = (
            None
            if row["Baseline ε"] is None
            else conv[reported]["epsilon"] - float(row["Baseline ε"])  # type: ignore[arg-type]
        )
        rows.append(row)
    return pd.DataFrame(rows)


def render() -> None:
    """Draw the page."""
    S.init_state()
    s = st.session_state
    st.title("Privacy loss (ε, δ)")
    st.caption(
        "ρ-zCDP implies (ε, δ)-DP for every δ; the curve shows that trade-off. Three conversions "
        "are drawn: Bun–Steinke (the conversion the TDA paper quotes), the tight "
        "Canonne–Kamath–Steinke bound (the one the production privacy-loss certificates use), "
        "and the Gaussian-mechanism profile (approximate for discrete noise). Smaller ε means "
        "stronger privacy. Each working part is shown beside its baseline (set on the planners)."
    )
    sources, baselines = _sources()
    if not sources:
        st.warning("The working scenario has no zCDP budget to convert (all budgets are zero).")
        return
    c1, c2 = st.columns([0.6, 0.4])
    s["pl_delta"] = s[S.DELTA]
    c2.select_slider(
        "δ",
        options=list(S.DELTA_CHOICES),
        format_func=S.fmt_delta,
        key="pl_delta",
        persist_state="session",
        on_change=S.guarded(_sync_delta, "privacy loss: sync_delta"),
        help=S.HELP_DELTA,
    )
    default = [k for k in sources if k in ("PHSafe (bounded ρ)", "TopDown persons")] or list(
        sources
    )[:1]
    if "pl_sources" in s:
        s["pl_sources"] = [k for k in s["pl_sources"] if k in sources]
    else:
        s["pl_sources"] = default
    chosen_names = c1.multiselect(
        "Scenarios to plot",
        list(sources),
        key="pl_sources",
        persist_state="session",
        help="Total ρ of each part of the working scenario (and of saved scenarios).",
    )
    delta = float(s[S.DELTA])
    reported = s[S.CONVERSION]
    chosen = {k: sources[k] for k in chosen_names}
    frame = _table(sources, baselines, delta, reported)
    headline = list(chosen) or list(sources)[:1]
    cols = st.columns(max(len(headline[:4]), 1))
    for col, name in zip(cols, headline[:4], strict=False):
        row = frame.loc[frame["Scenario"] == name].iloc[0]
        eps = float(row[f"ε {SHORT[reported]}"])
        diff = row["Δε"]
        col.metric(
            f"{name}: ε at δ = {S.fmt_delta(delta)}",
            f"{eps:.2f}",
            delta=None
            if diff is None or diff != diff
            else f"Δ {float(diff):+.2f} vs baseline {float(row['Baseline ε']):.2f}".replace(
                "-", "−"
            ),
            delta_color="off",
            delta_arrow="off",
            help=f"ρ = {sources[name]:.4f} converted by {S.conversion_label(reported)}. "
            "ε bounds how much any one person's data can change the odds of any output "
            "(by at most a factor of about e raised to ε, except with probability δ).",
        )
    if headline:
        name = headline[0]
        eps = float(frame.loc[frame["Scenario"] == name, f"ε {SHORT[reported]}"].iloc[0])
        st.info(f"**{name}:** {epsilon_reading(eps, delta)}", icon=":material/chat:")
    if chosen:
        st.plotly_chart(
            _figure(chosen, baselines, delta, reported),
            config={"toImageButtonOptions": {"filename": "epsilon_delta_curves"}},
            alt="(ε, δ) curves of the chosen budgets under three conversions, with baselines "
            "and the published reference points",
        )
    else:
        st.info("Pick at least one scenario to plot.")
    left, right = st.columns([0.56, 0.44])
    with left:
        st.subheader(f"ε at δ = {S.fmt_delta(delta)}")
        details = st.toggle(
            "Show ε under every conversion", key="pl_all_conversions", persist_state="session"
        )
        reported_col = f"ε {SHORT[reported]}"
        order = ["Scenario", "ρ", reported_col, "Baseline ε", "Δε"]
        if details:
            order += [f"ε {SHORT[c]}" for c in CONVERSIONS if f"ε {SHORT[c]}" != reported_col]
            order.append("Baseline ρ")
        st.dataframe(
            frame,
            hide_index=True,
            width="stretch",
            column_order=order,
            alt=f"ε at δ = {S.fmt_delta(delta)} of each budget, with its baseline",
            column_config={
                "Scenario": st.column_config.TextColumn("Budget"),
                "ρ": st.column_config.NumberColumn(format="%.4f"),
                "Baseline ρ": st.column_config.NumberColumn(format="%.4f"),
                "Baseline ε": st.column_config.NumberColumn(
                    help=f"ε of the baseline's same part ({TINY[reported]}).", format="%.2f"
                ),
                "Δε": st.column_config.NumberColumn(
                    help="Working − baseline ε (reported conversion).", format="%+.2f"
                ),
                **{
                    f"ε {SHORT[c]}": st.column_config.NumberColumn(
                        f"ε {TINY[c]}", help=f"ε by {SHORT[c]}.", format="%.2f"
                    )
                    for c in CONVERSIONS
                },
            },
        )
        st.caption(
            f"Reported conversion: **{S.conversion_label(reported)}** (change it in the "
            "sidebar); the production privacy-loss certificates use CKS."
        )
        st.download_button(
            "Download ε table (CSV)",
            tidy_bytes(frame, "csv"),
            file_name="epsilon_table.csv",
            mime="text/csv",
        )
    with right:
        refs = pd.DataFrame(_reference_points())
        refs["conversion"] = refs["conversion"].map(TINY)
        st.subheader("Reference points")
        st.dataframe(
            refs[["label", "rho", "conversion", "epsilon"]].rename(
                columns={"label": "Point", "rho": "ρ", "conversion": "Conversion", "epsilon": "ε"}
            ),
            hide_index=True,
            width="stretch",
            alt="Published reference points of privacy loss at δ = 1e-10",
            column_config={
                "Point": st.column_config.TextColumn(width=200),
                "ρ": st.column_config.NumberColumn(format="%.4f", width=70),
                "Conversion": st.column_config.TextColumn(width=100),
                "ε": st.column_config.NumberColumn(format="%.2f", width=60),
            },
        )


render()
