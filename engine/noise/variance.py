"""Vectorised noise variances for arrays of scales, delegating to :mod:`engine.dp.distributions`.

:mod:`engine.dp.distributions` is the one place that states each distribution's variance (the exact
discrete-Gaussian variance from its pmf, docs/science.md §1 and §2; the two-sided geometric's
2e^{−z}/(1−e^{−z})², docs/science.md §4). Engines report a variance per noisy count (PHS §6.5), so
this module applies those scalar formulas to whole arrays: one pmf evaluation per *distinct* small
σ² (σ < 3), and the identity Var = σ² where the two agree to float64 precision.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from engine.core.errors import ValidationError
from engine.dp import distributions
from engine.noise._arguments import MAX_SIGMA2, MIN_Z, check_scale

Mechanism = Literal["discrete_gaussian", "two_sided_geometric"]
MECHANISMS: tuple[str, ...] = ("discrete_gaussian", "two_sided_geometric")

# Below this σ² the discrete Gaussian variance differs from σ² (see engine.dp.distributions).
_SMALL_SIGMA2 = 9.0


def discrete_gaussian_variance(sigma2: ArrayLike) -> np.ndarray:
    """Exact Var of N_Z(0, σ²) for each element of ``sigma2`` (float64 array of the same shape)."""
    scale = check_scale(sigma2, None, name="sigma2", lower=0.0, upper=MAX_SIGMA2, hint=_SIGMA2_HINT)
    s2 = np.broadcast_to(scale.values, (scale.count,)).astype(np.float64)
    out = s2.copy()
    small = s2 < _SMALL_SIGMA2
    if small.any():
        values, inverse = np.unique(s2[small], return_inverse=True)
        exact = np.array([distributions.discrete_gaussian_variance(v) for v in values])
        out[small] = exact[inverse]
    return out.reshape(scale.shape)


def two_sided_geometric_variance(z: ArrayLike) -> np.ndarray:
    """Var of G(z) = 2e^{−z}/(1 − e^{−z})² for each element of ``z`` (same shape)."""
    scale = check_scale(z, None, name="z", lower=MIN_Z, upper=np.inf, hint=_Z_HINT)
    zz = np.broadcast_to(scale.values, (scale.count,)).astype(np.float64)
    return (2.0 * np.exp(-zz) / np.expm1(-zz) ** 2).reshape(scale.shape)


def noise_variance(mechanism: Mechanism, parameter: ArrayLike) -> np.ndarray:
    """Variance of the named noise for each scale: σ² for the discrete Gaussian, z for G(z)."""
    if mechanism == "discrete_gaussian":
        return discrete_gaussian_variance(parameter)
    if mechanism == "two_sided_geometric":
        return two_sided_geometric_variance(parameter)
    raise ValidationError(
        f"unknown noise mechanism {mechanism!r}; choose one of {', '.join(MECHANISMS)}"
    )


_SIGMA2_HINT = (
    "Pass the variance σ² = Δ²/(2ρ) of each query (docs/science.md §1), a positive number."
)
_Z_HINT = "Pass the geometric scale z = ε/Δ of each query (docs/science.md §4), a positive number."
