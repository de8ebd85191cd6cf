"""TopDown planner page: total ρ per universe, geolevel shares and per-level query shares, every
number beside the baseline's.

Thin page: shares are edited as exact fractions ("447/4099") or decimals and validated by
:class:`~phexplore.api.budgets.TopDownAllocation` (messages shown in place, naming the level and the
actual sum); σ and MOE per query come from :func:`phexplore.app.planner_tables.topdown_frames` (TDA App. B),
the predicted error of the published counts from :func:`phexplore.app.planner_tables.topdown_post_processed`
(docs/science.md §7). The committee's table, the baseline bar, the share editors and the heatmap
are in :mod:`pages.planner_parts`.
"""

from __future__ import annotations

import streamlit as st

from pages.planner_parts.baseline_bar import baseline_bar, scaled_message
from pages.planner_parts.committee_view import committee_section
from pages.planner_parts.topdown_shares import (
    check_pending,
    editor_keys,
    problem_list,
    share_editors,
)
from pages.planner_parts.topdown_views import (
    HEAT_LABELS,
    compared,
    heatmap,
    heatmap_title,
    queries_table,
)
from phexplore.api.budgets import (
    SPREAD_LABEL,
    PHExploreError,
    TopDownAllocation,
    default_states,
    exact_from_input,
    held_exact_notes,
    load_topdown_preset,
    preset_spine,
    spent_label,
    spread_invariant_share,
)
from phexplore.api.planning import relative, scale_topdown_runs
from phexplore.app import planner_tables as T
from phexplore.app import state as S
from phexplore.app.committee import percent
from phexplore.app.guide import epsilon_reading

BASE_KEY = "td_base"
ERROR_KEY = "td_rho_error"
TOASTED_KEY = "td_toasted"
STALE_CSS = (
    "<style>div:has(> [class*='st-key-td_stale_label']) ~ div{opacity:.45;"
    "filter:grayscale(100%);}[class*='st-key-td_stale_label']{color:#7a5200;}</style>"
)
HELP_PUBLISHED = (
    "Published count: the predicted error after least squares, non-negativity and rounding "
    "(docs/science.md §7), on a shipped count profile — the Rhode Island 2010 blocks for "
    "allocations on the folded VOTINGAGE × RACEETH schema; for the 2,016-cell production schema "
    "a generated national population of 20,000,000 persons (51 states, 206 counties of realistic "
    "sizes; one state of it, Kentucky with 8 counties, when the run has 1 state or no US level). "
    "Exact for the least-squares stage; validated against repeated runs on generated populations "
    "(docs/prediction.md). ⚠ marks a cell outside the validated range (hover for why; the table "
    "says it too)."
)


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


def _scale(target: str, pct: float) -> str:
    """Scale the shown run's total ρ, or one geolevel's budget, by ``pct`` percent (exact)."""
    s = st.session_state
    universe = s["td_universe"]
    runs = dict(s[S.TOPDOWN])
    before = float(runs[universe].rho)
    levels = {} if target == "total" else {target: pct}
    runs = scale_topdown_runs(runs, 0 if levels else pct, levels, only=universe)
    s[S.TOPDOWN] = runs
    s.pop(BASE_KEY, None)
    S.bump_editor_version()
    what = (
        f"the {universe} run's total ρ" if not levels else f"the {universe} run's {target} budget"
    )
    return scaled_message(what, pct, before, float(runs[universe].rho))


def _controls(runs: dict[str, TopDownAllocation]) -> str:
    """Preset, universe and total ρ; returns the universe shown."""
    s = st.session_state
    top = st.columns([0.36, 0.14, 0.25, 0.25], vertical_alignment="bottom")
    options = S.preset_options("topdown")
    if "td_preset_pick" not in s:
        s["td_preset_pick"] = s[S.TOPDOWN_PRESET]
    top[0].selectbox(
        "Preset",
        list(options),
        format_func=options.get,
        key="td_preset_pick",
        persist_state="session",
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
        persist_state="session",
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
        persist_state="session",
        on_change=S.guarded(_on_rho, "topdown planner: on_rho"),
        args=(universe,),
        help=(S.HELP_RHO if what == "ρ" else "Pure-DP budget ε (two-sided geometric noise).")
        + " Shares stay as they are; every query's budget scales with it.",
    )
    return str(universe)


def _metrics(summary: dict, base_summary: dict, base_label: str) -> None:
    """ρ per run and in total, each with Δ vs the baseline; ε of all runs with its Δ."""
    s = st.session_state
    delta, conversion = float(s[S.DELTA]), s[S.CONVERSION]
    m = st.columns(len(summary["runs"]) + 2)
    for i, (name, entry) in enumerate(summary["runs"].items()):
        pure = entry["mechanism"] == "puredp"
        value = entry["epsilon"] if pure else entry["rho"]
        base_entry = base_summary["runs"].get(name) or {}
        base = (
            base_entry.get("epsilon" if pure else "rho")
            if base_entry.get("mechanism") == entry["mechanism"]
            else None
        )
        m[i].metric(
            f"{name}: {'ε (pure DP)' if pure else 'ρ'}",
            f"{value:.4f}",
            delta=_delta_text(value, base),
            delta_color="off",
            delta_arrow="off",
            help=S.HELP_RHO + f" Δ against the baseline ({base_label}).",
        )
    if "rho_total" in summary:
        total, base_total = summary["rho_total"], base_summary.get("rho_total")
        eps = summary["epsilon_total"][conversion]
        base_eps = base_summary.get("epsilon_total")
        base_eps = base_eps.get(conversion) if isinstance(base_eps, dict) else None
        m[-2].metric(
            "All runs: total ρ",
            f"{total:.4f}",
            delta=_delta_text(total, base_total),
            delta_color="off",
            delta_arrow="off",
            help="ρ adds over runs.",
        )
        m[-1].metric(
            f"ε at δ = {S.fmt_delta(delta)}",
            f"{eps:.2f}",
            delta=_delta_text(eps, base_eps, digits=2),
            delta_color="off",
            delta_arrow="off",
            help=f"ε of all runs by {S.conversion_label(conversion)}.",
        )
    else:
        m[-2].metric("All runs: total ε", f"{summary['epsilon_total']:.4f}")


def _delta_text(value: float, base: object, digits: int = 4) -> str | None:
    """ "Δ −0.7669 (−30.0%) vs baseline", or None when the baseline has no such number (e.g. a
    ρ against a pure-DP ε)."""
    if not isinstance(base, int | float):
        return None
    diff = value - float(base)
    rel = percent(relative(value, base))
    return f"Δ {diff:+.{digits}f} ({rel}) vs baseline".replace("-", "−") if rel else None


def render() -> None:
    """Draw the page."""
    S.init_state()
    s = st.session_state
    s.setdefault(ERROR_KEY, None)
    runs: dict[str, TopDownAllocation] = dict(s[S.TOPDOWN])
    delta = float(s[S.DELTA])

    st.title("TopDown planner")
    st.caption(
        "Split each run's total ρ over geolevels and, within a level, over query groups "
        "(σ² = 1/(ρ·c·d), TDA App. B). Every number is shown beside the baseline's, with Δ."
    )
    universe = _controls(runs)
    alloc = runs[universe]
    targets = {"total": "total ρ (every level)"}
    targets.update({lv: f"{lv} only" for lv in alloc.geolevels})
    base = baseline_bar("topdown", "td", targets, _scale)
    runs = dict(s[S.TOPDOWN])
    alloc = runs[universe]

    level_key, query_key = editor_keys(universe)
    base_all = s.setdefault(BASE_KEY, {})
    if level_key not in s and query_key not in s or universe not in base_all:
        base_all[universe] = alloc
    # Validate the editors' pending edits before drawing anything, so the error sits at the top
    # of the page and the offending column headers and row labels are marked in the editors.
    pending = check_pending(alloc, base_all[universe], universe)
    if s[ERROR_KEY]:
        st.error(f"Not applied: {s[ERROR_KEY]}", icon=":material/warning:")
    if pending.candidate is None:
        st.error(
            "**Invalid shares — not applied.** The numbers below are stale: they show the last "
            f"valid allocation until the marked cells (⚠) are fixed.\n\n"
            f"{problem_list(pending.problems) or '- ' + str(pending.invalid)}",
            icon=":material/warning:",
        )
        if s.get(TOASTED_KEY) != pending.invalid:
            st.toast(f"Invalid shares: {pending.invalid}", icon=":material/warning:")
        s[TOASTED_KEY] = pending.invalid
    else:
        s[TOASTED_KEY] = None
        runs[universe] = pending.candidate
        s[S.TOPDOWN] = runs
        alloc = pending.candidate
    base_runs = dict(base.topdown or {})
    st.markdown(
        f"Working allocations: **{S.budget_badge('topdown')}** · compared with the baseline "
        f"**{base.label}**"
    )

    states_key = f"td_states_{alloc.name}"
    s.setdefault(states_key, default_states(alloc))
    n_states = int(s[states_key])
    spread = bool(s[S.SPREAD_INVARIANT])
    shown_runs = _spread(runs, n_states) if spread else runs
    shown_base = _spread(base_runs, n_states) if spread and base_runs else base_runs

    results = st.container(key="td_results")
    with results:
        if pending.candidate is None:
            # Everything after this label in the container is greyed (CSS sibling rule).
            st.html(STALE_CSS)
            st.container(key="td_stale_label").markdown(
                "**Stale** — computed from the last valid allocation; fix the marked shares."
            )
        rows, summary = T.topdown_frames(shown_runs, delta, n_states=n_states)
        base_rows, base_summary = (
            T.topdown_frames(shown_base, delta, n_states=n_states)
            if shown_base
            else (rows, summary)
        )
        _metrics(summary, base_summary, base.label)
        total_eps = (
            summary["epsilon_total"][s[S.CONVERSION]]
            if "rho_total" in summary
            else summary["epsilon_total"]
        )
        st.caption(f"**ε in words (all runs):** {epsilon_reading(float(total_eps), delta)}")
        for name, entry in summary["runs"].items():
            pure = entry["mechanism"] == "puredp"
            nominal = entry["epsilon"] if pure else entry["rho"]
            spent = entry["epsilon_spent"] if pure else entry["rho_spent"]
            st.caption(f"{name}: {spent_label(nominal, spent, 'ε' if pure else 'ρ')}.")
        if shown_base:
            committee_section(
                f"baseline {base.label}",
                shown_base,
                f"working ({S.topdown_origin()})",
                shown_runs,
                key="td_committee",
                n_states=n_states,
                heading="Published-count error: baseline → working",
            )

    st.subheader("Shares")
    share_editors(pending, universe, beside=lambda: _run_settings(states_key, alloc.name))

    published_error = None
    try:
        rows, notes = T.topdown_post_processed(shown_runs, n_states=n_states)
        if shown_base:
            base_rows, _ = T.topdown_post_processed(shown_base, n_states=n_states)
    except PHExploreError as exc:
        published_error, notes = str(exc), []
    results2 = st.container(key="td_results_views")
    with results2:
        if pending.candidate is None:
            st.container(key="td_stale_label_views").markdown("**Stale** — see above.")
        show = st.radio(
            "Heatmap shows",
            [k for k in HEAT_LABELS if k in rows.columns],
            format_func=HEAT_LABELS.get,
            horizontal=True,
            key="td_heat_value",
            persist_state="session",
            help=S.HELP_MOE + " " + HELP_PUBLISHED,
        )
        if published_error:
            st.info(f"No published-count prediction for this allocation: {published_error}")
        for note in notes if show.startswith("post_processed") else []:
            st.caption(f"Published-count prediction: {note}.")
        both = compared(rows, base_rows if shown_base else rows.iloc[0:0])
        sub = both[both["run"] == universe]
        if show.startswith("post_processed") and "post_processed_holds" in rows.columns:
            outside = rows[(rows["run"] == universe) & (rows["post_processed_holds"] == False)]  # noqa: E712
            if len(outside):
                st.caption(
                    f"⚠ {len(outside)} published-count cells lie outside the range where the "
                    "prediction was validated against runs (hover a cell, or see the table's "
                    "last columns)."
                )
        st.plotly_chart(
            heatmap(sub, show, heatmap_title(HEAT_LABELS[show], S.topdown_origin(), universe)),
            config={"toImageButtonOptions": {"filename": f"topdown_{universe}_{show}"}},
            alt=f"Heatmap of the {HEAT_LABELS[show]} by geolevel and query group, {universe} run",
        )
        if alloc.universe == "persons":
            for note in held_exact_notes(alloc, n_states):
                st.caption(f"Held exact: {note}.")
        with st.expander("All queries (table)", expanded=False):
            all_columns = st.toggle(
                "Show every column (cells, shares, ρ per query)",
                key="td_all_columns",
                persist_state="session",
            )
            queries_table(sub, show, base.label, all_columns)
            st.download_button(
                "Download allocation JSON",
                S.json_bytes({u: a.to_dict() for u, a in runs.items()}),
                file_name=f"{s[S.TOPDOWN_PRESET]}.topdown.json",
                mime="application/json",
            )
    if alloc.citation:
        st.caption(f"Source: {alloc.citation}")


def _spread(runs: dict[str, TopDownAllocation], n_states: int) -> dict[str, TopDownAllocation]:
    return {
        name: spread_invariant_share(a, n_states) if a.universe == "persons" else a
        for name, a in runs.items()
    }


def _run_settings(states_key: str, alloc_name: str) -> None:
    """Spine, number of states and the held-exact share: used by the Run page and the numbers."""
    s = st.session_state
    S.sync_widget("td_spine", S.SPINE)
    st.radio(
        "Geographic spine for runs",
        list(S.SPINES),
        format_func=S.SPINES.get,
        key="td_spine",
        persist_state="session",
        on_change=S.guarded(
            lambda: s.__setitem__(S.SPINE, s["td_spine"]), "topdown planner: update"
        ),
        help="The hierarchy TopDown works down. The AIAN-style spine adds a branch for "
        "American Indian/Alaska Native areas; optimized block groups regroup blocks to bring "
        "off-spine entities closer to the spine (SPN §3–§4). Used by the Run page.",
    )
    ran_on = preset_spine(alloc_name)
    if ran_on:
        st.caption(
            f"{alloc_name.split(' (')[0]} ran on **{ran_on['kind']} block groups** around "
            f"{ran_on['targets']} ({ran_on.get('citation', '')}). With the allocation's own "
            "spine, runs use it where the data carry places (generated populations) and the "
            "conventional spine otherwise; every run's results name the spine it used."
        )
    c2, c3 = st.columns([0.4, 0.6], vertical_alignment="bottom")
    c2.number_input(
        "States in the run's geography (1–100)",
        min_value=1,
        max_value=100,
        step=1,
        key=states_key,
        persist_state="session",
        help="1 for Rhode Island, a county or any part of one state; 52 for the US. The "
        "US and state total populations are held exact (TDA §5.2), so their shares buy "
        "no measurement; with one state a US level is bypassed into it (SPN §5).",
    )
    S.sync_widget("td_spread", S.SPREAD_INVARIANT)
    c3.checkbox(
        "Spread the held-exact shares over each level's other queries",
        key="td_spread",
        persist_state="session",
        on_change=lambda: s.__setitem__(S.SPREAD_INVARIANT, s["td_spread"]),
        help=f"{SPREAD_LABEL}. Production assigned State TOTAL a share although it is "
        "invariant outside AIAN-split states. Used by the Run page.",
    )
    if s[S.SPREAD_INVARIANT]:
        c3.warning(f"Departure from production: {SPREAD_LABEL}.")


render()
