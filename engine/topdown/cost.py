"""A rough time and memory estimate of a TopDown run, shown before Run (docs/topdown.md,
"The cost estimate shown before Run").

A linear model in the number of blocks and the schema's cells, with coefficients measured by
``benchmarks/topdown_production.py`` on generated states with the 2,016-cell schema on a quiet
2-core machine, plus the dense comparison table a caller keeps (the app keeps at most a set number
of rows) and the app's predicted-vs-measured table. The measurements behind each coefficient are in
that section of docs/topdown.md. It is an order of magnitude for planning, not a promise: the time
depends on the machine and its load.
"""

from __future__ import annotations

from dataclasses import dataclass

SECONDS_PER_BLOCK_2016 = 0.00036
"""Wall-clock seconds per block of a run with the 2,016-cell schema on a quiet 2-core machine
(plus :data:`BASE_SECONDS`): end to end 8.57 s on 23,133 blocks at 1 million persons and 110.9 s
on 292,120 blocks at 10 million (medians of 3: 0.37 and 0.38 ms per block), this code, 2026-11-27
evening (docs/topdown.md, "The cost estimate shown before Run")."""
BASE_SECONDS = 2.0
BASE_GB = 0.35
"""Python, NumPy, SciPy, Clarabel and the app before any data."""
BYTES_PER_BLOCK_CELL = 1.8
"""Peak bytes per (block × cell) over :data:`BASE_GB` of a run whose blocks are loaded sparse
(generated populations, PPMF; measured: docs/topdown.md, "The cost estimate shown before Run")."""
TABLE_BYTES_PER_ROW = 330.0
"""Bytes per row of the dense comparison table (geounit × query cell) the app keeps, with the
tables built beside it (measured by ``benchmarks/app_metrics.py``: docs/topdown.md, "The cost
estimate shown before Run")."""
ANSWERS_PER_CELL = 1.3
"""Query answer cells per histogram cell of a geounit (the production query set: ≈ 2,600 answer
cells over 2,016 histogram cells)."""
PREDICTION_PROFILE_BYTES_PER_BLOCK_CELL = 9.0
PREDICTION_PROFILE_SECONDS_PER_BLOCK_2016 = 1.3e-4
"""The app's predicted-vs-measured table (docs/prediction.md), first its count profile of the
run's spine (every geounit's true counts): bytes per (block × cell) and seconds per block at 2,016
cells (measured: docs/topdown.md, "The cost estimate shown before Run")."""
PREDICTION_SAMPLED_GB_2016 = 0.5
PREDICTION_SAMPLED_SECONDS_2016 = 8.0
PREDICTION_SAMPLED_FULL_BLOCKS = 23_133
"""Then the prediction itself, evaluated on a sample of whole families of at most
``engine.prediction.RUN_TABLE_MAX_UNITS`` geounits per level, so bounded: its memory (GB) and
seconds at 2,016 cells and the block count up to which its time grows with the blocks; the memory
is the bound throughout (an over-estimate for small runs). The CLI does not compute it (measured:
docs/topdown.md, "The cost estimate shown before Run")."""
NODES_PER_BLOCK = 1.04
"""Geounits per block on the conventional spine (block groups, tracts, counties, the state)."""
METRICS_BASE_SECONDS_2016 = 4.0
METRICS_SECONDS_PER_BLOCK_2016 = 0.0004
"""The app's metrics stage beyond the prediction: the comparison table, MAE, Blau bias and EPL
with 200 bootstrap resamples of every geolevel × query, metrics.json — a fixed part and seconds
per block at 2,016 cells (``benchmarks/app_steps.py``: docs/topdown.md, "The cost estimate shown
before Run")."""
SAVE_BASE_SECONDS_2016 = 0.9
SAVE_SECONDS_PER_BLOCK_2016 = 0.0003
"""Writing the run's record folder into the workspace (tables as Parquet, manifest)."""
SWEEP_RUN_BASE_SECONDS_2016 = 2.0
SWEEP_RUN_SECONDS_PER_BLOCK_2016 = 0.004
"""One run of a budget sweep: the engine, the dense table of the sweep's queries and its metrics
(MAE, EPL, error quantiles, MOE coverage, Blau and homogeneity bias)."""
SRS_SECONDS_PER_BLOCK_2016 = 0.0017
"""One replicate (fraction × seed) of the SRS baseline of a sweep."""


@dataclass(frozen=True)
class AppRunCost:
    """Estimated wall-clock seconds of each step of an app run: the engine (load, measure,
    estimate), the metrics stage, the budget sweep (0 without one) and writing the record."""

    engine_s: float
    metrics_s: float
    sweep_s: float
    saving_s: float

    @property
    def total_s(self) -> float:
        return self.engine_s + self.metrics_s + self.sweep_s + self.saving_s

    @property
    def main_share(self) -> float:
        """The share of the run itself (engine and metrics) in the time before the sweep ends."""
        before = self.engine_s + self.metrics_s + self.sweep_s
        return (self.engine_s + self.metrics_s) / before if before > 0 else 1.0

    def steps(self) -> list[tuple[str, float]]:
        """The steps in order with their expected seconds (the progress bar's plan)."""
        return [
            ("engine", self.engine_s),
            ("metrics", self.metrics_s),
            ("sweep", self.sweep_s),
            ("saving", self.saving_s),
        ]


def estimate_app_run(
    n_blocks: int, n_cells: int, *, sweep_runs: int = 0, srs_replicates: int = 0
) -> AppRunCost:
    """Estimated seconds of each step of an app run on ``n_blocks`` blocks of a schema with
    ``n_cells`` cells, with a sweep of ``sweep_runs`` runs and ``srs_replicates`` SRS replicates
    (quiet 2-core machine; a busy one is slower)."""
    if n_blocks < 0 or n_cells < 1 or sweep_runs < 0 or srs_replicates < 0:
        raise ValueError("n_blocks, sweep_runs, srs_replicates must be ≥ 0 and n_cells ≥ 1")
    scale = max(n_cells / 2016.0, 0.05)
    engine = estimate_topdown_cost(n_blocks, n_cells).seconds
    with_prediction = estimate_topdown_cost(n_blocks, n_cells, prediction=True).seconds
    metrics = (
        with_prediction
        - engine
        + (METRICS_BASE_SECONDS_2016 + METRICS_SECONDS_PER_BLOCK_2016 * n_blocks) * scale
    )
    sweep = (
        sweep_runs
        * (SWEEP_RUN_BASE_SECONDS_2016 + SWEEP_RUN_SECONDS_PER_BLOCK_2016 * n_blocks)
        * scale
        + srs_replicates * SRS_SECONDS_PER_BLOCK_2016 * n_blocks * scale
    )
    saving = (SAVE_BASE_SECONDS_2016 + SAVE_SECONDS_PER_BLOCK_2016 * n_blocks) * scale
    return AppRunCost(engine, metrics, sweep, saving)


@dataclass(frozen=True)
class RunCost:
    """Estimated wall-clock seconds and peak memory (GB) of a run."""

    seconds: float
    gigabytes: float

    def sentence(self) -> str:
        minutes = self.seconds / 60.0
        when = f"{self.seconds:.0f} s" if self.seconds < 120 else f"{minutes:.0f} min"
        return (
            f"Estimated run time ≈ {when} and peak memory ≈ {self.gigabytes:.1f} GB on a quiet "
            "2-core machine (benchmarks/topdown_production.py; longer when the machine is busy)."
        )


def table_rows(n_blocks: int, n_cells: int, limit: int) -> int:
    """Dense comparison rows of a run (geounits × answer cells), at most ``limit``."""
    return int(min(limit, NODES_PER_BLOCK * n_blocks * n_cells * ANSWERS_PER_CELL))


def estimate_topdown_cost(
    n_blocks: int, n_cells: int, *, kept_rows: int = 0, prediction: bool = False
) -> RunCost:
    """Estimated cost of a run on ``n_blocks`` blocks of a schema with ``n_cells`` cells, keeping
    ``kept_rows`` rows of the dense comparison table (0 for the CLI, which keeps none), with the
    app's predicted-vs-measured table when ``prediction``."""
    if n_blocks < 0 or n_cells < 1 or kept_rows < 0:
        raise ValueError("n_blocks and kept_rows must be ≥ 0 and n_cells ≥ 1")
    scale = n_cells / 2016.0
    seconds = BASE_SECONDS + SECONDS_PER_BLOCK_2016 * n_blocks * max(scale, 0.05)
    gigabytes = (
        BASE_GB
        + BYTES_PER_BLOCK_CELL * n_blocks * n_cells / 1e9
        + TABLE_BYTES_PER_ROW * kept_rows / 1e9
    )
    if prediction:
        sampled = min(1.0, n_blocks / PREDICTION_SAMPLED_FULL_BLOCKS)
        seconds += (
            PREDICTION_PROFILE_SECONDS_PER_BLOCK_2016 * n_blocks * scale
            + PREDICTION_SAMPLED_SECONDS_2016 * sampled * scale
        )
        gigabytes += (
            PREDICTION_PROFILE_BYTES_PER_BLOCK_CELL * n_blocks * n_cells / 1e9
            + PREDICTION_SAMPLED_GB_2016 * scale
        )
    return RunCost(seconds=seconds, gigabytes=gigabytes)
