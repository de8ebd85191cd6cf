"""Budget-session page: plan from accuracy targets, see the trade-off curve, export a session report.

Thin page over :mod:`phexplore.planning.targets` (``plan_phsafe``, ``tradeoff_scale_phsafe``,
``tradeoff_scale_topdown``) and :func:`phexplore.app.report.build_report_html`, for committees that
want the least privacy loss that meets their accuracy targets and a self-contained record of the
decision.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from phexplore import api as R
from phexplore.api.budgets import PHExploreError, describe_profile, shipped_profile_for
from phexplore.api.planning import (
    OBJECTIVE_LABELS,
    Scenario,
    plan_phsafe,
    plan_topdown_published,
    tradeoff_scale_phsafe,
    tradeoff_scale_topdown,
)
from phexplore.app import baseline as B
from phexplore.app import state as S
from phexplore.app.charts import chart_title, readable
from phexplore.app.naming import cell_label, display_frame
from phexplore.app.report import build_report_html

SCALES = (0.125, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 4.0, 8.0)


def _use_plan() -> None:
    plan = st.session_state.get("bs_plan")
    if plan is not None:
        st.session_state[S.PHSAFE] = plan["budget"]
        st.session_state[S.PHSAFE_DISABLED] = []
        st.session_state.pop("ps_enabled_levels", None)
        S.bump_editor_version()
        st.session_state["bs_flash"] = "The planned budget is now the working PHSafe budget."


def _plan_tab() -> None:
    s = st.session_state
    budget = s[S.PHSAFE]
    st.caption(
        f"From the MOE targets of the working PHSafe budget (**{budget.name}**): the least ρ that "
        "meets every target, or — under a total cap — the allocation that falls short of the "
        "targets as little as possible."
    )
    s.setdefault("bs_cap", 0.0)
    c1, c2 = st.columns(2)
    cap = c1.number_input(
        "Cap on total unbounded ρ (0 = no cap: meet every target)",
        min_value=0.0,
        step=0.1,
        format="%.4f",
        key="bs_cap",
        persist_state="session",
        help=S.HELP_RHO,
    )
    objective = c2.selectbox(
        "With a cap",
        list(OBJECTIVE_LABELS),
        format_func=OBJECTIVE_LABELS.get,
        key="bs_objective",
        persist_state="session",
        disabled=cap == 0,
        help="How to share a budget too small for every target: the same shortfall everywhere, or the least summed shortfall.",
    )
    try:
        plan = plan_phsafe(
            budget, rho_cap=cap or None, objective=objective, delta=float(s[S.DELTA])
        )
    except PHExploreError as exc:
        st.error(str(exc))
        return
    s["bs_plan"] = plan
    summary = plan["summary"]
    conv = s[S.CONVERSION]
    m = st.columns(4)
    m[0].metric("Total ρ (unbounded)", f"{summary['rho_total_unbounded']:.4f}", help=S.HELP_RHO)
    m[1].metric(
        f"ε bounded at δ={S.fmt_delta(summary['delta'])}",
        f"{summary['epsilon_bounded'][conv]:.2f}",
        help=S.conversion_label(conv),
    )
    m[2].metric(
        "Worst MOE / target",
        f"{summary['worst_ratio']:.3f}",
        help="1.000 means every target is met exactly; above 1 the MOE exceeds its target.",
    )
    m[3].metric("Targets met", "yes" if summary["targets_met"] else "no")
    rows = pd.DataFrame(plan["rows"])
    shown = display_frame(
        rows[
            [
                "table",
                "geo_level",
                "iteration_level",
                "moe_target",
                "rho_unbounded",
                "moe_bound",
                "moe_exact",
                "ratio",
                "binding",
            ]
        ]
    )
    st.dataframe(
        shown,
        hide_index=True,
        width="stretch",
        height=260,
        alt="Planned budget: ρ and MOE against each target",
        column_config={
            "MOE target (90%)": st.column_config.NumberColumn(format="%.0f"),
            "ρ (unbounded)": st.column_config.NumberColumn(format="%.6f"),
            "MOE / target": st.column_config.NumberColumn(format="%.3f"),
            "Binding target": st.column_config.CheckboxColumn(
                help="This target sets the worst shortfall."
            ),
        },
    )
    b1, b2 = st.columns(2)
    b1.button(
        "Use this plan in the PHSafe planner",
        on_click=S.guarded(_use_plan, "budget session: use_plan"),
        type="primary",
    )
    b2.download_button(
        "Download plan (CSV)",
        R.tidy_bytes(rows, "csv"),
        file_name="phsafe_plan.csv",
        mime="text/csv",
    )


def _use_published_plan() -> None:
    s = st.session_state
    runs = dict(s[S.TOPDOWN])
    runs["persons"] = s["bs_pub_plan"]["allocation"]
    s[S.TOPDOWN] = runs
    S.bump_editor_version()
    s["bs_flash"] = f"TopDown planner: persons ρ set to {float(runs['persons'].rho):.4f}."


def _published_tab() -> None:
    """Least total ρ (shares of the working persons allocation kept) meeting targets on the
    accuracy of the published counts (docs/science.md §7;
    :func:`phexplore.api.planning.plan_topdown_published`)."""
    s = st.session_state
    alloc = s[S.TOPDOWN].get("persons")
    if alloc is None:
        st.info("The working TopDown scenario has no persons run.")
        return
    st.caption(
        f"Targets on the published counts (after least squares, non-negativity and rounding), "
        f"not on the noisy measurements. Shares of **{alloc.name}** are kept; the least total ρ "
        f"meeting every target is found on {describe_profile(shipped_profile_for(alloc))} "
        "(docs/prediction.md). Targets are in persons, > 0."
    )
    default = pd.DataFrame(
        {"geolevel": [alloc.geolevels[-1]], "query": ["TOTAL"], "target": [10.0]}
    )
    targets = st.data_editor(
        s.get("bs_pub_targets", default),
        key="bs_pub_editor",
        num_rows="dynamic",
        alt="Targets on the published counts: geolevel, query and target (editable)",
        hide_index=True,
        column_config={
            "geolevel": st.column_config.SelectboxColumn("Geolevel", options=list(alloc.geolevels)),
            "query": st.column_config.SelectboxColumn(
                "Query", options=list(dict.fromkeys(["TOTAL", *alloc.all_queries()]))
            ),
            "target": st.column_config.NumberColumn("Target (persons)", min_value=0.001),
        },
    )
    measure = st.radio(
        "Target is", ["rmse", "moe90"], horizontal=True, key="bs_pub_measure", persist_state="session",
        format_func={"rmse": "RMSE", "moe90": "90% MOE"}.get,
    )  # fmt: skip
    if st.button("Plan ρ", key="bs_pub_go", type="primary"):
        wanted: dict[str, dict[str, float]] = {}
        for row in targets.dropna().itertuples(index=False):
            wanted.setdefault(str(row.geolevel), {})[str(row.query)] = float(row.target)
        try:
            s["bs_pub_plan"] = plan_topdown_published(
                alloc, wanted, shipped_profile_for(alloc), measure=measure, delta=float(s[S.DELTA])
            )
        except PHExploreError as exc:
            st.error(str(exc))
            s.pop("bs_pub_plan", None)
    plan = s.get("bs_pub_plan")
    if not plan:
        return
    summary = plan["summary"]
    m = st.columns(2)
    m[0].metric("Least total ρ (persons)", f"{summary['rho']:.4f}", help=S.HELP_RHO)
    m[1].metric(
        f"ε at δ={S.fmt_delta(summary['delta'])}",
        f"{summary['epsilon'][s[S.CONVERSION]]:.2f}",
        help=S.conversion_label(s[S.CONVERSION]),
    )
    for note in summary["notes"]:
        st.caption(f"Note: {note}.")
    st.dataframe(
        display_frame(pd.DataFrame(plan["rows"])),
        hide_index=True,
        width="stretch",
        alt="Published-count targets and the accuracy at the least total ρ",
    )
    st.button("Use this ρ in the TopDown planner", on_click=_use_published_plan, key="bs_pub_use")


def _curves(
    part: pd.DataFrame, x_col: str, y_col: str, hover: Callable[[pd.DataFrame], list[str]]
) -> go.Figure:
    """One line per selected cell: MOE (y) against ε (x)."""
    fig = go.Figure()
    for cell, grp in part.groupby("cell", sort=False):
        fig.add_trace(
            go.Scatter(x=grp[x_col], y=grp[y_col], mode="lines+markers", name=cell, text=hover(grp))
        )
    return fig


def _tradeoff_tab() -> None:
    s = st.session_state
    conv = s[S.CONVERSION]
    delta = float(s[S.DELTA])
    engine = st.radio(
        "Scenario part",
        ["phsafe", "topdown"],
        format_func={"phsafe": "PHSafe budget", "topdown": "TopDown persons run"}.get,
        horizontal=True,
        key="bs_trade_engine",
        persist_state="session",
        help="Which part of the working scenario to scale.",
    )
    if engine == "phsafe":
        rows = pd.DataFrame(tradeoff_scale_phsafe(S.effective_phsafe(), SCALES, delta))
        if rows.empty:
            st.info("The working PHSafe budget measures nothing.")
            return
        rows["cell"] = [
            cell_label(t, lv) for t, lv in zip(rows["table"], rows["level"], strict=True)
        ]
        cells = list(dict.fromkeys(rows["cell"]))
        picked = st.multiselect(
            "Tables · levels",
            cells,
            default=cells[:3],
            key="bs_trade_cells",
            persist_state="session",
            help="MOE of each as every budget is scaled by the same factor (0.125× … 8×).",
        )
        x_title = f"ε (bounded ρ, {S.conversion_label(conv)})"
        part = rows[rows["cell"].isin(picked)]
        fig = _curves(
            part, f"epsilon_{conv}", "moe_exact", lambda g: [f"scale {v:g}×" for v in g["scale"]]
        )
    else:
        alloc = s[S.TOPDOWN].get("persons")
        if alloc is None or alloc.mechanism != "zcdp":
            st.info("The working TopDown scenario has no zCDP persons run.")
            return
        rhos = list(np.round(float(alloc.rho) * np.array(SCALES), 6))
        rows = pd.DataFrame(tradeoff_scale_topdown(alloc, rhos, delta))
        rows["cell"] = rows["geolevel"] + " · " + rows["query"]
        cells = list(dict.fromkeys(rows["cell"]))
        defaults = [c for c in cells if c.endswith("· TOTAL")][:4] or cells[:3]
        picked = st.multiselect(
            "Geolevels · queries",
            cells,
            default=defaults,
            key="bs_trade_td",
            persist_state="session",
            help="Curves to draw: the 90% MOE of each as the persons run's total ρ is scaled.",
        )
        x_title = f"ε of the persons run ({S.conversion_label(conv)})"
        part = rows[rows["cell"].isin(picked)]
        fig = _curves(part, f"epsilon_{conv}", "moe90", lambda g: [f"ρ = {v:g}" for v in g["rho"]])
    fig.update_xaxes(title=x_title + ", unitless")
    fig.update_yaxes(type="log", title="90% MOE (persons)")
    origin = S.phsafe_origin() if engine == "phsafe" else S.topdown_origin()
    fig.update_layout(
        title=chart_title(f"Accuracy vs privacy loss as the budget scales (δ = {delta:g})", origin),
        height=450,
    )
    st.plotly_chart(
        readable(fig),
        config={"toImageButtonOptions": {"filename": f"tradeoff_{engine}"}},
        alt="MOE against ε as the budget scales, one line per chosen cell",
    )
    st.download_button(
        "Download trade-off table (CSV)",
        R.tidy_bytes(rows, "csv"),
        file_name=f"tradeoff_{engine}.csv",
        mime="text/csv",
    )


def _report_tab() -> None:
    s = st.session_state
    saved: dict[str, Scenario] = s[S.SAVED]
    options = {"__phsafe__": "Working PHSafe budget", "__topdown__": "Working TopDown allocations"}
    options.update({name: f"Saved: {name}" for name in saved})
    choice = st.selectbox(
        "Scenario to report",
        list(options),
        format_func=options.get,
        key="bs_report_pick",
        persist_state="session",
        help="The working budgets or a scenario saved on the Scenarios page.",
    )
    kind = saved[choice].kind if choice in saved else choice.strip("_")
    others = {"": "Nothing (one scenario)", "__baseline__": "The planner's baseline"}
    others.update(
        {name: f"Saved: {name}" for name, sc in saved.items() if sc.kind == kind and name != choice}
    )
    if s.get("bs_report_compare") not in others:
        s["bs_report_compare"] = ""
    st.selectbox(
        "Compare it with",
        list(others),
        format_func=others.get,
        key="bs_report_compare",
        persist_state="session",
        help="A two-scenario report opens with what changed between them and, for TopDown, the "
        "predicted error of both budgets' published counts by geolevel (the committee's table).",
    )
    s.setdefault("bs_report_runs", True)
    attach = st.checkbox(
        "Include this session's runs of this exact budget",
        key="bs_report_runs",
        persist_state="session",
        help="metrics.json of the session's runs whose budget fingerprint is the scenario's "
        "(error and EPL tables); runs of other budgets are never included.",
    )

    def report_inputs() -> tuple[Scenario, list]:
        if choice in saved:
            scenario = saved[choice]
        else:
            kind = choice.strip("_")
            scenario = Scenario(
                name=s[S.SCENARIO_NAME],
                kind=kind,
                phsafe=S.effective_phsafe() if kind == "phsafe" else None,
                topdown=dict(s[S.TOPDOWN]) if kind == "topdown" else None,
                delta=float(s[S.DELTA]),
                conversion=s[S.CONVERSION],
                spine=s[S.SPINE],
            )
        runs = list(scenario.results)
        if attach:
            runs += [r.metrics for r in s[S.RUNS]]
        return scenario, runs

    if st.button("Build the report", key="bs_build"):
        try:
            scenario, runs = report_inputs()
            other = _compare_with(s["bs_report_compare"], scenario)
            # Only runs of the scenario's exact budget, each once (Scenario.matching_runs).
            s["bs_report"] = (
                scenario.name,
                build_report_html(scenario, runs, compare_with=other),
            )
            s["bs_report_count"] = len(scenario.matching_runs(runs))
            s["bs_report_basis"] = S.report_basis(scenario, runs)
        except PHExploreError as exc:
            st.error(str(exc))
    built = s.get("bs_report")
    if built is not None:
        name, html = built
        st.caption(f"Runs in the report: {s.get('bs_report_count', 0)}.")
        try:  # a report whose scenario or runs changed since it was built says so
            stale = s.get("bs_report_basis") != S.report_basis(*report_inputs())
        except PHExploreError:
            stale = True
        if stale:
            st.warning(
                "**Out of date**: the scenario, its budget or its runs changed since this report "
                "was built — press “Build the report” again.",
                icon=":material/history:",
            )
        st.download_button(
            f"Download the report of “{name}” (HTML, {len(html) / 1024:,.0f} KB)",
            html.encode("utf-8"),
            file_name=f"{name}.report.html",
            mime="text/html",
            type="primary",
            key="bs_report_download",
        )
    st.caption(
        "The report records the scenario, its ρ and ε under all three conversions, the MOE table, "
        "the (ε, δ) curves and the attached run results, with the software version and date; "
        "compared with a second scenario it opens with what changed and, for TopDown, both "
        "budgets' published-count error by geolevel."
    )


def _compare_with(choice: str, scenario: Scenario) -> Scenario | None:
    """The second scenario of a two-scenario report: the planner's baseline or a saved one."""
    s = st.session_state
    if not choice:
        return None
    if choice != "__baseline__":
        return s[S.SAVED][choice]
    if scenario.kind == "phsafe":
        base = B.phsafe_baseline()
        return Scenario(
            name=f"baseline {base.label}", kind="phsafe", phsafe=base.phsafe,
            delta=scenario.delta, conversion=scenario.conversion,
        )  # fmt: skip
    base = B.topdown_baseline()
    return Scenario(
        name=f"baseline {base.label}", kind="topdown", topdown=dict(base.topdown or {}),
        delta=scenario.delta, conversion=scenario.conversion,
    )  # fmt: skip


def render() -> None:
    """Draw the page."""
    S.init_state()
    st.title("Budget session")
    st.caption(
        "Tools for a budget-setting meeting: start from accuracy targets, see what each extra "
        "unit of privacy loss buys, and leave with a report of the decision."
    )
    flash = st.session_state.pop("bs_flash", None)
    if flash:
        st.success(flash)
    tabs = st.tabs(
        [
            "Plan from targets",
            "TopDown: published-count targets",
            "Trade-off curve",
            "Session report",
        ]
    )
    with tabs[0]:
        _plan_tab()
    with tabs[1]:
        _published_tab()
    with tabs[2]:
        _tradeoff_tab()
    with tabs[3]:
        _report_tab()


render()
