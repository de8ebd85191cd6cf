"""Progress of the running job (stages, time left) with its Cancel button."""

from __future__ import annotations

import streamlit as st

from pages.run_parts.jobs import JOB
from phexplore import api as R
from phexplore.app import state as S


@st.fragment(run_every=1.0)
def job_panel() -> None:
    """Progress of the running job (refreshed every second) with a Cancel button."""
    s = st.session_state
    job: R.RunJob | None = s.get(JOB)
    if job is None:
        return
    if R.collect_finished(s, S.RUNS):
        st.rerun()
    st.markdown(f"**Running {job.engine}** on {job.label} — {job.elapsed():.0f} s")
    eta = job.eta()
    left = (
        ""
        if eta is None
        else f" — about {eta:.0f} s left"
        if eta < 120
        else f" — about {eta / 60:.0f} min left"
    )
    st.progress(job.shown_fraction, text=f"Overall {job.shown_fraction:.0%}{left}")
    stages = list(job.stages.items())
    for i, (label, fraction) in enumerate(stages):
        done = i < len(stages) - 1 or fraction >= 1.0
        st.progress(
            1.0 if done else max(min(fraction, 1.0), 0.0), text=("✓ " if done else "… ") + label
        )
    if st.button("Cancel run", key="run_cancel"):
        job.cancel_event.set()
        st.info("Cancelling after the current step…")
