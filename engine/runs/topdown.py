"""The TopDown run's stages: load → measure → estimate (TDA §6–§7; docs/science.md §4, §8).

* :func:`load` — the block histogram of ``spec.data`` (a sample, a file or folder, with an
  optional block filter), or the histogram the caller already holds (the app's cache, uploads).
* :func:`measure` — the spine (the allocation's own, the conventional one, or the SPN spine of
  the spine options: :func:`engine.runs.spine_choice.resolve_spine`), per-node budgets, true
  answers and the noisy measurements (:func:`engine.topdown.plan.plan_run`,
  :func:`engine.topdown.measurement.measure_plan`).
* :func:`estimate` — top-down least squares and rounding, batches of families handed to the
  run's executor (:func:`engine.topdown.estimation.estimate`).

The metrics stage is :mod:`engine.runs.topdown_metrics`: the engine computes no metrics. Every
option is read from the spec's typed :class:`~engine.runs.options.TopDownRunOptions`.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from engine.core.errors import ValidationError
from engine.core.executors import Executor
from engine.data.histogram import BlockHistogram, check_count_magnitude, keep_blocks
from engine.data.inputs import load_topdown_input, person_records_input
from engine.data.sources import DEFAULT_MAX_BYTES
from engine.dp.budget import TopDownAllocation
from engine.dp.budget.invariants import spread_invariant_share
from engine.runs.control import RunControl
from engine.runs.data_source import BlockFilter
from engine.runs.options import PRESET_SPINE, TopDownRunOptions
from engine.runs.spec import RunSpec, thaw
from engine.runs.spine_choice import SpineChoice, resolve_spine
from engine.spark.histograms import spark_truth, truth_of_cells
from engine.spark.persons import SPARK_CELLS, block_node_cells, read_person_records
from engine.topdown.estimation import estimate as estimate_families
from engine.topdown.geography import GeoTree
from engine.topdown.measure import Measurements
from engine.topdown.measurement import KeyedMeasurements, measure_plan
from engine.topdown.options import TopDownOptions
from engine.topdown.plan import TopDownPlan, plan_run
from engine.topdown.result import TopDownResult, result_of
from engine.topdown.sparse_histograms import aggregate_sparse
from engine.topdown.spine.options import DEFAULT_FANOUT_CUTOFF
from engine.topdown.spine.plan import SpinePlan, plan_spine


def options_of(spec: RunSpec) -> TopDownRunOptions:
    """The TopDown options of a TopDown spec."""
    if not isinstance(spec.options, TopDownRunOptions):
        raise ValidationError(f"a {spec.engine} run has no TopDown options")
    return spec.options


# ------------------------------------------------------------------ load
def filter_blocks(hist: BlockHistogram, block_filter: BlockFilter) -> BlockHistogram:
    """The blocks of ``hist`` inside the geounits of ``block_filter`` (the run's ``filter``)."""
    level, wanted = block_filter.level, {u.strip() for u in block_filter.units if u.strip()}
    if level not in hist.geography.columns:
        raise ValidationError(
            f"filter {block_filter}: the data have no level {level!r}; levels: "
            f"{', '.join(hist.levels)}"
        )
    keep = hist.geography[level].astype(str).isin(wanted).to_numpy()
    if not keep.any():
        raise ValidationError(f"filter {block_filter}: no block of the data is inside them")
    # keep_blocks subsets every per-block array of the unit frame too (housing units, GQ
    # facilities: the structural zeros of TDA §5.3), as the app's subset does.
    return keep_blocks(hist, keep)


def load(spec: RunSpec, executor: Executor | None = None) -> BlockHistogram:
    """Read ``spec.data``: ``source`` (sample, file or folder), ``format``, ``mapping``,
    ``max_bytes`` (size limit per input file), ``filter``.

    On the Spark backend (``executor`` a :class:`~engine.spark.executor.SparkExecutor`) person
    records — a PPMF/MDF file or sample, a generated population — are read and recoded on the
    executors (:func:`engine.spark.persons.read_person_records`; no size limit): the driver
    receives only the non-zero block cells. Every other input is loaded here."""
    data = spec.data
    block_filter = None if data.filter is None else thaw_filter(data.filter)
    persons = None
    if getattr(executor, "name", "") == "spark":
        persons = person_records_input(data.source, kind=data.format, mapping=data.mapping)
    if persons is not None:
        kind, path, extra = persons
        hist = read_person_records(
            executor.session,  # type: ignore[union-attr]
            kind,
            path,
            block_filter=block_filter,
            extra=extra,
        )
    else:
        hist = load_topdown_input(
            data.source,
            kind=data.format,
            mapping=data.mapping,
            max_bytes=data.max_bytes or DEFAULT_MAX_BYTES,
        )
    if data.filter is not None:
        hist = filter_blocks(hist, data.filter)
    return hist


def thaw_filter(block_filter: BlockFilter) -> dict[str, Any]:
    """A block filter as the plain ``{"level", "units"}`` the Spark reader takes."""
    return {"level": block_filter.level, "units": list(block_filter.units)}


def reads_persons_on_spark(spec: RunSpec) -> bool:
    """True when ``spec`` runs on Spark and its data are person records that :func:`load` has
    Spark read on the executors (a PPMF/MDF file or sample, a generated population folder)."""
    if spec.backend != "spark":
        return False
    data = spec.data
    return person_records_input(data.source, kind=data.format, mapping=data.mapping) is not None


def allocation_of(spec: RunSpec) -> TopDownAllocation:
    """The allocation of a TopDown spec (its config is the allocation's JSON dict)."""
    config = thaw(spec.config)
    return TopDownAllocation.from_dict(config, name=str(config.get("name", "allocation")))


def n_states(hist: BlockHistogram) -> int:
    """States in the data (1 without a State column: part of one state)."""
    if "State" not in hist.geography.columns:
        return 1
    return max(1, int(hist.geography["State"].nunique()))


def run_allocation(spec: RunSpec, hist: BlockHistogram) -> TopDownAllocation:
    """The allocation the run measures with: the spec's, with its held-exact shares spread first
    when ``spread_invariant_share`` (a labelled departure from production, TDA §5.2; the options
    refuse it beside an AIAN-style branch)."""
    allocation = allocation_of(spec)
    if not options_of(spec).spread_invariant_share:
        return allocation
    return spread_invariant_share(allocation, n_states(hist))


# ------------------------------------------------------------------ measure and estimate
@dataclass(frozen=True)
class Measured:
    """The measure stage's output: the plan, the true node histograms and the noisy answers."""

    plan: TopDownPlan
    truth: Any
    """int64 CSR ``(n_nodes, n_cells)`` (:func:`engine.topdown.sparse_histograms.aggregate_sparse`)."""
    measured: Measurements | KeyedMeasurements
    spine_plan: SpinePlan | None
    seconds: float
    allocation: TopDownAllocation
    """The allocation measured with (the spec's, or its spread form)."""
    spine: SpineChoice | None = None
    """The spine the run measured on and why (metrics.json ``spine_used``)."""


def spine_plan_of(
    options: TopDownRunOptions, hist: BlockHistogram, allocation: TopDownAllocation
) -> SpinePlan:
    """The spine the options name, built on ``hist`` (:func:`engine.topdown.spine.plan.plan_spine`);
    ``spine`` = ``preset`` is resolved first (:func:`engine.runs.spine_choice.resolve_spine`)."""
    if options.spine == PRESET_SPINE:
        chosen = resolve_spine(options, allocation, hist).build
        options = chosen or dataclasses.replace(options, spine="conventional")
    cutoff = options.fanout_cutoff
    return plan_spine(
        hist,
        allocation,
        options.spine,
        list(options.entities),
        special_areas=options.special_areas,
        fanout_cutoff=DEFAULT_FANOUT_CUTOFF if cutoff is None else float(cutoff),
        tract_groups=options.tract_groups,
        bypass=options.bypass,
    )


def measure(
    spec: RunSpec, hist: BlockHistogram, control: RunControl, executor: Executor | None = None
) -> Measured:
    """Spine, budgets, true answers and noisy measurements of a TopDown run (TDA §6).

    On the Spark backend the true histograms are summed by Spark (same integers, docs/science.md
    §8); the keyed noise is drawn in the estimation's units of work."""
    started = time.perf_counter()
    check_count_magnitude(hist, spec.data.source or "the input")
    options = options_of(spec)
    allocation = run_allocation(spec, hist)
    engine_options = TopDownOptions(noise_method=options.noise_method, solver=options.solver)
    kwargs: dict[str, Any] = {"options": engine_options}
    spine_plan = None
    spine = resolve_spine(options, allocation, hist)  # the run's spine, else the preset's
    if spine.build is not None:
        control.progress("Building the spine", 0.0)
        spine_plan = spine_plan_of(spine.build, hist, allocation)
        kwargs = spine_plan.run_kwargs(allocation, engine_options)
    elif options.levels:
        kwargs["tree"] = GeoTree.from_histogram(hist, list(options.levels))
    plan = plan_run(hist, allocation, **kwargs)
    control.check("before measuring")
    control.progress("Aggregating the true histogram", 0.0)
    on_executors = executor if getattr(executor, "name", "") == "spark" else None
    truth = true_histograms(plan, hist, on_executors)
    measured = measure_plan(plan, truth, spec.seed)
    control.progress("Measured noisy query answers", 0.02)
    return Measured(
        plan, truth, measured, spine_plan, time.perf_counter() - started, allocation, spine
    )


def true_histograms(plan: TopDownPlan, hist: BlockHistogram, spark: Executor | None) -> Any:
    """Every spine geounit's true histogram, int64 CSR ``(n_nodes, n_cells)`` (TDA §5: sums of
    its blocks; non-zero cells only).

    On the Spark backend (``spark``: a :class:`~engine.spark.executor.SparkExecutor`) Spark sums
    the block histogram's non-zero cells, as a long sparse DataFrame, by ``groupBy`` on every
    block's ancestors in the spine (:func:`engine.spark.histograms.spark_truth`); elsewhere the
    tree sums them here (:func:`engine.topdown.sparse_histograms.aggregate_sparse`). Both give
    the same integers."""
    held = hist.extra.pop(SPARK_CELLS, None)  # cells of person records recoded on Spark
    if spark is None:
        return aggregate_sparse(plan.tree, hist.sparse_counts)
    session = spark.session  # type: ignore[attr-defined]
    n_cells = hist.schema.size
    if held is not None:
        cells = block_node_cells(session, plan.tree, hist.geography["Block"], held.cells())
        truth = truth_of_cells(session, plan.tree, cells, n_cells)
        held.release()
    else:
        truth = spark_truth(session, plan.tree, hist.sparse_counts, n_cells)
    sparse = sp.csr_matrix(truth, dtype=np.int64)
    sparse.eliminate_zeros()
    sparse.sort_indices()
    return sparse


def estimate(
    spec: RunSpec,
    hist: BlockHistogram,
    measured: Measured,
    executor: Executor,
    control: RunControl,
    started: float,
) -> TopDownResult:
    """Top-down estimation (TDA §7) on ``executor``; the run's :class:`TopDownResult`.

    A cancel through ``control`` raises :class:`~engine.core.errors.RunCancelled` between units."""
    estimation = estimate_families(
        measured.plan,
        measured.measured,
        measured.truth,
        executor=executor,
        progress=control.progress,
        cancel=control.cancelled,
    )
    timings = {"measurement": measured.seconds, **estimation.timings}
    result = result_of(
        measured.plan,
        hist,
        measured.truth,
        measured.measured,
        estimation,
        seed=spec.seed,
        runtime_s=time.perf_counter() - started,
        timings=timings,
        workers=executor.workers,
    )
    control.progress("Done", 1.0)
    return result
