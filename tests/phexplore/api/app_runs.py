"""App runs as the Run page builds them (pages/run_parts/topdown_form.py, phsafe_form.py): the typed
run description, the session's bookkeeping, and the work a RunJob runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from phexplore import api as R
from phexplore.api.jobs import RunJob, RunRecord


def topdown_app_work(
    hist: Any,
    label: str,
    allocation: Any,
    *,
    seed: int,
    run_id: int = 1,
    sample: str | None = None,
    folder: str | None = None,
    level: str | None = None,
    units: Sequence[str] = (),
    backend: str = "local",
    sweep: Any = None,
    **options: Any,
) -> Callable[[RunJob], RunRecord]:
    """The work of a TopDown run started on the Run page (``options``: TopDownRunOptions)."""
    spec = R.RunSpec(
        engine="topdown",
        data=R.app_data_source(
            label, sample=sample, folder=folder, level=level, units=units, hist=hist
        ),
        config=allocation.to_dict(),
        seed=seed,
        options=R.TopDownRunOptions(**options),
        **R.app_backend(backend),
    )
    session = R.SessionRun(run_id=run_id, scenario="s", data_label=label, budget=allocation)
    return R.topdown_work(spec, session, hist, sweep)


def phsafe_app_work(
    extract: Any,
    label: str,
    budget: Any,
    *,
    seed: int,
    states: Sequence[str] = (),
    run_id: int = 1,
    sample: str | None = None,
    folder: str | None = None,
    **options: Any,
) -> Callable[[RunJob], RunRecord]:
    """The work of a PHSafe run started on the Run page (``options``: PHSafeRunOptions)."""
    spec = R.RunSpec(
        engine="phsafe",
        data=R.app_data_source(label, sample=sample, folder=folder),
        config=R.phsafe_run_config(budget, states),
        seed=seed,
        options=R.PHSafeRunOptions(**options),
    )
    session = R.SessionRun(run_id=run_id, scenario="s", data_label=label, budget=budget)
    return R.phsafe_work(spec, session, extract)
