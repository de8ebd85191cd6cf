"""The one place that states the noise distributions' pmf, variance and central intervals.

Discrete Gaussian N_Z(0, σ²): P(k) ∝ exp(−k²/(2σ²)) on the integers (Canonne, Kamath & Steinke 2020;
docs/science.md §1; PHS Lemma 3). Its variance is *not* σ² for small σ (it is smaller), so we
compute it from the pmf. Two-sided geometric G(z): P(k) = (1 − e^{−z}) e^{−z|k|} / (1 + e^{−z})
(docs/science.md §4; PF "TopDown options"), variance 2e^{−z}/(1 − e^{−z})².

Used by the analytic layer (:mod:`engine.dp.moe`, exact MOE) and by the engines (:mod:`engine.noise`,
reported VARIANCE); the analytic core stays free of engine imports because this module lives here.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import erfinv

from engine.core.errors import ValidationError

# Beyond this σ the discrete Gaussian's variance equals σ² to float64 precision (Poisson summation:
# the relative gap is about 8π²σ²·exp(−2π²σ²), below 1e-70 at σ = 3).
_SIGMA_CONTINUOUS = 3.0
# Beyond this σ central-interval masses use the continuity-corrected normal (error O(σ⁻²) < 1e-10).
_SIGMA_NORMAL_MASS = 2.0e4


MAX_SIGMA2 = 1e24
"""Largest noise variance accepted (σ = 10^12 persons): beyond it a budget is effectively 0."""


def _check_sigma2(sigma2: float) -> float:
    s2 = float(sigma2)
    if not math.isfinite(s2) or s2 <= 0:
        raise ValidationError(f"noise variance σ² must be a positive finite number; got {sigma2!r}")
    if s2 > MAX_SIGMA2:
        raise ValidationError(
            f"noise standard deviation σ = {math.sqrt(s2):.3g} exceeds 10^12 persons: the budget "
            "(ρ or ε) of this query is so small that every count would be pure noise; raise it"
        )
    return s2


def _support(sigma: float) -> np.ndarray:
    """Non-negative integers carrying all but ~1e-30 of the mass (|k| ≤ 12σ + 2)."""
    return np.arange(0, int(math.ceil(12.0 * sigma)) + 3, dtype=np.float64)


def discrete_gaussian_pmf(k: np.ndarray | int, sigma2: float) -> np.ndarray:
    """P(X = k) for X ~ N_Z(0, σ²), computed with an exact (truncated-at-1e-30) normaliser."""
    s2 = _check_sigma2(sigma2)
    kk = np.asarray(k, dtype=np.float64)
    return np.exp(-(kk**2) / (2.0 * s2)) / discrete_gaussian_normaliser(s2)


def discrete_gaussian_normaliser(sigma2: float) -> float:
    """Σ_k exp(−k²/(2σ²)) over all integers k (Poisson summation for large σ)."""
    s2 = _check_sigma2(sigma2)
    sigma = math.sqrt(s2)
    if sigma >= _SIGMA_CONTINUOUS:
        # Jacobi theta identity: Σ_k e^{−k²/2σ²} = σ√(2π) Σ_n e^{−2π²σ²n²}.
        return sigma * math.sqrt(2.0 * math.pi) * (1.0 + 2.0 * math.exp(-2.0 * math.pi**2 * s2))
    k = _support(sigma)
    w = np.exp(-(k**2) / (2.0 * s2))
    return float(w[0] + 2.0 * w[1:].sum())


def discrete_gaussian_variance(sigma2: float) -> float:
    """Exact variance of N_Z(0, σ²) from its pmf (< σ² for small σ; = σ² in float64 for σ ≥ 3)."""
    s2 = _check_sigma2(sigma2)
    sigma = math.sqrt(s2)
    if sigma >= _SIGMA_CONTINUOUS:
        return s2
    k = _support(sigma)
    w = np.exp(-(k**2) / (2.0 * s2))
    norm = w[0] + 2.0 * w[1:].sum()
    return float(2.0 * (k**2 * w).sum() / norm)


def discrete_gaussian_central_mass(m: int, sigma2: float) -> float:
    """P(|X| ≤ m) for X ~ N_Z(0, σ²)."""
    s2 = _check_sigma2(sigma2)
    if m < 0:
        return 0.0
    sigma = math.sqrt(s2)
    if sigma >= _SIGMA_NORMAL_MASS:
        return math.erf((m + 0.5) / (sigma * math.sqrt(2.0)))
    k = np.arange(0, m + 1, dtype=np.float64)
    w = np.exp(-(k**2) / (2.0 * s2))
    return float(min(1.0, (w[0] + 2.0 * w[1:].sum()) / discrete_gaussian_normaliser(s2)))


def discrete_gaussian_moe(sigma2: float, confidence: float = 0.90) -> int:
    """Exact MOE: the smallest integer m ≥ 0 with P(|X| ≤ m) ≥ ``confidence`` (docs/science.md §2,
    PHS Def. 10)."""
    s2 = _check_sigma2(sigma2)
    _check_confidence(confidence)
    sigma = math.sqrt(s2)
    if sigma >= _SIGMA_NORMAL_MASS:
        m = int(math.ceil(float(erfinv(confidence)) * sigma * math.sqrt(2.0) - 0.5))
        while m > 0 and discrete_gaussian_central_mass(m - 1, s2) >= confidence:
            m -= 1
        while discrete_gaussian_central_mass(m, s2) < confidence:
            m += 1
        return m
    k = _support(sigma)
    w = np.exp(-(k**2) / (2.0 * s2))
    norm = discrete_gaussian_normaliser(s2)
    mass = (2.0 * np.cumsum(w) - w[0]) / norm
    idx = int(np.searchsorted(mass, confidence, side="left"))
    return min(idx, len(k) - 1)


def geometric_pmf(k: np.ndarray | int, z: float) -> np.ndarray:
    """P(X = k) for the two-sided geometric G(z): (1 − e^{−z}) e^{−z|k|} / (1 + e^{−z})."""
    zz = _check_z(z)
    kk = np.abs(np.asarray(k, dtype=np.float64))
    q = math.exp(-zz)
    return (1.0 - q) * np.exp(-zz * kk) / (1.0 + q)


def geometric_variance(z: float) -> float:
    """Variance of the two-sided geometric G(z): 2e^{−z} / (1 − e^{−z})²."""
    zz = _check_z(z)
    q = math.exp(-zz)
    if q == 1.0:  # z below float resolution: the variance is effectively infinite
        return math.inf
    return 2.0 * q / (1.0 - q) ** 2


def geometric_moe(z: float, confidence: float = 0.90) -> int:
    """Smallest integer m with P(|X| ≤ m) ≥ ``confidence`` for X ~ G(z).

    P(|X| ≤ m) = 1 − 2e^{−z(m+1)}/(1 + e^{−z}), solved in closed form.
    """
    zz = _check_z(z)
    _check_confidence(confidence)
    q = math.exp(-zz)
    tail = (1.0 - confidence) * (1.0 + q) / 2.0
    m = max(0, int(math.ceil(-math.log(tail) / zz - 1.0 - 1e-12)))
    while m > 0 and 1.0 - 2.0 * math.exp(-zz * m) / (1.0 + q) >= confidence:
        m -= 1
    while 1.0 - 2.0 * math.exp(-zz * (m + 1)) / (1.0 + q) < confidence:
        m += 1
    return m


def _check_z(z: float) -> float:
    zz = float(z)
    if not math.isfinite(zz) or zz <= 0:
        raise ValidationError(f"geometric scale z must be a positive finite number; got {z!r}")
    return zz


def _check_confidence(confidence: float) -> None:
    if not (0.0 < float(confidence) < 1.0):
        raise ValidationError(
            f"confidence level must be strictly between 0 and 1; got {confidence!r}"
        )
