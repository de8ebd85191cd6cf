"""PHSafe's release on a CEF extract — truncate and join, count, measure, post-process — as the
Python API the run pipeline (and so the app and the CLI) calls.

Pipeline (PHS §3, Algorithms 1–5; docs/science.md §3): prepare the extract for the configured states
→ for each of the nine measured tables, filter → truncate-and-join → map to population groups and
basis cells → count (once) → discrete Gaussian (zcdp) or two-sided geometric (puredp) noise per
enabled population-group level, redrawn ``trials`` times → PH5_num and PH8_num derived → official
outputs, tidy frames, published tables (:mod:`engine.phsafe.postprocess`) and the truncation
diagnostics (:mod:`engine.phsafe.truncation_report`). ``non_private=True`` skips the noise and
yields the true tabulation in the official non-private layout. The engine returns estimates and
diagnostics only: the noise-vs-truncation error analysis against the truth is a metric
(:mod:`engine.metrics.phsafe_errors`), computed by the run pipeline (:mod:`engine.runs.phsafe`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pandas as pd

from engine.core.errors import RunCancelled, ValidationError
from engine.core.executors import Executor, InProcessExecutor
from engine.data.cef_types import CefExtract
from engine.phsafe.config import MEASURED_TABLES, PHSafeConfig, levels_of
from engine.phsafe.join import (
    LevelCounts,
    PreparedExtract,
    TableTabulation,
    TruncationStats,
    prepare_extract,
    tabulate_table,
)
from engine.phsafe.measure import MeasuredLevel, measure_level, noise_spec
from engine.phsafe.outputs import (
    measurement_frame,
    nonprivate_official_frames,
    private_official_frames,
)
from engine.phsafe.postprocess import published_tables
from engine.phsafe.tables import MEASURED
from engine.phsafe.truncation_report import truncation_frame

ProgressCallback = Callable[[str, float], None]
CancelCallback = Callable[[], bool]


class PreparedLike(Protocol):
    """What a run needs of a prepared extract besides its data (any backend's)."""

    states: tuple[str, ...]
    state_filter: tuple[str, ...]
    n_persons: int
    n_units: int


Tabulator = Callable[..., "dict[str, TableTabulation]"]
"""``tabulate(prepared, config, *, non_private, progress, cancel)`` → counts of every table."""

MAX_TRIALS = 1_000
"""Upper bound on noise trials: the noise of every trial is kept (≈ 85 MB at 1,000 trials of the
production US configuration, 10,608 cells per trial)."""


@dataclass(frozen=True)
class PHSafeResult:
    """Everything one PHSafe run produced (see :func:`run_phsafe`)."""

    config: PHSafeConfig
    seed: int | None
    trials: int
    non_private: bool
    states: tuple[str, ...]
    n_persons: int
    n_units: int
    levels: tuple[MeasuredLevel, ...]
    measurements: pd.DataFrame
    """Tidy basis cells (plus derived PH5_num, PH8_num): true, true_truncated, noisy, variance, …"""
    official: dict[str, pd.DataFrame]
    """The official output files as string frames, keyed by table."""
    published: pd.DataFrame | None
    """Post-processed PH1–PH8 with totals, averages and 90% intervals (private runs)."""
    truncation: pd.DataFrame
    """Share of joined persons each candidate τ drops, per truncated table (a diagnostic)."""
    truncation_stats: dict[str, TruncationStats]
    unmapped_records: dict[str, int]
    runtime_s: float
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return "non-private (true tabulation, no noise)" if self.non_private else "private"


def _check_args(trials: int, seed: int | None) -> None:
    if isinstance(trials, bool) or not isinstance(trials, int | np.integer):
        raise ValidationError(f"trials must be a whole number; got {trials!r}")
    if not 1 <= int(trials) <= MAX_TRIALS:
        raise ValidationError(f"trials must be between 1 and {MAX_TRIALS:,}; got {trials}")
    if seed is not None and (
        isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0
    ):
        raise ValidationError(f"seed must be a non-negative whole number or None; got {seed!r}")


def run_levels(table: str, config: PHSafeConfig, non_private: bool) -> tuple[str, ...]:
    """Levels a run tabulates: enabled ones (private) or all (non-private; no Nation for PR)."""
    if non_private:
        levels = levels_of(table)
        if config.is_puerto_rico:
            levels = tuple(lvl for lvl in levels if not lvl.startswith("usa_"))
        return levels
    return config.enabled_levels(table)


def _tabulate_unit(
    unit: tuple[PreparedExtract, str, int | None, tuple[str, ...]],
) -> TableTabulation:
    """One unit of work for an executor: join and count one measured table."""
    prepared, table, tau, levels = unit
    return tabulate_table(prepared, table, tau, levels)


def tabulate_all(
    prepared: PreparedExtract,
    config: PHSafeConfig,
    *,
    non_private: bool = False,
    progress: ProgressCallback | None = None,
    cancel: CancelCallback | None = None,
    executor: Executor | None = None,
) -> dict[str, TableTabulation]:
    """The expensive, noise-free part: join and count every measured table once.

    The nine measured tables are independent units of work (PHS §3) handed to ``executor``
    (default: in this process, one after the other).
    """
    units = []
    for table in MEASURED_TABLES:
        levels = run_levels(table, config, non_private)
        if levels:
            tau = config.tau.get(table) if MEASURED[table].algorithm == 1 else None
            units.append((prepared, table, tau, tuple(levels)))

    def done(i: int, _result: TableTabulation) -> None:
        if progress is not None:
            progress(f"joined and counted {units[i][1]}", 0.9 * (i + 1) / len(units))

    if units and progress is not None:
        progress(f"joining and counting {units[0][1]}", 0.0)
    tabs = (executor or InProcessExecutor()).map(_tabulate_unit, units, cancel=cancel, done=done)
    return {unit[1]: tab for unit, tab in zip(units, tabs, strict=True)}


def measure_all(
    tabulations: dict[str, TableTabulation],
    config: PHSafeConfig,
    *,
    trials: int,
    rng: np.random.Generator | None,
    cancel: CancelCallback | None = None,
    seed: int | None = None,
    method: str = "fast",
) -> list[MeasuredLevel]:
    """Noise for every enabled level, ``trials`` times (the cheap part; reuses the counts).

    With ``seed`` the noise is keyed by (seed, level, geounit, table) (docs/science.md §8), so it
    does not depend on which tables are measured or in which order; else it comes from ``rng``.
    """
    measured: list[MeasuredLevel] = []
    for table, tab in tabulations.items():
        if cancel is not None and cancel():
            raise RunCancelled(f"PHSafe run cancelled while adding noise to {table}")
        tau = config.tau.get(table) if MEASURED[table].algorithm == 1 else None
        for level, counts in tab.levels.items():
            spec = noise_spec(table, level, config.budget(table, level), config.privacy_defn, tau)
            measured.append(measure_level(counts, spec, trials, rng, seed=seed, method=method))
    return measured


def _final_pop_frame(tabulations: dict[str, TableTabulation]) -> pd.DataFrame | None:
    tab = tabulations.get("PH8_denom")
    if tab is None:
        return None
    frames = []
    for counts in tab.levels.values():
        if counts.final_pop is None:
            continue
        frames.append(_flat_counts(counts, counts.final_pop))
    return pd.concat(frames, ignore_index=True) if frames else None


def _flat_counts(counts: LevelCounts, values: np.ndarray) -> pd.DataFrame:
    n_r, n_i, n_c = values.shape
    return pd.DataFrame(
        {
            "region_type": counts.region_type,
            "region_id": np.repeat(np.asarray(counts.region_ids, dtype=object), n_i * n_c),
            "iteration_code": np.tile(
                np.repeat(np.asarray(counts.iteration_codes, dtype=object), n_c), n_r
            ),
            "cell": np.tile(np.asarray(counts.basis, dtype=np.int64), n_r * n_i),
            "count": values.reshape(-1),
        }
    )


def run_phsafe(
    extract: CefExtract | None,
    config: PHSafeConfig,
    *,
    seed: int | None,
    trials: int = 1,
    non_private: bool = False,
    progress: ProgressCallback | None = None,
    cancel: CancelCallback | None = None,
    prepared: PreparedExtract | PreparedLike | None = None,
    tabulate: Tabulator | None = None,
    executor: Executor | None = None,
    noise_method: str = "fast",
) -> PHSafeResult:
    """Run PHSafe on ``extract`` with ``config``.

    ``seed`` seeds the noise generator (``None``: fresh OS entropy); ``trials`` ≥ 1 noise draws reuse
    one join (trial 0 is the published run; all trials feed the pipeline's error analysis). ``progress`` is
    called as ``progress(label, fraction)``; ``cancel()`` is checked between tables and raises
    :class:`~engine.core.errors.RunCancelled` when it returns True. ``prepared`` (from
    :func:`~engine.phsafe.join.prepare_extract` for the same extract and ``state_filter``) skips the
    preparation step, so an app can re-run new budgets or τ on a cached extract. ``tabulate``
    replaces the join-and-count step (:func:`tabulate_all`) by another backend's — the Spark
    backend's :func:`engine.spark.phsafe.tabulate_all` with its own ``prepared`` — which must
    return the same counts; noise and outputs are this module's either way.
    """
    _check_args(trials, seed)
    if not isinstance(config, PHSafeConfig):
        raise ValidationError("config must be a PHSafeConfig (use PHSafeConfig.from_json)")
    if not non_private and config.total_budget() == 0:
        raise ValidationError(
            "every privacy budget is 0, so there is nothing to measure; give at least one table "
            "and level a positive budget (or use a non-private run for the true tabulation)"
        )
    t0 = time.perf_counter()
    if progress is not None:
        progress("preparing the extract", 0.0)
    if prepared is None:
        if extract is None:
            raise ValidationError("run_phsafe needs an extract or a prepared extract")
        prepared = prepare_extract(extract, config.state_filter)
    elif prepared.state_filter != tuple(sorted(config.state_filter)):
        raise ValidationError(
            "the prepared extract was made for state_filter "
            f"{list(prepared.state_filter)}, not {sorted(config.state_filter)}; prepare it again"
        )
    t_prep = time.perf_counter()
    if tabulate is None:
        tabulations = tabulate_all(
            prepared,
            config,
            non_private=non_private,
            progress=progress,
            cancel=cancel,
            executor=executor,
        )
    else:
        tabulations = tabulate(
            prepared, config, non_private=non_private, progress=progress, cancel=cancel
        )
    t_join = time.perf_counter()
    if non_private:
        levels = [
            MeasuredLevel(c, None, None)
            for tab in tabulations.values()
            for c in tab.levels.values()
        ]
    else:
        if progress is not None:
            progress(f"adding noise ({trials} trial{'s' if trials > 1 else ''})", 0.9)
        # A seed keys the noise by (seed, level, geounit, table) (docs/science.md §8); without one
        # the noise comes from fresh OS entropy; "exact" uses OpenDP's samplers.
        rng = np.random.default_rng(seed) if seed is None else None
        levels = measure_all(
            tabulations,
            config,
            trials=int(trials),
            rng=rng,
            cancel=cancel,
            seed=None if seed is None else int(seed),
            method=noise_method,
        )
    t_noise = time.perf_counter()
    measurements = measurement_frame(levels)
    if non_private:
        official = nonprivate_official_frames(measurements, _final_pop_frame(tabulations))
        published = None
    else:
        official = private_official_frames(measurements)
        published = published_tables(measurements) if not measurements.empty else None
    stats = {t: tab.truncation for t, tab in tabulations.items() if tab.truncation is not None}
    result = PHSafeResult(
        config=config,
        seed=seed,
        trials=int(trials),
        non_private=non_private,
        states=prepared.states,
        n_persons=prepared.n_persons,
        n_units=prepared.n_units,
        levels=tuple(levels),
        measurements=measurements,
        official=official,
        published=published,
        truncation=truncation_frame(stats),
        truncation_stats=stats,
        unmapped_records={t: tab.unmapped_records for t, tab in tabulations.items()},
        runtime_s=time.perf_counter() - t0,
        timings={
            "prepare_s": t_prep - t0,
            "join_and_count_s": t_join - t_prep,
            "noise_s": t_noise - t_join,
            "outputs_and_analysis_s": time.perf_counter() - t_noise,
        },
    )
    if progress is not None:
        progress("done", 1.0)
    return result
