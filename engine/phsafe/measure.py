"""Noise for one population-group level: PHS Algorithm 5 (discrete Gaussian) and its pure-DP twin.

For a level with budget ρ_i the whole vector of basis counts of the level gets independent
N_Z(0, σ²) noise with σ² = Δ²/(2ρ_i) (PHS Algorithm 5, docs/science.md §1), Δ = 2τ+2 for the
Algorithm-1 tables and Δ = 2 for the Algorithm-2 tables (PHS §5.1, docs/science.md §2). Under
``privacy_defn = puredp`` (the official configuration option) the budget is ε_i and the noise
two-sided geometric with P(k) ∝ e^{−z|k|}, z = ε_i/Δ (L1 sensitivity Δ), variance
2e^{−z}/(1 − e^{−z})².

The reported VARIANCE (PHS §6.5) is what the official PHSafe writes: the noise parameter σ² for the
discrete Gaussian and the exact variance for the geometric. An infinite budget means no noise and
VARIANCE 0 (the official ``e2e_test2`` case). The analytic 90% MOE is the exact one from the pmf
(docs/science.md §2) next to the paper's bound ⌊1.645·σ⌋ (PHS §7.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from engine.dp.distributions import discrete_gaussian_moe, geometric_moe, geometric_variance
from engine.dp.moe import phsafe_sensitivity, z_for_confidence
from engine.noise import (
    discrete_gaussian,
    keyed_discrete_gaussian,
    keyed_two_sided_geometric,
    two_sided_geometric,
)
from engine.noise.keyed import geounit_hashes, unit_keys
from engine.phsafe.join import LevelCounts

DISCRETE_GAUSSIAN = "Discrete Gaussian"
TWO_SIDED_GEOMETRIC = "Two-Sided Geometric"
Z_90 = z_for_confidence(0.90)
"""1.645, the 95th normal percentile of the paper-style MOE bound (docs/science.md §2; one copy in
engine.dp.moe)."""


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

    One rule for the engine and the analytic tools: :func:`engine.dp.moe.phsafe_sensitivity`
    (raises :class:`~engine.core.errors.ValidationError`, a ``ValueError``, for a missing τ).
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


def draw_noise(
    spec: NoiseSpec,
    shape: tuple[int, ...],
    rng: np.random.Generator | None,
    *,
    method: str = "fast",
) -> np.ndarray:
    """Independent int64 noise of ``shape`` for this level (all zeros when the budget is infinite).

    ``method="exact"``: OpenDP's exact samplers (release-grade, OS randomness, ``rng`` unused).
    """
    if spec.noiseless or int(np.prod(shape)) == 0:
        return np.zeros(shape, dtype=np.int64)
    if spec.distribution == DISCRETE_GAUSSIAN:
        return discrete_gaussian(spec.scale, shape, rng, method=method)  # type: ignore[arg-type]
    return two_sided_geometric(spec.scale, shape, rng, method=method)  # type: ignore[arg-type]


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


def keyed_noise(spec: NoiseSpec, counts: LevelCounts, trials: int, seed: int) -> np.ndarray:
    """int64 noise of shape (trials, regions, iterations, cells) keyed by (seed, level, geounit,
    query) (docs/science.md §8; :mod:`engine.noise.keyed`): the unit is one table (query) at one
    population group (level) of one region and iteration code (geounit ``region/iteration``), and
    the value's position inside the unit is ``trial × cells + cell``. A level's noise therefore does
    not depend on which other tables or levels are measured, nor in which order or process."""

    n_r, n_i, n_c = counts.true_truncated.shape
    shape = (trials, n_r, n_i, n_c)
    if spec.noiseless or int(np.prod(shape)) == 0:
        return np.zeros(shape, dtype=np.int64)
    geounits = [f"{r}/{i}" for r in counts.region_ids for i in counts.iteration_codes]
    hashes = geounit_hashes([counts.level] * len(geounits), geounits)
    keys = unit_keys(seed, spec.table, hashes).reshape(1, n_r, n_i, 1)
    index = (
        np.arange(trials, dtype=np.uint64)[:, None] * np.uint64(n_c)
        + np.arange(n_c, dtype=np.uint64)[None, :]
    ).reshape(trials, 1, 1, n_c)
    if spec.distribution == DISCRETE_GAUSSIAN:
        return keyed_discrete_gaussian(spec.scale, keys, index)
    return keyed_two_sided_geometric(spec.scale, keys, index)


def measure_level(
    counts: LevelCounts,
    spec: NoiseSpec,
    trials: int,
    rng: np.random.Generator | None,
    *,
    seed: int | None = None,
    method: str = "fast",
) -> MeasuredLevel:
    """Draw ``trials`` independent noise vectors for one level (PHS Algorithm 5, repeated).

    With ``seed`` the ``fast`` noise is keyed (:func:`keyed_noise`); otherwise it comes from
    ``rng``; ``method="exact"`` draws from OpenDP.
    """
    shape = (trials, *counts.true_truncated.shape)
    if seed is not None and method == "fast":
        noise = keyed_noise(spec, counts, trials, seed)
    else:
        noise = draw_noise(spec, shape, rng, method=method)
    return MeasuredLevel(counts=counts, spec=spec, noise=noise)
