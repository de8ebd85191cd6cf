"""Progress and cancel of a run: the one bookkeeping every face (CLI, app, experiments) hands over.

The pipeline reports ``progress(message, fraction)`` with the fraction of the current stage or run
done (0–1) and polls ``cancelled()`` between units of work; engines receive the same two callables,
and a cancel raises :class:`~engine.core.errors.RunCancelled` wherever it is noticed. The control
keeps each stage's own fraction (:attr:`RunControl.stages`) and the overall fraction of the job
(:attr:`RunControl.fraction`, never going back), mapped through the current *phase* when a job has
several (the app's run, then its ρ sweep: :meth:`RunControl.phase`). A face that knows what the job
will cost can :meth:`RunControl.plan` its steps (the engine, the metrics, a sweep, saving) with
their expected shares of the time; the pipeline then enters each step (:meth:`RunControl.enter`), so the
overall fraction reaches 100% only when the last step ends, not when the engine does. A face only
decides how to show it (a line on stderr, progress bars) and when to ask for a cancel.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from engine.core.errors import RunCancelled

Progress = Callable[[str, float], None]


def _ignore(message: str, fraction: float) -> None:
    return None


def _clamp(fraction: float) -> float:
    return min(max(float(fraction), 0.0), 1.0)


@dataclass
class RunControl:
    """``on_progress(message, fraction)``, a thread-safe cancel flag and the progress so far."""

    on_progress: Progress = _ignore
    cancel_event: threading.Event = field(default_factory=threading.Event)
    stages: dict[str, float] = field(default_factory=dict)
    """Each stage's own fraction done (0–1), in the order the stages started."""
    fraction: float = 0.0
    """The overall fraction done (0–1), never going back."""
    span: tuple[float, float] = (0.0, 1.0)
    """The part of the overall fraction the current phase fills."""
    steps: dict[str, tuple[float, float]] = field(default_factory=dict)
    """The planned steps (:meth:`plan`): each one's part of the overall fraction."""
    step: str = ""
    """The step entered last (:meth:`enter`), "" before any."""

    def progress(self, message: str, fraction: float) -> None:
        """Record the stage and the overall fraction, then tell the face (the stage's fraction)."""
        value = _clamp(fraction)
        self.stages[message] = value
        low, high = self.span
        self.fraction = max(self.fraction, low + (high - low) * value)
        self.on_progress(message, value)

    def phase(self, start: float, stop: float) -> None:
        """Map the fractions reported from now on onto ``start``–``stop`` of the whole job."""
        self.span = (_clamp(start), _clamp(stop))

    def plan(self, weights: Sequence[tuple[str, float]]) -> None:
        """Plan the job's steps in order with their expected shares of its time (any positive
        scale; a step of weight 0 fills nothing); :meth:`enter` maps each onto its part."""
        total = sum(max(float(w), 0.0) for _, w in weights) or 1.0
        start = 0.0
        self.steps = {}
        for name, weight in weights:
            stop = min(start + max(float(weight), 0.0) / total, 1.0)
            self.steps[str(name)] = (start, stop)
            start = stop

    def enter(self, step: str) -> None:
        """Start planned step ``step`` (the fractions reported from now on fill its part); a step
        that was not planned changes nothing (a face without a plan sees the stages' fractions)."""
        if step in self.steps:
            self.step = step
            self.span = self.steps[step]
            self.fraction = max(self.fraction, self.span[0])

    def cancel(self) -> None:
        """Ask the run to stop at the next check."""
        self.cancel_event.set()

    def cancelled(self) -> bool:
        """True once :meth:`cancel` was called (engines poll this between units of work)."""
        return self.cancel_event.is_set()

    def check(self, where: str = "") -> None:
        """Raise :class:`~engine.core.errors.RunCancelled` when a cancel was asked for."""
        if self.cancelled():
            raise RunCancelled(f"run cancelled{' ' + where if where else ''}")

    def silent(self) -> RunControl:
        """A control sharing this one's cancel flag that reports no progress (one run of an
        experiment's grid: the grid reports)."""
        return RunControl(cancel_event=self.cancel_event)
