"""A run in progress and the runs kept in the session: the app's face on the run pipeline.

Part of the app-facing API (:mod:`phexplore.api`). A run executes in a worker thread so the page can
show progress and offer Cancel: :class:`RunJob` holds the :class:`~engine.runs.control.RunControl`
the pipeline reports to and polls — the one progress bookkeeping the CLI and experiments use too
(each stage's fraction, the overall fraction through the job's phases, the cancel flag); the
thread never touches ``st.session_state`` — it fills the job, which the page reads.
:func:`collect_finished` moves a finished job's :class:`RunRecord` into the session on whatever
page is open.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from engine.core.errors import PHExploreError, RunCancelled
from engine.runs.control import RunControl
from phexplore.api.data import problem_lines
from phexplore.failures import describe_failure


@dataclass
class RunRecord:
    """One finished run kept in the session: its tidy comparison table, metrics and extra tables."""

    id: int
    label: str
    engine: str
    scenario: str
    settings: dict[str, Any]
    metrics: dict[str, Any]
    tidy: pd.DataFrame
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    experiment: Any = None
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    """Unique across sessions (run ids restart at 1 in every session); keys cached results."""
    data: Any = None
    """The input the run used (block histogram or CEF extract), kept in the session so the run
    can be replayed here even when its data cannot be read again (an upload); never saved."""

    @property
    def rho(self) -> float | None:
        """The run's total budget (ρ, or ε for pure DP)."""
        value = self.settings.get("rho")
        return None if value is None else float(value)


@dataclass
class RunJob:
    """A run in progress: progress per stage label, a cancel flag, and the outcome when done."""

    engine: str
    label: str
    control: RunControl = field(default_factory=RunControl)
    """The pipeline's progress and cancel (the work maps a second phase, a ρ sweep, onto the
    second half of the overall fraction: :meth:`RunControl.phase`)."""
    record: RunRecord | None = None
    error: list[str] | None = None
    cancelled: bool = False
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    thread: threading.Thread | None = None

    @property
    def cancel_event(self) -> threading.Event:
        """The cancel flag the Cancel button sets."""
        return self.control.cancel_event

    @property
    def stages(self) -> dict[str, float]:
        """Each stage's own fraction done, in the order the stages started."""
        return self.control.stages

    @property
    def fraction(self) -> float:
        """The overall fraction done, never 100% before the end: work remains until the thread
        has finished (metrics, a sweep), so it stops at 99% until :attr:`done`."""
        return min(self.control.fraction, 0.99)

    @property
    def shown_fraction(self) -> float:
        """The overall fraction to show: 1.0 only once the job has finished."""
        return 1.0 if self.done else self.fraction

    def progress(self, label: str, fraction: float) -> None:
        """Progress callback: remember the stage and the overall fraction."""
        self.control.progress(label, fraction)

    def cancel(self) -> bool:
        """Cancel callback: True once Cancel was pressed."""
        return self.control.cancelled()

    @property
    def done(self) -> bool:
        """True once the worker thread has finished (successfully or not)."""
        return self.finished is not None

    def eta(self) -> float | None:
        """Seconds left, extrapolated from the elapsed time and the overall fraction (None while
        under 2% done, and once finished)."""
        if self.fraction < 0.02 or self.done:
            return None
        return self.elapsed() * (1.0 - self.fraction) / self.fraction

    def elapsed(self) -> float:
        """Seconds since start (until finish)."""
        return (self.finished or time.monotonic()) - self.started


JOB_KEY = "run_job"
MESSAGE_KEY = "run_last_message"


def collect_finished(state: MutableMapping[str, Any], runs_key: str) -> bool:
    """Move a finished job's record into ``state[runs_key]`` and leave a message; True if done.

    Called on every page (from ``app.py``) and by the Run page's progress panel, so a run that
    ends while the user is on another page is kept all the same.
    """
    job: RunJob | None = state.get(JOB_KEY)
    if job is None or not job.done:
        return False
    state[JOB_KEY] = None
    if job.record is not None:
        # One runtime figure: the wall-clock time of the whole job (run, metrics and any sweep),
        # shown in this message and as the Run page's "Runtime".
        job.record.settings["elapsed_s"] = round(job.elapsed(), 1)
        state[runs_key] = [*state[runs_key], job.record]
        state[MESSAGE_KEY] = (
            "success",
            f"Finished {job.record.label} in {job.record.settings['elapsed_s']:.1f} s.",
        )
    elif job.cancelled:
        state[MESSAGE_KEY] = ("warning", "The run was cancelled; nothing was kept.")
    else:
        lines = "\n".join(f"- {x}" for x in job.error or [])
        state[MESSAGE_KEY] = ("error", f"The run failed:\n\n{lines}")
    return True


def start_job(job: RunJob, work: Callable[[RunJob], RunRecord]) -> RunJob:
    """Run ``work(job)`` in a daemon thread; errors become readable lines on the job."""

    def target() -> None:
        try:
            job.record = work(job)
        except RunCancelled:
            job.cancelled = True
        except PHExploreError as exc:
            job.error = problem_lines(exc)
        except Exception as exc:  # one line in place; the traceback goes to the log file
            job.error = [describe_failure(exc, f"the {job.engine} run")]
        finally:
            job.finished = time.monotonic()

    job.thread = threading.Thread(target=target, name=f"phexplore-{job.engine}", daemon=True)
    job.thread.start()
    return job
