"""TopDown run form: data, budget and sweep columns; starts the run when Run is pressed."""

from __future__ import annotations

import math

import streamlit as st

from pages.run_parts.data_source import TopDownData, topdown_data
from pages.run_parts.jobs import JOB, next_run_id
from pages.run_parts.run_options import epl_options
from pages.run_parts.topdown_budget import WORKING, TopDownBudget, topdown_budget
from phexplore import api as R
from phexplore.api.budgets import PHExploreError
from phexplore.app import state as S

TOPDOWN_DEFAULTS: dict[str, object] = {
    "run_td_seed": 2020,
    "run_td_workers": 1,
    "run_td_noise": "fast",
    "run_td_sweep": False,
    "run_td_rhos": "0.25, 1, 4",
    "run_td_sweep_seeds": 1,
    "run_td_srs": True,
    "run_td_epl_p": R.EPL_PERCENTILE,
    "run_td_epl_m": R.EPL_MULTIPLIER,
}


def _topdown_sweep(
    data: TopDownData, budget: TopDownBudget
) -> tuple[str | None, bool, str, int, bool, bool]:
    """Sweep column and the Run button: (preset, sweep, budgets text, seeds, SRS, Run pressed)."""
    s = st.session_state
    choice, what, hist = budget.choice, budget.what, data.hist
    st.markdown("**Sweep (optional)**")
    preset = None if choice == WORKING else choice
    sweep = st.checkbox(
        "Also run a budget sweep (EPL vs ρ, SRS comparison)",
        key="run_td_sweep",
        disabled=preset is None,
        help="Re-runs the allocation preset at several budgets × seeds and a simple random "
        "sample baseline (PF Fig. 2). Needs a preset allocation.",
    )
    rhos_text = st.text_input(
        f"Sweep budgets ({what}, comma separated)",
        key="run_td_rhos",
        disabled=not sweep,
        help="Each budget is one more TopDown run with the same shares; EPL and error are plotted against it.",
    )
    sweep_seeds = st.number_input(
        "Seeds per budget (trials)",
        min_value=1,
        max_value=10,
        key="run_td_sweep_seeds",
        disabled=not sweep,
        help="Repeated runs per budget with consecutive seeds; their spread shows the noise in EPL and MAE.",
    )
    srs = st.checkbox(
        "Include the SRS baseline",
        key="run_td_srs",
        disabled=not sweep,
        help=R.SRS_HELP,
    )
    epl_options()
    go = st.button(
        "Run TopDown",
        type="primary",
        disabled=hist is None or s.get(JOB) is not None or budget.mismatch is not None,
        key="run_td_go",
    )
    return preset, sweep, rhos_text, int(sweep_seeds), srs, go


def topdown_form() -> R.RunJob | None:
    """Controls of a TopDown run; returns a started job when Run is pressed."""
    s = st.session_state
    for key, default in TOPDOWN_DEFAULTS.items():
        s.setdefault(key, default)
    c1, c2, c3 = st.columns(3)
    with c1:
        data = topdown_data()
    with c2:
        budget = topdown_budget(data)
    if budget is None:
        return None
    with c3:
        preset, sweep, rhos_text, sweep_seeds, srs, go = _topdown_sweep(data, budget)
    hist, data_label, level, units = data.hist, data.data_label, data.level, data.units
    if not go or hist is None or budget.mismatch:
        return None
    try:
        rhos = (
            [float(x) for x in rhos_text.replace(";", ",").split(",") if x.strip()] if sweep else []
        )
        if any(not math.isfinite(r) or r <= 0 for r in rhos):
            raise ValueError
    except ValueError:
        st.error(f"Sweep budgets must be positive numbers separated by commas; got {rhos_text!r}")
        return None
    try:
        run_data = R.subset(hist, level, units)
    except PHExploreError as exc:
        st.error(str(exc))
        return None
    label = data_label + (f" [{level} {', '.join(units)}]" if level and units else "")
    try:
        # The run description, typed as the CLI builds it: a bad value is refused here, in one
        # line naming it, before any job starts.
        spec = R.RunSpec(
            engine="topdown",
            data=R.app_data_source(
                label,
                sample=data.sample,
                folder=data.folder,
                level=level,
                units=units,
                hist=run_data,
            ),
            config=budget.allocation.to_dict(),
            seed=budget.seed,
            options=R.TopDownRunOptions(
                spine=s[S.SPINE],
                entities=(budget.entity,) if budget.use_entities and budget.entity else (),
                special_areas=budget.special_areas,
                spread_invariant_share=bool(s[S.SPREAD_INVARIANT]),
                noise_method=budget.noise_method,
                epl_boot=R.EPL_BOOT,
                epl_percentile=float(s["run_td_epl_p"]),
                epl_multiplier=float(s["run_td_epl_m"]),
            ),
            workers=budget.workers,
            **R.app_backend(s.get("run_td_backend", "local")),
        )
        session = R.SessionRun(
            run_id=next_run_id(),
            scenario=s[S.SCENARIO_NAME],
            data_label=label,
            budget=budget.budget,
            preset=budget.preset,
        )
        sweep = R.Sweep(preset, tuple(rhos), sweep_seeds, srs) if rhos and preset else None
        work = R.topdown_work(spec, session, run_data, sweep)
    except PHExploreError as exc:
        st.error(str(exc))
        return None
    return R.start_job(R.RunJob(engine="topdown", label=label), work)
