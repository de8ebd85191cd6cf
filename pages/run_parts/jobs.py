"""Starting a run in this session's workspace, and which run the session follows (no widgets).

A run's number and token are reserved in the workspace before its job starts
(:func:`phexplore.app.state.reserve_run`); the job then belongs to the workspace, so a reload or a
second tab finds it again (:mod:`phexplore.api.jobs`). At most one run per workspace at a time,
unless the user ticks "Allow another run" (:data:`PARALLEL`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from phexplore import api as R
from phexplore.app import state as S

JOB = R.JOB_KEY
PARALLEL = "run_parallel"
"""Session key: the user asked to start a run while another of the workspace is running."""


def blocking_job() -> R.RunJob | None:
    """The running job that keeps this session from starting another: its own, else (one heavy
    job per workspace) any running job of the workspace unless the user allowed more."""
    s = st.session_state
    own: R.RunJob | None = s.get(JOB)
    if own is not None and not own.done:
        return own
    if s.get(PARALLEL):
        return None
    return R.BOARD.busy(S.workspace().root)


def launch(
    engine: str,
    label: str,
    make_work: Callable[[int, str], Callable[[R.RunJob], Any]],
    *,
    plan: Sequence[tuple[str, float]] = (),
    expected_s: float | None = None,
) -> R.RunJob:
    """Reserve the run's number and token, build its work with them (``make_work(number,
    token)``; a refusal gives the number back and propagates) and start it in the workspace."""
    s = st.session_state
    workspace = S.workspace()
    entry = S.reserve_run(engine, label)
    try:
        work = make_work(entry.number, entry.token)
    except BaseException:
        workspace.release_run(entry.token)
        raise
    job = R.RunJob(
        engine=engine, label=label, token=entry.token, number=entry.number, expected_s=expected_s
    )
    if plan:
        job.control.plan(plan)
    R.start_job(job, work, workspace=workspace)
    s[JOB] = job
    return job
