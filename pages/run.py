"""Run page: run TopDown or PHSafe on a shipped sample or an uploaded file, with progress and cancel.

Thin page: data loading and validation are :mod:`engine.data`'s (problems listed as a readable
list), runs and metrics go through :mod:`phexplore.api` (the one run pipeline, :mod:`engine.runs`)
to the engines. Results are kept in the session (Results page) and downloadable here. The widgets
live in :mod:`pages.run_parts`, one job per module: the data picker (``data_source``), the TopDown
form (``topdown_form``, ``topdown_budget``), the PHSafe form (``phsafe_form``), the options both
share (``run_options``), the progress/cancel panel right under the Run button (``progress``),
starting a job in the workspace (``jobs``) and the latest result of the engine shown
(``latest_result``).
"""

from __future__ import annotations

import streamlit as st

from pages.run_parts.latest_result import latest_result
from pages.run_parts.phsafe_form import phsafe_form
from pages.run_parts.topdown_form import topdown_form
from phexplore.app import state as S


def render() -> None:
    """Draw the page."""
    S.init_state()
    st.title("Run an engine")
    st.caption(
        "Run the full TopDown or PHSafe engine on public test data and measure its error against "
        "the truth. Start small (one county, one state): the first results appear in seconds."
    )
    engine = st.radio(
        "Engine",
        ["topdown", "phsafe"],
        format_func={"topdown": "TopDown (redistricting data)", "phsafe": "PHSafe (S-DHC)"}.get,
        horizontal=True,
        key="run_engine",
        persist_state="session",
        help="TopDown protects the redistricting (P.L. 94-171) tables; PHSafe the S-DHC household tables.",
    )
    if engine == "topdown":
        topdown_form()
    else:
        phsafe_form()
    latest_result(engine)


render()
