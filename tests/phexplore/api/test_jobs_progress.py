"""Run progress is honest: never 100% while work remains; one runtime figure; one bookkeeping
(the job's RunControl)."""

from __future__ import annotations

from phexplore.api.jobs import JOB_KEY, MESSAGE_KEY, RunJob, RunRecord, collect_finished


def test_overall_fraction_never_reaches_100_before_the_end() -> None:
    job = RunJob(engine="topdown", label="x")
    job.control.phase(0.0, 0.5)  # a run, then a sweep: the run is the first half
    job.progress("Done", 1.0)  # the run is done, the sweep has not started
    assert job.shown_fraction == 0.5
    job.progress("Computing metrics", 1.0)
    job.control.phase(0.5, 1.0)
    job.progress("ρ sweep (3 budgets × 1 seeds)", 0.0)
    assert job.shown_fraction == 0.5  # never back
    assert job.stages["ρ sweep (3 budgets × 1 seeds)"] == 0.0  # each stage its own fraction
    job.progress("Sweep: run 3 of 3", 1.0)
    assert job.shown_fraction == 0.99  # the thread still has to hand over the result
    single = RunJob(engine="phsafe", label="y")
    single.progress("done", 1.0)
    assert single.shown_fraction == 0.99
    single.finished = single.started + 2.0
    assert single.shown_fraction == 1.0


def test_one_runtime_figure_in_message_and_record() -> None:
    import pandas as pd

    job = RunJob(engine="phsafe", label="y")
    job.record = RunRecord(
        id=1, label="#1 · PHSafe", engine="phsafe", scenario="s", settings={"runtime_s": 0.4},
        metrics={}, tidy=pd.DataFrame(),
    )  # fmt: skip
    job.finished = job.started + 3.25
    state = {JOB_KEY: job, "runs": []}
    assert collect_finished(state, "runs")
    assert state["runs"][0].settings["elapsed_s"] == 3.2
    assert "in 3.2 s" in state[MESSAGE_KEY][1]


def test_planned_steps_keep_room_for_metrics_and_writing() -> None:
    """The bar reaches the engine's end at the engine's share of the estimate, not at 99%."""
    job = RunJob(engine="topdown", label="x", expected_s=100.0)
    job.control.plan([("engine", 60.0), ("metrics", 30.0), ("sweep", 0.0), ("saving", 10.0)])
    job.control.enter("engine")
    job.progress("Estimating", 1.0)
    assert job.shown_fraction == 0.6
    job.control.enter("metrics")
    job.progress("Metrics: residuals", 0.0)
    assert job.stage == "Metrics: residuals" and job.shown_fraction == 0.6
    job.progress("Metrics: metrics.json", 0.5)
    assert job.shown_fraction == 0.75
    # the estimate keeps the time left honest while a step reports no progress
    job.started -= 10.0
    eta = job.eta()
    assert eta is not None and eta >= 100.0 * 0.25 - 1e-9


def _wait(job: RunJob) -> None:
    assert job.thread is not None
    job.thread.join(timeout=60)
    assert job.done


def test_a_job_writes_its_run_into_the_workspace_and_is_found_again(tmp_path) -> None:
    import pandas as pd

    from phexplore.api.jobs import BOARD, follow, start_job
    from phexplore.app.workspace.store import Workspace

    ws = Workspace(tmp_path / "ws")
    entry = ws.reserve_run("phsafe", "#1 · PHSafe", "s")
    job = RunJob(engine="phsafe", label="y", token=entry.token, number=entry.number)

    def work(j: RunJob) -> RunRecord:
        j.progress("working", 1.0)
        return RunRecord(
            id=entry.number, label="#1 · PHSafe", engine="phsafe", scenario="s", settings={},
            metrics={"engine": "phsafe"}, tidy=pd.DataFrame({"a": [1]}), token=entry.token,
        )  # fmt: skip

    start_job(job, work, workspace=ws)
    _wait(job)
    assert ws.run_entry(entry.token).status == "finished"
    assert [r.token for r in Workspace(tmp_path / "ws").records()[0]] == [entry.token]
    # a new session (a reload) on the workspace follows the job it did not start
    fresh: dict = {"runs": []}
    assert follow(fresh, ws.root) is job
    assert collect_finished(fresh, "runs") and fresh[MESSAGE_KEY][0] == "success"
    assert [r.token for r in fresh["runs"]] == [entry.token]
    assert follow(fresh, ws.root) is None  # shown once per session
    assert follow({"runs": []}, ws.root) is None  # nor by a page opened after it was shown
    # a failing job is recorded as failed, with its reason
    failing = ws.reserve_run("phsafe", "#2", "s")
    bad = RunJob(engine="phsafe", label="z", token=failing.token, number=failing.number)

    def boom(j: RunJob) -> RunRecord:
        raise ValueError("no such column")

    start_job(bad, boom, workspace=ws)
    _wait(bad)
    assert ws.run_entry(failing.token).status == "failed"
    assert bad.outcome()[0] == "error"
    assert BOARD.busy(ws.root) is None


def test_a_job_whose_workspace_closed_is_cancelled(tmp_path) -> None:
    from phexplore.api import jobs

    board = jobs.JobBoard()
    job = RunJob(engine="topdown", label="x", workspace=tmp_path)
    board._jobs[job.token] = job  # registered without the reaper thread: reaped by hand below
    board.touch(tmp_path, "page-1")
    now = job.started + 1.0
    assert board.reap(lambda page: True, now=now) == []  # the page is open
    assert board.reap(lambda page: False, now=now) == []  # closed for a moment: a reload
    late = now + jobs.CLOSE_GRACE_S + 1.0
    assert board.reap(lambda page: False, now=late) == [job]
    assert job.cancel_event.is_set() and "workspace was closed" in (job.note or "")
    assert board.busy(tmp_path) is job  # still running until the engine notices the cancel
