"""Runs in progress: a run in a worker thread, owned by its workspace, found again after a reload.

Part of the app-facing API (:mod:`phexplore.api`). A run executes in a worker thread so the page can
show progress and offer Cancel: :class:`RunJob` holds the :class:`~engine.runs.control.RunControl`
the pipeline reports to and polls — the one progress bookkeeping the CLI and experiments use too
(each stage's fraction, the overall fraction through the job's planned steps, the cancel flag);
the thread never touches ``st.session_state``.

A job belongs to its workspace (:mod:`phexplore.app.workspace`), not to the browser tab that
started it: its number is reserved in the workspace before it starts, the thread writes the
finished run into the workspace itself, and :data:`BOARD` (one per server) lists every job of a
workspace, so a reload or a second tab finds a running job — its progress, then its result. At
most one job runs per workspace unless the user asks for more (:meth:`JobBoard.busy`). A job whose
workspace is closed — no page of it open for :data:`CLOSE_GRACE_S` seconds — is cancelled
(:meth:`JobBoard.reap`), never left holding a core. :func:`collect_finished` moves a finished
job's record into the session on whatever page is open.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamlit.runtime import Runtime

from engine.core.errors import PHExploreError, RunCancelled
from engine.runs.control import RunControl
from phexplore.api.data import problem_lines
from phexplore.app.records import RunRecord
from phexplore.app.workspace.store import Workspace
from phexplore.failures import describe_failure

CLOSE_GRACE_S = float(os.environ.get("PHEXPLORE_CLOSE_GRACE_S", "60"))
"""Seconds a workspace may have no open page before its running jobs are cancelled (a reload
reconnects within seconds; ``$PHEXPLORE_CLOSE_GRACE_S`` changes it)."""
REAP_EVERY_S = 2.0
KEEP_FINISHED = 20
"""Finished jobs the board keeps per workspace (so a page opened later can say how they ended)."""


@dataclass
class RunJob:
    """A run in progress: progress per stage, a cancel flag, and the outcome when done."""

    engine: str
    label: str
    control: RunControl = field(default_factory=RunControl)
    """The pipeline's progress and cancel (:meth:`RunControl.plan`: the run's steps and their
    shares of the time estimate)."""
    record: RunRecord | None = None
    error: list[str] | None = None
    cancelled: bool = False
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    thread: threading.Thread | None = None
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    """The run's token (``run_token``), reserved in the workspace with its number."""
    number: int | None = None
    """The run's number (#N) in its workspace."""
    workspace: Path | None = None
    """The workspace folder the job belongs to (None: a job of no workspace, e.g. in a test)."""
    expected_s: float | None = None
    """The time estimate shown before Run (engine, metrics and any sweep), when there is one."""
    note: str | None = None
    """Why the job ended as it did when nobody pressed anything (e.g. its workspace closed), or a
    problem after the run (its record could not be saved)."""
    shown: bool = False
    """Some session has shown how the job ended (then a session that was not following it while
    it ran — a page opened later — does not show it again)."""

    @property
    def cancel_event(self) -> threading.Event:
        """The cancel flag the Cancel button sets."""
        return self.control.cancel_event

    @property
    def stages(self) -> dict[str, float]:
        """Each stage's own fraction done, in the order the stages started."""
        return self.control.stages

    @property
    def stage(self) -> str:
        """The stage being worked on (the last one reported)."""
        return next(reversed(self.control.stages), "Starting")

    @property
    def fraction(self) -> float:
        """The overall fraction done, never 100% before the end: work remains until the thread
        has finished (metrics, a sweep, saving the record), so it stops at 99% until :attr:`done`."""
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
        """Seconds left, or None when no honest figure exists (under 2% done, finished).

        The larger of two readings: the elapsed time extrapolated from the overall fraction, and
        the time estimate shown before Run minus the time elapsed (so a step that reports no
        progress — metrics, writing — does not read "0 s left" while it runs)."""
        if self.fraction < 0.02 or self.done:
            return None
        extrapolated = self.elapsed() * (1.0 - self.fraction) / self.fraction
        if self.expected_s is None:
            return extrapolated
        return max(extrapolated, self.expected_s * (1.0 - self.fraction))

    def elapsed(self) -> float:
        """Seconds since start (until finish)."""
        return (self.finished or time.monotonic()) - self.started

    def outcome(self) -> tuple[str, str]:
        """``(kind, sentence)`` of a finished job for the page: success, warning or error."""
        if self.record is not None:
            elapsed = self.record.settings.get("elapsed_s", round(self.elapsed(), 1))
            text = f"Finished {self.record.label} in {elapsed:.1f} s."
            problem = self.record.settings.get("sweep_problem")
            if problem:
                return "warning", f"{text} Note: {problem}."
            if self.note:
                return "warning", f"{text} {self.note}"
            return "success", text
        if self.cancelled:
            why = f" ({self.note})" if self.note else ""
            return "warning", f"Run #{self.number or '?'} was cancelled{why}; nothing was kept."
        lines = "\n".join(f"- {x}" for x in self.error or [])
        return "error", f"Run #{self.number or '?'} failed:\n\n{lines}"


JOB_KEY = "run_job"
"""Session key: the job this session is following (started here, or found after a reload)."""
MESSAGE_KEY = "run_last_message"
SEEN_KEY = "run_jobs_seen"
"""Session key: tokens of finished jobs whose outcome this session has shown."""


class JobBoard:
    """Every job of this server, by workspace; which pages are open on each workspace."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, RunJob] = {}
        self._pages: dict[Path, dict[str, float]] = {}
        self._reaper: threading.Thread | None = None

    def add(self, job: RunJob) -> None:
        with self._lock:
            self._jobs[job.token] = job
            if job.workspace is not None:
                finished = [
                    j for j in self._jobs.values() if j.workspace == job.workspace and j.done
                ]
                for old in sorted(finished, key=lambda j: j.finished or 0)[:-KEEP_FINISHED]:
                    self._jobs.pop(old.token, None)
        self._start_reaper()

    def jobs(self, workspace: Path) -> list[RunJob]:
        """The workspace's jobs, running first, then the latest finished."""
        with self._lock:
            mine = [j for j in self._jobs.values() if j.workspace == workspace]
        return sorted(mine, key=lambda j: (j.done, -(j.finished or j.started)))

    def running(self, workspace: Path) -> list[RunJob]:
        """The workspace's jobs still running."""
        return [j for j in self.jobs(workspace) if not j.done]

    def busy(self, workspace: Path) -> RunJob | None:
        """The job that makes the workspace busy (one heavy job at a time), or None."""
        running = self.running(workspace)
        return running[0] if running else None

    def touch(self, workspace: Path, page: str) -> None:
        """Page ``page`` (a browser session) has the workspace open now."""
        with self._lock:
            self._pages.setdefault(workspace, {})[page] = time.monotonic()

    def reap(self, is_open: Callable[[str], bool], now: float | None = None) -> list[RunJob]:
        """Cancel the running jobs of every workspace with no open page (by ``is_open``) for
        :data:`CLOSE_GRACE_S` seconds; returns them."""
        now = time.monotonic() if now is None else now
        cancelled = []
        with self._lock:
            running = [j for j in self._jobs.values() if not j.done and j.workspace is not None]
            pages = {w: dict(p) for w, p in self._pages.items()}
        for job in running:
            seen = pages.get(job.workspace, {})  # type: ignore[arg-type]
            last = max(
                [now if is_open(page) else when for page, when in seen.items()] or [job.started]
            )
            if now - last >= CLOSE_GRACE_S and not job.cancel_event.is_set():
                job.note = (
                    f"its workspace was closed: no page of it was open for {CLOSE_GRACE_S:.0f} s"
                )
                job.cancel_event.set()
                cancelled.append(job)
        return cancelled

    def _start_reaper(self) -> None:
        with self._lock:
            if self._reaper is not None and self._reaper.is_alive():
                return
            self._reaper = threading.Thread(
                target=self._reap_forever, name="phexplore-job-reaper", daemon=True
            )
            self._reaper.start()

    def _reap_forever(self) -> None:
        while True:
            time.sleep(REAP_EVERY_S)
            checker = page_checker()
            if checker is not None:
                self.reap(checker)


def page_checker() -> Callable[[str], bool] | None:
    """Whether a browser session of this Streamlit server is connected (None without a server,
    e.g. under AppTest: then nothing is reaped)."""
    if not Runtime.exists():
        return None
    runtime = Runtime.instance()
    return runtime.is_active_session


BOARD = JobBoard()
"""The server's jobs (one per process, shared by every session)."""


def collect_finished(state: MutableMapping[str, Any], runs_key: str) -> bool:
    """Show, once per session, how the session's job ended: its record joins ``state[runs_key]``
    and a message is left; True when that happened.

    Called on every page (from ``app.py``) and by the Run page's progress panel, so a run that
    ends while the user is on another page — or after a reload — is kept all the same."""
    job: RunJob | None = state.get(JOB_KEY)
    if job is None or not job.done:
        return False
    state[JOB_KEY] = None
    job.shown = True
    seen = set(state.get(SEEN_KEY) or ())
    seen.add(job.token)
    state[SEEN_KEY] = seen
    if job.record is not None:
        job.record.settings.setdefault("elapsed_s", round(job.elapsed(), 1))
        held = [r for r in state[runs_key] if r.token != job.record.token]
        state[runs_key] = sorted([*held, job.record], key=lambda r: r.id)
    state[MESSAGE_KEY] = job.outcome()
    return True


def follow(state: MutableMapping[str, Any], workspace: Path) -> RunJob | None:
    """The job this session follows: its own, else a running job of its workspace (started
    before a reload, or in another tab), else one that finished in the last two minutes without
    any session showing how it ended (it finished while its page was reloading)."""
    job: RunJob | None = state.get(JOB_KEY)
    if job is not None:
        return job
    seen = set(state.get(SEEN_KEY) or ())
    for other in BOARD.jobs(workspace):
        if other.token in seen:
            continue
        recent = other.finished is not None and time.monotonic() - other.finished < 120
        if not other.done or (recent and not other.shown):
            state[JOB_KEY] = other
            return other
    return None


def start_job(
    job: RunJob, work: Callable[[RunJob], RunRecord], workspace: Workspace | None = None
) -> RunJob:
    """Run ``work(job)`` in a daemon thread; errors become readable lines on the job.

    With ``workspace`` (the job's number reserved there first): the finished run is written into
    the workspace by the thread itself, so it is kept whoever is watching; a failed or cancelled
    run is recorded as such. The job joins :data:`BOARD`."""

    def target() -> None:
        try:
            record = work(job)
            record.settings["elapsed_s"] = round(time.monotonic() - job.started, 1)
            if workspace is not None:
                job.control.enter("saving")
                job.progress("Writing the run to the workspace", 0.0)
                try:
                    workspace.save_run(record)
                except Exception as exc:  # the run is kept in memory all the same
                    record.settings["unsaved"] = True
                    job.note = (
                        "It could not be written to the workspace, so it is kept only until the "
                        "server stops: " + describe_failure(exc, "saving the run")
                    )
            job.record = record
        except RunCancelled:
            job.cancelled = True
            _end(workspace, job, "cancelled", job.note or "cancelled")
        except PHExploreError as exc:
            job.error = problem_lines(exc)
            _end(workspace, job, "failed", "; ".join(job.error))
        except Exception as exc:  # one line in place; the traceback goes to the log file
            job.error = [describe_failure(exc, f"the {job.engine} run")]
            _end(workspace, job, "failed", job.error[0])
        finally:
            job.finished = time.monotonic()

    if workspace is not None:
        job.workspace = workspace.root
    BOARD.add(job)
    job.thread = threading.Thread(target=target, name=f"phexplore-{job.engine}", daemon=True)
    job.thread.start()
    return job


def _end(workspace: Workspace | None, job: RunJob, status: str, message: str) -> None:
    if workspace is None:
        return
    # a workspace that became unusable: the page says how the job ended anyway
    with contextlib.suppress(PHExploreError):
        workspace.end_run(job.token, status, message)


__all__ = [
    "BOARD",
    "JOB_KEY",
    "MESSAGE_KEY",
    "JobBoard",
    "RunJob",
    "RunRecord",
    "collect_finished",
    "follow",
    "start_job",
]
