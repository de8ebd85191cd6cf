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
