"""Experiments: a grid of runs (budgets × seeds) through the run pipeline, and their metrics.

Engines: TopDown (budgets = total ρ of the allocation, or ε for a pure-DP preset) and PHSafe
(budgets = total unbounded ρ of the configuration; metrics per table × population-group level, no
SRS baseline or Blau table since PHSafe has no sub-state geography). The tables are described in
:mod:`engine.metrics.experiments` (docs/science.md §5; PF Methods, Fig. 2–3; TDA §9 Tables 11–13).

Each cell of the grid is a :class:`~engine.runs.spec.RunSpec` — the base run with its budget and
seed replaced (:func:`grid_specs`) — executed by :func:`engine.runs.pipeline.execute` on one shared
executor, with the data loaded once. Each run uses its seed as the engine seed, so any cell can be
re-run alone (its spec's fingerprint says which run it is). Reused across the grid: the data, the
true Blau and homogeneity tables, the SRS sweep (it does not depend on the budget). Progress and
cancel go through one :class:`~engine.runs.control.RunControl`: the grid reports, each cell's run
polls its cancel flag.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from engine.core.errors import RunCancelled, ValidationError
from engine.data.cef import load_cef_extract
from engine.data.cef_types import CefExtract
from engine.data.histogram import BlockHistogram, tree_levels
from engine.data.samples import get_sample, load_topdown_sample
from engine.dp.presets import load_topdown_preset
from engine.metrics.blau import (
    blau_quintile_bias,
    blau_table,
    homogeneity_bias,
    homogeneity_index_from_histogram,
    raceeth_counts_from_histogram,
)
from engine.metrics.epl_settings import EPLSettings, settings_of
from engine.metrics.experiments import (
    ExperimentGrid,
    ExperimentResult,
    check_grid,
    check_srs_fractions,
    check_tradeoff,
)
from engine.metrics.experiments import _prefix as prefix
from engine.metrics.srs import DEFAULT_FRACTIONS, srs_sweep
from engine.phsafe.config import PRESET_NAMES, PHSafeConfig
from engine.phsafe.config import preset as phsafe_preset
from engine.phsafe.join import prepare_extract
from engine.runs.control import RunControl
from engine.runs.data_source import DataSource
from engine.runs.inputs import with_inputs
from engine.runs.options import BackendOptions, TopDownRunOptions
from engine.runs.phsafe import config_of
from engine.runs.phsafe_frames import phsafe_noise_frame, phsafe_tidy, scaled_config
from engine.runs.pipeline import execute, executor_for
from engine.runs.spec import RunSpec
from engine.runs.table_files import resolve_format, write_table
from engine.runs.topdown import allocation_of
from engine.spark import phsafe as spark_phsafe
from engine.topdown.export import iter_measurement_frames
from engine.topdown.plan import default_tree
from engine.topdown.queries import SCHEMA_QUERIES

ENGINES: tuple[str, ...] = ("topdown", "phsafe")
DEFAULT_PRESET = "ri2010-production-like"

SWEEP_QUERIES: dict[str, tuple[str, ...]] = {
    "ri2010": SCHEMA_QUERIES["ri2010"],
    "redistricting2020": ("TOTAL", "VOTINGAGE", "HISPANIC", "HISPANIC*CENRACE"),
}
"""Queries an experiment (and the app's budget sweep) measures by default, per person schema.

On the RI schema every query (16 cells). On the 2,016-cell production schema the total, voting
age, Hispanic origin and the 126 race × ethnicity cells the redistricting tables publish (P.L.
94-171 P2), 131 answer cells per geounit — not DETAILED (2,016), the 252 voting-age × race ×
ethnicity cells or the household/GQ queries: every run of the grid builds a dense table of its
queries, and its time grows with those cells (``benchmarks/app_steps.py``). Pass ``queries`` for
others."""
TRADEOFF: dict[str, tuple[str, str]] = {
    "ri2010": ("Tract", "RACEETH"),
    "redistricting2020": ("Tract", "TOTAL"),
}
"""The default MAE–EPL trade-off (geolevel, query) per schema (PF Fig. 2 plots counts of tracts):
RACEETH on the RI schema; TOTAL on the production schema, whose race/ethnicity cells (HISPANIC ×
CENRACE: 126 per geounit) are mostly empty, so that their residuals' P5 and P95 are 0 and EPL is
undefined (docs/metrics.md)."""
MIN_TRADEOFF_UNITS = 30
"""Geounits a trade-off level needs (fewer residuals make its EPL meaningless): with fewer at the
schema's level (3 tracts in Perry County), the coarsest level that has as many is used."""


def _schema_key(schema: Any) -> str | None:
    """The key of :data:`SWEEP_QUERIES` / :data:`TRADEOFF` for a schema: its own name, else the
    shipped schema with the same attributes (``pl94171`` has RI 2010's)."""
    if schema.name in SWEEP_QUERIES:
        return str(schema.name)
    if "RACEETH" in schema.names:
        return "ri2010"
    if {"HISPANIC", "CENRACE"} <= set(schema.names):
        return "redistricting2020"
    return None


def default_queries(schema: Any) -> tuple[str, ...]:
    """The queries an experiment measures on ``schema`` by default (:data:`SWEEP_QUERIES`)."""
    key = _schema_key(schema)
    if key is not None:
        return SWEEP_QUERIES[key]
    return SCHEMA_QUERIES.get(schema.name, ("TOTAL", "DETAILED"))


def default_tradeoff(
    schema: Any,
    levels: Sequence[str],
    queries: Sequence[str],
    units: Mapping[str, int] | None = None,
) -> tuple[str, str]:
    """The default trade-off (geolevel, query) on ``schema`` (:data:`TRADEOFF`). ``units`` counts
    each level's geounits: a level with fewer than :data:`MIN_TRADEOFF_UNITS` gives way to the
    coarsest one with as many (else the finest). A level or query the data lack gives way to the
    middle level and the first query past TOTAL."""
    key = _schema_key(schema)
    level, query = TRADEOFF.get(key or "", ("", ""))
    if level not in levels:
        level = levels[len(levels) // 2] if levels else level
    if units is not None and units.get(level, 0) < MIN_TRADEOFF_UNITS and levels:
        enough = [lv for lv in levels if units.get(lv, 0) >= MIN_TRADEOFF_UNITS]
        level = enough[0] if enough else levels[-1]
    if query not in queries:
        query = next((q for q in queries if q != "TOTAL"), queries[0] if queries else query)
    return level, query


def grid_specs(base: RunSpec, budgets: Sequence[float], seeds: Sequence[int]) -> list[RunSpec]:
    """The run of every (budget, seed) cell: ``base`` with its total budget and seed replaced.

    TopDown: the allocation's shares at total ρ (ε) = budget; PHSafe: every table × level budget
    scaled so that they sum to the budget (:func:`engine.runs.phsafe_frames.scaled_config`).
    """
    out = []
    for budget in budgets:
        if base.engine == "topdown":
            config = allocation_of(base).with_rho(budget).to_dict()
        else:
            config = scaled_config(config_of(base), budget).to_dict()
        for seed in seeds:
            out.append(base.replace(config=config, seed=int(seed)))
    return out


def run_experiment(
    engine: str = "topdown",
    data: Any = None,
    rhos: Sequence[float] = (0.1, 1.0, 10.0),
    seeds: Sequence[int] = (0, 1, 2),
    *,
    preset: str | None = None,
    universe: str = "persons",
    queries: Sequence[str] | None = None,
    srs_fractions: Sequence[float] | None = DEFAULT_FRACTIONS,
    n_boot: int = 100,
    workers: int = 1,
    control: RunControl | None = None,
    data_name: str | None = None,
    tradeoff: tuple[str, str] | None = None,
    epl_settings: EPLSettings | None = None,
    backend: str = "local",
    backend_options: BackendOptions | None = None,
) -> ExperimentResult:
    """Run ``engine`` on ``data`` for every budget in ``rhos`` × every seed.

    ``backend``/``backend_options`` say where the runs run (``"spark"`` with ``master`` or
    ``remote``: one Spark session for the whole grid); the numbers do not depend on it.

    EPLs use ``epl_settings`` (default PF's published p = 95, m = 1.0; recorded in
    ``ExperimentResult.notes["epl_settings"]``).

    TopDown (default ``data="ri2010"``, a sample name or a :class:`BlockHistogram`): ``preset``
    (default ``"ri2010-production-like"``) names the allocation whose shares are rescaled to each
    budget — ``"ri2010-e2e-1940-like"`` gives PF's pure-DP setting, where the budgets are ε;
    ``queries`` default to the schema's (:func:`default_queries`; on the 2,016-cell schema the
    race/ethnicity marginals, not DETAILED); the SRS baseline runs over ``srs_fractions``
    (``None`` skips it).

    PHSafe (default ``data="phsafe_synthetic_us"``, a sample name, a CEF-extract directory or a
    :class:`~engine.data.cef_types.CefExtract`): ``preset`` is a PHSafe preset name
    (``phsafe-2020``) or a config.json path, default the data folder's ``config.json``; each
    budget is the run's total unbounded ρ (or ε), shared over tables and levels as in the config.
    Metrics are per table (``query``) × population-group level (``geolevel``); there is no SRS
    baseline or Blau table (no sub-state geography).

    ``control`` (:class:`~engine.runs.control.RunControl`) hears the grid's progress after each
    run, and its cancel flag stops the grid between and inside runs. ``data_name`` labels data
    passed as an object. ``tradeoff`` = (geolevel, query), default the schema's
    (:func:`default_tradeoff`; PHSafe: ``state_*``, ``PH1_num``), is checked against the data's
    levels and queries before any engine run (so a typo fails fast instead of giving an empty
    :meth:`ExperimentResult.tradeoff`) and recorded in ``notes["tradeoff"]``.
    """
    if engine not in ENGINES:
        raise ValidationError(
            f"unknown engine {engine!r} for experiments; available: {', '.join(ENGINES)}"
        )
    budgets, seed_list = check_grid(rhos, seeds)
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 0:
        raise ValidationError(f"n_boot must be a non-negative integer; got {n_boot!r}")
    if engine == "topdown" and srs_fractions is not None:
        srs_fractions = check_srs_fractions(srs_fractions)
    control = control or RunControl()
    srs_steps = len(srs_fractions) * len(seed_list) if engine == "topdown" and srs_fractions else 0
    grid = ExperimentGrid(
        budgets,
        seed_list,
        n_boot,
        control.progress,
        engine,
        settings_of(epl_settings),
        extra_steps=srs_steps,
    )
    where = {"backend": backend, "backend_options": backend_options or BackendOptions()}
    if engine == "phsafe":
        return _phsafe_experiment(grid, data, preset, control, data_name, tradeoff, where)
    return _topdown_experiment(
        grid,
        data,
        preset,
        universe,
        queries,
        srs_fractions,
        workers,
        control,
        data_name,
        tradeoff,
        where,
    )


def _measurements_with_truth(result: Any, tidy: pd.DataFrame) -> pd.DataFrame:
    """TopDown measurements joined with the true answers and the noise scale of each query.

    The per-node query budget b (ρ·c·d, or ε·c·d) gives σ² = 1/b (zCDP) or z = b/2 (pure DP).
    Only the queries of ``tidy`` are drawn (the inner join keeps no other row), and the measured
    geounits are read from the variances (finite exactly where an answer was measured), so no
    noise of another query is drawn.
    """
    wanted = set(tidy["query"].unique())
    measured = pd.concat(list(iter_measurement_frames(result, queries=wanted)), ignore_index=True)
    budgets = []
    ids = np.asarray(result.tree.node_id, dtype=object)
    levels = np.asarray(result.tree.level_names, dtype=object)
    for j, group in enumerate(result.queries):
        if group.name not in wanted:
            continue
        b = result.measured.budget[:, j]
        nodes = np.flatnonzero(np.isfinite(result.measured.variance[:, j]))
        budgets.append(
            pd.DataFrame(
                {
                    "geolevel": levels[nodes],
                    "geounit": ids[nodes],
                    "query": group.name,
                    "budget": b[nodes],
                }
            )
        )
    budget = pd.concat(budgets, ignore_index=True)
    measured = measured.merge(budget, on=["geolevel", "geounit", "query"], how="left")
    with np.errstate(divide="ignore"):
        b = measured["budget"].to_numpy(float)
        measured["scale"] = 1.0 / b if result.mechanism == "zcdp" else b / 2.0
    truth = tidy[["geolevel", "geounit", "query", "cell", "true"]]
    return measured.merge(truth, on=["geolevel", "geounit", "query", "cell"], how="inner")


def _topdown_allocation(preset: str, universe: str) -> Any:
    allocations = load_topdown_preset(preset)
    if universe not in allocations:
        raise ValidationError(
            f"preset {preset!r} has no {universe!r} allocation; it has {sorted(allocations)}"
        )
    return allocations[universe]


def _load_histogram(data: str | BlockHistogram) -> tuple[str, BlockHistogram]:
    if isinstance(data, BlockHistogram):
        return "custom histogram", data
    if not isinstance(data, str):
        raise ValidationError(f"data must be a sample name or a BlockHistogram; got {data!r}")
    return data, load_topdown_sample(data)


def _topdown_experiment(
    grid: ExperimentGrid,
    data: Any,
    preset: str | None,
    universe: str,
    queries: Sequence[str] | None,
    srs_fractions: Sequence[float] | None,
    workers: int,
    control: RunControl,
    data_name: str | None,
    tradeoff: tuple[str, str] | None = None,
    where: Mapping[str, Any] | None = None,
) -> ExperimentResult:
    name, hist = _load_histogram("ri2010" if data is None else data)
    base = _topdown_allocation(preset or DEFAULT_PRESET, universe)
    query_names = tuple(queries) if queries is not None else default_queries(hist.schema)
    tree = default_tree(hist, base)
    if tradeoff is None:
        units = {
            lv: int(hist.geography[lv].nunique()) if lv in hist.geography else 0
            for lv in tree.levels
        }
        tradeoff = default_tradeoff(hist.schema, list(tree.levels), list(query_names), units)
    check_tradeoff(tradeoff, list(tree.levels), list(query_names))
    has_raceeth = "RACEETH" in hist.schema.names
    blau = blau_table(raceeth_counts_from_histogram(hist)) if has_raceeth else None
    homogeneity = homogeneity_index_from_histogram(hist)
    base_spec = with_inputs(
        RunSpec(
            engine="topdown",
            data=DataSource(source=data_name or name),
            config=base.to_dict(),
            seed=grid.seeds[0],
            options=TopDownRunOptions(levels=tuple(tree.levels)),
            workers=workers,
            **(where or {}),
        )
    )
    specs = iter(grid_specs(base_spec, grid.budgets, grid.seeds))
    with executor_for(base_spec) as executor:
        for budget, seed in grid.cells():
            spec = next(specs)
            if control.cancelled():
                raise RunCancelled("experiment cancelled")
            output = execute(
                spec, control=control.silent(), data=hist, executor=executor,
                queries=query_names, outputs="tidy",
            )  # fmt: skip
            result, tidy = output.result, output.tidy
            noise = _measurements_with_truth(result, tidy)
            keys = grid.collect(budget, seed, tidy, noise, result.mechanism, result.runtime_s)
            if blau is not None:
                grid.blau.append(prefix(blau_quintile_bias(tidy, blau), keys))
            grid.homogeneity.append(prefix(homogeneity_bias(tidy, homogeneity), keys))
    levels = tree_levels(tree, hist)
    srs = (
        srs_sweep(
            hist,
            srs_fractions,
            grid.seeds,
            query_names,
            levels=levels,
            n_boot=grid.n_boot,
            epl_settings=grid.epl_settings,
            progress=lambda i, n, what: (
                control.check("in the SRS baseline"),
                grid.step(i, n, what),
            ),
        )
        if srs_fractions
        else pd.DataFrame()
    )
    return grid.result(
        data=data_name or name,
        preset=base.name,
        mechanism=base.mechanism,
        srs=srs,
        notes={"queries": list(query_names), "levels": list(levels), "tradeoff": list(tradeoff)},
    )


def _phsafe_inputs(data: Any, preset: str | None) -> tuple[str, Any, Any, str]:
    """(data label, CefExtract, PHSafeConfig, config label) from the data and preset arguments."""
    folder: Path | None = None
    label = "custom extract"
    if data is None:
        data = "phsafe_synthetic_us"
    if isinstance(data, str | Path):
        path = Path(data)
        if path.is_dir():
            folder, label = path, str(data)
        else:
            folder, label = get_sample(str(data)).path, str(data)
    if preset is None:
        if folder is None or not (folder / "config.json").is_file():
            raise ValidationError(
                "give a PHSafe preset (" + ", ".join(PRESET_NAMES) + ") or a config.json path; "
                "the data has no config.json beside it"
            )
        config = PHSafeConfig.from_json(folder / "config.json")
        preset_label = f"{label}/config.json"
    elif preset in PRESET_NAMES:
        config, preset_label = phsafe_preset(preset), preset
    else:
        config, preset_label = PHSafeConfig.from_json(preset), str(preset)
    if folder is not None:
        extract = load_cef_extract(folder, state_filter=config.state_filter)
    elif isinstance(data, CefExtract):
        extract = data
    else:
        raise ValidationError(
            f"PHSafe data must be a sample name, a CEF-extract directory or a CefExtract; got {data!r}"
        )
    return label, extract, config, preset_label


def _phsafe_experiment(
    grid: ExperimentGrid,
    data: Any,
    preset: str | None,
    control: RunControl,
    data_name: str | None,
    tradeoff: tuple[str, str] | None = None,
    where: Mapping[str, Any] | None = None,
) -> ExperimentResult:
    label, extract, config, preset_label = _phsafe_inputs(data, preset)
    measured = {
        (table, level)
        for table, levels in config.privacy_budget.items()
        for level, b in levels.items()
        if b > 0
    }
    if tradeoff is None:
        tradeoff = ("state_*", "PH1_num")
    check_tradeoff(
        tradeoff,
        sorted({level for _, level in measured}),
        sorted({table for table, _ in measured}),
    )
    base_spec = with_inputs(
        RunSpec(
            engine="phsafe",
            data=DataSource(source=data_name or label),
            config=config.to_dict(),
            seed=0,
            **(where or {}),
        )
    )
    specs = iter(grid_specs(base_spec, grid.budgets, grid.seeds))
    with executor_for(base_spec) as executor:
        if executor.name == "spark":  # join and count once on Spark; every cell reuses the counts
            session = executor.session  # type: ignore[attr-defined]
            cef = spark_phsafe.read_cef(session, extract)
            prepared: Any = spark_phsafe.prepare(session, cef, config.state_filter)
        else:
            prepared = prepare_extract(extract, config.state_filter)
        for budget, seed in grid.cells():
            spec = next(specs)
            if control.cancelled():
                raise RunCancelled("experiment cancelled")
            output = execute(
                spec, control=control.silent(), data=extract, executor=executor,
                prepared=prepared, outputs="tidy",
            )  # fmt: skip
            result = output.result
            scaled = config_of(spec)
            noise = phsafe_noise_frame(result, scaled.privacy_defn)
            grid.collect(
                budget, seed, phsafe_tidy(result), noise, scaled.privacy_defn, result.runtime_s
            )
    return grid.result(
        data=data_name or label,
        preset=preset_label,
        mechanism=config.privacy_defn,
        srs=pd.DataFrame(),
        notes={
            "tables": sorted(config.privacy_budget),
            "tau": dict(config.tau),
            "tradeoff": list(tradeoff),
        },
    )


def write_experiment(
    result: ExperimentResult,
    out_dir: str | Path,
    *,
    output_format: str = "auto",
    extra: Mapping[str, pd.DataFrame] | None = None,
) -> list[Path]:
    """Write an experiment's tables (and ``extra`` ones, e.g. ``tradeoff``) plus experiment.json.

    ``output_format``: ``csv``, ``parquet``, or ``auto`` = CSV unless a table has more than
    :data:`engine.runs.output_options.AUTO_CSV_MAX_ROWS` rows, then Parquet for every table
    (:func:`engine.runs.table_files.write_table`); experiment.json records the format.
    """
    folder = Path(out_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValidationError(f"cannot create output folder {folder}: {exc.strerror}") from None
    tables = {**result.tables(), **dict(extra or {})}
    fmt = resolve_format(output_format, max((len(t) for t in tables.values()), default=0))
    written = [folder / write_table([t], folder, stem, fmt).file for stem, t in tables.items()]
    path = folder / "experiment.json"
    text = json.dumps(result.description(written, fmt), indent=2, default=str) + "\n"
    path.write_text(text, encoding="utf-8")
    return [*written, path]
