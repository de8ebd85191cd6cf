"""Experiment tables: the metrics of a grid of runs (budgets × seeds) and PF's SRS baseline.

The grid itself is run by :func:`engine.runs.experiments.run_experiment` (metrics run no engine);
this module collects, per run, the engine-independent metrics of its tidy comparison table and of
its noisy measurements, and summarises them (docs/science.md §5; PF Methods, Fig. 2–3, Table 1; TDA
§9 Tables 11–13):

* per (budget, seed, geolevel, query): MAE, median AE, mean signed error and EPL with its bootstrap
  interval and number of residuals (``runs``), plus signed-error quantiles (``error_quantiles``) for
  the distribution of errors across seeds;
* per (budget, seed, geolevel, Blau quintile): mean signed error of the total population
  (``blau_bias``, TDA Table 13) and per homogeneity index (``homogeneity_bias``, PF Fig. 3);
* per (budget, seed, geolevel, query): empirical coverage of the noisy measurements by their 90%
  MOE (``moe_coverage``): the analytic z·σ bound (docs/science.md §2, z = 1.645) and the exact
  integer MOE of the discrete Gaussian / two-sided geometric noise actually drawn; invariant answers
  are left out;
* the SRS sweep over sample fractions (``srs``), and the MAE–EPL trade-off table of both designs on
  the same axes (:meth:`ExperimentResult.tradeoff`, PF Fig. 2).

For a pure-DP allocation (PF's 2018 E2E setting) the ``rho`` column holds ε
(``ExperimentResult.budget_name`` says which).
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

from engine.core.csv_cells import frame_to_csv
from engine.core.errors import ValidationError
from engine.dp.distributions import discrete_gaussian_moe, geometric_moe
from engine.dp.moe import z_for_confidence
from engine.metrics.epl import epl_table
from engine.metrics.epl_settings import EPLSettings
from engine.metrics.error_tables import SIGNED_ERROR_QUANTILES, error_table, mae_table

MOE_Z = z_for_confidence(0.90)
"""z of the analytic 90% MOE z·σ (docs/science.md §2)."""
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
            frame_to_csv(table, path)  # formula-like text made inert
            written.append(path)
        path = folder / "experiment.json"
        path.write_text(
            json.dumps(self.description(written), indent=2, default=str) + "\n", encoding="utf-8"
        )
        written.append(path)
        return written

    def description(self, written: Sequence[Path], output_format: str = "csv") -> dict[str, Any]:
        """The ``experiment.json`` content: settings, the files written and their format."""
        return {
            "engine": self.engine,
            "data": self.data,
            "preset": self.preset,
            "mechanism": self.mechanism,
            "budget_name": self.budget_name,
            "rhos": list(self.rhos),
            "seeds": list(self.seeds),
            "files": [p.name for p in written],
            "output_format": output_format,
            "notes": self.notes,
        }


def _across_seeds(table: pd.DataFrame, key: str) -> pd.DataFrame:
    g = table.groupby([key, "geolevel", "query"], sort=True, observed=True)
    # TDA's absolute error (TDA §9) where the runs' tables have geounits (TopDown)
    tda = {"tda_mae_mean": ("tda_mae", "mean")} if "tda_mae" in table.columns else {}
    out = g.agg(
        n_seeds=("seed", "nunique"),
        **tda,
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


def check_grid(
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
    """Share of noisy measurements within their MOE, per geolevel × query (docs/science.md §2, §5).

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
class ExperimentGrid:
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

    extra_steps: int = 0
    """Steps after the grid's runs counted in its progress (the SRS replicates)."""

    @property
    def total_steps(self) -> int:
        return len(self.budgets) * len(self.seeds) + self.extra_steps

    def cells(self):
        """Yield (budget, seed) in order, reporting each run as it starts (the fraction of the
        grid's steps done before it) and the end of the runs."""
        n_runs = len(self.budgets) * len(self.seeds)
        total = self.total_steps
        done = 0
        for budget in self.budgets:
            for seed in self.seeds:
                self.report(
                    f"{self.engine} run {done + 1}/{n_runs} (budget {budget:g}, seed {seed})",
                    done / total,
                )
                yield budget, seed
                done += 1
        self.report(f"{self.engine} runs done ({n_runs})", done / total)

    def step(self, index: int, count: int, what: str) -> None:
        """Report extra step ``index`` of ``count`` (0-based, as it starts): ``what`` it is."""
        n_runs = len(self.budgets) * len(self.seeds)
        self.report(f"{what} ({index + 1}/{count})", (n_runs + index) / max(self.total_steps, 1))

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


def _prefix(table: pd.DataFrame, keys: dict[str, Any]) -> pd.DataFrame:
    out = table.copy()
    for position, (key, value) in enumerate(keys.items()):
        out.insert(position, key, value)
    return out
