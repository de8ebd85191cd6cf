"""TopDown planner page: total ρ per universe, geolevel shares and per-level query shares.

Thin page: shares are edited as exact fractions ("447/4099") or decimals and validated by
:class:`~phexplore.api.budgets.TopDownAllocation` (messages shown in place, naming the level and the
actual sum); σ and MOE per query come from :func:`phexplore.planning.targets.moe_tables.topdown_rows`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from phexplore.api.budgets import (
    HELD_EXACT,
    SPREAD_LABEL,
    PHExploreError,
    ShareProblem,
    TopDownAllocation,
    default_states,
    exact_from_input,
    format_fraction,
    held_exact_notes,
    load_topdown_preset,
    locate_share_problems,
    preset_spine,
    spent_label,
    spread_invariant_share,
)
from phexplore.app import state as S
from phexplore.app.charts import log_colorbar, readable
from phexplore.app.guide import epsilon_reading
from phexplore.app.naming import column_label, display_frame

BASE_KEY = "td_base"
ERROR_KEY = "td_rho_error"
TOASTED_KEY = "td_toasted"
STALE_CSS = (
    "<style>div:has(> .st-key-td_stale_label) ~ div{opacity:.45;filter:grayscale(100%);}"
    ".st-key-td_stale_label{color:#8a6d00;}</style>"
)
MARK = "⚠ "
HELP_LEVEL_SHARE = (
    "Share c of the run's ρ spent at this geolevel. Shares must add up to exactly 1 along the "
    "spine (US → block). Write fractions like 447/4099 or decimals like 0.25."
)
HELP_QUERY_SHARE = (
    "Share d of the level's budget spent on each query group; each level's shares must add up "
    "to exactly 1. Leave a cell empty when the query is not measured at that level."
)


HEAT_LABELS = {
    "moe90": "noisy measurement: 90% MOE",
    "sigma": "noisy measurement: σ",
    "post_processed_moe": "published count: 90% MOE",
    "post_processed_rmse": "published count: RMSE",
}
HELP_PUBLISHED = (
    "Published count: the predicted error after least squares, non-negativity and rounding "
    "(docs/science.md §7), on the Rhode Island 2010 spine and counts; exact for the least-squares stage, "
    "validated against repeated runs where the mean count per cell is ≥ 1 (docs/prediction.md)."
)


def _editor_keys(universe: str) -> tuple[str, str]:
    version = st.session_state[S.EDITOR_VERSION]
    return f"td_levels_{universe}_{version}", f"td_queries_{universe}_{version}"


def _load_preset() -> None:
    s = st.session_state
    try:
        s[S.TOPDOWN] = load_topdown_preset(s["td_preset_pick"])
        s[S.TOPDOWN_PRESET] = s["td_preset_pick"]
        s[ERROR_KEY] = None
    except PHExploreError as exc:
        s[ERROR_KEY] = str(exc)
    s.pop(BASE_KEY, None)
    S.bump_editor_version()


def _on_rho(universe: str) -> None:
    s = st.session_state
    try:
        runs = dict(s[S.TOPDOWN])
        # exact: an untouched input keeps the preset's fraction; a typed value is its decimal
        current = runs[universe]
        runs[universe] = current.with_rho(
            exact_from_input(s[f"td_rho_{universe}"], current.rho, where=f"total of {universe}")
        )
        s[S.TOPDOWN] = runs
        s[ERROR_KEY] = None
    except PHExploreError as exc:
        s[ERROR_KEY] = str(exc)


def _level_frame(alloc: TopDownAllocation) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "geolevel": list(alloc.geolevels),
            "share": [format_fraction(alloc.level_shares[lv]) for lv in alloc.geolevels],
        }
    )


def _query_frame(alloc: TopDownAllocation) -> pd.DataFrame:
    queries: dict[str, None] = {}
    for lv in alloc.geolevels:
        for q in alloc.query_shares.get(lv, {}):
            queries.setdefault(q, None)
    data: dict[str, list[Any]] = {"query": list(queries)}
    for lv in alloc.geolevels:
        shares = alloc.query_shares.get(lv, {})
        data[lv] = [format_fraction(shares[q]) if q in shares else None for q in queries]
    return pd.DataFrame(data)


def _draft(alloc: TopDownAllocation, levels: pd.DataFrame, queries: pd.DataFrame) -> dict[str, Any]:
    """The allocation's JSON dict with the edited shares (validated by ``from_dict``)."""
    draft = alloc.to_dict()
    draft["level_shares"] = {
        str(r.geolevel): ("0" if r.share is None or str(r.share).strip() == "" else str(r.share))
        for r in levels.itertuples(index=False)
    }
    qs: dict[str, dict[str, str]] = {lv: {} for lv in alloc.geolevels}
    for _, row in queries.iterrows():
        for lv in alloc.geolevels:
            value = row.get(lv)
            if value is None or (isinstance(value, float) and math.isnan(value)):
                continue
            if str(value).strip() == "":
                continue
            qs[lv][str(row["query"])] = str(value).strip()
    draft["query_shares"] = qs
    return draft


def _heatmap(rows: pd.DataFrame, value: str, title: str) -> go.Figure:
    """Geolevel × query heatmap of σ or MOE (colour on a log scale, numbers printed); queries
    held exact (invariants, TDA §5.2) are blank cells labelled "held exact"."""
    rows = rows.assign(**{value: rows[value].where(rows["status"] == "measured")})
    pivot = rows.pivot_table(
        index="geolevel", columns="query", values=value, sort=False, dropna=False
    )
    order = list(dict.fromkeys(rows["geolevel"]))
    pivot = pivot.reindex(order)
    held = {(r.geolevel, r.query) for r in rows.itertuples() if r.status == HELD_EXACT}
    values = pivot.to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.log10(np.where(values > 0, values, np.nan))  # 0 = invariant: no colour
    text = [
        [
            "held exact" if (lv, q) in held else ("" if math.isnan(v) else f"{v:,.1f}")
            for q, v in zip(pivot.columns, row, strict=True)
        ]
        for lv, row in zip(pivot.index, values, strict=True)
    ]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(pivot.columns),
            y=list(pivot.index),
            text=text,
            texttemplate="%{text}",
            colorscale="Viridis",
            colorbar=log_colorbar(
                [v for v in pivot.to_numpy(dtype=float).ravel() if v > 0],
                column_label(value),
            ),
            hovertemplate="%{y} · %{x}: %{text} persons<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed", title="Geolevel")
    fig.update_xaxes(title="Query group", tickangle=-35)
    fig.update_layout(title=title, height=440)
    return readable(fig)


def _with_edits(frame: pd.DataFrame, editor_key: str) -> pd.DataFrame:
    """``frame`` with the data editor's pending cell edits applied (the editor's own state)."""
    out = frame.copy()
    for row, changes in (st.session_state.get(editor_key) or {}).get("edited_rows", {}).items():
        for column, value in changes.items():
            if column in out.columns:
                out.loc[int(row), column] = value
    return out


def _mark(label: str, hit: bool) -> str:
    """A column header with a warning mark when a problem lies in that column."""
    return MARK + label if hit else label


def _styled(frame: pd.DataFrame, column: str, bad: set[str]) -> Any:
    """``frame`` with the label cells of offending rows in red (the label column is read-only)."""
    if not bad:
        return frame
    return frame.style.map(
        lambda v: "background-color:#f8d7da;color:#842029;font-weight:bold" if v in bad else "",
        subset=[column],
    )


def _problem_list(problems: list[ShareProblem]) -> str:
    """Markdown list of the offending cells, each named by table, level and query."""
    lines = []
    for p in problems:
        if p.table == "levels":
            where = "Level share column" if p.level is None else f"Level share of {p.level}"
        else:
            where = f"Query shares of {p.level}" if p.query is None else f"{p.query} at {p.level}"
        lines.append(f"- **{where}**: {p.message}")
    return "\n".join(lines)


def render() -> None:
    """Draw the page."""
    S.init_state()
    s = st.session_state
    s.setdefault(ERROR_KEY, None)
    runs: dict[str, TopDownAllocation] = dict(s[S.TOPDOWN])
    delta = float(s[S.DELTA])
    conversion = s[S.CONVERSION]

    st.title("TopDown planner")
    st.caption(
        "Split each run's total ρ over geolevels and, within a level, over query groups. A query "
        "answered with ρ·c·d gets discrete-Gaussian noise with σ² = 1/(ρ·c·d) (TDA App. B); its "
        "90% MOE is 1.645·σ (noisy measurements, before post-processing). The published counts "
        "are more accurate: switch the heatmap to the predicted published-count error."
    )

    top = st.columns([0.34, 0.16, 0.25, 0.25])
    options = S.preset_options("topdown")
    if "td_preset_pick" not in s:
        s["td_preset_pick"] = s[S.TOPDOWN_PRESET]
    top[0].selectbox(
        "Preset",
        list(options),
        format_func=options.get,
        key="td_preset_pick",
        help="Production 2020 (TDA Tables 6–8), April 2021 demonstration (Tables 3–5), the 2018 "
        "End-to-End test on 1940 data (pure DP, PF) and their RI 2010 adaptations.",
    )
    top[1].button(
        "Load preset",
        on_click=S.guarded(_load_preset, "topdown planner: load_preset"),
        width="stretch",
    )
    if s.get("td_universe") not in runs:
        s["td_universe"] = next(iter(runs))
    universe = top[2].radio(
        "Universe",
        list(runs),
        horizontal=True,
        key="td_universe",
        help="Persons and housing units are separate runs with their own budgets; ρ adds.",
    )
    alloc = runs[universe]
    what = "ε" if alloc.mechanism == "puredp" else "ρ"
    rho_key = f"td_rho_{universe}"
    s[rho_key] = float(alloc.rho)
    top[3].number_input(
        f"Total {what} of the {universe} run",
        min_value=1e-6,
        step=0.01,
        format="%.4f",
        key=rho_key,
        on_change=S.guarded(_on_rho, "topdown planner: on_rho"),
        args=(universe,),
        help=(S.HELP_RHO if what == "ρ" else "Pure-DP budget ε (two-sided geometric noise).")
        + " Shares stay as they are; every query's budget scales with it.",
    )

    level_key, query_key = _editor_keys(universe)
    base_all = s.setdefault(BASE_KEY, {})
    if level_key not in s and query_key not in s or universe not in base_all:
        base_all[universe] = alloc
    base: TopDownAllocation = base_all[universe]

    # Validate the editors' pending edits before drawing them, so the error sits at the top of the
    # page and the offending column headers and row labels are marked in the editors themselves.
    level_frame, query_frame = _level_frame(base), _query_frame(base)
    draft = _draft(alloc, _with_edits(level_frame, level_key), _with_edits(query_frame, query_key))
    problems = locate_share_problems(draft)
    invalid: str | None = None
    try:
        candidate = TopDownAllocation.from_dict(draft, name=alloc.name)
    except PHExploreError as exc:
        invalid = str(exc)
    if s[ERROR_KEY]:
        st.error(f"Not applied: {s[ERROR_KEY]}", icon=":material/warning:")
    if invalid is not None:
        st.error(
            "**Invalid shares — not applied.** The numbers below are stale: they show the last "
            f"valid allocation until the marked cells (⚠) are fixed.\n\n"
            f"{_problem_list(problems) or '- ' + invalid}",
            icon=":material/warning:",
        )
        if s.get(TOASTED_KEY) != invalid:
            st.toast(f"Invalid shares: {invalid}", icon=":material/warning:")
        s[TOASTED_KEY] = invalid
    else:
        s[TOASTED_KEY] = None
        runs[universe] = candidate
        s[S.TOPDOWN] = runs
        alloc = candidate
    st.markdown(f"Working allocations: **{S.budget_badge('topdown')}**")

    bad_levels = {p.level for p in problems if p.table == "levels" and p.level}
    bad_queries = {p.query for p in problems if p.table == "queries" and p.query}
    level_share_bad = any(p.table == "levels" for p in problems)
    query_cols_bad = {p.level for p in problems if p.table == "queries"}

    left, right = st.columns([0.42, 0.58])
    with left:
        st.subheader("Shares")
        st.data_editor(
            _styled(level_frame, "geolevel", bad_levels),
            key=level_key,
            hide_index=True,
            width="stretch",
            disabled=["geolevel"],
            column_config={
                "geolevel": st.column_config.TextColumn("Geolevel"),
                "share": st.column_config.TextColumn(
                    _mark("Level share c", level_share_bad), help=HELP_LEVEL_SHARE
                ),
            },
        )
        st.data_editor(
            _styled(query_frame, "query", bad_queries),
            key=query_key,
            hide_index=True,
            width="stretch",
            disabled=["query"],
            column_config={
                "query": st.column_config.TextColumn("Query group"),
                **{
                    lv: st.column_config.TextColumn(
                        _mark(lv, lv in query_cols_bad), help=HELP_QUERY_SHARE
                    )
                    for lv in base.geolevels
                },
            },
        )
        S.sync_widget("td_spine", S.SPINE)
        st.radio(
            "Geographic spine for runs",
            list(S.SPINES),
            format_func=S.SPINES.get,
            key="td_spine",
            on_change=S.guarded(
                lambda: s.__setitem__(S.SPINE, s["td_spine"]), "topdown planner: update"
            ),
            help="The hierarchy TopDown works down. The AIAN-style spine adds a branch for "
            "American Indian/Alaska Native areas; optimized block groups regroup blocks to bring "
            "off-spine entities closer to the spine (SPN §3–§4). Used by the Run page.",
        )
        ran_on = preset_spine(alloc.name)
        if ran_on:
            st.caption(
                f"{alloc.name.split(' (')[0]} ran on **{ran_on['kind']} block groups** around "
                f"{ran_on['targets']} ({ran_on.get('citation', '')}). With the allocation's own "
                "spine, runs use it where the data carry places (generated populations) and the "
                "conventional spine otherwise; every run's results name the spine it used."
            )

        states_key = f"td_states_{alloc.name}"
        s.setdefault(states_key, default_states(alloc))
        n_states = int(
            st.number_input(
                "States in the run's geography (1–100)",
                min_value=1,
                max_value=100,
                step=1,
                key=states_key,
                help="1 for Rhode Island, a county or any part of one state; 52 for the US. The "
                "US and state total populations are held exact (TDA §5.2), so their shares buy "
                "no measurement; with one state a US level is bypassed into it (SPN §5).",
            )
        )
        S.sync_widget("td_spread", S.SPREAD_INVARIANT)
        st.checkbox(
            "Spread the held-exact shares over each level's other queries",
            key="td_spread",
            on_change=lambda: s.__setitem__(S.SPREAD_INVARIANT, s["td_spread"]),
            help=f"{SPREAD_LABEL}. Production assigned State TOTAL a share although it is "
            "invariant outside AIAN-split states. Used by the Run page.",
        )
        if s[S.SPREAD_INVARIANT]:
            st.warning(f"Departure from production: {SPREAD_LABEL}.")
            runs = {
                name: spread_invariant_share(a, n_states) if a.universe == "persons" else a
                for name, a in runs.items()
            }
            alloc = runs[universe]

    rows, summary = S.topdown_frames(runs, delta, n_states=n_states)
    published_error, published_notes = None, []
    try:
        rows, published_notes = S.topdown_post_processed(runs, n_states=n_states)
    except PHExploreError as exc:
        published_error = str(exc)
    with right:
        if invalid is not None:
            # Everything after this label in the column is greyed (CSS sibling rule).
            st.html(STALE_CSS)
            st.container(key="td_stale_label").markdown(
                "**Stale** — computed from the last valid allocation; fix the marked shares."
            )
        m = st.columns(len(runs) + 1)
        for i, (name, entry) in enumerate(summary["runs"].items()):
            eps = (
                entry["epsilon"] if entry["mechanism"] == "puredp" else entry["epsilon"][conversion]
            )
            label = "ε (pure DP)" if entry["mechanism"] == "puredp" else "ρ"
            value = entry.get("rho", entry["epsilon"]) if label == "ρ" else entry["epsilon"]
            m[i].metric(
                f"{name}: {label}",
                f"{value:.4f}",
                delta=None
                if entry["mechanism"] == "puredp"
                else f"ε {eps:.2f} at δ={S.fmt_delta(delta)}",
                delta_color="off",
                help=S.HELP_RHO,
            )
        if "rho_total" in summary:
            m[-1].metric(
                "All runs: total ρ",
                f"{summary['rho_total']:.4f}",
                delta=f"ε {summary['epsilon_total'][conversion]:.2f} at δ={S.fmt_delta(delta)}",
                delta_color="off",
                help=f"ρ adds over runs. ε by {S.conversion_label(conversion)}.",
            )
        else:
            m[-1].metric("All runs: total ε", f"{summary['epsilon_total']:.4f}")
        total_eps = (
            summary["epsilon_total"][conversion]
            if "rho_total" in summary
            else summary["epsilon_total"]
        )
        st.caption(f"**ε in words (all runs):** {epsilon_reading(float(total_eps), delta)}")
        for name, entry in summary["runs"].items():
            pure = entry["mechanism"] == "puredp"
            nominal = entry["epsilon"] if pure else entry["rho"]
            spent = entry["epsilon_spent"] if pure else entry["rho_spent"]
            st.caption(f"{name}: {spent_label(nominal, spent, 'ε' if pure else 'ρ')}.")
        show = st.radio(
            "Heatmap shows",
            [k for k in HEAT_LABELS if k in rows.columns],
            format_func=HEAT_LABELS.get,
            horizontal=True,
            key="td_heat_value",
            help=S.HELP_MOE + " " + HELP_PUBLISHED,
        )
        if published_error:
            st.info(f"No published-count prediction for this allocation: {published_error}")
        for note in published_notes if show.startswith("post_processed") else []:
            st.caption(f"Published-count prediction: {note}.")
        sub = rows[rows["run"] == universe]
        label = HEAT_LABELS[show]
        st.plotly_chart(
            _heatmap(
                sub, show, f"{s[S.SCENARIO_NAME]} — {alloc.name}: {label} by geolevel × query"
            ),
            config={"toImageButtonOptions": {"filename": f"topdown_{universe}_{show}"}},
        )
        if alloc.universe == "persons":
            for note in held_exact_notes(alloc, n_states):
                st.caption(f"Held exact: {note}.")
        with st.expander("All queries (table)"):
            measured = sub["status"] == "measured"
            st.dataframe(
                display_frame(
                    sub.assign(
                        sigma=sub["sigma"].where(measured), moe90=sub["moe90"].where(measured)
                    ),
                    extra={
                        "sigma": "Noisy-measurement σ (persons)",
                        "moe90": "Noisy-measurement 90% MOE (persons)",
                    },
                ),
                hide_index=True,
                width="stretch",
            )
            st.download_button(
                "Download allocation JSON",
                S.json_bytes({u: a.to_dict() for u, a in runs.items()}),
                file_name=f"{s[S.TOPDOWN_PRESET]}.topdown.json",
                mime="application/json",
            )
    if alloc.citation:
        st.caption(f"Source: {alloc.citation}")


render()
