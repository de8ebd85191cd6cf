"""Start page: Plan → Test → Decide in three steps with a worked example, a glossary, and ε in words.

Thin page: the example's numbers come from :func:`phexplore.app.guide.worked_example` (the planner's own
functions), the reading of ε from :func:`phexplore.app.guide.epsilon_reading`, the terms from
:data:`phexplore.app.guide.GLOSSARY`.
"""

from __future__ import annotations

import streamlit as st

from phexplore.api.planning import phsafe_summary
from phexplore.app import state as S
from phexplore.app.guide import GLOSSARY, epsilon_reading, guided_steps, worked_example

PAGE_FILES = {
    "PHSafe planner": "pages/phsafe_planner.py",
    "Run": "pages/run.py",
    "Scenarios → Budget session": "pages/scenarios.py",
}


@st.cache_data(show_spinner=False)
def _example(delta: float, conversion: str) -> dict:
    return worked_example(delta, conversion)


def render() -> None:
    """Draw the page."""
    S.init_state()
    s = st.session_state
    delta, conversion = float(s[S.DELTA]), str(s[S.CONVERSION])
    st.title("Start here")
    st.markdown(
        "PHExplore helps a committee set the privacy-loss budget of census tables: **plan** a "
        "budget and see its margins of error and privacy loss, **test** it by running the real "
        "algorithm on public sample data, and **decide** by saving scenarios and taking away a "
        "report. Everything stays on this computer."
    )
    budget = S.effective_phsafe()
    summary = phsafe_summary(budget, delta)
    eps = float(summary["epsilon_bounded"][conversion])
    c1, c2 = st.columns([0.3, 0.7])
    c1.metric(
        f"Working PHSafe budget: ε at δ = {S.fmt_delta(delta)}",
        f"{eps:.2f}",
        help=f"{S.conversion_label(conversion)}; budget {S.phsafe_origin()}.",
    )
    c2.info(epsilon_reading(eps, delta), icon=":material/chat:")

    example = _example(delta, conversion)
    st.subheader("Three steps, with a worked example")
    st.caption(
        f"The example starts from the production PHSafe budget ({example['preset']}) and loosens "
        f"one target: {example['cell']}. Follow it in a workshop, then try your own targets."
    )
    cols = st.columns(3)
    for col, step in zip(cols, guided_steps(example), strict=True):
        with col.container(border=True):
            st.markdown(f"### {step.stage}")
            st.markdown(f"**Where:** {step.page}")
            st.markdown(f"**Do:** {step.action}")
            st.markdown(f"**See:** {step.look_for}")
            st.page_link(
                PAGE_FILES[step.page],
                label=f"Open {step.page.split(' → ')[0]}",
                icon=":material/arrow_forward:",
            )

    st.subheader("Glossary")
    for term, text in GLOSSARY.items():
        st.markdown(f"**{term}** — {text}")
    with st.expander("For trainers: running a workshop"):
        st.markdown(
            "1. Open **Start here** on a projector; the sidebar's δ and conversion apply to every "
            "page.\n"
            "2. Walk the three steps above; each takes a few minutes. The numbers quoted in them "
            "are computed live, so they match what participants see.\n"
            "3. Let groups change one MOE target each and save it as a named scenario; compare two "
            "scenarios on the Scenarios page (only the rows that differ are listed).\n"
            "4. Finish on Budget session → Session report: the HTML file opens offline and lists "
            "each run with its number, data, seed and the fingerprint of the budget it used."
        )


render()
