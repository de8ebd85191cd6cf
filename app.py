"""PHExplore Streamlit app: wires the pages in ``pages/`` with ``st.navigation``.

Start it with ``make run`` or ``phexplore app`` (both serve on 127.0.0.1). The sidebar holds the
settings shared by every page — the scenario name, the δ at which ε is reported and the
ρ → (ε, δ) conversion used for headline numbers — kept in the session while moving between pages,
and the page's link: the open scenario and the working budget, bound to the address's query
parameters (Streamlit's ``bind="query-params"``; :mod:`phexplore.app.links`), so a reload, a second
tab or a shared link opens the same scenario and budget. Scenarios and runs live in the workspace
(:mod:`phexplore.app.workspace`), shared by every page of the server.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from phexplore import api as R
from phexplore.api.budgets import CONVERSIONS, PHExploreError
from phexplore.app import links, page_style
from phexplore.app import state as S

# Icons: Material symbols are drawn with the font bundled in Streamlit's own static files (served
# from this machine); the browser-tab icon is a PNG in assets/ (a Material page_icon would be
# fetched from an outside font host, and emoji need a colour-emoji font that is often missing).
ICON = str(Path(__file__).resolve().parent / "assets" / "phexplore-icon.png")
PAGES = {
    "Start": [
        st.Page("pages/start.py", title="Start here", icon=":material/school:", default=True),
    ],
    "Plan": [
        st.Page("pages/phsafe_planner.py", title="PHSafe planner", icon=":material/calculate:"),
        st.Page(
            "pages/topdown_planner.py", title="TopDown planner", icon=":material/account_tree:"
        ),
        st.Page("pages/privacy_loss.py", title="Privacy loss (ε, δ)", icon=":material/lock:"),
    ],
    "Test": [
        st.Page("pages/run.py", title="Run", icon=":material/play_arrow:"),
        st.Page("pages/results.py", title="Results", icon=":material/bar_chart:"),
    ],
    "Decide": [
        st.Page("pages/scenarios.py", title="Scenarios", icon=":material/compare:"),
        st.Page("pages/budget_session.py", title="Budget session", icon=":material/groups:"),
    ],
}


def _sync_delta() -> None:
    """Copy the sidebar δ to the session (and to the Privacy-loss page's own δ picker)."""
    s = st.session_state
    s[S.DELTA] = float(s["sb_delta"])
    if "pl_delta" in s:
        s["pl_delta"] = s[S.DELTA]


def _sidebar() -> None:
    """Settings shared by all pages (persisted across page changes)."""
    s = st.session_state
    with st.sidebar:
        S.sync_widget("sb_scenario_name", S.SCENARIO_NAME)
        st.text_input(
            "Scenario name",
            key="sb_scenario_name",
            on_change=S.guarded(
                lambda: s.__setitem__(S.SCENARIO_NAME, s["sb_scenario_name"] or "Scenario"),
                "app: update",
            ),
            help="Labels every chart and download of this session.",
        )
        S.sync_widget("sb_delta", S.DELTA)
        st.select_slider(
            "δ for reported ε",
            options=list(S.DELTA_CHOICES),
            format_func=S.fmt_delta,
            key="sb_delta",
            on_change=S.guarded(_sync_delta, "app: sync_delta"),
            help=S.HELP_DELTA,
        )
        S.sync_widget("sb_conversion", S.CONVERSION)
        st.selectbox(
            "Reported ρ → ε conversion",
            list(CONVERSIONS),
            format_func=S.conversion_label,
            key="sb_conversion",
            on_change=S.guarded(
                lambda: s.__setitem__(S.CONVERSION, s["sb_conversion"]), "app: update"
            ),
            help=S.HELP_CONVERSION,
        )


# Session keys (comments, not docstrings: Streamlit's "magic" would draw a bare string in app.py):
# the link's query parameters were read (once, on the session's first run); what opening the
# link did, shown once at the top of the page.
LINK_READ = "link_read"
LINK_NOTES = "link_notes"


def _read_link() -> None:
    """On a session's first run: open the scenario and apply the budget its address names,
    saying what happened (an unknown or altered scenario or budget is reported, not used)."""
    s = st.session_state
    if s.get(LINK_READ):
        return
    s[LINK_READ] = True
    notes: list[tuple[str, str]] = []
    named = st.query_params.get(links.SCENARIO_PARAM)
    if named:
        try:
            scenario = links.find_scenario(named, s[S.SAVED])
            S.open_scenario(scenario)
            notes.append(("success", f"Opened scenario “{scenario.name}” from the link."))
        except PHExploreError as exc:
            notes.append(("error", str(exc)))
    code = st.query_params.get(links.BUDGET_PARAM)
    if code:
        try:
            S.apply_linked_budget(links.decode_budget(code))
            notes.append(("info", "Applied the working budget the link carries."))
        except PHExploreError as exc:
            notes.append(("error", str(exc)))
    s[LINK_NOTES] = notes


def _open_from_sidebar() -> None:
    s = st.session_state
    label = s.get(links.SCENARIO_PARAM) or ""
    if not label:
        s[S.OPEN_SCENARIO] = None
        return
    S.open_scenario(links.find_scenario(label, s[S.SAVED]))


def _budget_from_sidebar() -> None:
    code = st.session_state.get(links.BUDGET_PARAM) or ""
    if code:
        S.apply_linked_budget(links.decode_budget(code))


def _link_widgets() -> None:
    """The page's link, drawn after the page (so it holds what the page changed): the open
    scenario and the working budget's code, both bound to the address."""
    s = st.session_state
    saved = s[S.SAVED]
    labels = {name: links.scenario_label(sc) for name, sc in saved.items()}
    opened = s.get(S.OPEN_SCENARIO)
    s[links.SCENARIO_PARAM] = labels.get(opened or "", "")
    s[links.BUDGET_PARAM] = S.link_budget_code()
    with st.sidebar:
        st.selectbox(
            "Open scenario",
            ["", *labels.values()],
            format_func=lambda v: v or "(none: the planners' budgets)",
            key=links.SCENARIO_PARAM,
            bind="query-params",
            on_change=S.guarded(_open_from_sidebar, "app: open scenario"),
            help="Loads a saved scenario into the planners. The page's address names it (with "
            "its budget's fingerprint) and any change you make to its budget: share the address "
            "and others open the same scenario and budget.",
        )
        with st.expander("Link to this budget"):
            st.text_input(
                "Working budget code",
                key=links.BUDGET_PARAM,
                bind="query-params",
                on_change=S.guarded(_budget_from_sidebar, "app: budget code"),
                help="The working budgets where they differ from the open scenario (or the "
                "shipped defaults), as carried in the page's address; paste a code to apply it. "
                "Empty: nothing differs.",
            )
            st.caption(
                f"Workspace: `{S.workspace().root}` (scenarios and runs are kept there, not in "
                "the link)."
            )


def _notes() -> None:
    """Once per session: what the link did, and whether the workspace can be used."""
    s = st.session_state
    for kind, text in s.pop(LINK_NOTES, None) or []:
        getattr(st, kind)(text, icon=":material/link:")
    problem = S.workspace_problem()
    if problem:
        st.error(
            f"The workspace cannot be used: {problem}. Until the server stops, scenarios and runs "
            "are kept in a temporary folder.",
            icon=":material/folder_off:",
        )


def main() -> None:
    """Configure the page, initialise the session and run the selected page."""
    st.set_page_config(page_title="PHExplore", page_icon=ICON, layout="wide")
    page_style.apply()  # room for tables at 1366 px, a visible keyboard-focus ring
    S.init_state()
    s = st.session_state
    root = S.workspace().root
    R.BOARD.touch(root, S.page_id())
    R.follow(s, root)
    R.collect_finished(s, S.RUNS)
    _read_link()
    nav = st.navigation(PAGES)
    _sidebar()
    _notes()
    try:
        nav.run()
    except Exception as exc:  # one line on the page, the traceback in the log (never on screen)
        S.show_failure(exc, f"the {nav.title} page")
    _link_widgets()


main()
