"""Replay controls (Results page): run a recorded run again — one of this session or from a file.

Thin: what a replay is and does lives in :mod:`phexplore.api.replay` (the run's recorded description
through the same pipeline, docs/science.md §8); here are the buttons, the upload, where it runs
(this machine, or the Spark the app was configured with — never the backend named in a file), the
consent to replay on changed data, the one-line errors and the progress/Cancel panel the Run page
uses too.
"""

from __future__ import annotations

import streamlit as st

from pages.run_parts.jobs import JOB, blocking_job, launch
from pages.run_parts.progress import job_panel
from phexplore import api as R
from phexplore.api.budgets import PHExploreError
from phexplore.app import state as S

PENDING = "res_replay_pending"
"""Set while a replay started here runs: the Results page then shows the new run when it ends."""
ERROR = "res_replay_error"
"""A replay refused before it started (one line), shown once."""
BACKEND = "res_replay_backend"
ALLOW_CHANGED = "res_replay_allow_changed"


def _start(run: R.RecordedRun) -> None:
    """Start the replay of ``run`` as this session's next run (callback; refusals to ERROR)."""
    s = st.session_state
    if blocking_job() is not None:
        s[ERROR] = (
            "A run of this workspace is in progress; wait for it or cancel it before replaying "
            "another (or tick “Allow another run” on the Run page)."
        )
        return
    try:
        launch(
            run.spec.engine,
            f"replay of {run.label}",
            lambda number, token: R.replay_work(
                run,
                run_id=number,
                run_token=token,
                scenario=s[S.SCENARIO_NAME],
                records=s[S.RUNS],
                backend=s.get(BACKEND, "local"),
                allow_changed=bool(s.get(ALLOW_CHANGED)),
            ),
        )
    except PHExploreError as exc:
        s[ERROR] = f"Cannot replay {run.label}: {exc}"
        return
    s[PENDING] = True


def _replay_session_run(run_id: int) -> None:
    s = st.session_state
    record = next((r for r in s[S.RUNS] if r.id == run_id), None)
    if record is None:
        s[ERROR] = f"Run #{run_id} is no longer in this session."
        return
    try:
        run = R.recorded_of(record)
    except PHExploreError as exc:
        s[ERROR] = str(exc)
        return
    _start(run)


def _replay_file_run() -> None:
    s = st.session_state
    runs: list[R.RecordedRun] = s.get("res_replay_file_runs") or []
    index = int(s.get("res_replay_pick") or 0)
    if not runs or index >= len(runs):
        s[ERROR] = "Choose a metrics.json or scenario file with a recorded run first."
        return
    _start(runs[index])


def show_new_replay() -> None:
    """Select a replay started here once it has finished (call before the run picker)."""
    s = st.session_state
    if not s.get(PENDING) or s.get(JOB) is not None:
        return
    s.pop(PENDING, None)
    runs = s[S.RUNS]
    if runs and (runs[-1].metrics or {}).get("replay_of"):
        s["res_run"] = runs[-1].id


def messages() -> None:
    """The finished-run message and a refused replay, at the top of the page."""
    s = st.session_state
    message = s.pop(R.MESSAGE_KEY, None)
    if message:
        getattr(st, message[0])(message[1])
    refused = s.pop(ERROR, None)
    if refused:
        st.error(refused, icon=":material/error:")


def replay_controls() -> None:
    """Where replays run (offered only when the app has Spark configured) and the consent to
    replay on data that changed since the run was recorded."""
    options = R.spark_backend_options()
    if options is not None:
        st.radio(
            "Replays run on",
            ["local", "spark"],
            format_func=lambda b: (
                "This machine" if b == "local" else f"Spark ({options.describe()})"
            ),
            key=BACKEND,
            persist_state="session",
            horizontal=True,
            help="Where a replay runs is your choice, never the backend named in the run's file "
            "(the numbers do not depend on it).",
        )
    st.checkbox(
        "Replay on the data as they are now",
        key=ALLOW_CHANGED,
        persist_state="session",
        help="A run's file records the content hash of every input file; a replay whose data "
        "changed since is refused unless this is ticked. Then it runs on the data as they are "
        "now, says which files changed and records them with the replay.",
    )


def replay_session_run(record: R.RunRecord) -> None:
    """ "Replay this run" for the run shown, with what it will do (or why it cannot)."""
    busy = blocking_job() is not None
    try:
        run = R.recorded_of(record)
    except PHExploreError as exc:
        st.caption(f"Replay is not available for this run: {exc}")
        return
    c1, c2 = st.columns([0.22, 0.78])
    c1.button(
        "Replay this run",
        key="res_replay_go",
        disabled=busy,
        on_click=S.guarded(lambda: _replay_session_run(record.id), "results: replay"),
        help=R.SAME_SEED_NOTE,
        icon=":material/replay:",
    )
    c2.caption(R.replay_note(run, st.session_state.get(BACKEND, "local")))


def replay_from_file() -> None:
    """Upload a metrics.json (CLI or app) or a saved scenario and replay one of its runs."""
    s = st.session_state
    with st.expander("Replay a run from a file (metrics.json or saved scenario)"):
        st.caption(
            "A metrics.json written by `phexplore run topdown` / `run phsafe` / `run replay` or "
            "downloaded from the Run page, or a scenario JSON with attached runs. "
            + R.SAME_SEED_NOTE
        )
        upload = st.file_uploader("Run file", type=["json"], key="res_replay_upload")
        s["res_replay_file_runs"] = []
        if upload is None:
            return
        try:
            runs = R.recorded_in_file(upload.getvalue(), upload.name)
        except PHExploreError as exc:
            st.error(f"Cannot replay {upload.name}: {exc}", icon=":material/error:")
            return
        s["res_replay_file_runs"] = runs
        if s.get("res_replay_pick") not in range(len(runs)):
            s["res_replay_pick"] = 0
        index = st.selectbox(
            "Run in this file",
            list(range(len(runs))),
            format_func=lambda i: runs[i].label,
            key="res_replay_pick",
            persist_state="session",
            help="A scenario file may hold several runs; a metrics.json holds one.",
        )
        st.caption(R.replay_note(runs[index], s.get(BACKEND, "local")))
        st.button(
            "Replay from file",
            key="res_replay_file_go",
            disabled=blocking_job() is not None,
            on_click=S.guarded(_replay_file_run, "results: replay file"),
            icon=":material/replay:",
        )


def replay_progress() -> None:
    """Progress and Cancel of a running job (the Run page's panel)."""
    if st.session_state.get(JOB) is not None:
        job_panel()


def replay_outcome(record: R.RunRecord) -> None:
    """For a replayed run: whether the same seed gave the same numbers."""
    outcome = R.replay_outcome(record)
    if outcome is not None:
        getattr(st, outcome[0])(outcome[1], icon=":material/replay:")
