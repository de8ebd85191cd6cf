"""Noise for one population-group level: PHS Algorithm 5 (discrete Gaussian) and its pure-DP twin.

For a level with budget ρ_i the whole vector of basis counts of the level gets independent
N_Z(0, σ²) noise with σ² = Δ²/(2ρ_i) (PHS Algorithm 5, SPEC §1), Δ = 2τ+2 for the Algorithm-1
tables and Δ = 2 for the Algorithm-2 tables (PHS §5.1, SPEC §2). Under ``privacy_defn = puredp``
(the official configuration option) the budget is ε_i and the noise two-sided geometric with
P(k) ∝ e^{−z|k|}, z = ε_i/Δ (L1 sensitivity Δ), variance 2e^{−z}/(1 − e^{−z})².

The reported VARIANCE (PHS §6.5) is what the official PHSafe writes: the noise parameter σ² for the
discrete Gaussian and the exact variance for the geometric. An infinite budget means no noise and
VARIANCE 0 (the official ``e2e_test2`` case). The analytic 90% MOE is the exact one from the pmf
(SPEC §2) next to the paper's bound ⌊1.645·σ⌋ (PHS §7.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from engine.noise import discrete_gaussian, two_sided_geometric
from engine.phsafe.join import LevelCounts
from phexplore.distributions import (
    discrete_gaussian_moe,
    geometric_moe,
    geometric_variance,
)
from phexplore.moe import phsafe_sensitivity, z_for_confidence

DISCRETE_GAUSSIAN = "Discrete Gaussian"
TWO_SIDED_GEOMETRIC = "Two-Sided Geometric"
Z_90 = z_for_confidence(0.90)
"""1.645, the 95th normal percentile of the paper-style MOE bound (SPEC §2; one copy in phexplore.moe)."""


@dataclass(frozen=True)
class NoiseSpec:
    """The noise of one table at one level: distribution, scale, reported variance and MOE."""

    table: str
    level: str
    privacy_defn: str
    budget: float
    sensitivity: int
    distribution: str
    scale: float
    """σ² (discrete Gaussian) or z (geometric); 0 when the budget is infinite (no noise)."""
    variance: float
    """The VARIANCE column: σ² (zcdp) or 2e^{−z}/(1 − e^{−z})² (puredp); 0 without noise."""
    moe90: int
    """Exact 90% MOE of the noise (smallest m with P(|X| ≤ m) ≥ 0.9); 0 without noise."""
    moe90_bound: int
    """PHS §7.1 bound ⌊1.645·σ⌋ (zcdp) or the exact geometric MOE (puredp)."""

    @property
    def noiseless(self) -> bool:
        return self.scale == 0.0


def sensitivity(table: str, tau: int | None) -> int:
    """Δ of PHS §5.1: 2τ+2 for Algorithm-1 tables, 2 for Algorithm-2 tables.

    One rule for the engine and the analytic tools: :func:`phexplore.moe.phsafe_sensitivity`
    (raises :class:`~phexplore.errors.ValidationError`, a ``ValueError``, for a missing τ).
    """
    return phsafe_sensitivity(table, tau)


def noise_spec(
    table: str, level: str, budget: float, privacy_defn: str, tau: int | None
) -> NoiseSpec:
    """The noise PHSafe adds to ``table`` at ``level`` with budget ρ (zcdp) or ε (puredp) > 0."""
    if not budget > 0:
        raise ValueError(f"{table}/{level}: a measured level needs a positive budget, got {budget}")
    delta = sensitivity(table, tau)
    if privacy_defn == "zcdp":
        distribution = DISCRETE_GAUSSIAN
        if math.isinf(budget):
            return NoiseSpec(
                table, level, privacy_defn, budget, delta, distribution, 0.0, 0.0, 0, 0
            )
        sigma2 = delta**2 / (2.0 * budget)
        return NoiseSpec(
            table,
            level,
            privacy_defn,
            budget,
            delta,
            distribution,
            sigma2,
            sigma2,
            discrete_gaussian_moe(sigma2),
            int(math.floor(Z_90 * math.sqrt(sigma2))),
        )
    if privacy_defn == "puredp":
        distribution = TWO_SIDED_GEOMETRIC
        if math.isinf(budget):
            return NoiseSpec(
                table, level, privacy_defn, budget, delta, distribution, 0.0, 0.0, 0, 0
            )
        z = budget / delta
        moe = geometric_moe(z)
        return NoiseSpec(
            table,
            level,
            privacy_defn,
            budget,
            delta,
            distribution,
            z,
            geometric_variance(z),
            moe,
            moe,
        )
    raise ValueError(f"unknown privacy_defn {privacy_defn!r}")


def draw_noise(spec: NoiseSpec, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Independent int64 noise of ``shape`` for this level (all zeros when the budget is infinite)."""
    if spec.noiseless or int(np.prod(shape)) == 0:
        return np.zeros(shape, dtype=np.int64)
    if spec.distribution == DISCRETE_GAUSSIAN:
        return discrete_gaussian(spec.scale, shape, rng)
    return two_sided_geometric(spec.scale, shape, rng)


@dataclass(frozen=True)
class MeasuredLevel:
    """One table at one level after measurement: its counts, noise spec and the noise of each trial.

    ``noise`` has shape (trials, regions, iterations, basis cells); trial 0 is the published run.
    ``spec`` and ``noise`` are ``None`` in a non-private run.
    """

    counts: LevelCounts
    spec: NoiseSpec | None
    noise: np.ndarray | None

    def noisy(self, trial: int = 0) -> np.ndarray:
        """Noisy basis counts of one trial (truncated truth + noise)."""
        if self.noise is None:
            raise ValueError("a non-private run has no noisy counts")
        return self.counts.true_truncated + self.noise[trial]

    def basis_frame(self) -> pd.DataFrame:
        """One row per region × iteration × basis cell: table, level, region_type, region_id,
        iteration_code, cell, true and true_truncated (shared by the outputs and error analysis)."""
        c = self.counts
        n_r, n_i, n_c = c.true_full.shape
        return pd.DataFrame(
            {
                "table": c.table,
                "level": c.level,
                "region_type": c.region_type,
                "region_id": np.repeat(np.asarray(c.region_ids, dtype=object), n_i * n_c),
                "iteration_code": np.tile(
                    np.repeat(np.asarray(c.iteration_codes, dtype=object), n_c), n_r
                ),
                "cell": np.tile(np.asarray(c.basis, dtype=np.int64), n_r * n_i),
                "true": c.true_full.reshape(-1),
                "true_truncated": c.true_truncated.reshape(-1),
            }
        )


def measure_level(
    counts: LevelCounts, spec: NoiseSpec, trials: int, rng: np.random.Generator
) -> MeasuredLevel:
    """Draw ``trials`` independent noise vectors for one level (PHS Algorithm 5, repeated)."""
    noise = draw_noise(spec, (trials, *counts.true_truncated.shape), rng)
    return MeasuredLevel(counts=counts, spec=spec, noise=noise)
