"""PF's appendix check of EPL on the geometric mechanism (PF Supplementary Methods Appendix, Table SA1).

Petti & Flaxman validated EPL on a mechanism whose privacy parameter is known: two-sided geometric
noise added to the 2,663 enumeration-district totals of 1940 Washington state, EPL computed with
their published settings (KDE bandwidth 0.1 × sd, density range ±1.0 × max(|P5|, |P95|)), repeated
over random seeds; Table SA1 prints the mean EPL and its 2.5–97.5% range across seeds for each ε.

Their design, to the letter of their notebook ``008_appendix_calcs.ipynb``: the noise of privacy
parameter ε is the difference of two geometric variables with success probability ε/2
(``GDPC(epsilon / 2, counts)``), i.e. P(k) ∝ (1 − ε/2)^|k| — the ε-DP geometric mechanism of a
count with L1 sensitivity 2 (bounded neighbours, as in the 2018 End-to-End TopDown). Only the
residuals enter EPL, so the true counts are not needed; the number of residuals (2,663) is what
matters.

Note what the check shows: the noise's own log-ratio between neighbouring counts is
−ln(1 − ε/2) ≈ ε/2, and with 2,663 residuals the KDE-based EPL overshoots it about twofold, which
lands near ε. With 200,000 residuals the same EPL approaches ε/2 (ε = 0.1: 0.055–0.058). The
check therefore says EPL at PF's sample size is on the scale of the privacy parameter, not that EPL
is an unbiased estimate of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.core.errors import ValidationError
from engine.metrics.epl import empirical_privacy_loss
from engine.metrics.epl_settings import EPLSettings, settings_of

SA1_COUNTS = 2_663
"""Enumeration districts of 1940 Washington state: the residuals of PF's Table SA1."""


@dataclass(frozen=True)
class GeometricCheck:
    """EPL of the geometric mechanism at one ε across seeds: mean and percentile interval."""

    epsilon: float
    n_residuals: int
    n_seeds: int
    mean: float
    low: float
    high: float
    values: tuple[float, ...]


def pf_geometric_residuals(epsilon: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """PF's ``GDPC(ε/2)`` noise: Geometric(ε/2) − Geometric(ε/2), ``n`` draws."""
    if not 0 < epsilon < 2:
        raise ValidationError(
            f"epsilon must satisfy 0 < ε < 2 for PF's geometric noise; got {epsilon}"
        )
    p = epsilon / 2.0
    return (rng.geometric(p, n) - rng.geometric(p, n)).astype(np.float64)


def geometric_epl_check(
    epsilon: float,
    *,
    n: int = SA1_COUNTS,
    seeds: Sequence[int] = tuple(range(40)),
    settings: EPLSettings | None = None,
    level: float = 0.95,
) -> GeometricCheck:
    """PF Table SA1 for one ε: EPL of ``n`` PF geometric residuals for each seed, summarised.

    Seed ``s`` draws from ``numpy.random.default_rng([n, s])``; ``low``/``high`` are the
    ``(1 − level)/2`` and ``(1 + level)/2`` quantiles of the per-seed EPLs (PF: 2.5% and 97.5%).
    """
    if n < 2:
        raise ValidationError(f"n must be at least 2 residuals; got {n}")
    if not seeds:
        raise ValidationError("give at least one seed")
    chosen = settings_of(settings)
    values = [
        empirical_privacy_loss(
            pf_geometric_residuals(epsilon, n, np.random.default_rng([n, int(s)])),
            settings=chosen,
        )
        for s in seeds
    ]
    arr = np.asarray(values, dtype=np.float64)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(arr, [alpha, 1.0 - alpha])
    return GeometricCheck(
        epsilon=float(epsilon),
        n_residuals=int(n),
        n_seeds=len(values),
        mean=float(arr.mean()),
        low=float(low),
        high=float(high),
        values=tuple(float(v) for v in arr),
    )
