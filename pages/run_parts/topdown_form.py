"""TopDown run form: data, budget and sweep columns; starts the run when Run is pressed."""

from __future__ import annotations

import math
from typing import Any

import streamlit as st

from pages.run_parts.data_source import TopDownData, topdown_data
from pages.run_parts.jobs import PARALLEL, blocking_job, launch
from pages.run_parts.progress import job_panel, last_message
from pages.run_parts.run_options import epl_options
from pages.run_parts.topdown_budget import WORKING, TopDownBudget, topdown_budget
from phexplore import api as R
from phexplore.api.budgets import PHExploreError
from phexplore.app import state as S

TOPDOWN_DEFAULTS: dict[str, object] = {
    "run_td_seed": 2020,
    "run_td_workers": 1,
    "run_td_noise": "fast",
    "run_td_solver": "auto",
    "run_td_universe": "housed",
    "run_td_sweep": False,
    "run_td_rhos": "0.25, 1, 4",
    "run_td_sweep_seeds": 1,
    "run_td_srs": True,
    "run_td_epl_p": R.EPL_PERCENTILE,
    "run_td_epl_m": R.EPL_MULTIPLIER,
}


def _topdown_sweep(
    data: TopDownData, budget: TopDownBudget
) -> tuple[str | None, bool, str, int, bool]:
    """Sweep column: (preset, sweep, budgets text, seeds per budget, SRS)."""
    choice, what = budget.choice, budget.what
    st.markdown("**Sweep (optional)**")
    preset = None if choice == WORKING else choice
    sweep = st.checkbox(
        "Also run a budget sweep (EPL vs ρ, SRS comparison)",
        key="run_td_sweep",
        persist_state="session",
        disabled=preset is None,
        help="Re-runs the allocation preset at several budgets × seeds and a simple random "
        "sample baseline (PF Fig. 2). Needs a preset allocation.",
    )
    rhos_text = st.text_input(
        f"Sweep budgets ({what}, comma separated)",
        key="run_td_rhos",
        persist_state="session",
        disabled=not sweep,
        help="Each budget is one more TopDown run with the same shares; EPL and error are plotted against it.",
    )
    sweep_seeds = st.number_input(
        "Seeds per budget (trials)",
        min_value=1,
        max_value=10,
        key="run_td_sweep_seeds",
        persist_state="session",
        disabled=not sweep,
        help="Repeated runs per budget with consecutive seeds; their spread shows the noise in EPL and MAE.",
    )
    srs = st.checkbox(
        "Include the SRS baseline",
        key="run_td_srs",
        persist_state="session",
        disabled=not sweep,
        help=R.SRS_HELP,
    )
    epl_options()
    return preset, sweep, rhos_text, int(sweep_seeds), srs


def _sweep_budgets(sweep: bool, rhos_text: str) -> list[float] | None:
    """The sweep's budgets (empty without a sweep; None after an error message)."""
    if not sweep:
        return []
    try:
        rhos = [float(x) for x in rhos_text.replace(";", ",").split(",") if x.strip()]
        if not rhos or any(not math.isfinite(r) or r <= 0 for r in rhos):
            raise ValueError
    except ValueError:
        st.error(f"Sweep budgets must be positive numbers separated by commas; got {rhos_text!r}")
        return None
    return rhos


def run_button(label: str, key: str, ready: bool, estimate: R.RunEstimate | None) -> bool:
    """The time estimate, the Run button (disabled while a run of the workspace is in
    progress, unless the user allows another) and the run panel right under it."""
    if estimate is not None:
        st.caption(estimate.sentence())
    blocking = blocking_job()
    pressed = st.button(
        label,
        type="primary",
        disabled=not ready or blocking is not None,
        key=key,
        help=None
        if blocking is None
        else f"Run #{blocking.number or '?'} of this workspace is in progress: wait for it, "
        "cancel it, or tick “Allow another run”.",
    )
    if blocking is not None and not blocking.done:
        st.checkbox(
            "Allow another run at the same time",
            key=PARALLEL,
            persist_state="session",
            help="Each run takes a processor core and memory; on a shared server one run at a "
            "time keeps the app responsive for everyone.",
        )
    return pressed


def topdown_form() -> None:
    """Controls of a TopDown run; starts its job when Run is pressed (the panel shows it)."""
    s = st.session_state
    for key, default in TOPDOWN_DEFAULTS.items():
        s.setdefault(key, default)
    c1, c2, c3 = st.columns(3)
    with c1:
        data = topdown_data()
    with c2:
        budget = topdown_budget(data)
    if budget is None:
        with c3:
            last_message()
            job_panel()
        return
    with c3:
        preset, sweep, rhos_text, sweep_seeds, srs = _topdown_sweep(data, budget)
        rhos = _sweep_budgets(sweep and preset is not None, rhos_text)
        hist = data.hist
        estimate = None
        if hist is not None:
            estimate = R.run_estimate(
                data.n_blocks,
                hist.schema.size,
                sweep_runs=len(rhos or []) * sweep_seeds,
                srs_replicates=(len(R.SRS_FRACTIONS) * sweep_seeds if rhos and srs else 0),
            )
        ready = hist is not None and budget.mismatch is None and rhos is not None
        go = run_button("Run TopDown", "run_td_go", ready, estimate)
        last_message()
        if go and ready and estimate is not None:
            _start(data, budget, preset, rhos or [], sweep_seeds, srs, estimate)
        job_panel()


def _start(
    data: TopDownData,
    budget: TopDownBudget,
    preset: str | None,
    rhos: list[float],
    sweep_seeds: int,
    srs: bool,
    estimate: R.RunEstimate,
) -> None:
    """Build the run description and start its job in the workspace (refusals in one line)."""
    s = st.session_state
    hist, data_label, level, units = data.hist, data.data_label, data.level, data.units
    assert hist is not None
    try:
        run_data = R.subset(hist, level, units)
    except PHExploreError as exc:
        st.error(str(exc))
        return
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
                solver=budget.solver,
                error_universe=budget.error_universe,
                epl_boot=R.EPL_BOOT,
                epl_percentile=float(s["run_td_epl_p"]),
                epl_multiplier=float(s["run_td_epl_m"]),
            ),
            workers=budget.workers,
            **R.app_backend(s.get("run_td_backend", "local")),
        )
        sweep = (
            R.Sweep(preset, tuple(rhos), sweep_seeds, srs, main_share=estimate.main_share)
            if rhos and preset
            else None
        )

        def make_work(number: int, token: str) -> Any:
            session = R.SessionRun(
                run_id=number,
                scenario=s[S.SCENARIO_NAME],
                data_label=label,
                budget=budget.budget,
                preset=budget.preset,
                run_token=token,
            )
            return R.topdown_work(spec, session, run_data, sweep)

        launch("topdown", label, make_work, plan=estimate.plan(), expected_s=estimate.total_s)
    except PHExploreError as exc:
        st.error(str(exc))
