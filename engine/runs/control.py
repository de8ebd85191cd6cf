"""Progress and cancel of a run: one object every face (CLI, app, experiments) hands to the pipeline.

The pipeline reports ``progress(message, fraction)`` with the overall fraction done (0–1) and
polls ``cancelled()`` between units of work; engines receive the same two callables. A face only
decides how to show progress (a line on stderr, a progress bar) and when to ask for a cancel.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.core.errors import PHExploreError

Progress = Callable[[str, float], None]


class RunCancelled(PHExploreError):
    """The run was cancelled through its :class:`RunControl`; nothing of it is kept."""


def _ignore(message: str, fraction: float) -> None:
    return None


@dataclass
class RunControl:
    """``on_progress(message, fraction)`` and a thread-safe cancel flag."""

    on_progress: Progress = _ignore
    _cancel: threading.Event = field(default_factory=threading.Event)
    stages: dict[str, float] = field(default_factory=dict)
    fraction: float = 0.0

    def progress(self, message: str, fraction: float) -> None:
        """Record the stage and the overall fraction (never going back), then tell the face."""
        value = min(max(float(fraction), 0.0), 1.0)
        self.stages[message] = value
        self.fraction = max(self.fraction, value)
        self.on_progress(message, value)

    def cancel(self) -> None:
        """Ask the run to stop at the next check."""
        self._cancel.set()

    def cancelled(self) -> bool:
        """True once :meth:`cancel` was called (engines poll this between units of work)."""
        return self._cancel.is_set()

    def check(self, where: str = "") -> None:
        """Raise :class:`RunCancelled` when a cancel was asked for."""
        if self.cancelled():
            raise RunCancelled(f"run cancelled{' ' + where if where else ''}")

    def scaled(self, start: float, stop: float) -> Progress:
        """A progress callback mapping a stage's own 0–1 onto ``start``–``stop`` of the run."""

        def report(message: str, fraction: float) -> None:
            self.progress(message, start + (stop - start) * min(max(float(fraction), 0.0), 1.0))

        return report
