"""PHExplore Streamlit app: wires the pages in ``pages/`` with ``st.navigation``.

Start it with ``make run`` or ``phexplore app`` (both serve on 127.0.0.1). The sidebar holds the
settings shared by every page — the scenario name, the δ at which ε is reported and the
ρ → (ε, δ) conversion used for headline numbers — kept in the session while moving between pages.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from phexplore import api as R
from phexplore.api.budgets import CONVERSIONS
from phexplore.app import page_style
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


def main() -> None:
    """Configure the page, initialise the session and run the selected page."""
    st.set_page_config(page_title="PHExplore", page_icon=ICON, layout="wide")
    page_style.apply()  # room for tables at 1366 px, a visible keyboard-focus ring
    S.init_state()
    S.keep_widget_state()
    R.collect_finished(st.session_state, S.RUNS)
    nav = st.navigation(PAGES)
    _sidebar()
    try:
        nav.run()
    except Exception as exc:  # one line on the page, the traceback in the log (never on screen)
        S.show_failure(exc, f"the {nav.title} page")


main()
