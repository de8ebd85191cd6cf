"""A run in progress and the runs kept in the session: the app's face on the run pipeline.

Part of the app-facing API (:mod:`phexplore.api`). A run executes in a worker thread so the page can
show progress and offer Cancel: :class:`RunJob` holds the :class:`~engine.runs.control.RunControl`
the pipeline reports to and polls (the same object the CLI and experiments use); the thread never
touches ``st.session_state`` — it fills the job, which the page reads. :func:`collect_finished`
moves a finished job's :class:`RunRecord` into the session on whatever page is open.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from engine.core.errors import PHExploreError
from engine.runs.control import RunControl
from phexplore.api.data import problem_lines


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
    cancel_event: threading.Event = field(default_factory=threading.Event)
    stages: dict[str, float] = field(default_factory=dict)
    fraction: float = 0.0
    record: RunRecord | None = None
    error: list[str] | None = None
    cancelled: bool = False
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    thread: threading.Thread | None = None
    phases: int = 1
    """Phases of the job: 1 (one run) or 2 (a run, then a budget sweep whose stages start with
    "Sweep"/"ρ sweep"); each phase is an equal part of :attr:`fraction`."""
    control: RunControl = field(init=False)

    def __post_init__(self) -> None:
        # The pipeline's progress and cancel: the same RunControl the CLI and experiments use,
        # sharing this job's cancel flag (the Cancel button sets cancel_event).
        self.control = RunControl(self._record_progress, self.cancel_event)

    def _record_progress(self, label: str, fraction: float) -> None:
        """Keep the stage and the overall fraction: never back, never 100% before the end.

        The pipeline's fraction is that of the current phase; with a sweep the run is the first
        half and the sweep the second. Work remains until the thread has finished (metrics, the
        sweep), so the overall fraction stops at 99% until :attr:`done`.
        """
        value = min(max(float(fraction), 0.0), 1.0)
        self.stages[label] = value
        phase = 1 if label.startswith(("Sweep", "ρ sweep")) and self.phases > 1 else 0
        overall = (phase + value) / max(self.phases, 1)
        self.fraction = max(self.fraction, min(overall, 0.99))

    @property
    def shown_fraction(self) -> float:
        """The overall fraction to show: 1.0 only once the job has finished."""
        return 1.0 if self.done else self.fraction

    def progress(self, label: str, fraction: float) -> None:
        """Progress callback: remember the stage and the overall fraction."""
        self.control.progress(label, fraction)

    def cancel(self) -> bool:
        """Cancel callback: True once Cancel was pressed."""
        return self.cancel_event.is_set()

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
        except PHExploreError as exc:
            if type(exc).__name__ in ("RunCancelled", "PHSafeCancelled"):
                job.cancelled = True
            else:
                job.error = problem_lines(exc)
        except Exception as exc:  # one line in place; the traceback goes to the log file
            from phexplore.failures import describe_failure

            job.error = [describe_failure(exc, f"the {job.engine} run")]
        finally:
            job.finished = time.monotonic()

    job.thread = threading.Thread(target=target, name=f"phexplore-{job.engine}", daemon=True)
    job.thread.start()
    return job
