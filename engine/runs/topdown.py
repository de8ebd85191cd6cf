"""The TopDown run's stages: load → measure → estimate → metrics (TDA §6–§9; SPEC §4–§5, §8).

* :func:`load` — the block histogram of ``spec.data`` (a sample, a file or folder, with an
  optional block filter), or the histogram the caller already holds (the app's cache, uploads).
* :func:`measure` — the spine (conventional or SPN spine options), per-node budgets, true answers
  and the noisy measurements (:func:`engine.topdown.run.plan_run`,
  :func:`~engine.topdown.run.measure_plan`).
* :func:`estimate` — top-down least squares and rounding, batches of families handed to the
  run's executor (:func:`engine.topdown.run.estimate`).
* :func:`metrics` — metrics.json (:func:`metrics_payload`: MAE, median AE, EPL, Blau bias, …)
  and the tables the app shows, computed here from the sparse residuals (estimates − truth) by
  :mod:`engine.metrics`: the engine computes no metrics.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from engine.core.errors import ValidationError
from engine.core.executors import Executor
from engine.data.histogram import BlockHistogram, keep_blocks
from engine.dp.budget import TopDownAllocation
from engine.metrics.epl_settings import EPLSettings
from engine.runs.control import RunControl
from engine.runs.spec import RunSpec
from engine.topdown.measure import Measurements
from engine.topdown.measurement import KeyedMeasurements
from engine.topdown.run import TopDownPlan, TopDownResult

EPL_BOOT = 200

PREDICTION_COLUMNS = [
    "geolevel",
    "query",
    "sigma",
    "predicted_rmse",
    "measured_rmse",
    "ratio",
    "model_holds",
    "validity",
    "units",
    "units_evaluated",
]
"""The columns of the predicted-vs-measured table written to ``metrics.json`` ``prediction``."""
"""Bootstrap resamples of the metrics.json EPL interval (generator seeded ``[seed, 1]``, as the app)."""

SPINE_OPTION_KEYS: tuple[str, ...] = (
    "spine",
    "entities",
    "special_areas",
    "fanout_cutoff",
    "tract_groups",
    "bypass",
)


def bootstrap_rng(seed: int) -> np.random.Generator:
    """The EPL bootstrap's generator for a run of noise seed ``seed``: seeded ``[seed, 1]``.

    A stream of its own (not the noise seed itself), so the bootstrap never replays the noise draws.
    """
    return np.random.default_rng([int(seed), 1])


# ------------------------------------------------------------------ load
def filter_blocks(hist: BlockHistogram, level: str, units: Sequence[str]) -> BlockHistogram:
    """The blocks of ``hist`` inside the geounits ``units`` of ``level`` (``--filter``)."""
    wanted = {str(u).strip() for u in units if str(u).strip()}
    if not level or not wanted:
        raise ValidationError("filter: expected LEVEL=ID[,ID…], e.g. County=44001")
    if level not in hist.geography.columns:
        raise ValidationError(
            f"--filter: the data have no level {level!r}; levels: {', '.join(hist.levels)}"
        )
    keep = hist.geography[level].astype(str).isin(wanted).to_numpy()
    if not keep.any():
        raise ValidationError(
            f"--filter {level}={','.join(sorted(wanted))} matches no block of the data"
        )
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
    from engine.data.inputs import load_topdown_input, person_records_input
    from engine.data.validate import DEFAULT_MAX_BYTES

    data = spec.data
    block_filter = data.get("filter")
    persons = None
    if getattr(executor, "name", "") == "spark":
        persons = person_records_input(
            str(data["source"]), kind=data.get("format"), mapping=data.get("mapping")
        )
    if persons is not None:
        from engine.spark.persons import read_person_records

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
            str(data["source"]),
            kind=data.get("format"),
            mapping=data.get("mapping"),
            max_bytes=int(data.get("max_bytes") or DEFAULT_MAX_BYTES),
        )
    if block_filter:
        hist = filter_blocks(hist, str(block_filter["level"]), list(block_filter["units"]))
    return hist


def reads_persons_on_spark(spec: RunSpec) -> bool:
    """True when ``spec`` runs on Spark and its data are person records that :func:`load` has
    Spark read on the executors (a PPMF/MDF file or sample, a generated population folder)."""
    from engine.data.inputs import person_records_input

    if spec.backend != "spark":
        return False
    data = spec.data
    return (
        person_records_input(
            str(data.get("source", "")), kind=data.get("format"), mapping=data.get("mapping")
        )
        is not None
    )


def allocation_of(spec: RunSpec) -> TopDownAllocation:
    """The allocation of a TopDown spec (its config is the allocation's JSON dict)."""
    config = dict(spec.config)
    return TopDownAllocation.from_dict(config, name=str(config.get("name", "allocation")))


def n_states(hist: BlockHistogram) -> int:
    """States in the data (1 without a State column: part of one state)."""
    if "State" not in hist.geography.columns:
        return 1
    return max(1, int(hist.geography["State"].nunique()))


def run_allocation(spec: RunSpec, hist: BlockHistogram) -> TopDownAllocation:
    """The allocation the run measures with: the spec's, with its held-exact shares spread first
    when ``options["spread_invariant_share"]`` (a labelled departure from production, TDA §5.2)."""
    allocation = allocation_of(spec)
    if not spec.options.get("spread_invariant_share"):
        return allocation
    from engine.dp.budget.invariants import spread_invariant_share

    if spec.options.get("special_areas") not in (None, "none"):
        raise ValidationError(
            "--spread-invariant-share cannot be combined with --special-areas: a split "
            "state's branches measure the State TOTAL (TDA §7.4), so its share is spent there"
        )
    return spread_invariant_share(allocation, n_states(hist))


# ------------------------------------------------------------------ measure and estimate
@dataclass(frozen=True)
class Measured:
    """The measure stage's output: the plan, the true node histograms and the noisy answers."""

    plan: TopDownPlan
    truth: Any
    """int64 CSR ``(n_nodes, n_cells)`` (:func:`engine.topdown.sparse_histograms.aggregate_sparse`)."""
    measured: Measurements | KeyedMeasurements
    spine_plan: Any
    seconds: float
    allocation: TopDownAllocation
    """The allocation measured with (the spec's, or its spread form)."""


def _options(spec: RunSpec) -> Any:
    from engine.topdown.run import TopDownOptions

    return TopDownOptions(noise_method=spec.noise_method)


def spine_given(spec: RunSpec) -> bool:
    """True when the spec asks for an SPN spine or entity reporting (any spine option set)."""
    options = spec.options
    return bool(
        (options.get("spine") or "conventional") != "conventional"
        or options.get("entities")
        or options.get("special_areas") is not None
        or options.get("tract_groups")
        or options.get("bypass") is not None
        or options.get("fanout_cutoff") is not None
    )


def measure(
    spec: RunSpec, hist: BlockHistogram, control: RunControl, executor: Executor | None = None
) -> Measured:
    """Spine, budgets, true answers and noisy measurements of a TopDown run (TDA §6).

    On the Spark backend the keyed noise is drawn on the executors (same numbers, SPEC §8)."""
    from engine.topdown.geography import GeoTree
    from engine.topdown.run import measure_plan, plan_run

    started = time.perf_counter()
    allocation = run_allocation(spec, hist)
    options = _options(spec)
    levels = spec.options.get("levels")
    kwargs: dict[str, Any] = {"options": options}
    spine_plan = None
    if spine_given(spec):
        if levels:
            raise ValidationError("--levels cannot be combined with the spine options (--spine …)")
        from engine.topdown.spine.options import DEFAULT_FANOUT_CUTOFF
        from engine.topdown.spine.plan import plan_spine

        control.progress("Building the spine", 0.0)
        o = spec.options
        cutoff = o.get("fanout_cutoff")
        spine_plan = plan_spine(
            hist,
            allocation,
            o.get("spine") or "conventional",
            list(o.get("entities") or ()),
            special_areas=o.get("special_areas"),
            fanout_cutoff=DEFAULT_FANOUT_CUTOFF if cutoff is None else float(cutoff),
            tract_groups=bool(o.get("tract_groups")),
            bypass=o.get("bypass"),
        )
        kwargs = spine_plan.run_kwargs(allocation, options)
    elif levels:
        kwargs["tree"] = GeoTree.from_histogram(hist, list(levels))
    plan = plan_run(hist, allocation, **kwargs)
    control.check("before measuring")
    control.progress("Aggregating the true histogram", 0.0)
    on_executors = executor if getattr(executor, "name", "") == "spark" else None
    truth = true_histograms(plan, hist, on_executors)
    measured = measure_plan(plan, truth, spec.seed, executor=on_executors)
    control.progress("Measured noisy query answers", 0.02)
    return Measured(plan, truth, measured, spine_plan, time.perf_counter() - started, allocation)


def true_histograms(plan: TopDownPlan, hist: BlockHistogram, spark: Executor | None) -> Any:
    """Every spine geounit's true histogram, int64 CSR ``(n_nodes, n_cells)`` (TDA §5: sums of
    its blocks; non-zero cells only, issue 17).

    On the Spark backend (``spark``: a :class:`~engine.spark.executor.SparkExecutor`) Spark sums
    the block histogram's non-zero cells, as a long sparse DataFrame, by ``groupBy`` on every
    block's ancestors in the spine (:func:`engine.spark.histograms.spark_truth`); elsewhere the
    tree sums them here (:func:`engine.topdown.sparse_histograms.aggregate_sparse`). Both give
    the same integers."""
    from engine.spark.persons import SPARK_CELLS
    from engine.topdown.sparse_histograms import aggregate_sparse

    held = hist.extra.pop(SPARK_CELLS, None)  # cells of person records recoded on Spark
    if spark is None:
        return aggregate_sparse(plan.tree, hist.sparse_counts)
    import scipy.sparse as sp

    from engine.spark.histograms import spark_truth, truth_of_cells

    session = spark.session  # type: ignore[attr-defined]
    n_cells = hist.schema.size
    if held is not None:
        from engine.spark.persons import block_node_cells

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
    """Top-down estimation (TDA §7) on ``executor``; the run's :class:`TopDownResult`."""
    from engine.topdown.run import RunCancelled, estimate, result_of

    try:
        estimation = estimate(
            measured.plan,
            measured.measured,
            measured.truth,
            executor=executor,
            progress=control.progress,
            cancel=control.cancelled,
        )
    except RunCancelled:
        control.check("while estimating")
        raise
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


# ------------------------------------------------------------------ metrics
def epl_settings_of(spec: RunSpec) -> EPLSettings:
    """The EPL density-range settings of a spec (options ``epl_percentile``/``epl_multiplier``;
    default Petti & Flaxman's published p = 95, m = 1.0; SPEC §5)."""
    from engine.metrics.epl_settings import PF_MULTIPLIER, PF_PERCENTILE

    return EPLSettings(
        percentile=float(spec.options.get("epl_percentile", PF_PERCENTILE)),
        multiplier=float(spec.options.get("epl_multiplier", PF_MULTIPLIER)),
    )


def blau_bias_of(
    result: TopDownResult, tidy: pd.DataFrame, hist: BlockHistogram | None
) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """``(blau table, blau_bias report)`` of a run whose schema has the eight RACEETH groups.

    With ``hist`` (the true blocks and their tabulation geography) the report covers the spine's
    levels and the tabulation geographies summed from the estimated blocks (block groups, tracts…)
    whatever the spine (:func:`engine.metrics.blau.blau_bias_report`, TDA Table 13); without it,
    the Blau table of the spine's levels. ``(None, None)`` for other schemas.
    """
    if "RACEETH" not in result.schema.names:
        return None, None
    from engine.metrics.blau import (
        RACEETH_GROUPS,
        blau_bias_report,
        blau_table,
        raceeth_counts_from_tidy,
    )

    attribute = result.schema.attributes[result.schema.axis("RACEETH")]
    if tuple(attribute.levels) != tuple(RACEETH_GROUPS):
        return None, None
    counts = raceeth_counts_from_tidy(result.to_tidy(("RACEETH",)))
    if hist is None:
        return blau_table(counts), None
    estimated = result.block_histogram().sum(axis=1)
    return None, blau_bias_report(tidy, hist, estimated, spine_counts=counts)


def noise_record(method: str) -> dict[str, Any]:
    """The metrics.json ``noise`` section: which sampler drew the measurements."""
    if method == "exact":
        return {
            "method": "exact",
            "sampler": "OpenDP exact samplers, OS randomness (release-grade, not reproducible)",
        }
    return {
        "method": "fast",
        "sampler": "counter-based generator keyed by (seed, level, geounit, query) (SPEC §8)",
    }


def metrics_payload(
    result: TopDownResult,
    extra_sections: Mapping[str, Any] | None = None,
    *,
    tidy: pd.DataFrame | None = None,
    noise_method: str = "fast",
    epl_boot: int = EPL_BOOT,
    epl_settings: EPLSettings | None = None,
    hist: BlockHistogram | None = None,
    residuals: Mapping[tuple[str, str], Any] | None = None,
) -> dict[str, Any]:
    """The metrics.json dictionary of a run (schema in :mod:`engine.metrics.metrics_json`).

    ``residuals`` (:func:`sparse_residuals`): the counted residuals of every geolevel × query,
    used instead of a tidy table (the sparse path; the same numbers, no dense table built).

    ``extra_sections`` (e.g. the spine metrics of :mod:`engine.topdown.spine`) are added as
    top-level keys; ``epl_settings`` (default PF's published p = 95, m = 1.0) are recorded as
    ``epl_settings``; ``noise`` records which sampler drew the measurements. With ``hist``,
    ``blau_bias`` also covers the tabulation geographies summed from the estimated blocks.
    """
    from engine.metrics.metrics_json import build_metrics_json

    pure = result.mechanism == "puredp"
    extra: dict[str, Any] = {
        "allocation": result.allocation_name,
        "mechanism": result.mechanism,
        "noise": noise_record(noise_method),
        "timings": {k: round(float(v), 4) for k, v in result.timings.items()},
        "diagnostics": result.diagnostics,
        "structural_zeros": result.diagnostics.get("structural", {}),
        "n_blocks": result.tree.n_blocks,
        "n_geounits": {lv: int(result.tree.nodes_at_level(lv).size) for lv in result.tree.levels},
        **(extra_sections or {}),
    }
    if pure:
        extra["epsilon"] = result.rho
        extra["epsilon_spent"] = result.rho_spent
    if residuals is None:
        tidy = result.to_tidy() if tidy is None else tidy
        blau, blau_bias = blau_bias_of(result, tidy, hist)
    else:
        blau, blau_bias = blau_bias_of(result, totals_tidy(result, residuals), hist)
    return build_metrics_json(
        engine="topdown",
        tidy=tidy,
        residuals=residuals,
        runtime_s=result.runtime_s,
        rho=None if pure else result.rho,
        rho_spent=None if pure else result.rho_spent,
        seed=result.seed,
        epl_boot=epl_boot,
        epl_rng=bootstrap_rng(result.seed),
        epl_settings=epl_settings,
        blau=blau,
        blau_bias=blau_bias,
        extra=extra,
    )


def sparse_residuals(
    result: TopDownResult, queries: Sequence[str] | None = None
) -> dict[tuple[str, str], Any]:
    """``{(geolevel, query): CountedResiduals}`` of the run, from its sparse histograms (issue 17).

    Per query the residuals (estimate − true) of every geounit are one CSR product
    ``(estimates − truth) @ A`` (``A`` maps each histogram cell to its answer cell), so only
    the cells where the true or the estimated answer is non-zero are ever held; the zeros of
    each geolevel are counted (:func:`engine.metrics.counted.counted_residuals`). The same
    residuals as the rows of :meth:`TopDownResult.to_tidy`, grouped by geolevel and query.
    """
    from engine.metrics.counted import counted_residuals
    from engine.topdown.export import answer_matrix
    from engine.topdown.queries import query_group

    names = result.query_names if queries is None else tuple(queries)
    difference = (result.estimates_sparse - result.truth_sparse).tocsr()
    tree = result.tree
    out: dict[tuple[str, str], Any] = {}
    for name in names:
        group = query_group(result.schema, name)
        answers = (difference @ answer_matrix(group)).tocsr()
        for level in tree.levels:
            rows = answers[tree.nodes_at_level(level)]
            out[(str(level), str(name))] = counted_residuals(rows)
    return out


def totals_tidy(result: TopDownResult, residuals: Mapping[tuple[str, str], Any]) -> pd.DataFrame:
    """The tidy rows the Blau bias reads: one TOTAL row per geounit (n_nodes rows).

    :func:`engine.metrics.blau.geounit_totals` sums the first of TOTAL and DETAILED present in
    the table per geounit; both give each geounit's total, so the TOTAL query alone stands for
    either (a table with neither is refused there, as on the dense path)."""
    names = {query for _, query in residuals}
    if names & {"TOTAL", "DETAILED"}:
        return result.to_tidy(("TOTAL",))
    return result.to_tidy((sorted(names)[0],)) if names else result.to_tidy(("TOTAL",))


@dataclass(frozen=True)
class TopDownMetrics:
    """The metrics stage's output: metrics.json, the tidy table and the tables the app shows."""

    payload: dict[str, Any]
    tidy: pd.DataFrame | None
    """The dense comparison table (None without ``tables``: build it with ``result.to_tidy``)."""
    tables: dict[str, pd.DataFrame]
    spine_sections: dict[str, Any] | None
    queries_left_out: tuple[str, ...] = ()
    """Queries of the metrics left out of ``tidy`` (over the app's row limit)."""


def metrics(
    spec: RunSpec,
    result: TopDownResult,
    hist: BlockHistogram,
    measured: Measured,
    *,
    tables: bool = False,
    extra: Mapping[str, Any] | None = None,
    queries: Sequence[str] | None = None,
    max_tidy_rows: int | None = None,
) -> TopDownMetrics:
    """metrics.json of the run and, with ``tables``, the MAE / Blau-bias / EPL / prediction tables
    (SPEC §5, §7) the app shows (their prediction rows are added to metrics.json too).

    ``queries`` (default: the run's query groups) are the queries the metrics cover.

    metrics.json and the tables come from the sparse histograms (:func:`sparse_residuals`): the
    zeros of the geounit × cell residuals are counted, never stored, with the same numbers as the
    dense table (issue 17). Without ``tables`` (the CLI) no dense table is built and ``tidy`` is
    None; with ``tables`` (the app) ``tidy`` is the dense comparison table of the queries whose
    rows fit in ``max_tidy_rows`` (all when None; :func:`engine.runs.dense_rows.chosen_queries`, the
    rule of run folders opened in the app), the others listed in ``queries_left_out``.
    """
    residuals = sparse_residuals(result, queries)
    tidy = None
    left_out: list[str] = []
    if tables:
        kept, left_out = tidy_queries(result, queries, max_tidy_rows)
        tidy = result.to_tidy(kept)
    spine_sections = None
    if measured.spine_plan is not None:
        from engine.runs.spine import spine_sections as spine_metrics

        spine_sections = spine_metrics(measured.spine_plan, result, hist)
    from engine.dp.budget.invariants import budget_use
    from engine.runs.schema_note import schema_note_section

    sections: dict[str, Any] = dict(extra or {})
    if spine_sections is not None:
        sections.update(spine_sections)
    schema_note = schema_note_section(hist.schema.name, measured.allocation)
    if schema_note:
        sections["schema_note"] = schema_note
    sections["spread_invariant_share"] = bool(spec.options.get("spread_invariant_share"))
    use = budget_use(measured.allocation, n_states(hist))
    sections["held_exact"] = [f"{level} {query}" for level, query in use.held]
    epl_boot = int(spec.options.get("epl_boot", EPL_BOOT))
    settings = epl_settings_of(spec)
    out: dict[str, pd.DataFrame] = {}
    if tables:
        from engine.metrics.counted import counted_error_table, counted_rmse_table

        out["mae"] = _as_tidy_levels(counted_error_table(residuals, ("geolevel", "query")), result)
        _, blau_bias = blau_bias_of(result, totals_tidy(result, residuals), hist)
        if blau_bias is not None:
            out["blau_bias"] = blau_bias
        out["epl"] = counted_epl_table(residuals, epl_boot, spec.seed, settings)
        conventional = (spec.options.get("spine") or "conventional") == "conventional"
        if measured.spine_plan is None or conventional:  # the prediction's spine (SPEC §7)
            predicted = _prediction(
                result,
                hist,
                measured.allocation,
                _as_tidy_levels(counted_rmse_table(residuals), result),
            )
            if predicted is not None:
                out["prediction"] = predicted
                sections["prediction"] = predicted[PREDICTION_COLUMNS].to_dict("records")
                sections["prediction_sampling"] = prediction_sampling_note()
                if measured.spine_plan is not None and measured.spine_plan.entity_sets:
                    entities = _entity_prediction(
                        result, hist, measured.allocation, measured.spine_plan.entity_sets
                    )
                    if entities is not None:
                        out["entity_prediction"] = entities
    sections["run"] = spec.to_dict()
    payload = metrics_payload(
        result,
        sections,
        noise_method=spec.noise_method,
        epl_boot=epl_boot,
        epl_settings=settings,
        hist=hist,
        residuals=residuals,
    )
    return TopDownMetrics(payload, tidy, out, spine_sections, tuple(left_out))


def tidy_queries(
    result: TopDownResult, queries: Sequence[str] | None, max_rows: int | None
) -> tuple[list[str], list[str]]:
    """``(kept, left out)``: the queries (default: the run's) of the dense tidy table whose rows
    (answer cells × geounits) fit in ``max_rows`` together (all when None), in the run's order."""
    from engine.runs.dense_rows import chosen_queries
    from engine.topdown.queries import query_group

    names = [str(q) for q in (result.query_names if queries is None else queries)]
    if max_rows is None:
        return names, []
    sizes = {q: int(query_group(result.schema, q).size) for q in names}
    chosen = set(chosen_queries(sizes, int(result.tree.n_nodes), int(max_rows)))
    if not chosen:
        raise ValidationError(
            f"even the smallest query of this run has more dense rows ({result.tree.n_nodes:,} "
            f"geounits) than the app holds ({int(max_rows):,}); run it with 'phexplore run "
            "topdown' and open the folder in Python (engine.runs.run_folder.open_run_folder)"
        )
    return [q for q in names if q in chosen], [q for q in names if q not in chosen]


def _entity_prediction(
    result: TopDownResult,
    hist: BlockHistogram,
    allocation: TopDownAllocation,
    entity_sets: Any,
) -> pd.DataFrame | None:
    """Predicted vs measured RMSE of off-spine entities (TOTAL, and VOTINGAGE where the schema
    has it) of a run on the conventional spine."""
    from engine.core.errors import PHExploreError
    from engine.metrics.prediction import entity_prediction_table
    from engine.topdown.profile import leaf_membership, tree_profile
    from engine.topdown.queries import query_group

    try:
        profile, order = tree_profile(result.tree, hist, "run")
        estimate = result.block_histogram().astype(np.float64)
    except PHExploreError:
        return None
    truth = hist.counts.astype(np.float64)
    queries = ["TOTAL", *(["VOTINGAGE"] if "VOTINGAGE" in hist.schema.names else [])]
    sets = []
    for entity_set in entity_sets:
        inside = entity_set.codes >= 0
        errors = {}
        for q in queries:
            group = query_group(hist.schema, q)
            err = group.answer(estimate) - group.answer(truth)
            sums = np.zeros((entity_set.n_entities, group.size))
            np.add.at(sums, entity_set.codes[inside], err[inside])
            errors[q] = sums
        member = leaf_membership(result.tree, order[-1], entity_set.codes)
        sets.append((entity_set.name, entity_set.entity_ids, member, errors))
    return entity_prediction_table(profile, allocation, sets)


def counted_epl_table(
    residuals: Mapping[tuple[str, str], Any],
    epl_boot: int,
    seed: int,
    settings: EPLSettings,
) -> pd.DataFrame:
    """The app's EPL table (:func:`engine.metrics.epl.epl_table`'s columns and ``attrs``) from
    counted residuals, the bootstrap drawn from :func:`bootstrap_rng` in sorted geolevel × query
    order as metrics.json draws it (the same intervals)."""
    from engine.metrics.metrics_json import counted_metric_tables

    _, counted = counted_metric_tables(
        residuals, ("geolevel", "query"), epl_boot, bootstrap_rng(seed), seed, settings
    )
    table = pd.DataFrame() if counted is None else counted  # None only when epl_boot is None
    columns = ["geolevel", "query", "epl", "epl_low", "epl_high", "n_residuals", "reason"]
    reasons = [r if isinstance(r, str) else None for r in table["reason"]]
    table = table.reindex(columns=columns)
    table["reason"] = pd.Series(reasons, index=table.index, dtype=object)
    table.attrs["epl_settings"] = settings.as_dict()
    return table


def _as_tidy_levels(frame: pd.DataFrame, result: TopDownResult) -> pd.DataFrame:
    """``frame`` with its ``geolevel`` column typed as the tidy table types it (a categorical of
    the run's level names, sorted), so tables from counted residuals match the dense path's."""
    categories = pd.Index(sorted({str(level) for level in result.tree.levels}), dtype=object)
    levels = pd.Categorical(frame["geolevel"].astype(str), categories=categories)
    return frame.assign(geolevel=levels)


def prediction_sampling_note() -> dict[str, Any]:
    """What the predicted-vs-measured rows were evaluated on (metrics.json
    ``prediction_sampling``; the rows' ``units_evaluated`` give the count per level)."""
    from engine.prediction import RUN_TABLE_MAX_UNITS

    return {
        "max_units_per_level": RUN_TABLE_MAX_UNITS,
        "method": (
            "the non-negativity and rounding correction (and the least squares on each family's "
            "populated cells) evaluated on whole families, every k-th family of each level "
            "(deterministic: the same run gives the same sample), at most about "
            f"{RUN_TABLE_MAX_UNITS:,} geounits per level; each row's units_evaluated of units"
        ),
    }


def _prediction(
    result: TopDownResult,
    hist: BlockHistogram,
    allocation: TopDownAllocation,
    measured_rmse: pd.DataFrame,
) -> pd.DataFrame | None:
    """The predicted-vs-measured table of a run (None when its spine has no count profile);
    ``measured_rmse``: :func:`engine.metrics.counted.counted_rmse_table` of its residuals."""
    from engine.core.errors import PHExploreError
    from engine.metrics.prediction import prediction_of_measured
    from engine.prediction import RUN_TABLE_MAX_UNITS
    from engine.topdown.profile import tree_profile

    try:
        profile, _ = tree_profile(result.tree, hist, "run")
    except PHExploreError:
        return None
    # the correction on a sample of whole families per level (every k-th; the rows say how many
    # geounits): bounded memory and time on large runs (docs/prediction.md)
    return prediction_of_measured(profile, allocation, measured_rmse, max_units=RUN_TABLE_MAX_UNITS)
