"""The one run pipeline: load → measure → estimate → metrics → write, for every face
(docs/science.md §8).

:func:`execute` takes a :class:`~engine.runs.spec.RunSpec` and a
:class:`~engine.runs.control.RunControl` (progress and cancel) and returns a :class:`RunOutput`;
:func:`write` writes it. The CLI (``phexplore run``), the app (:mod:`phexplore.api`) and the
experiments (:mod:`engine.runs.experiments`) all call these two functions, so "what happens when I
press Run" is this module:

0. **inputs** — the SHA-256 of every file the run reads is recorded in the description
   (:func:`engine.runs.inputs.with_inputs`), so a replay can tell whether the data changed;
1. **load** — the data of ``spec.data`` (:func:`engine.runs.topdown.load`,
   :func:`engine.runs.phsafe.load`), unless the caller passes data it already holds;
2. **measure** and 3. **estimate** — the engine (:mod:`engine.topdown`, :mod:`engine.phsafe`),
   its independent units of work run by the executor of ``spec.backend``/``spec.workers``
   (:mod:`engine.core.executors`); noise keyed by (seed, level, geounit, query);
4. **metrics** — from (truth, estimates) by :mod:`engine.metrics`, never inside the engine
   (:mod:`engine.runs.topdown_metrics`, :mod:`engine.runs.phsafe`);
5. **write** — :mod:`engine.runs.writers`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from engine.core.errors import ValidationError
from engine.core.executors import Executor, make_executor
from engine.runs import phsafe as phsafe_stages
from engine.runs import topdown as topdown_stages
from engine.runs.control import RunControl
from engine.runs.inputs import with_inputs
from engine.runs.options import PHSafeRunOptions
from engine.runs.spec import RunSpec
from engine.runs.topdown_metrics import metrics as topdown_metrics
from engine.runs.topdown_metrics import tidy_queries
from engine.runs.writers import write_phsafe, write_topdown
from engine.spark.executor import spark_executor

OUTPUTS: tuple[str, ...] = ("metrics", "tidy", "result")
"""What :func:`execute` computes after the engine: metrics.json, the tidy table, or nothing."""


@dataclass
class RunOutput:
    """What a run produced: the engine result, metrics.json, the tidy table and extra tables."""

    spec: RunSpec
    result: Any
    metrics: dict[str, Any]
    tidy: pd.DataFrame | None
    """The tidy comparison table; None for a TopDown run whose metrics were computed from the
    sparse histograms (``tables=False``: the CLI; ``result.to_tidy(queries)`` builds it)."""
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    data: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Engine-specific leftovers a face may show (TopDown's spine sections and error universe,
    :class:`engine.metrics.universe.BlockUniverse`, under ``"universe"``; PHSafe's error analysis,
    :class:`engine.runs.phsafe.PHSafeErrorAnalysis`, under ``"errors"``)."""

    @property
    def runtime_s(self) -> float:
        return float(self.result.runtime_s)


def execute(
    spec: RunSpec,
    *,
    control: RunControl | None = None,
    data: Any = None,
    executor: Executor | None = None,
    tables: bool = False,
    extra_metrics: Mapping[str, Any] | None = None,
    queries: Sequence[str] | None = None,
    prepared: Any = None,
    outputs: str = "metrics",
    max_tidy_rows: int | None = None,
) -> RunOutput:
    """Run ``spec`` through load → measure → estimate → metrics (see the module docstring).

    ``data``: the loaded histogram / CEF extract when the caller already holds it (else loaded
    from ``spec.data``). ``executor`` overrides the one ``spec.backend``/``spec.workers`` names
    (the caller then closes it). ``tables`` adds the tables the app shows; ``extra_metrics`` are
    extra metrics.json sections; ``queries`` the TopDown queries of the metrics and tidy table
    (``max_tidy_rows``: the tidy table keeps only the queries fitting in that many dense rows,
    :func:`engine.runs.dense_rows.chosen_queries`; the others are listed in
    ``extra["queries_left_out"]``); ``prepared`` a PHSafe prepared extract to reuse.

    ``outputs`` (:data:`OUTPUTS`): ``"metrics"`` — metrics.json (and the tables); ``"tidy"`` — no
    metrics.json, the tidy comparison table only (experiments compute their own tables from it;
    ``max_tidy_rows`` bounds it likewise); ``"result"`` — the engine's result alone (benchmarks of
    the engine; a TopDown run builds no table).

    ``output.spec`` is ``spec`` with the content hashes of its input files recorded.
    """
    if outputs not in OUTPUTS:
        raise ValidationError(f"outputs must be one of {', '.join(OUTPUTS)}; got {outputs!r}")
    control = control or RunControl()
    spec = with_inputs(spec)
    own = executor is None
    runner = executor if executor is not None else executor_for(spec)
    try:
        if spec.engine == "topdown":
            return _topdown(
                spec, control, data, runner, tables, extra_metrics, queries, outputs, max_tidy_rows
            )
        return _phsafe(spec, control, data, runner, extra_metrics, prepared, outputs == "metrics")
    finally:
        if own:
            runner.close()


def executor_for(spec: RunSpec) -> Executor:
    """The executor ``spec.backend`` names: in process, a process pool, or Spark
    (:func:`engine.spark.executor.spark_executor` from ``spec.backend_options``)."""
    if spec.backend == "spark":
        return spark_executor(spec.backend_options.to_json())
    return make_executor(spec.backend, spec.workers)


def _topdown(
    spec: RunSpec,
    control: RunControl,
    data: Any,
    executor: Executor,
    tables: bool,
    extra_metrics: Mapping[str, Any] | None,
    queries: Sequence[str] | None,
    outputs: str,
    max_tidy_rows: int | None = None,
) -> RunOutput:
    stages = topdown_stages
    started = time.perf_counter()
    control.enter("engine")
    hist = stages.load(spec, executor) if data is None else data
    control.check("after loading")
    measured = stages.measure(spec, hist, control, executor)
    result = stages.estimate(spec, hist, measured, executor, control, started)
    if outputs == "result":
        return RunOutput(spec=spec, result=result, metrics={}, tidy=None, data=hist)
    if outputs == "tidy":
        kept, left_out = tidy_queries(result, queries, max_tidy_rows)
        return RunOutput(
            spec=spec,
            result=result,
            metrics={},
            tidy=result.to_tidy(kept),
            data=hist,
            extra={"queries": queries, "queries_left_out": left_out},
        )
    control.enter("metrics")
    control.progress("Computing metrics", 0.0)
    computed = topdown_metrics(
        spec,
        result,
        hist,
        measured,
        tables=tables,
        extra=extra_metrics,
        queries=queries,
        max_tidy_rows=max_tidy_rows,
        progress=control.progress,
    )
    control.progress("Metrics computed", 1.0)
    return RunOutput(
        spec=spec,
        result=result,
        metrics=computed.payload,
        tidy=computed.tidy,
        tables=computed.tables,
        data=hist,
        extra={
            "spine_sections": computed.spine_sections,
            "queries": queries,
            "queries_left_out": list(computed.queries_left_out),
            "universe": computed.universe,
        },
    )


def _phsafe(
    spec: RunSpec,
    control: RunControl,
    data: Any,
    executor: Executor,
    extra_metrics: Mapping[str, Any] | None,
    prepared: Any,
    with_metrics: bool,
) -> RunOutput:
    stages = phsafe_stages
    control.enter("engine")
    # Spark reads (and casts) the files itself: the extract never has to fit in this process
    extract = stages.load(spec) if data is None and spec.backend != "spark" else data
    control.check("after loading")
    result = stages.measure_and_estimate(spec, extract, executor, control, prepared=prepared)
    control.enter("metrics")
    control.progress("Error analysis (noise and truncation)", 0.0)
    errors = stages.error_analysis(result, _scale(spec))
    control.progress("Error analysis done", 1.0)
    payload: dict[str, Any] = {}
    if with_metrics:
        payload = stages.metrics_payload(
            result, scale=_scale(spec), noise_method=spec.noise_method, errors=errors
        )
        payload.update(extra_metrics or {})
        payload["run"] = spec.to_dict()
    return RunOutput(
        spec=spec,
        result=result,
        metrics=payload,
        tidy=errors.cells,
        tables={
            "level_errors": errors.levels,
            "truncation_scale": errors.at_scale if result.n_persons > 0 else pd.DataFrame(),
            "truncation": result.truncation,
            "measurements": result.measurements,
        },
        data=extract,
        extra={"errors": errors},
    )


def write(
    output: RunOutput,
    out_dir: str | Path,
    *,
    summary: Sequence[str] = (),
) -> dict[str, Path]:
    """The write stage: the run's files in ``out_dir`` (:mod:`engine.runs.writers`).

    TopDown options read here: ``microdata``, ``measurements`` (False: not written), ``output_format``
    (``auto``/``csv``/``parquet``) and ``estimates`` (``auto``/``dense``/``sparse``); the
    estimates are streamed from the result, not from ``output.tidy``.
    """
    if output.spec.engine == "topdown":
        options = topdown_stages.options_of(output.spec)
        return write_topdown(
            output.result,
            output.metrics,
            out_dir,
            queries=output.extra.get("queries"),
            microdata=options.microdata,
            measurements=options.measurements,
            output_format=options.output_format,
            estimates=options.estimates,
        )
    return write_phsafe(
        output.result, output.metrics, out_dir, summary, errors=output.extra.get("errors")
    )


def _scale(spec: RunSpec) -> float | None:
    """The data's declared fraction of the full population (PHSafe option ``scale``), or None."""
    return spec.options.scale if isinstance(spec.options, PHSafeRunOptions) else None
