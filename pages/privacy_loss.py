"""Privacy-loss page: the (ε, δ) curves of the working scenario for all three conversions.

Thin page: curves come from :func:`engine.dp.accounting.epsilon_curves` (cached in
:mod:`phexplore.app.state`), point values from :func:`phexplore.api.budgets.conversions`; reference
points are the shipped presets' ρ converted with the same functions.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from phexplore.api.budgets import CONVERSIONS, conversions, epsilon_for_delta, load_topdown_preset
from phexplore.api.results import tidy_bytes
from phexplore.app import state as S
from phexplore.app.charts import readable
from phexplore.app.guide import epsilon_reading

DASHES = {"bun_steinke": "dot", "cks": "solid", "gaussian": "dash"}
SHORT = {
    "bun_steinke": "Bun–Steinke (TDA paper)",
    "cks": "CKS (production certificates)",
    "gaussian": "Gaussian profile",
}


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


def _sources() -> dict[str, float]:
    """Named ρ values of the working scenario (and of saved scenarios, when there are any)."""
    s = st.session_state
    out: dict[str, float] = {}
    budget = S.effective_phsafe()
    if budget.privacy_defn == "zcdp" and budget.total_unbounded() > 0:
        out["PHSafe (bounded ρ)"] = budget.total_bounded()
        out["PHSafe (unbounded ρ)"] = budget.total_unbounded()
    runs = s[S.TOPDOWN]
    zcdp = {u: a for u, a in runs.items() if a.mechanism == "zcdp"}
    for universe, alloc in zcdp.items():
        out[f"TopDown {universe}"] = float(alloc.rho)
    if len(zcdp) > 1:
        out["TopDown total"] = sum(float(a.rho) for a in zcdp.values())
    for name, rho in S.saved_rhos().items():
        out[name] = rho
    return {k: v for k, v in out.items() if math.isfinite(v) and v > 0}


def _sync_delta() -> None:
    s = st.session_state
    s[S.DELTA] = float(s["pl_delta"])
    s["sb_delta"] = s[S.DELTA]


def _figure(chosen: dict[str, float], delta: float, reported: str, scenario: str) -> go.Figure:
    fig = go.Figure()
    palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]
    for i, (name, rho) in enumerate(chosen.items()):
        frame = S.epsilon_curve_frame(rho)
        for conv in CONVERSIONS:
            part = frame[frame["conversion"] == conv]
            fig.add_trace(
                go.Scatter(
                    x=part["delta"],
                    y=part["epsilon"],
                    mode="lines",
                    name=f"{name} (ρ={rho:.4g}) · {SHORT[conv]}",
                    line={
                        "color": palette[i % len(palette)],
                        "dash": DASHES[conv],
                        "width": 3 if conv == reported else 1.5,
                    },
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
    fig.add_vline(x=delta, line_dash="dot", line_color="gray")
    fig.update_xaxes(type="log", title="δ (probability the guarantee may fail)")
    fig.update_yaxes(type="log", title="ε (privacy-loss parameter, unitless)")
    fig.update_layout(
        title=f"{scenario}: (ε, δ) curves — line style = conversion, thick = reported",
        height=600,
        legend={"font": {"size": 11}},
    )
    return readable(fig)


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
        "stronger privacy."
    )
    sources = _sources()
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
        help="Total ρ of each part of the working scenario (and of saved scenarios).",
    )
    delta = float(s[S.DELTA])
    reported = s[S.CONVERSION]
    chosen = {k: sources[k] for k in chosen_names}

    table = []
    for name, rho in sources.items():
        conv = conversions(rho, delta=delta)
        row = {"Scenario": name, "ρ": rho}
        for c in CONVERSIONS:
            row[f"ε {SHORT[c]}"] = conv[c]["epsilon"]
        table.append(row)
    frame = pd.DataFrame(table)
    headline = list(chosen) or list(sources)[:1]
    cols = st.columns(max(len(headline[:4]), 1))
    for col, name in zip(cols, headline[:4], strict=False):
        eps = float(frame.loc[frame["Scenario"] == name, f"ε {SHORT[reported]}"].iloc[0])
        col.metric(
            f"{name}: ε at δ = {S.fmt_delta(delta)}",
            f"{eps:.2f}",
            help=f"ρ = {sources[name]:.4f} converted by {S.conversion_label(reported)}. "
            "ε bounds how much any one person's data can change the odds of any output "
            "(by a factor of at most e^ε, except with probability δ).",
        )
    if headline:
        name = headline[0]
        eps = float(frame.loc[frame["Scenario"] == name, f"ε {SHORT[reported]}"].iloc[0])
        st.info(f"**{name}:** {epsilon_reading(eps, delta)}", icon=":material/chat:")
    left, right = st.columns([0.62, 0.38])
    with left:
        if chosen:
            st.plotly_chart(
                _figure(chosen, delta, reported, s[S.SCENARIO_NAME]),
                config={"toImageButtonOptions": {"filename": "epsilon_delta_curves"}},
            )
        else:
            st.info("Pick at least one scenario to plot.")
    with right:
        st.subheader(f"ε at δ = {S.fmt_delta(delta)}")
        st.dataframe(
            frame,
            hide_index=True,
            width="stretch",
            column_config={
                "ρ": st.column_config.NumberColumn(format="%.4f"),
                **{
                    f"ε {SHORT[c]}": st.column_config.NumberColumn(format="%.2f")
                    for c in CONVERSIONS
                },
            },
        )
        st.caption(
            f"Reported conversion: **{S.conversion_label(reported)}** (change it in the sidebar)."
        )
        st.download_button(
            "Download ε table (CSV)",
            tidy_bytes(frame, "csv"),
            file_name="epsilon_table.csv",
            mime="text/csv",
        )
        refs = pd.DataFrame(_reference_points())
        refs["conversion"] = refs["conversion"].map(SHORT)
        st.markdown("**Reference points**")
        st.dataframe(
            refs[["label", "rho", "conversion", "epsilon"]].rename(
                columns={"label": "Point", "rho": "ρ", "conversion": "Conversion", "epsilon": "ε"}
            ),
            hide_index=True,
            width="stretch",
            column_config={
                "ρ": st.column_config.NumberColumn(format="%.4f"),
                "ε": st.column_config.NumberColumn(format="%.2f"),
            },
        )


render()
