"""The TopDown run's metrics stage: metrics.json and the tables the app shows (docs/science.md §5,
§7; TDA Table 13; PF Methods).

Computed here, never in the engine, from the run's sparse histograms: the residuals (estimates −
truth) of every geolevel × query (:func:`sparse_residuals`; zeros counted, not stored; at the block
level only the blocks of the run's error universe, :mod:`engine.metrics.universe`), from which
:func:`metrics` builds metrics.json (:func:`metrics_payload`: TDA's absolute error on the
tabulation geographies and by size class (TDA Tables 9–12, :mod:`engine.runs.tabulation`), the
per-cell MAE, median AE, EPL with its bootstrap interval, Blau-quintile bias, the
predicted-vs-measured RMSE of a conventional spine, the spine sections of an SPN spine, the spine
used and why, the schema note, the held-exact shares) and, for the app, the MAE, Blau-bias, EPL and
prediction tables. Options come from the spec's typed
:class:`~engine.runs.options.TopDownRunOptions` (error universe, EPL resamples and settings).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from engine.core.errors import PHExploreError, ValidationError
from engine.data.histogram import BlockHistogram
from engine.dp.budget import TopDownAllocation
from engine.dp.budget.invariants import budget_use
from engine.metrics.blau import blau_bias_report, blau_table, raceeth_counts_of_rows
from engine.metrics.counted import counted_error_table, counted_residuals, counted_rmse_table
from engine.metrics.epl_settings import EPL_TABLE_COLUMNS, EPLSettings
from engine.metrics.metrics_json import build_metrics_json, counted_metric_tables
from engine.metrics.prediction import entity_prediction_table, prediction_of_measured
from engine.metrics.universe import BlockUniverse, block_universe
from engine.prediction import RUN_TABLE_MAX_UNITS
from engine.runs.dense_rows import chosen_queries
from engine.runs.options import EPL_BOOT, noise_record
from engine.runs.schema_note import schema_note_section
from engine.runs.spec import RunSpec
from engine.runs.spine import spine_sections as spine_metrics
from engine.runs.tabulation import tda_sections
from engine.runs.topdown import Measured, n_states, options_of
from engine.topdown.export import answer_matrix
from engine.topdown.profile import leaf_membership, tree_profile
from engine.topdown.queries import query_group
from engine.topdown.result import TopDownResult

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


def bootstrap_rng(seed: int) -> np.random.Generator:
    """The EPL bootstrap's generator for a run of noise seed ``seed``: seeded ``[seed, 1]``.

    A stream of its own (not the noise seed itself), so the bootstrap never replays the noise draws.
    """
    return np.random.default_rng([int(seed), 1])


def epl_settings_of(spec: RunSpec) -> EPLSettings:
    """The EPL density-range settings of a spec (options ``epl_percentile``/``epl_multiplier``;
    default Petti & Flaxman's published p = 95, m = 1.0; docs/science.md §5)."""
    options = options_of(spec)
    return EPLSettings(percentile=options.epl_percentile, multiplier=options.epl_multiplier)


def blau_bias_of(
    result: TopDownResult,
    tidy: pd.DataFrame,
    hist: BlockHistogram | None,
    universe: BlockUniverse | None = None,
) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """``(blau table, blau_bias report)`` of a run whose schema has the eight Blau groups
    (RACEETH, or HISPANIC × CENRACE folded: :func:`engine.metrics.blau.raceeth_fold`).

    With ``hist`` (the true blocks and their tabulation geography) the report covers the spine's
    levels and the tabulation geographies summed from the estimated blocks (block groups, tracts…)
    whatever the spine, blocks ranked within ``universe`` (default every block;
    :func:`engine.metrics.blau.blau_bias_report`, TDA Table 13); without it, the Blau table of the
    spine's levels. ``(None, None)`` for other schemas.
    """
    tree = result.tree
    counts = raceeth_counts_of_rows(
        tree.level_names, tree.node_id, result.truth_sparse, result.schema
    )
    if counts is None:
        return None, None
    if hist is None:
        return blau_table(counts), None
    estimated = np.asarray(result.block_histogram_sparse().sum(axis=1)).reshape(-1)
    return None, blau_bias_report(tidy, hist, estimated, spine_counts=counts, universe=universe)


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
    universe: BlockUniverse | None = None,
    tda_mae: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The metrics.json dictionary of a run (schema in :mod:`engine.metrics.metrics_json`).

    ``residuals`` (:func:`sparse_residuals`): the counted residuals of every geolevel × query,
    used instead of a tidy table (the sparse path; the same numbers, no dense table built), already
    restricted to ``universe`` (:class:`engine.metrics.universe.BlockUniverse`: the blocks the
    block-level figures average over; default every block, as before the universe was recorded —
    :func:`metrics` passes the run's). ``tda_mae``: the section on the tabulation geographies
    (:func:`engine.runs.tabulation.tda_sections`; default: from the residuals of the spine's
    levels).

    ``extra_sections`` (e.g. the spine metrics of :mod:`engine.topdown.spine`) are added as
    top-level keys; ``epl_settings`` (default PF's published p = 95, m = 1.0) are recorded as
    ``epl_settings``; ``noise`` records which sampler drew the measurements. With ``hist``,
    ``blau_bias`` also covers the tabulation geographies summed from the estimated blocks.
    """
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
        if universe is not None and hist is not None:
            tidy = universe.restrict(tidy, hist.geography[hist.levels[-1]].to_numpy())
        blau, blau_bias = blau_bias_of(result, tidy, hist, universe)
    else:
        blau, blau_bias = blau_bias_of(result, totals_tidy(result, residuals), hist, universe)
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
        error_universe=None if universe is None else universe.section(),
        tda_mae=tda_mae,
    )


def sparse_residuals(
    result: TopDownResult,
    queries: Sequence[str] | None = None,
    universe: BlockUniverse | None = None,
) -> dict[tuple[str, str], Any]:
    """``{(geolevel, query): CountedResiduals}`` of the run, from its sparse histograms.

    Per query the residuals (estimate − true) of every geounit are one CSR product
    ``(estimates − truth) @ A`` (``A`` maps each histogram cell to its answer cell), so only
    the cells where the true or the estimated answer is non-zero are ever held; the zeros of
    each geolevel are counted (:func:`engine.metrics.counted.counted_residuals`). The same
    residuals as the rows of :meth:`TopDownResult.to_tidy`, grouped by geolevel and query; at the
    block level only the blocks of ``universe`` (None: every block).
    """
    names = result.query_names if queries is None else tuple(queries)
    difference = (result.estimates_sparse - result.truth_sparse).tocsr()
    tree = result.tree
    out: dict[tuple[str, str], Any] = {}
    for name in names:
        group = query_group(result.schema, name)
        answers = (difference @ answer_matrix(group)).tocsr()
        for level in tree.levels:
            nodes = tree.nodes_at_level(level)
            if universe is not None:
                nodes = universe.level_nodes(str(level), nodes, tree.block_node)
            out[(str(level), str(name))] = counted_residuals(answers[nodes])
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
    universe: BlockUniverse | None = None
    """The blocks of the block-level figures (``tidy`` keeps every block; its block rows outside
    the universe are left out of the figures)."""


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
    progress: Callable[[str, float], None] | None = None,
) -> TopDownMetrics:
    """metrics.json of the run and, with ``tables``, the MAE / Blau-bias / EPL / prediction tables
    (docs/science.md §5, §7) the app shows (their prediction rows are added to metrics.json too).

    ``queries`` (default: the run's query groups) are the queries the metrics cover.

    metrics.json and the tables come from the sparse histograms (:func:`sparse_residuals`): the
    zeros of the geounit × cell residuals are counted, never stored, with the same numbers as the
    dense table. Without ``tables`` (the CLI) no dense table is built and ``tidy`` is
    None; with ``tables`` (the app) ``tidy`` is the dense comparison table of the queries whose
    rows fit in ``max_tidy_rows`` (all when None; :func:`engine.runs.dense_rows.chosen_queries`, the
    rule of run folders opened in the app), the others listed in ``queries_left_out``.

    The block-level figures average over the blocks of the options' ``error_universe``
    (:func:`engine.metrics.universe.block_universe`); TDA's figures on the tabulation geographies
    (``tda_mae``, ``tda_size_classes``) come from :func:`engine.runs.tabulation.tda_sections`.

    ``progress(stage, fraction)`` hears each step as it starts (residuals, the dense table, the
    tables, the prediction, metrics.json).
    """
    report = progress or (lambda stage, fraction: None)
    report("Metrics: residuals of every geolevel × query", 0.0)
    options = options_of(spec)
    universe = block_universe(hist, options.error_universe)
    residuals = sparse_residuals(result, queries, universe)
    tda = tda_sections(result, hist, residuals, universe, queries)
    tidy = None
    left_out: list[str] = []
    if tables:
        report("Metrics: the comparison table", 0.1)
        kept, left_out = tidy_queries(result, queries, max_tidy_rows)
        tidy = result.to_tidy(kept)
    spine_sections = None
    if measured.spine_plan is not None:
        spine_sections = spine_metrics(measured.spine_plan, result, hist, universe)
    sections: dict[str, Any] = dict(extra or {})
    if spine_sections is not None:
        sections.update(spine_sections)
    schema_note = schema_note_section(hist.schema.name, measured.allocation)
    if schema_note:
        sections["schema_note"] = schema_note
    sections.update({k: v for k, v in tda.items() if k != "tda_mae"})
    if measured.spine is not None:
        sections["spine_used"] = measured.spine.section()
    sections["spread_invariant_share"] = options.spread_invariant_share
    use = budget_use(measured.allocation, n_states(hist))
    sections["held_exact"] = [f"{level} {query}" for level, query in use.held]
    epl_boot = options.epl_boot
    settings = epl_settings_of(spec)
    out: dict[str, pd.DataFrame] = {}
    if tables:
        report("Metrics: MAE, Blau-quintile bias, EPL with bootstrap intervals", 0.3)
        out["mae"] = _as_tidy_levels(counted_error_table(residuals, ("geolevel", "query")), result)
        _, blau_bias = blau_bias_of(result, totals_tidy(result, residuals), hist, universe)
        if blau_bias is not None:
            out["blau_bias"] = blau_bias
        out["epl"] = counted_epl_table(residuals, epl_boot, spec.seed, settings)
        # the prediction's spine is the conventional one (docs/science.md §7)
        conventional = measured.spine is None or measured.spine.kind == "conventional"
        if measured.spine_plan is None or conventional:
            report("Metrics: predicted vs measured RMSE of the published counts", 0.55)
            # the prediction covers every block of the spine: measured over every block too
            every_block = (
                residuals if universe.inside is None else sparse_residuals(result, queries)
            )
            predicted = _prediction(
                result,
                hist,
                measured.allocation,
                _as_tidy_levels(counted_rmse_table(every_block), result),
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
    report("Metrics: metrics.json (MAE, EPL, Blau bias of every geolevel × query)", 0.8)
    payload = metrics_payload(
        result,
        sections,
        noise_method=spec.noise_method,
        epl_boot=epl_boot,
        epl_settings=settings,
        hist=hist,
        residuals=residuals,
        universe=universe,
        tda_mae=tda["tda_mae"],
    )
    return TopDownMetrics(payload, tidy, out, spine_sections, tuple(left_out), universe)


class DenseRowsExceeded(ValidationError):
    """Even the smallest query of a run has more dense rows than a face allows (``max_tidy_rows``)."""


def tidy_queries(
    result: TopDownResult, queries: Sequence[str] | None, max_rows: int | None
) -> tuple[list[str], list[str]]:
    """``(kept, left out)``: the queries (default: the run's) of the dense tidy table whose rows
    (answer cells × geounits) fit in ``max_rows`` together (all when None), in the run's order;
    :class:`DenseRowsExceeded` when not even one fits."""
    names = [str(q) for q in (result.query_names if queries is None else queries)]
    if max_rows is None:
        return names, []
    sizes = {q: int(query_group(result.schema, q).size) for q in names}
    chosen = set(chosen_queries(sizes, int(result.tree.n_nodes), int(max_rows)))
    if not chosen:
        raise DenseRowsExceeded(
            f"even the smallest query of this run has more dense rows ({result.tree.n_nodes:,} "
            f"geounits) than the {int(max_rows):,} rows allowed"
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
    _, counted = counted_metric_tables(
        residuals, ("geolevel", "query"), epl_boot, bootstrap_rng(seed), seed, settings
    )
    table = pd.DataFrame() if counted is None else counted  # None only when epl_boot is None
    columns = ["geolevel", "query", *EPL_TABLE_COLUMNS]
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
    try:
        profile, _ = tree_profile(result.tree, hist, "run")
    except PHExploreError:
        return None
    # the correction on a sample of whole families per level (every k-th; the rows say how many
    # geounits): bounded memory and time on large runs (docs/prediction.md)
    return prediction_of_measured(profile, allocation, measured_rmse, max_units=RUN_TABLE_MAX_UNITS)
