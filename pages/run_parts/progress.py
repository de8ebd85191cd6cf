"""The run panel beside the Run button: the workspace's run in progress (stage, time left, Cancel),
then how it ended.

Drawn right under the Run button (in view at 1366×768) on the Run page, and on the Results page for
replays. It follows the session's own job or, after a reload or in a second tab, the job running in
the workspace (:func:`phexplore.api.jobs.follow`), refreshed every second.
"""

from __future__ import annotations

import streamlit as st

from phexplore import api as R
from phexplore.app import state as S


def _time_left(job: R.RunJob) -> str:
    """``"about 40 s left"``, or the stage under way when no honest figure exists."""
    eta = job.eta()
    if eta is None or eta < 1.0:
        return f"{job.stage} …"
    if eta < 120:
        return f"{job.stage} — about {eta:.0f} s left"
    return f"{job.stage} — about {eta / 60:.0f} min left"


def last_message() -> None:
    """How the session's last run ended (once), where the user is looking: beside Run."""
    message = st.session_state.pop(R.MESSAGE_KEY, None)
    if message:
        getattr(st, message[0])(message[1])


@st.fragment(run_every=1.0)
def job_panel() -> None:
    """Progress of the run this session follows (refreshed every second), with Cancel."""
    s = st.session_state
    workspace = S.workspace().root
    R.BOARD.touch(workspace, S.page_id())
    job = R.follow(s, workspace)
    if job is None:
        return
    if R.collect_finished(s, S.RUNS):
        st.rerun()
    number = f"#{job.number} " if job.number else ""
    with st.container(border=True, key="run_panel"):
        st.markdown(
            f"**Run {number}in progress** — {job.engine} on {job.label} · {job.elapsed():.0f} s"
        )
        st.progress(job.shown_fraction, text=f"{job.shown_fraction:.0%} — {_time_left(job)}")
        done = list(job.stages)[-4:-1]
        if done:
            st.caption("Done: " + " · ".join(done))
        if job.cancel_event.is_set():
            st.info("Cancelling after the current step…")
        elif st.button("Cancel run", key="run_cancel", icon=":material/stop_circle:"):
            job.cancel_event.set()
            st.info("Cancelling after the current step…")
