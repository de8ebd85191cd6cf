"""A rough time and memory estimate of a TopDown run, shown before Run (issue 17).

A linear model in the size of the dense arrays of a run (geounits × cells per geounit), with
coefficients measured by ``benchmarks/topdown_production.py`` on generated states with the
2,016-cell schema on a shared 2-core machine (docs/topdown.md, "Production scale"). It is an order
of magnitude for planning, not a promise: the time depends on the machine's load.
"""

from __future__ import annotations

from dataclasses import dataclass

SECONDS_PER_BLOCK_2016 = 0.010
"""Wall-clock seconds per block with the 2,016-cell schema: 31.6 s / 2,453 blocks (100,000
persons) and 192 s / 23,133 blocks (1,000,000 persons) on the shared machine (docs/topdown.md)."""
BASE_SECONDS = 2.0
BASE_GB = 0.35
"""Python, NumPy, SciPy, Clarabel and the app before any data."""
BYTES_PER_NODE_CELL = 64.0
"""Peak bytes per (geounit × cell): truth, estimates and noisy DETAILED answers held densely
(int64/float64) plus the loader's counts and temporaries: (3.47 − 0.35) GB over 24,135 × 2,016
geounit-cells at 1,000,000 persons."""
NODES_PER_BLOCK = 1.04
"""Geounits per block on the conventional spine (block groups, tracts, counties, the state)."""


@dataclass(frozen=True)
class RunCost:
    """Estimated wall-clock seconds and peak memory (GB) of a run."""

    seconds: float
    gigabytes: float

    def sentence(self) -> str:
        minutes = self.seconds / 60.0
        when = f"{self.seconds:.0f} s" if self.seconds < 120 else f"{minutes:.0f} min"
        return (
            f"Estimated run time ≈ {when} and peak memory ≈ {self.gigabytes:.1f} GB on a 2-core "
            "machine (benchmarks/topdown_production.py; longer when the machine is busy)."
        )


def estimate_topdown_cost(n_blocks: int, n_cells: int) -> RunCost:
    """Estimated cost of a run on ``n_blocks`` blocks of a schema with ``n_cells`` cells."""
    if n_blocks < 0 or n_cells < 1:
        raise ValueError("n_blocks must be ≥ 0 and n_cells ≥ 1")
    scale = n_cells / 2016.0
    seconds = BASE_SECONDS + SECONDS_PER_BLOCK_2016 * n_blocks * max(scale, 0.05)
    gigabytes = BASE_GB + BYTES_PER_NODE_CELL * NODES_PER_BLOCK * n_blocks * n_cells / 1e9
    return RunCost(seconds=seconds, gigabytes=gigabytes)
