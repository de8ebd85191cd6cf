"""The app's runs: a typed :class:`~engine.runs.spec.RunSpec` the page built, run by the one pipeline.

Part of the app-facing API (:mod:`phexplore.api`). The Run page builds the run description itself
from its widgets — :class:`~engine.runs.options.TopDownRunOptions` or
:class:`~engine.runs.options.PHSafeRunOptions`, the data source of
:func:`~phexplore.api.run_choices.app_data_source`, the backend of
:func:`~phexplore.api.run_choices.app_backend` — the same records the CLI builds from its
arguments. :func:`topdown_work` and :func:`phsafe_work` return the work a
:class:`~phexplore.api.jobs.RunJob` runs in its thread: :func:`engine.runs.pipeline.execute` (load →
measure → estimate → metrics) with the job's :class:`~engine.runs.control.RunControl`, plus an
optional ρ sweep through :func:`engine.runs.experiments.run_experiment`. No science here.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.core.errors import RunCancelled, ValidationError
from engine.data.histogram import BlockHistogram
from engine.data.samples import list_samples
from engine.dp.budget import PHSafeBudget, TopDownAllocation
from engine.metrics.srs import DEFAULT_FRACTIONS
from engine.runs.experiments import default_queries, run_experiment
from engine.runs.pipeline import RunOutput, execute
from engine.runs.provenance import Provenance, run_provenance
from engine.runs.spec import RunSpec
from engine.runs.topdown import allocation_of, options_of, reads_persons_on_spark, run_allocation
from engine.runs.topdown_metrics import DenseRowsExceeded
from engine.topdown.queries import SCHEMA_QUERIES
from phexplore.api import limits
from phexplore.api.jobs import RunJob, RunRecord
from phexplore.api.run_choices import epl_settings
from phexplore.api.run_records import phsafe_record, topdown_record
from phexplore.failures import describe_failure

SWEEP_BOOT = 20
"""Bootstrap resamples of each EPL of a ρ sweep (the sweep's curve, not the run's metrics)."""


@dataclass(frozen=True)
class SessionRun:
    """A run's place in the session: its number, scenario and data label, and the budget it was
    taken from as the planner holds it (``budget``: the PHSafe budget, or the TopDown allocations
    of every universe; ``preset``: the preset its origin is compared with, else the one its names
    point to)."""

    run_id: int
    scenario: str
    data_label: str
    budget: Mapping[str, TopDownAllocation] | PHSafeBudget
    preset: str | None = None
    run_token: str | None = None
    """The run's token as reserved in the workspace with its number (default: a fresh one)."""

    def provenance(self, spec: RunSpec) -> Provenance:
        """A new run's provenance (:func:`engine.runs.provenance.run_provenance`, the one builder):
        the budget's one fingerprint, its origin and what differs from the preset, the run number,
        a fresh token, data, seed."""
        return run_provenance(
            spec,
            budget=self.budget,
            preset=self.preset,
            run_id=self.run_id,
            run_token=self.run_token or uuid.uuid4().hex,
            data=self.data_label,
        )


@dataclass(frozen=True)
class Sweep:
    """A ρ sweep beside a TopDown run: the preset's allocation at each of ``rhos`` × ``seeds``
    consecutive seeds from the run's, with the SRS baseline when ``srs`` (PF Fig. 2)."""

    preset: str
    rhos: tuple[float, ...]
    seeds: int = 1
    srs: bool = True
    main_share: float = 0.5
    """The part of the job's progress the run itself fills (the sweep the rest): its share of the
    time estimate (:func:`phexplore.api.data.sweep_share`)."""


def topdown_work(
    spec: RunSpec, session: SessionRun, hist: BlockHistogram, sweep: Sweep | None = None
) -> Callable[[RunJob], RunRecord]:
    """The work of the TopDown run ``spec`` on ``hist`` (plus an optional ρ ``sweep``).

    The run is tied to its exact budget: ``metrics.json`` and the record carry the planner's
    budget fingerprint and origin, the run number, the data label and the seed. Checked before any
    job starts (a ValidationError names the problem): the allocation ``spread_invariant_share``
    asks for, and the EPL settings (the options' ranges)."""
    if isinstance(session.budget, PHSafeBudget):
        raise ValidationError("a TopDown run needs a TopDown budget")
    options = options_of(spec)
    run_allocation(spec, hist)  # refused before the job starts
    settings = epl_settings(options.epl_percentile, options.epl_multiplier)
    provenance = session.provenance(spec)  # refuses a budget that lacks the run's allocation
    allocation = allocation_of(spec)

    def work(job: RunJob) -> RunRecord:
        if sweep is not None:
            job.control.phase(0.0, sweep.main_share)
        output = execute_topdown(spec, job, hist, provenance)
        experiment, sweep_problem = None, None
        if sweep is not None:
            job.control.phase(sweep.main_share, 1.0)
            try:
                experiment = run_sweep(spec, job, hist, sweep, session.data_label, settings)
            except RunCancelled:
                why = f" ({job.note})" if job.note else ""
                sweep_problem = f"the budget sweep was cancelled{why}; the run's own result is kept"
            except Exception as exc:  # the main run's result is never discarded with it
                sweep_problem = (
                    "the budget sweep failed, the run's own result is kept: "
                    + describe_failure(exc, "the budget sweep")
                )
        record = topdown_record(
            output,
            scenario=session.scenario,
            allocation=allocation,
            provenance=provenance,
            experiment=experiment,
        )
        if sweep_problem:
            record.settings["sweep_problem"] = sweep_problem
        return record

    return work


def run_sweep(
    spec: RunSpec, job: RunJob, hist: BlockHistogram, sweep: Sweep, data_label: str, settings: Any
) -> Any:
    """The ρ sweep beside a TopDown run (:func:`engine.runs.experiments.run_experiment`) on the
    run's data, with the schema's default queries and trade-off
    (:func:`engine.runs.experiments.default_queries`: on the 2,016-cell schema the race and
    ethnicity marginals, not DETAILED)."""
    job.progress(f"ρ sweep ({len(sweep.rhos)} budgets × {sweep.seeds} seeds)", 0.0)
    return run_experiment(
        "topdown",
        hist,
        rhos=list(sweep.rhos),
        seeds=list(range(spec.seed, spec.seed + sweep.seeds)),
        preset=sweep.preset,
        queries=default_queries(hist.schema),
        srs_fractions=DEFAULT_FRACTIONS if sweep.srs else None,
        n_boot=SWEEP_BOOT,
        workers=spec.workers,
        control=job.control,
        data_name=data_label,
        epl_settings=settings,
    )


def execute_topdown(
    spec: RunSpec,
    job: RunJob,
    hist: BlockHistogram,
    provenance: Provenance,
    extra: Mapping[str, Any] | None = None,
) -> RunOutput:
    """Run a TopDown ``spec`` on ``hist`` through the one pipeline with the app's tables and the
    run's provenance in metrics.json (``extra``: more sections, e.g. ``replay_of``). On the Spark
    backend, person records named by ``spec.data`` are read again by Spark's executors
    (:func:`spark_reads_persons`; the same histogram), not taken from ``hist``.

    metrics.json and the tables come from the sparse residuals; the dense tidy table keeps at
    most :data:`phexplore.api.limits.APP_MAX_ROWS` rows, by the rule of opened run folders
    (smallest queries first, TOTAL first; the others in ``output.extra["queries_left_out"]``)."""
    queries = SCHEMA_QUERIES.get(hist.schema.name)
    try:
        output = execute(
            spec,
            control=job.control,
            # on Spark, person records (a PPMF sample, a generated folder) are read by the
            # executors, as `phexplore run` reads them; the page's copy only described the data
            data=None if spark_reads_persons(spec) else hist,
            tables=True,
            queries=queries,
            max_tidy_rows=limits.APP_MAX_ROWS,
            extra_metrics={
                "spine": options_of(spec).spine,
                **provenance.metrics(),
                **dict(extra or {}),
            },
        )
    except DenseRowsExceeded as exc:
        raise ValidationError(
            f"{exc} (the app holds {limits.APP_MAX_ROWS:,}); run it with 'phexplore run topdown' "
            "and open the folder in Python (engine.runs.run_folder.open_run_folder)"
        ) from None
    output.extra["queries"] = queries
    return output


def spark_reads_persons(spec: RunSpec) -> bool:
    """True when a Run-page TopDown ``spec`` runs on Spark on person records the executors can
    read again from where they are (a shipped PPMF sample, or a generated population folder by
    its absolute path: :func:`engine.runs.topdown.reads_persons_on_spark`); never for uploads,
    which exist only in the session."""
    source = spec.data.source
    if spec.data.upload or not (
        Path(source).is_absolute() or source in {s.name for s in list_samples()}
    ):
        return False
    return reads_persons_on_spark(spec)


def phsafe_work(spec: RunSpec, session: SessionRun, extract: Any) -> Callable[[RunJob], RunRecord]:
    """The work of the PHSafe run ``spec`` on ``extract`` (the working PHSafe budget's config).

    Like :func:`topdown_work`, the run carries its budget's fingerprint (of the budget as the
    planner holds it, before the run's state filter), origin, run number, data and seed."""
    if not isinstance(session.budget, PHSafeBudget):
        raise ValidationError("a PHSafe run needs a PHSafe budget")
    provenance = session.provenance(spec)
    budget = session.budget

    def work(job: RunJob) -> RunRecord:
        output = execute(
            spec,
            control=job.control,
            data=extract,
            extra_metrics=provenance.metrics(),
        )
        return phsafe_record(
            output, scenario=session.scenario, budget=budget, provenance=provenance
        )

    return work
