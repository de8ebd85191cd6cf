"""PHSafe run form on the working PHSafe budget; starts the run when Run is pressed."""

from __future__ import annotations

from typing import Any

import streamlit as st

from pages.run_parts.data_source import ReadAgain, phsafe_data
from pages.run_parts.jobs import launch
from pages.run_parts.progress import job_panel, last_message
from pages.run_parts.run_options import backend_choice, noise_choice, seed_input
from pages.run_parts.topdown_form import run_button
from phexplore import api as R
from phexplore.api.budgets import PHExploreError, PHSafeBudget
from phexplore.app import state as S

PHSAFE_DEFAULTS: dict[str, object] = {
    "run_ph_states": "44",
    "run_ph_seed": 2020,
    "run_ph_trials": 20,
    "run_ph_noise": "fast",
}


def phsafe_form() -> None:
    """Controls of a PHSafe run on the working PHSafe budget; starts its job when Run is
    pressed (the panel under the button shows it)."""
    s = st.session_state
    for key, default in PHSAFE_DEFAULTS.items():
        s.setdefault(key, default)
    c1, c2 = st.columns(2)
    with c1:
        extract, data_label, scale, where = phsafe_data()
        states = st.text_input(
            "States to run (2-digit FIPS, comma separated)",
            key="run_ph_states",
            persist_state="session",
            help="A subset keeps the run short (44 = Rhode Island). Leave empty for the states "
            "of the budget's state filter.",
        )
    with c2:
        budget = S.effective_phsafe()
        st.markdown("**Budget**")
        st.markdown(
            f"Working PHSafe budget from the PHSafe planner: total ρ "
            f"**{budget.total_unbounded():.4f}** (unbounded), {len(budget.tables())} tables."
        )
        st.caption(f"Budget: **{S.budget_badge('phsafe')}**")
        seed = seed_input("run_ph_seed")
        trials = st.number_input(
            "Trials (noise redraws)",
            min_value=1,
            max_value=200,
            key="run_ph_trials",
            persist_state="session",
            help="Several noise draws on one join give the empirical MOE next to the analytic one.",
        )
        noise_choice("run_ph_noise")
        backend_choice("run_ph_backend")
        go = run_button("Run PHSafe", "run_ph_go", extract is not None, None)
        last_message()
        if go and extract is not None:
            _start(extract, data_label, scale, where, states, budget, int(seed), int(trials))
        job_panel()


def _start(
    extract: Any,
    data_label: str,
    scale: float | None,
    where: ReadAgain,
    states: str,
    budget: PHSafeBudget,
    seed: int,
    trials: int,
) -> None:
    """Build the run description and start its job in the workspace (refusals in one line)."""
    s = st.session_state
    wanted = [x.strip() for x in states.split(",") if x.strip()]
    label = data_label + (f" [states {', '.join(wanted)}]" if wanted else "")
    try:
        # The run description, typed as the CLI builds it (a bad value is refused here).
        spec = R.RunSpec(
            engine="phsafe",
            data=R.app_data_source(label, sample=where.sample, folder=where.folder),
            config=R.phsafe_run_config(budget, wanted),
            seed=seed,
            options=R.PHSafeRunOptions(
                trials=trials, scale=scale, noise_method=str(s["run_ph_noise"])
            ),
            **R.app_backend(s.get("run_ph_backend", "local")),
        )

        def make_work(number: int, token: str) -> Any:
            session = R.SessionRun(
                run_id=number,
                scenario=s[S.SCENARIO_NAME],
                data_label=label,
                budget=budget,
                run_token=token,
            )
            return R.phsafe_work(spec, session, extract)

        launch("phsafe", label, make_work, plan=R.PHSAFE_PLAN)
    except PHExploreError as exc:
        st.error(str(exc))
