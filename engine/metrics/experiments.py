"""Experiments: an engine over a grid of budgets × seeds, with PF's SRS baseline on the same axes.

Engines: TopDown (budgets = total ρ of the allocation, or ε for a pure-DP preset) and PHSafe
(budgets = total unbounded ρ of the configuration; metrics per table × population-group level,
no SRS baseline or Blau table since PHSafe has no sub-state geography).

What it computes (SPEC §5; PF Methods, Fig. 2–3, Table 1; TDA §9 Tables 11–13):

* per (budget, seed, geolevel, query): MAE, median AE, mean signed error and EPL with its bootstrap
  interval and number of residuals (``runs``), plus signed-error quantiles (``error_quantiles``) for
  the distribution of errors across seeds;
* per (budget, seed, geolevel, Blau quintile): mean signed error of the total population
  (``blau_bias``, TDA Table 13) and per homogeneity index (``homogeneity_bias``, PF Fig. 3);
* per (budget, seed, geolevel, query): empirical coverage of the noisy measurements by their 90%
  MOE (``moe_coverage``): the analytic z·σ bound (SPEC §2, z = 1.645) and the exact integer MOE of
  the discrete Gaussian / two-sided geometric noise actually drawn; invariant answers are left out;
* the SRS sweep over sample fractions (``srs``), and the MAE–EPL trade-off table of both designs on
  the same axes (:meth:`ExperimentResult.tradeoff`, PF Fig. 2).

Reused across the grid: the data, the spine, the true Blau and homogeneity tables, the SRS sweep
(it does not depend on the budget). Each run uses its seed as the engine seed, so any cell of the
grid can be re-run alone. For a pure-DP allocation (PF's 2018 E2E setting) the ``rho`` column holds
ε (``ExperimentResult.budget_name`` says which).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from engine.data.histogram import BlockHistogram, tree_levels
from engine.data.histogram import subset_histogram as subset_histogram  # re-export (old importers)
from engine.metrics.blau import (
    blau_quintile_bias,
    blau_table,
    homogeneity_bias,
    homogeneity_index_from_histogram,
    raceeth_counts_from_histogram,
)
from engine.metrics.epl import EPLSettings, epl_table, settings_of
from engine.metrics.errors import SIGNED_ERROR_QUANTILES, error_table, mae_table
from engine.metrics.srs import DEFAULT_FRACTIONS, srs_sweep
from phexplore.distributions import discrete_gaussian_moe, geometric_moe
from phexplore.errors import ValidationError
from phexplore.moe import z_for_confidence

ENGINES: tuple[str, ...] = ("topdown", "phsafe")
DEFAULT_PRESET = "ri2010-production-like"
MOE_Z = z_for_confidence(0.90)
"""z of the analytic 90% MOE z·σ (SPEC §2)."""
Progress = Callable[[str, float], None]


@dataclass(frozen=True)
class ExperimentResult:
    """Tidy results of :func:`run_experiment` (see the module docstring for each table)."""

    engine: str
    data: str
    preset: str
    mechanism: str
    rhos: tuple[float, ...]
    seeds: tuple[int, ...]
    runs: pd.DataFrame
    srs: pd.DataFrame
    blau_bias: pd.DataFrame
    homogeneity_bias: pd.DataFrame
    error_quantiles: pd.DataFrame
    moe_coverage: pd.DataFrame
    runtime_s: pd.DataFrame
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def budget_name(self) -> str:
        """``"rho"`` for zCDP runs, ``"epsilon"`` for pure-DP runs (the ``rho`` column's meaning)."""
        return "epsilon" if self.mechanism == "puredp" else "rho"

    def summary(self) -> pd.DataFrame:
        """Per (rho, geolevel, query), across seeds: mean and range of MAE, median AE and EPL.

        ``epl_seed_low``/``epl_seed_high`` are the smallest and largest per-seed EPL;
        ``epl_boot_low``/``epl_boot_high`` the mean bootstrap bounds; ``n_residuals`` per seed.
        """
        return _across_seeds(self.runs, "rho")

    def srs_summary(self) -> pd.DataFrame:
        """Per (fraction, geolevel, query), across seeds, like :meth:`summary`."""
        return _across_seeds(self.srs, "fraction") if not self.srs.empty else self.srs

    def blau_summary(self) -> pd.DataFrame:
        """Mean signed error by rho × geolevel × Blau quintile, averaged over seeds (TDA Table 13).

        Empty when the schema has no RACEETH attribute (no Blau groups).
        """
        if self.blau_bias.empty:
            return self.blau_bias
        g = self.blau_bias.groupby(["rho", "geolevel", "quintile"], sort=False, observed=True)
        out = g.agg(
            n_geounits=("n_geounits", "first"),
            blau_low=("blau_low", "first"),
            blau_high=("blau_high", "first"),
            mean_signed_error=("mean_signed_error", "mean"),
            seed_low=("mean_signed_error", "min"),
            seed_high=("mean_signed_error", "max"),
        )
        return out.reset_index()

    def tradeoff(self, geolevel: str, query: str, *, error: str = "median_ae") -> pd.DataFrame:
        """MAE–EPL trade-off of the engine (over rho) and SRS (over fraction) on one axis pair.

        Columns: design, parameter, error (the ``error`` statistic averaged over seeds), epl,
        epl_low, epl_high (across-seed range with several seeds, else the bootstrap interval),
        n_residuals.
        """
        if error not in ("mae", "median_ae"):
            raise ValidationError(f"error must be 'mae' or 'median_ae'; got {error!r}")
        frames = []
        for design, table, key in (
            (self.engine, self.summary(), "rho"),
            ("srs", self.srs_summary(), "fraction"),
        ):
            if table.empty:
                continue
            rows = table[(table["geolevel"] == geolevel) & (table["query"] == query)]
            several = rows["n_seeds"] > 1
            frames.append(
                pd.DataFrame(
                    {
                        "design": design,
                        "parameter": rows[key].to_numpy(float),
                        "error": rows[f"{error}_mean"].to_numpy(float),
                        "epl": rows["epl_mean"].to_numpy(float),
                        "epl_low": np.where(several, rows["epl_seed_low"], rows["epl_boot_low"]),
                        "epl_high": np.where(several, rows["epl_seed_high"], rows["epl_boot_high"]),
                        "n_residuals": rows["n_residuals"].to_numpy(),
                    }
                )
            )
        if not frames or all(f.empty for f in frames):
            raise ValidationError(
                f"no results for geolevel {geolevel!r} and query {query!r}; levels: "
                f"{sorted(self.runs['geolevel'].unique())}, queries: "
                f"{sorted(self.runs['query'].unique())}"
            )
        return pd.concat(frames, ignore_index=True)

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table by the file stem :meth:`write` uses."""
        return {
            "runs": self.runs,
            "summary": self.summary(),
            "srs": self.srs,
            "srs_summary": self.srs_summary(),
            "blau_bias": self.blau_bias,
            "blau_summary": self.blau_summary(),
            "homogeneity_bias": self.homogeneity_bias,
            "error_quantiles": self.error_quantiles,
            "moe_coverage": self.moe_coverage,
            "runtime": self.runtime_s,
        }

    def write(self, out_dir: str | Path) -> list[Path]:
        """Write every table as CSV plus ``experiment.json`` (settings and file list) to ``out_dir``."""
        folder = Path(out_dir)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValidationError(f"cannot create output folder {folder}: {exc.strerror}") from None
        written = []
        for stem, table in self.tables().items():
            path = folder / f"{stem}.csv"
            table.to_csv(path, index=False)
            written.append(path)
        meta = {
            "engine": self.engine,
            "data": self.data,
            "preset": self.preset,
            "mechanism": self.mechanism,
            "budget_name": self.budget_name,
            "rhos": list(self.rhos),
            "seeds": list(self.seeds),
            "files": [p.name for p in written],
            "notes": self.notes,
        }
        path = folder / "experiment.json"
        path.write_text(json.dumps(meta, indent=2, default=str) + "\n", encoding="utf-8")
        written.append(path)
        return written


def _across_seeds(table: pd.DataFrame, key: str) -> pd.DataFrame:
    g = table.groupby([key, "geolevel", "query"], sort=True, observed=True)
    out = g.agg(
        n_seeds=("seed", "nunique"),
        mae_mean=("mae", "mean"),
        mae_low=("mae", "min"),
        mae_high=("mae", "max"),
        median_ae_mean=("median_ae", "mean"),
        epl_mean=("epl", "mean"),
        epl_seed_low=("epl", "min"),
        epl_seed_high=("epl", "max"),
        epl_boot_low=("epl_low", "mean"),
        epl_boot_high=("epl_high", "mean"),
        n_residuals=("n_residuals", "first"),
    )
    return out.reset_index()


def _check_grid(
    rhos: Sequence[float], seeds: Sequence[int]
) -> tuple[tuple[float, ...], tuple[int, ...]]:
    if not rhos:
        raise ValidationError("give at least one budget value (rho, or epsilon for pure DP)")
    checked = []
    for r in rhos:
        value = (
            float(r)
            if isinstance(r, int | float | np.number) and not isinstance(r, bool)
            else math.nan
        )
        if not math.isfinite(value) or value <= 0:
            raise ValidationError(f"budget values must be positive numbers; got {r!r}")
        checked.append(value)
    if not seeds:
        raise ValidationError("give at least one seed")
    if any(isinstance(s, bool) or not isinstance(s, int | np.integer) or s < 0 for s in seeds):
        raise ValidationError(f"seeds must be non-negative integers; got {list(seeds)!r}")
    if len(set(seeds)) != len(seeds):
        raise ValidationError(f"seeds must be distinct; got {list(seeds)!r}")
    return tuple(checked), tuple(int(s) for s in seeds)


def error_quantile_table(
    tidy: pd.DataFrame, quantiles: Sequence[float] = SIGNED_ERROR_QUANTILES
) -> pd.DataFrame:
    """Signed-error quantiles per geolevel × query (one ``q<quantile>`` column each)."""
    errors = error_table(tidy)
    g = errors.groupby(["geolevel", "query"], sort=True, observed=True)["error"]
    out = pd.DataFrame({f"q{q:g}": g.quantile(q) for q in quantiles})
    return out.reset_index()


def moe_coverage_table(
    measurements: pd.DataFrame, *, mechanism: str, confidence: float = 0.90
) -> pd.DataFrame:
    """Share of noisy measurements within their MOE, per geolevel × query (SPEC §2, §5).

    ``measurements`` has geolevel, query, noisy, true, variance and ``scale``: the noise parameter
    σ² of the discrete Gaussian (zCDP) or z of the two-sided geometric (pure DP). ``moe_normal`` =
    1.645·sqrt(variance) (the analytic MOE z·σ); ``moe_exact`` = the smallest integer m with
    P(|noise| ≤ m) ≥ ``confidence`` for that noise. Invariant rows (variance 0) are left out.
    """
    needed = ["geolevel", "query", "noisy", "true", "variance", "scale"]
    missing = [c for c in needed if c not in measurements.columns]
    if missing:
        raise ValidationError(f"measurement table lacks column(s) {missing}")
    if mechanism not in ("zcdp", "puredp"):
        raise ValidationError(f"mechanism must be 'zcdp' or 'puredp'; got {mechanism!r}")
    rows = measurements[measurements["variance"] > 0]
    abs_error = np.abs(rows["noisy"].to_numpy(float) - rows["true"].to_numpy(float))
    scales = rows["scale"].to_numpy(float)
    moe_of = discrete_gaussian_moe if mechanism == "zcdp" else geometric_moe
    exact_by_scale = {v: moe_of(float(v), confidence) for v in np.unique(scales)}
    moe_exact = np.array([exact_by_scale[v] for v in scales], dtype=float)
    moe_normal = MOE_Z * np.sqrt(rows["variance"].to_numpy(float))
    frame = rows[["geolevel", "query"]].assign(
        moe_normal=moe_normal,
        moe_exact=moe_exact,
        covered_normal=abs_error <= moe_normal,
        covered_exact=abs_error <= moe_exact,
    )
    g = frame.groupby(["geolevel", "query"], sort=True, observed=True)
    out = g.agg(
        n_cells=("moe_exact", "size"),
        moe_normal=("moe_normal", "mean"),
        moe_exact=("moe_exact", "mean"),
        coverage_normal=("covered_normal", "mean"),
        coverage_exact=("covered_exact", "mean"),
    )
    return out.reset_index()


def _measurements_with_truth(result: Any, tidy: pd.DataFrame) -> pd.DataFrame:
    """TopDown measurements joined with the true answers and the noise scale of each query.

    The per-node query budget b (ρ·c·d, or ε·c·d) gives σ² = 1/b (zCDP) or z = b/2 (pure DP).
    """
    measured = result.measurements
    budgets = []
    ids = np.asarray(result.tree.node_id, dtype=object)
    levels = np.asarray(result.tree.level_names, dtype=object)
    for j, group in enumerate(result.queries):
        b = result.measured.budget[:, j]
        nodes = np.flatnonzero(np.isfinite(result.measured.noisy[j][:, 0]))
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
    from phexplore.presets import load_topdown_preset

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
    from engine.data.samples import load_topdown_sample

    return data, load_topdown_sample(data)


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
    progress: Progress | None = None,
    cancel: Callable[[], bool] | None = None,
    data_name: str | None = None,
    tradeoff: tuple[str, str] | None = None,
    epl_settings: EPLSettings | None = None,
) -> ExperimentResult:
    """Run ``engine`` on ``data`` for every budget in ``rhos`` × every seed.

    EPLs use ``epl_settings`` (default PF's published p = 95, m = 1.0; recorded in
    ``ExperimentResult.notes["epl_settings"]``).

    TopDown (default ``data="ri2010"``, a sample name or a :class:`BlockHistogram`): ``preset``
    (default ``"ri2010-production-like"``) names the allocation whose shares are rescaled to each
    budget — ``"ri2010-e2e-1940-like"`` gives PF's pure-DP setting, where the budgets are ε;
    ``queries`` default to the schema's queries; the SRS baseline runs over ``srs_fractions``
    (``None`` skips it).

    PHSafe (default ``data="phsafe_synthetic_us"``, a sample name, a CEF-extract directory or a
    :class:`~engine.data.cef_types.CefExtract`): ``preset`` is a PHSafe preset name
    (``phsafe-2020``) or a config.json path, default the data folder's ``config.json``; each
    budget is the run's total unbounded ρ (or ε), shared over tables and levels as in the config.
    Metrics are per table (``query``) × population-group level (``geolevel``); there is no SRS
    baseline or Blau table (no sub-state geography).

    ``progress(message, fraction)`` is called after each run; ``cancel()`` is forwarded to the
    engine. ``data_name`` labels data passed as an object. ``tradeoff`` = (geolevel, query), when
    given, is checked against the data's levels and queries before any engine run (so a typo
    fails fast instead of giving an empty :meth:`ExperimentResult.tradeoff`).
    """
    if engine not in ENGINES:
        raise ValidationError(
            f"unknown engine {engine!r} for experiments; available: {', '.join(ENGINES)}"
        )
    budgets, seed_list = _check_grid(rhos, seeds)
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 0:
        raise ValidationError(f"n_boot must be a non-negative integer; got {n_boot!r}")
    if engine == "topdown" and srs_fractions is not None:
        srs_fractions = check_srs_fractions(srs_fractions)
    report = progress or (lambda message, fraction: None)
    grid = _Grid(budgets, seed_list, n_boot, report, engine, settings_of(epl_settings))
    if engine == "phsafe":
        return _phsafe_experiment(grid, data, preset, cancel, data_name, tradeoff)
    return _topdown_experiment(
        grid, data, preset, universe, queries, srs_fractions, workers, cancel, data_name, tradeoff
    )


def check_srs_fractions(fractions: Sequence[float]) -> tuple[float, ...]:
    """The SRS sampling fractions as floats, each in (0, 1]; else a ValidationError naming it."""
    out = []
    for f in fractions:
        value = (
            float(f)
            if isinstance(f, int | float | np.number) and not isinstance(f, bool)
            else math.nan
        )
        if not (0.0 < value <= 1.0):
            raise ValidationError(f"SRS sampling fractions must be in (0, 1]; got {f!r}")
        out.append(value)
    return tuple(out)


def check_tradeoff(
    tradeoff: tuple[str, str] | None, levels: Sequence[str], queries: Sequence[str]
) -> None:
    """Fail before any run when the trade-off geolevel or query is not in the experiment."""
    if tradeoff is None:
        return
    level, query = tradeoff
    if level not in levels:
        raise ValidationError(
            f"trade-off geolevel {level!r} is not in this experiment; levels: {', '.join(levels)}"
        )
    if query not in queries:
        raise ValidationError(
            f"trade-off query {query!r} is not in this experiment; queries: {', '.join(queries)}"
        )


@dataclass
class _Grid:
    """Budgets × seeds and the per-run tables collected while running them."""

    budgets: tuple[float, ...]
    seeds: tuple[int, ...]
    n_boot: int
    report: Progress
    engine: str
    epl_settings: EPLSettings
    runs: list[pd.DataFrame] = field(default_factory=list)
    blau: list[pd.DataFrame] = field(default_factory=list)
    homogeneity: list[pd.DataFrame] = field(default_factory=list)
    quantiles: list[pd.DataFrame] = field(default_factory=list)
    coverage: list[pd.DataFrame] = field(default_factory=list)
    timing: list[dict[str, Any]] = field(default_factory=list)

    def cells(self):
        """Yield (budget, seed) in order, reporting progress after each."""
        total = len(self.budgets) * len(self.seeds)
        done = 0
        for budget in self.budgets:
            for seed in self.seeds:
                yield budget, seed
                done += 1
                self.report(
                    f"{self.engine} run {done}/{total} (budget {budget:g}, seed {seed})",
                    done / total,
                )

    def collect(
        self,
        budget: float,
        seed: int,
        tidy: pd.DataFrame,
        noise: pd.DataFrame,
        mechanism: str,
        runtime_s: float,
    ) -> dict[str, Any]:
        """Record the engine-independent metrics of one run; returns the row keys."""
        keys = {"rho": budget, "seed": seed}
        errors = mae_table(tidy)
        boot_rng = np.random.default_rng([seed, round(budget * 1_000_000)])
        epl = epl_table(tidy, n_boot=self.n_boot, rng=boot_rng, settings=self.epl_settings)
        self.runs.append(_prefix(errors.merge(epl, on=["geolevel", "query"], how="left"), keys))
        self.quantiles.append(_prefix(error_quantile_table(tidy), keys))
        self.coverage.append(_prefix(moe_coverage_table(noise, mechanism=mechanism), keys))
        self.timing.append({**keys, "runtime_s": float(runtime_s)})
        return keys

    def result(
        self, *, data: str, preset: str, mechanism: str, srs: pd.DataFrame, notes: dict[str, Any]
    ) -> ExperimentResult:
        runtime = pd.DataFrame(self.timing)
        runs = pd.concat(self.runs, ignore_index=True).merge(
            runtime, on=["rho", "seed"], how="left"
        )
        return ExperimentResult(
            engine=self.engine,
            data=data,
            preset=preset,
            mechanism=mechanism,
            rhos=self.budgets,
            seeds=self.seeds,
            runs=runs,
            srs=srs,
            blau_bias=pd.concat(self.blau, ignore_index=True) if self.blau else pd.DataFrame(),
            homogeneity_bias=(
                pd.concat(self.homogeneity, ignore_index=True)
                if self.homogeneity
                else pd.DataFrame()
            ),
            error_quantiles=pd.concat(self.quantiles, ignore_index=True),
            moe_coverage=pd.concat(self.coverage, ignore_index=True),
            runtime_s=runtime,
            notes={**notes, "n_boot": self.n_boot, "epl_settings": self.epl_settings.as_dict()},
        )


def _topdown_experiment(
    grid: _Grid,
    data: Any,
    preset: str | None,
    universe: str,
    queries: Sequence[str] | None,
    srs_fractions: Sequence[float] | None,
    workers: int,
    cancel: Callable[[], bool] | None,
    data_name: str | None,
    tradeoff: tuple[str, str] | None = None,
) -> ExperimentResult:
    from engine.topdown.queries import SCHEMA_QUERIES
    from engine.topdown.run import default_tree, run_topdown

    name, hist = _load_histogram("ri2010" if data is None else data)
    base = _topdown_allocation(preset or DEFAULT_PRESET, universe)
    query_names = (
        tuple(queries)
        if queries is not None
        else SCHEMA_QUERIES.get(hist.schema.name, ("TOTAL", "DETAILED"))
    )
    tree = default_tree(hist, base)
    check_tradeoff(tradeoff, list(tree.levels), list(query_names))
    has_raceeth = "RACEETH" in hist.schema.names
    blau = blau_table(raceeth_counts_from_histogram(hist)) if has_raceeth else None
    homogeneity = homogeneity_index_from_histogram(hist)
    for budget, seed in grid.cells():
        allocation = base.with_rho(budget)
        result = run_topdown(hist, allocation, seed=seed, tree=tree, workers=workers, cancel=cancel)
        tidy = result.to_tidy(query_names)
        noise = _measurements_with_truth(result, tidy)
        keys = grid.collect(budget, seed, tidy, noise, allocation.mechanism, result.runtime_s)
        if blau is not None:
            grid.blau.append(_prefix(blau_quintile_bias(tidy, blau), keys))
        grid.homogeneity.append(_prefix(homogeneity_bias(tidy, homogeneity), keys))
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
        )
        if srs_fractions
        else pd.DataFrame()
    )
    return grid.result(
        data=data_name or name,
        preset=base.name,
        mechanism=base.mechanism,
        srs=srs,
        notes={"queries": list(query_names), "levels": list(levels)},
    )


def _phsafe_inputs(data: Any, preset: str | None) -> tuple[str, Any, Any, str]:
    """(data label, CefExtract, PHSafeConfig, config label) from the data and preset arguments."""
    from engine.data.cef import load_cef_extract
    from engine.data.cef_types import CefExtract
    from engine.phsafe.config import PRESET_NAMES, PHSafeConfig
    from engine.phsafe.config import preset as phsafe_preset

    folder: Path | None = None
    label = "custom extract"
    if data is None:
        data = "phsafe_synthetic_us"
    if isinstance(data, str | Path):
        path = Path(data)
        if path.is_dir():
            folder, label = path, str(data)
        else:
            from engine.data.samples import get_sample

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
    grid: _Grid,
    data: Any,
    preset: str | None,
    cancel: Callable[[], bool] | None,
    data_name: str | None,
    tradeoff: tuple[str, str] | None = None,
) -> ExperimentResult:
    from engine.metrics.phsafe_runs import phsafe_noise_frame, phsafe_tidy, scaled_config
    from engine.phsafe.join import prepare_extract
    from engine.phsafe.run import run_phsafe

    label, extract, config, preset_label = _phsafe_inputs(data, preset)
    measured = {
        (table, level)
        for table, levels in config.privacy_budget.items()
        for level, b in levels.items()
        if b > 0
    }
    check_tradeoff(
        tradeoff,
        sorted({level for _, level in measured}),
        sorted({table for table, _ in measured}),
    )
    prepared = prepare_extract(extract, config.state_filter)
    for budget, seed in grid.cells():
        scaled = scaled_config(config, budget)
        result = run_phsafe(extract, scaled, seed=seed, prepared=prepared, cancel=cancel)
        noise = phsafe_noise_frame(result, scaled.privacy_defn)
        grid.collect(
            budget, seed, phsafe_tidy(result), noise, scaled.privacy_defn, result.runtime_s
        )
    return grid.result(
        data=data_name or label,
        preset=preset_label,
        mechanism=config.privacy_defn,
        srs=pd.DataFrame(),
        notes={"tables": sorted(config.privacy_budget), "tau": dict(config.tau)},
    )


def _prefix(table: pd.DataFrame, keys: dict[str, Any]) -> pd.DataFrame:
    out = table.copy()
    for position, (key, value) in enumerate(keys.items()):
        out.insert(position, key, value)
    return out
