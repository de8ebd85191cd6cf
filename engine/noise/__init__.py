"""Integer noise for the engines: discrete Gaussian (zCDP) and two-sided geometric (pure DP).

Public API (other modules call exactly these):

- :func:`discrete_gaussian` — N_Z(0, σ²), P(k) ∝ exp(−k²/(2σ²)) (docs/science.md §1; Canonne, Kamath
  & Steinke 2020). ``method="fast"``: vectorised NumPy rejection sampler driven by an explicit
  Generator (:mod:`engine.noise.fast_discrete_gaussian`). ``method="exact"``: OpenDP's exact CKS
  sampler with OS randomness (:mod:`engine.noise.exact`).
- :func:`two_sided_geometric` — G(z), P(k) ∝ exp(−z|k|) (docs/science.md §4; Petti & Flaxman 2020).
- :func:`keyed_discrete_gaussian`, :func:`keyed_two_sided_geometric` — the same distributions from
  the counter-based generator keyed by (seed, level, geounit, query) of :mod:`engine.noise.keyed`
  (docs/science.md §8): every value is a function of its key and position, so the split of work
  never changes the numbers.
- :func:`noise_variance` — the variance of either, per element (:mod:`engine.noise.variance`, which
  delegates to :mod:`engine.dp.distributions`).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from engine.core.errors import ValidationError
from engine.noise import exact, fast_discrete_gaussian, fast_geometric, keyed
from engine.noise._arguments import MAX_SIGMA2, MIN_Z, check_generator, check_scale
from engine.noise.exact import ExactSamplerUnavailable
from engine.noise.variance import (
    discrete_gaussian_variance,
    noise_variance,
    two_sided_geometric_variance,
)

__all__ = [
    "ExactSamplerUnavailable",
    "Method",
    "discrete_gaussian",
    "discrete_gaussian_variance",
    "keyed_discrete_gaussian",
    "keyed_two_sided_geometric",
    "noise_variance",
    "two_sided_geometric",
    "two_sided_geometric_variance",
]

Method = Literal["fast", "exact"]
METHODS: tuple[str, ...] = ("fast", "exact")


def discrete_gaussian(
    sigma2: ArrayLike,
    size: int | tuple[int, ...] | None,
    rng: np.random.Generator | None,
    *,
    method: Method = "fast",
) -> np.ndarray:
    """Draw int64 noise from the discrete Gaussian N_Z(0, σ²).

    ``sigma2`` is the variance *parameter* σ² (a scalar, or an array that broadcasts to ``size``;
    ``size=None`` draws one value per element of ``sigma2``). The distribution's actual variance is
    :func:`discrete_gaussian_variance` (smaller than σ² when σ < 3). ``rng`` drives
    ``method="fast"`` and is required there; ``method="exact"`` ignores it and draws from OpenDP's
    cryptographically secure generator (not reproducible by design).
    """
    _check_method(method)
    scale = check_scale(
        sigma2,
        size,
        name="sigma2",
        lower=0.0,
        upper=MAX_SIGMA2,
        hint=(
            "σ² is the noise variance Δ²/(2ρ) of the query (docs/science.md §1); it must be "
            "positive."
        ),
    )
    if method == "exact":
        return exact.discrete_gaussian(scale)
    return fast_discrete_gaussian.sample(scale, check_generator(rng))


def two_sided_geometric(
    z: ArrayLike,
    size: int | tuple[int, ...] | None,
    rng: np.random.Generator | None,
    *,
    method: Method = "fast",
) -> np.ndarray:
    """Draw int64 noise from the two-sided geometric G(z), P(k) ∝ e^{−z|k|}.

    ``z`` is the scale (ε/Δ of the query; the 2018 End-to-End test used z = query budget / 2,
    docs/science.md §4), a scalar or an array that broadcasts to ``size``. ``method`` as in
    :func:`discrete_gaussian`; the exact method is OpenDP's discrete Laplace with scale 1/z.
    """
    _check_method(method)
    scale = check_scale(
        z,
        size,
        name="z",
        lower=MIN_Z,
        upper=np.inf,
        hint="z is the geometric scale ε/Δ of the query (docs/science.md §4); it must be positive.",
    )
    if method == "exact":
        return exact.two_sided_geometric(scale)
    return fast_geometric.sample(scale, check_generator(rng))


def _check_method(method: object) -> None:
    if method not in METHODS:
        raise ValidationError(
            f"unknown sampling method {method!r}; use 'fast' (seeded NumPy, for exploration) or "
            "'exact' (OpenDP, release-grade, not seedable)"
        )


def keyed_discrete_gaussian(sigma2: ArrayLike, keys: ArrayLike, index: ArrayLike) -> np.ndarray:
    """N_Z(0, σ²) from the keyed counter-based generator (:mod:`engine.noise.keyed`).

    ``sigma2``, ``keys`` (unit keys from :func:`engine.noise.keyed.unit_keys`) and ``index`` (the
    position of each value inside its unit) broadcast together; the result has their shape.
    """
    check_scale(
        sigma2,
        None,
        name="sigma2",
        lower=0.0,
        upper=MAX_SIGMA2,
        hint=(
            "σ² is the noise variance Δ²/(2ρ) of the query (docs/science.md §1); it must be "
            "positive."
        ),
    )
    return keyed.discrete_gaussian(sigma2, keys, index)


def keyed_two_sided_geometric(z: ArrayLike, keys: ArrayLike, index: ArrayLike) -> np.ndarray:
    """Two-sided geometric G(z) from the keyed counter-based generator (see above)."""
    check_scale(
        z,
        None,
        name="z",
        lower=MIN_Z,
        upper=np.inf,
        hint="z is the geometric scale ε/Δ of the query (docs/science.md §4); it must be positive.",
    )
    return keyed.two_sided_geometric(z, keys, index)
