"""Scenarios page: name, save, load (JSON), duplicate, and compare two scenarios side by side.

Thin page over :mod:`phexplore.planning.scenarios`: a :class:`~phexplore.planning.scenarios.Scenario`
holds either the working PHSafe budget or the working TopDown allocations, the reporting choices
and the ``metrics.json`` of attached runs; :func:`~phexplore.planning.scenarios.compare` gives the
ρ, ε, MOE and run-result rows shown here, :func:`~phexplore.planning.changes.change_sentence` what
changed, and for two TopDown scenarios the committee's table (:mod:`pages.planner_parts`) the
predicted error of their published counts by geolevel.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from pages.planner_parts.committee_view import committee_section
from phexplore import api as R
from phexplore.api.budgets import PHExploreError, short_fingerprint
from phexplore.api.planning import Scenario, change_sentence, compare, relative
from phexplore.app import state as S
from phexplore.app.charts import chart_title, readable
from phexplore.app.naming import display_frame, measure_label
from phexplore.app.report import build_report_html

ERROR_KEY = "sc_error"
KINDS = {"phsafe": "PHSafe budget (S-DHC)", "topdown": "TopDown allocations (redistricting)"}


def _saved() -> dict[str, Scenario]:
    return st.session_state[S.SAVED]


def _store(scenario: Scenario) -> None:
    """Save in the workspace (one of the same name is replaced: undoable)."""
    S.save_scenario(scenario)


def _current(kind: str, name: str, notes: str, run_ids: list[int]) -> Scenario:
    """The working scenario of ``kind`` with the chosen session runs of its exact budget attached."""
    s = st.session_state
    scenario = Scenario(
        name=name,
        kind=kind,
        phsafe=S.effective_phsafe() if kind == "phsafe" else None,
        topdown=dict(s[S.TOPDOWN]) if kind == "topdown" else None,
        delta=float(s[S.DELTA]),
        conversion=s[S.CONVERSION],
        spine=s[S.SPINE],
        notes=notes,
    )
    chosen = [r.metrics for r in s[S.RUNS] if r.id in run_ids]
    return replace(scenario, results=tuple(scenario.matching_runs(chosen)))


def _on_save() -> None:
    s = st.session_state
    try:
        scenario = _current(
            s["sc_kind"],
            (s.get("sc_name") or "").strip(),
            s.get("sc_notes", ""),
            s.get("sc_runs", []),
        )
        replaced = scenario.name in _saved()
        _store(scenario)
        s[S.SCENARIO_NAME] = scenario.name
        s["sb_scenario_name"] = scenario.name
        s[ERROR_KEY] = None
        s["sc_flash"] = f"Saved “{scenario.name}” ({KINDS[scenario.kind]}) in the workspace" + (
            " — it replaces the earlier one (Undo below brings that back)." if replaced else "."
        )
    except PHExploreError as exc:
        s[ERROR_KEY] = str(exc)


def _on_load(name: str) -> None:
    """Make a saved scenario the working one (planners, δ, conversion, spine, name); the Run
    page's data, allocation choice and seed stay as they are."""
    s = st.session_state
    S.open_scenario(_saved()[name])
    s[ERROR_KEY] = None
    s["sc_flash"] = f"Loaded “{name}” into the planners."


def _on_duplicate(name: str) -> None:
    s = st.session_state
    new = (s.get("sc_dup_name") or "").strip() or f"{name} (copy)"
    try:
        if new in _saved():
            raise PHExploreError(f"a scenario named “{new}” already exists; pick another name")
        _store(_saved()[name].duplicate(new))
        s[ERROR_KEY] = None
        s["sc_flash"] = f"Duplicated “{name}” as “{new}”."
    except PHExploreError as exc:
        s[ERROR_KEY] = str(exc)


def _on_delete(name: str) -> None:
    """Delete a saved scenario from the workspace (Undo brings it back)."""
    s = st.session_state
    S.delete_scenario(name)
    s["sc_flash"] = f"Deleted “{name}” (Undo below brings it back)."


def _on_undo() -> None:
    s = st.session_state
    restored = S.undo_delete()
    s["sc_flash"] = f"Restored {restored}." if restored else "Nothing to undo."


def _on_upload() -> None:
    s = st.session_state
    upload = s.get("sc_upload")
    if upload is None:
        return
    try:
        scenario = Scenario.from_json(upload.getvalue(), source=upload.name)
        _store(scenario)
        s[ERROR_KEY] = None
        s["sc_flash"] = f"Loaded “{scenario.name}” from {upload.name}; it is in the saved list."
    except PHExploreError as exc:
        s[ERROR_KEY] = str(exc)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        # A JSON value of the wrong shape that the validator did not catch: never a traceback.
        s[ERROR_KEY] = (
            f"{upload.name}: not a valid PHExplore scenario file: {S.describe_bad_input(exc)}"
        )


def _moe_differences(a: Scenario, b: Scenario, moe: pd.DataFrame) -> None:
    """Only the MOEs that differ, with B − A and Δ%, as a table and a bar chart of the differences."""
    keys = [c for c in moe.columns if c not in ("moe_a", "moe_b", "difference")]
    differs = moe["moe_a"].isna() | moe["moe_b"].isna() | (moe["difference"].fillna(0) != 0)
    changed = moe[differs].copy()
    st.markdown(f"**90% MOE: {len(changed)} of {len(moe)} rows differ**")
    if changed.empty:
        st.success(f"All {len(moe)} MOEs are the same in “{a.name}” and “{b.name}”.")
        return
    changed["relative"] = [
        relative(vb, va) for va, vb in zip(changed["moe_a"], changed["moe_b"], strict=True)
    ]
    shown = display_frame(changed, extra={"moe_a": "A", "moe_b": "B", "relative": "Δ%"})
    shown["Δ%"] = shown["Δ%"] * 100
    st.dataframe(
        shown,
        hide_index=True,
        width="stretch",
        alt=f"The 90% MOEs that differ between “{a.name}” (A) and “{b.name}” (B)",
        column_config={
            "A": st.column_config.NumberColumn(help=f"“{a.name}”", format="%.1f"),
            "B": st.column_config.NumberColumn(help=f"“{b.name}”", format="%.1f"),
            "Difference (B − A)": st.column_config.NumberColumn("Δ (B − A)", format="%+.1f"),
            "Δ%": st.column_config.NumberColumn(help="(B − A) / A, in percent.", format="%+.1f%%"),
        },
    )
    label_cols = display_frame(changed[keys])
    labels = label_cols.astype(str).agg(" · ".join, axis=1).tolist()
    fig = go.Figure(
        go.Bar(
            x=changed["difference"].fillna(0),
            y=labels,
            orientation="h",
            texttemplate="%{x:+.1f}",
            textposition="inside",
            insidetextanchor="middle",
            marker_color=["#D55E00" if v > 0 else "#0072B2" for v in changed["difference"]],
            name="B − A",
        )
    )
    unit = "persons" if a.kind == "topdown" else "persons or households"
    fig.update_xaxes(title=f"Difference of 90% MOE, B − A ({unit})")
    fig.update_yaxes(title="", autorange="reversed")
    fig.update_layout(
        title=chart_title("MOEs that differ: B − A", f"A = {a.origin()}", f"B = {b.origin()}"),
        height=max(260, 40 + 28 * len(changed)),
        showlegend=False,
    )
    st.plotly_chart(
        readable(fig),
        config={"toImageButtonOptions": {"filename": "comparison_moe"}},
        alt="Bar chart of the MOE differences B − A",
    )


def _comparison(a: Scenario, b: Scenario) -> None:
    rows = compare(a, b)
    st.markdown(f"**What changed:** {change_sentence(a, b)}")
    totals = pd.DataFrame(rows["totals"]).rename(columns={"a": "A", "b": "B"})
    totals["measure"] = totals["measure"].map(measure_label)
    totals["relative"] = [relative(vb, va) for va, vb in zip(totals["A"], totals["B"], strict=True)]
    c1, c2 = st.columns([0.5, 0.5])
    with c1:
        st.markdown("**Privacy loss**")
        shown = display_frame(totals, extra={"relative": "Δ%"})
        shown["Δ%"] = shown["Δ%"] * 100
        st.dataframe(
            shown,
            hide_index=True,
            width="stretch",
            alt=f"Total ρ and ε of “{a.name}” (A) and “{b.name}” (B) with the difference",
            column_config={
                "Measure": st.column_config.TextColumn(width=170),
                "A": st.column_config.NumberColumn(help=f"“{a.name}”", format="%.3f"),
                "B": st.column_config.NumberColumn(help=f"“{b.name}”", format="%.3f"),
                "Difference (B − A)": st.column_config.NumberColumn("Δ (B − A)", format="%+.3f"),
                "Δ%": st.column_config.NumberColumn(format="%+.1f%%"),
            },
        )
        st.download_button(
            "Download totals (CSV)",
            R.tidy_bytes(totals.rename(columns={"A": a.name, "B": b.name}), "csv"),
            file_name="comparison_totals.csv",
            mime="text/csv",
        )
    with c2:
        st.markdown(f"**A** = “{a.name}” ({a.origin()})  \n**B** = “{b.name}” ({b.origin()})")
        st.download_button(
            "Download the report of B compared with A (HTML)",
            lambda: build_report_html(b, compare_with=a).encode("utf-8"),
            file_name=f"{b.name} vs {a.name}.report.html",
            mime="text/html",
            key="sc_pair_report_download",
            help="B's session report, opening with what changed from A and (TopDown) the "
            "published-count error of both by geolevel.",
            on_click="ignore",
        )
    if a.kind == b.kind == "topdown" and a.topdown and b.topdown:
        committee_section(
            f"A: {a.name}",
            a.topdown,
            f"B: {b.name}",
            b.topdown,
            key="sc_committee",
            heading="Published-count error: A → B",
        )
    moe = pd.DataFrame(rows["moe"])
    if moe.empty:
        st.info("MOEs are compared between scenarios of the same kind (PHSafe or TopDown).")
    elif a.kind == "phsafe":
        _moe_differences(a, b, moe)
    else:
        with st.expander("Noisy-measurement MOEs that differ"):
            _moe_differences(a, b, moe)
    results = pd.DataFrame(rows["results"])
    st.markdown("**Run results (latest attached run of each)**")
    if results.empty:
        st.caption("Attach runs when saving (both scenarios need one) to compare their MAE.")
    else:
        st.caption(R.TRUTH_NOTE)
        st.dataframe(
            display_frame(results, extra={"mae_a": f"MAE {a.name}", "mae_b": f"MAE {b.name}"}),
            hide_index=True,
            width="stretch",
            alt="Mean absolute error of the latest attached run of each scenario",
        )


def render() -> None:
    """Draw the page."""
    S.init_state()
    s = st.session_state
    s.setdefault(ERROR_KEY, None)
    st.title("Scenarios")
    st.caption(
        "A scenario is a named set of budget choices (a PHSafe budget or TopDown allocations, with "
        "δ, the reported conversion and the spine) plus the results of runs made with it. Saved "
        "scenarios are kept in the workspace (a reload, another tab or a restart finds them); "
        "compare them side by side, download them as JSON, or share the page's address."
    )
    flash = s.pop("sc_flash", None)
    if flash:
        st.success(flash)
    if s[ERROR_KEY]:
        st.error(s[ERROR_KEY])
    undo = [item for item in s.get(S.UNDO) or [] if item[0] == "scenario"]
    if undo:
        st.button(
            f"Undo: bring back {undo[-1][2]}",
            key="sc_undo_go",
            on_click=S.guarded(_on_undo, "scenarios: undo"),
            icon=":material/undo:",
        )
    problems = s.get(S.WS_PROBLEMS) or []
    if problems:
        with st.expander(f"The workspace holds {len(problems)} thing(s) it cannot use"):
            for line in problems:
                st.caption(line)

    left, right = st.columns(2)
    with left:
        st.subheader("Save the working scenario")
        if "sc_name" not in s:
            s["sc_name"] = s[S.SCENARIO_NAME]
        st.text_input(
            "Name",
            key="sc_name",
            persist_state="session",
            help="Saving under an existing name replaces it.",
        )
        st.radio(
            "What to save",
            list(KINDS),
            format_func=KINDS.get,
            horizontal=True,
            key="sc_kind",
            persist_state="session",
            help="A scenario holds one kind of budget: the PHSafe planner's or the TopDown planner's.",
        )
        kind = s["sc_kind"]
        working = _current(kind, "working", "", [])
        st.caption(f"Budget: **{S.budget_badge(kind)}**")
        runs = [r for r in s[S.RUNS] if working.is_mine(r.metrics)]
        others = sum(1 for r in s[S.RUNS] if r.engine == kind) - len(runs)
        ids = [r.id for r in runs]
        if s.get("sc_runs_kind") != kind or "sc_runs" not in s:
            s["sc_runs"], s["sc_runs_kind"] = ids, kind
        else:
            s["sc_runs"] = [i for i in s["sc_runs"] if i in ids]
        st.multiselect(
            "Attach run results",
            ids,
            format_func={r.id: r.label for r in runs}.get,
            key="sc_runs",
            persist_state="session",
            help="Runs of this session made with exactly this budget (same fingerprint); their "
            "metrics are saved with the scenario.",
        )
        if others:
            st.caption(
                f"{others} run(s) of this session used another budget and cannot be attached "
                "to this scenario."
            )
        st.text_area(
            "Notes",
            key="sc_notes",
            persist_state="session",
            height=68,
            help="Why this scenario; shown in reports.",
        )
        st.button(
            "Save scenario", type="primary", on_click=S.guarded(_on_save, "scenarios: on_save")
        )
        st.file_uploader(
            "Load a scenario JSON",
            type=["json"],
            key="sc_upload",
            on_change=S.guarded(_on_upload, "scenarios: on_upload"),
            help="A file downloaded from this page or written by `phexplore`.",
        )
    with right:
        st.subheader("Saved scenarios")
        saved = _saved()
        if not saved:
            st.info("Nothing saved yet.")
        else:
            summary = pd.DataFrame(
                [
                    {
                        "Scenario": sc.name,
                        "Kind": "TopDown" if sc.kind == "topdown" else "PHSafe",
                        "Budget": sc.origin(),
                        "Fingerprint": short_fingerprint(sc.fingerprint()),
                        "ρ": sc.headline()["rho"],
                        f"ε ({sc.conversion}) at δ": sc.headline()["epsilon"],
                        "δ": sc.delta,
                        "Runs": len(sc.results),
                    }
                    for sc in saved.values()
                ]
            )
            summary.columns = ["Scenario", "Kind", "Budget", "Fingerprint", "ρ", "ε", "δ", "Runs"]
            # Narrow columns: the whole list fits the half page at 1366 px (δ on demand).
            st.dataframe(
                summary,
                hide_index=True,
                width="stretch",
                alt="Saved scenarios of this session",
                column_order=["Scenario", "Kind", "Budget", "ρ", "ε", "Runs"],
                column_config={
                    "Scenario": st.column_config.TextColumn(width=110),
                    "Kind": st.column_config.TextColumn(width=70),
                    "Budget": st.column_config.TextColumn(
                        width=130, help="The budget's origin: a preset or “modified from …”."
                    ),
                    "ρ": st.column_config.NumberColumn(format="%.3f", width=60),
                    "ε": st.column_config.NumberColumn(
                        format="%.2f", width=55, help="ε at each scenario's δ and conversion."
                    ),
                    "Runs": st.column_config.NumberColumn(width=45),
                },
            )
            name = st.selectbox(
                "Scenario",
                list(saved),
                key="sc_pick",
                persist_state="session",
                help="The saved scenario the buttons below act on.",
            )
            b1, b2, b3 = st.columns(3)
            b1.button(
                "Load into planners",
                on_click=S.guarded(_on_load, "scenarios: on_load"),
                args=(name,),
                width="stretch",
            )
            b2.download_button(
                "Download JSON",
                saved[name].to_json().encode("utf-8"),
                file_name=f"{name}.scenario.json",
                mime="application/json",
                width="stretch",
            )
            b3.button(
                "Delete",
                key="sc_delete_go",
                on_click=S.guarded(_on_delete, "scenarios: on_delete"),
                args=(name,),
                width="stretch",
                help="Removes it from the workspace; Undo (above) brings it back.",
            )
            d1, d2 = st.columns([0.65, 0.35])
            d1.text_input(
                "Name of the copy",
                key="sc_dup_name",
                persist_state="session",
                placeholder=f"{name} (copy)",
                help="Duplicates keep the budgets but not the attached run results.",
            )
            d2.button(
                "Duplicate",
                on_click=S.guarded(_on_duplicate, "scenarios: on_duplicate"),
                args=(name,),
                width="stretch",
            )

    saved = _saved()
    if len(saved) >= 2:
        st.divider()
        st.subheader("Compare two scenarios")
        names = list(saved)
        c1, c2 = st.columns(2)
        a = c1.selectbox(
            "Scenario A",
            names,
            index=0,
            key="sc_cmp_a",
            persist_state="session",
            help="First scenario of the comparison.",
        )
        b = c2.selectbox(
            "Scenario B",
            names,
            index=1,
            key="sc_cmp_b",
            persist_state="session",
            help="Second scenario; differences are B − A.",
        )
        if a == b:
            st.info("Pick two different scenarios.")
        else:
            _comparison(saved[a], saved[b])


render()
