"""PHSafe run form on the working PHSafe budget; starts the run when Run is pressed."""

from __future__ import annotations

import streamlit as st

from pages.run_parts.data_source import phsafe_data
from pages.run_parts.jobs import JOB, next_run_id
from pages.run_parts.run_options import backend_choice, noise_choice, seed_input
from phexplore import api as R
from phexplore.api.budgets import PHExploreError
from phexplore.app import state as S

PHSAFE_DEFAULTS: dict[str, object] = {
    "run_ph_states": "44",
    "run_ph_seed": 2020,
    "run_ph_trials": 20,
    "run_ph_noise": "fast",
}


def phsafe_form() -> R.RunJob | None:
    """Controls of a PHSafe run on the working PHSafe budget; returns a started job on Run."""
    s = st.session_state
    for key, default in PHSAFE_DEFAULTS.items():
        s.setdefault(key, default)
    c1, c2 = st.columns(2)
    with c1:
        extract, data_label, scale, where = phsafe_data()
        states = st.text_input(
            "States to run (2-digit FIPS, comma separated)",
            key="run_ph_states",
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
            help="Several noise draws on one join give the empirical MOE next to the analytic one.",
        )
        noise_choice("run_ph_noise")
        backend_choice("run_ph_backend")
        go = st.button(
            "Run PHSafe",
            type="primary",
            disabled=extract is None or s.get(JOB) is not None,
            key="run_ph_go",
        )
    if not go or extract is None:
        return None
    wanted = [x.strip() for x in states.split(",") if x.strip()]
    label = data_label + (f" [states {', '.join(wanted)}]" if wanted else "")
    try:
        # The run description, typed as the CLI builds it (a bad value is refused here).
        spec = R.RunSpec(
            engine="phsafe",
            data=R.app_data_source(label, sample=where.sample, folder=where.folder),
            config=R.phsafe_run_config(budget, wanted),
            seed=int(seed),
            options=R.PHSafeRunOptions(
                trials=int(trials), scale=scale, noise_method=str(s["run_ph_noise"])
            ),
            **R.app_backend(s.get("run_ph_backend", "local")),
        )
        session = R.SessionRun(
            run_id=next_run_id(),
            scenario=s[S.SCENARIO_NAME],
            data_label=label,
            budget=budget,
        )
        work = R.phsafe_work(spec, session, extract)
    except PHExploreError as exc:
        st.error(str(exc))
        return None
    return R.start_job(R.RunJob(engine="phsafe", label=data_label), work)
