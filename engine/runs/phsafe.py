"""The PHSafe run's stages: load → measure and estimate → metrics (PHS §3–§7; docs/science.md §3,
§5, §8).

* :func:`load` — the CEF extract of ``spec.data`` (a sample name or a folder of the three CEF
  files), read for the configuration's ``state_filter``.
* :func:`measure_and_estimate` — :func:`engine.phsafe.release.run_phsafe`: join and count the nine
  measured tables (one unit of work each, handed to the run's executor), noise keyed by
  (seed, level, geounit, query), post-processing into the official outputs.
* :func:`error_analysis` — the metrics stage: the engine's truth before and after truncation (a
  diagnostic), its noisy estimates and the analytic noise of each level handed to
  :mod:`engine.metrics.phsafe_errors` (noise vs truncation error, empirical vs analytic MOE,
  truncation at scale; PHS §7.1, docs/science.md §5);
* :func:`metrics_payload` — metrics.json from that error analysis (MAE by table and
  population-group level, noise variance and MOE, truncation; schema in docs/phsafe.md).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import pandas as pd

from engine.core.errors import ValidationError
from engine.core.executors import Executor
from engine.data.cef import load_cef_extract
from engine.data.cef_types import CefExtract
from engine.data.sources import DEFAULT_MAX_BYTES
from engine.metrics import phsafe_errors
from engine.phsafe.config import MEASURED_TABLES, PHSafeConfig, levels_of
from engine.phsafe.inputs import resolve_data_dir
from engine.phsafe.measure import MeasuredLevel
from engine.phsafe.release import PHSafeResult, run_phsafe
from engine.phsafe.truncation_report import truncation_summary
from engine.runs.control import RunControl
from engine.runs.options import PHSafeRunOptions, noise_record
from engine.runs.spec import RunSpec, thaw
from engine.spark import phsafe as spark_phsafe


def options_of(spec: RunSpec) -> PHSafeRunOptions:
    """The PHSafe options of a PHSafe spec."""
    if not isinstance(spec.options, PHSafeRunOptions):
        raise ValidationError(f"a {spec.engine} run has no PHSafe options")
    return spec.options


def load(spec: RunSpec) -> CefExtract:
    """Read and validate the CEF extract of ``spec.data.source`` for the config's states."""
    limit = spec.data.max_bytes
    return load_cef_extract(
        resolve_data_dir(spec.data.source),
        max_bytes=DEFAULT_MAX_BYTES if limit is None else limit,
        state_filter=config_of(spec).state_filter,
    )


def config_of(spec: RunSpec) -> PHSafeConfig:
    """The PHSafe configuration of a spec (its config is the official config.json dictionary)."""
    return PHSafeConfig.from_json(thaw(spec.config))


def measure_and_estimate(
    spec: RunSpec,
    extract: CefExtract | None,
    executor: Executor,
    control: RunControl,
    *,
    prepared: Any = None,
) -> PHSafeResult:
    """Join, count, add noise and post-process (:func:`engine.phsafe.release.run_phsafe`).

    On the Spark backend (``executor.name == "spark"``) the join and counts run on Spark
    (:mod:`engine.spark.phsafe`), which reads ``extract`` when the caller holds one and else the
    files of ``spec.data.source`` itself; noise and outputs are the same code either way."""
    config = config_of(spec)
    options = options_of(spec)
    tabulate = None
    if getattr(executor, "name", "") == "spark":
        if prepared is None:
            session = executor.session  # type: ignore[attr-defined]
            control.progress("reading the extract on Spark", 0.0)
            source = extract if extract is not None else resolve_data_dir(spec.data.source)
            cef = spark_phsafe.read_cef(session, source)
            prepared = spark_phsafe.prepare(session, cef, config.state_filter)
        if isinstance(prepared, spark_phsafe.SparkPrepared):
            tabulate = spark_phsafe.tabulate_all
    return run_phsafe(
        extract,
        config,
        seed=spec.seed,
        trials=options.trials,
        non_private=options.non_private,
        progress=control.progress,
        cancel=control.cancelled,
        prepared=prepared,
        executor=executor,
        noise_method=spec.noise_method,
        tabulate=tabulate,
    )


@dataclass(frozen=True)
class PHSafeErrorAnalysis:
    """The error analysis of one PHSafe run against the truth (the metrics stage's frames)."""

    cells: pd.DataFrame
    """Per basis cell of trial 0: true, true_truncated, noisy and the three error components."""
    levels: pd.DataFrame
    """Per table × level over all trials: MAEs, empirical vs analytic variance and MOE."""
    at_scale: pd.DataFrame
    """Truncation error per 1,000 persons and projected to full scale, beside the noise MOE."""
    seconds: float
    """Wall time of the analysis (counted in metrics.json ``timings.outputs_and_analysis_s``)."""


def level_truth(level: MeasuredLevel) -> phsafe_errors.LevelTruth:
    """One measured level as metric inputs: truth before/after truncation, estimates, analytic noise."""
    c, spec = level.counts, level.spec
    estimates = None
    if level.noise is not None:
        estimates = c.true_truncated[None, ...] + level.noise
    analytic = None
    if spec is not None:
        analytic = {
            "budget": spec.budget,
            "sensitivity": spec.sensitivity,
            "variance": spec.variance,
            "moe90": spec.moe90,
            "moe90_bound": spec.moe90_bound,
        }
    return phsafe_errors.LevelTruth(
        c.table, c.level, c.true_full, c.true_truncated, estimates, analytic
    )


def error_analysis(result: PHSafeResult, scale: float | None = None) -> PHSafeErrorAnalysis:
    """Noise vs truncation error of ``result`` (:mod:`engine.metrics.phsafe_errors`, PHS §7.1).

    ``scale``: the fraction of a full population the data hold (the sample's declared scale, e.g.
    0.001), for the truncation error projected to full scale.
    """
    started = time.perf_counter()
    cells = phsafe_errors.cell_errors(
        (level.basis_frame(), None if level.noise is None else level.noisy(0))
        for level in result.levels
    )
    levels = phsafe_errors.level_summary(level_truth(level) for level in result.levels)
    at_scale = phsafe_errors.truncation_at_scale(levels, max(int(result.n_persons), 1), scale)
    return PHSafeErrorAnalysis(cells, levels, at_scale, time.perf_counter() - started)


def _nested(frame: pd.DataFrame, column: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    if frame.empty or column not in frame.columns:
        return out
    for row in frame.itertuples(index=False):
        value = getattr(row, column)
        if isinstance(value, float) and math.isnan(value):
            continue
        out.setdefault(row.table, {})[row.level] = value
    return out


def metrics_payload(
    result: PHSafeResult,
    *,
    scale: float | None = None,
    noise_method: str = "fast",
    errors: PHSafeErrorAnalysis | None = None,
) -> dict[str, Any]:
    """metrics.json for a PHSafe run (documented in docs/phsafe.md); ``noise`` records the sampler.

    ``scale`` is the fraction of a full population the data hold (a sample's declared scale, e.g.
    0.001): it adds ``truncation_at_scale`` — truncation error per 1,000 persons and projected to
    full scale beside the noise MOE — and the ``scale`` section. ``errors``: the run's
    :func:`error_analysis` at ``scale`` when the caller already holds it (else computed here).
    """
    if errors is None:
        errors = error_analysis(result, scale)
    config = result.config
    budgets = {
        t: {lvl: config.budget(t, lvl) for lvl in levels_of(t) if config.budget(t, lvl) != 0}
        for t in MEASURED_TABLES
    }
    total = float(sum(v for levels in budgets.values() for v in levels.values()))
    le = errors.levels
    trunc = truncation_summary(result.truncation_stats)
    trunc_mae = _nested(le, "mae_truncation")
    for table, info in trunc.items():
        info["mae_by_level"] = trunc_mae.get(table, {})
        info["mean_error_by_level"] = _nested(le, "mean_truncation_error").get(table, {})
    metrics: dict[str, Any] = {
        "schema_version": 1,
        "engine": "phsafe",
        "mode": result.label,
        "non_private": result.non_private,
        "privacy_defn": config.privacy_defn,
        "budget_unit": "rho" if config.privacy_defn == "zcdp" else "epsilon",
        "runtime_s": result.runtime_s + errors.seconds,
        "timings": {
            **result.timings,
            "outputs_and_analysis_s": result.timings.get("outputs_and_analysis_s", 0.0)
            + errors.seconds,
        },
        "seed": result.seed,
        "trials": result.trials,
        "states": list(result.states),
        "puerto_rico": config.is_puerto_rico,
        "n_persons": result.n_persons,
        "n_units": result.n_units,
        "tau": dict(config.tau),
        "rho": total if math.isfinite(total) else None,
        "rho_by_level": budgets,
        "rho_total_unbounded": total,
        "rho_total_bounded": 2.0 * total,
        "mae": _nested(le, "mae") if not result.non_private else trunc_mae,
        "n_cells": _nested(le, "cells"),
        "mae_noise": _nested(le, "mae_noise"),
        "noise_variance": {
            t: {
                lvl: {"analytic": v, "empirical": _nested(le, "empirical_variance")[t][lvl]}
                for lvl, v in levels.items()
            }
            for t, levels in _nested(le, "analytic_variance").items()
        },
        "analytic_moe": _nested(le, "analytic_moe"),
        "empirical_moe": _nested(le, "empirical_moe"),
        "moe_coverage": _nested(le, "coverage"),
        "truncation": trunc,
        "unmapped_records": result.unmapped_records,
        "noise": noise_record(noise_method) if not result.non_private else None,
        "scale": {
            "sample_fraction": scale,
            "projection_factor": None if scale is None else 1.0 / float(scale),
            "persons_in_run": result.n_persons,
            "note": (
                "truncation error grows with population and noise does not: truncation error is "
                "reported per 1,000 persons and, with a declared scale, projected to full scale "
                "(a projection assuming the same household-size mix)"
            ),
        },
    }
    if result.n_persons > 0 and not le.empty and "mean_truncation_error" in le:
        scaled = errors.at_scale
        metrics["truncation_at_scale"] = {
            table: {
                row["level"]: {
                    k: (None if isinstance(v, float) and math.isnan(v) else v)
                    for k, v in row.items()
                    if k not in ("table", "level")
                }
                for row in part.to_dict("records")
            }
            for table, part in scaled.groupby("table", sort=False)
        }
    return metrics
