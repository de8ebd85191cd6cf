"""Start page: Plan → Test → Decide in three steps with a worked example, a TopDown exercise for
trainers, a glossary, ε in words and a "reset to start" control.

Thin page: the examples' numbers come from :func:`phexplore.app.guide.worked_example` and
:func:`phexplore.app.guide.topdown_exercise` (the planners' own functions), the reading of ε from
:func:`phexplore.app.guide.epsilon_reading`, the terms from :data:`phexplore.app.guide.GLOSSARY`;
the reset is :func:`phexplore.app.baseline.reset_to_start`.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from phexplore.api.planning import phsafe_summary
from phexplore.app import baseline as B
from phexplore.app import state as S
from phexplore.app.guide import (
    GLOSSARY,
    Step,
    epsilon_reading,
    exercise_steps,
    guided_steps,
    topdown_exercise,
    worked_example,
)

PAGE_FILES = {
    "PHSafe planner": "pages/phsafe_planner.py",
    "TopDown planner": "pages/topdown_planner.py",
    "Run": "pages/run.py",
    "Results": "pages/results.py",
    "Scenarios → Budget session": "pages/scenarios.py",
}


@st.cache_data(show_spinner=False)
def _example(delta: float, conversion: str) -> dict:
    return worked_example(delta, conversion)


@st.cache_data(show_spinner=False)
def _exercise(delta: float, conversion: str) -> dict[str, Any]:
    return topdown_exercise(delta, conversion)


def _reset() -> None:
    B.reset_to_start()
    st.session_state["start_flash"] = (
        "Back to the start: production budgets in both planners (baselines too), conventional "
        "spine, δ = 1e-10, CKS. This session's runs and saved scenarios are kept."
    )


def _cards(steps: list[Step]) -> None:
    cols = st.columns(len(steps))
    for col, step in zip(cols, steps, strict=True):
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


def render() -> None:
    """Draw the page."""
    S.init_state()
    s = st.session_state
    delta, conversion = float(s[S.DELTA]), str(s[S.CONVERSION])
    head = st.columns([0.78, 0.22], vertical_alignment="bottom")
    head[0].title("Start here")
    head[1].button(
        "Reset to start",
        key="start_reset_go",
        icon=":material/restart_alt:",
        on_click=S.guarded(_reset, "start: reset"),
        width="stretch",
        help="Put both planners back on the production budgets with their default baselines, "
        "and δ, conversion and spine on their defaults — between workshop groups. Runs and saved "
        "scenarios are kept.",
    )
    flash = s.pop("start_flash", None)
    if flash:
        st.success(flash)
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
    _cards(guided_steps(example))

    exercise = _exercise(delta, conversion)
    st.subheader("A TopDown exercise: what does a 30% cut do to county and block accuracy?")
    st.caption(
        f"Starts from {exercise['preset']} (production's shares on the shipped Rhode Island "
        "sample's schema, so the run works on it). The numbers quoted are the TopDown planner's "
        "committee table, computed live."
    )
    _cards(exercise_steps(exercise))

    st.subheader("Glossary")
    for term, text in GLOSSARY.items():
        st.markdown(f"**{term}** — {text}")
    with st.expander("For trainers: running a workshop"):
        st.markdown(
            "1. Open **Start here** on a projector; the sidebar's δ and conversion apply to every "
            "page.\n"
            "2. Walk the three steps above; each takes a few minutes. The numbers quoted in them "
            "are computed live, so they match what participants see.\n"
            "3. Then the TopDown exercise: cut ρ by 30% on the TopDown planner, read county "
            "against block in the committee's table, run it, compare.\n"
            "4. Let groups change one MOE target each and save it as a named scenario; compare two "
            "scenarios on the Scenarios page (only the rows that differ are listed).\n"
            "5. Finish on Budget session → Session report: the HTML file opens offline and lists "
            "each run with its number, data, seed and the fingerprint of the budget it used.\n"
            "6. Between groups press **Reset to start** (top right): the planners go back to the "
            "production budgets; runs and saved scenarios stay."
        )


render()
