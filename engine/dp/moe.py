"""Noise scale and margins of error (docs/science.md §2; PHS §7.1, Def. 10, Corollary 2; TDA App. B,
Thm 2).

- Discrete Gaussian with L2 sensitivity Δ at ρ-zCDP: σ² = Δ²/(2ρ) (PHS Lemma 3).
- Continuous MOE bound: MOE ≤ ⌊z·σ⌋ with z = 1.645 at 90% (PHS §7.1; the paper's Corollary 2 prints
  1.3448 = 1.64²/2, but Table 10 reproduces to every printed digit only with 1.645 — docs/science.md
  §2). Inverse: ρ = z²Δ²/(2·MOE²).
- Exact MOE: the smallest integer m with P(|X| ≤ m) ≥ confidence, from the pmf
  (:func:`engine.dp.distributions.discrete_gaussian_moe`).
- PHSafe sensitivities: 2τ+2 for Algorithm-1 tables, 2 for Algorithm-2 (denominator) tables.
- TopDown noisy measurements: σ² = 1/(ρ·c·d) for level share c and query share d (TDA App. B).
"""

from __future__ import annotations

import math

from scipy.special import ndtri

from engine.core.errors import ValidationError
from engine.dp.distributions import discrete_gaussian_moe, geometric_moe

#: Measured tables of PHSafe, in production order (PHS §3.2).
PHSAFE_TABLES: tuple[str, ...] = (
    "PH1_num",
    "PH1_denom",
    "PH2",
    "PH3",
    "PH4",
    "PH5_denom",
    "PH6",
    "PH7",
    "PH8_denom",
)
#: Tables measured by PHS Algorithm 2 (household counts, sensitivity 2, no truncation).
PHSAFE_DENOMINATOR_TABLES: frozenset[str] = frozenset({"PH1_denom", "PH5_denom", "PH8_denom"})


def z_for_confidence(confidence: float = 0.90) -> float:
    """Two-sided normal quantile rounded to 3 decimals (1.645 at 90%, 1.960 at 95%), as PHS Table 10."""
    c = float(confidence)
    if not (0.0 < c < 1.0):
        raise ValidationError(
            f"confidence level must be strictly between 0 and 1; got {confidence!r}"
        )
    return round(float(ndtri((1.0 + c) / 2.0)), 3)


def sigma2_for_rho(rho: float, sensitivity: float) -> float:
    """σ² = Δ²/(2ρ) of the (discrete) Gaussian mechanism at ρ-zCDP (PHS Lemma 3)."""
    r = float(rho)
    if not math.isfinite(r) or r <= 0:
        raise ValidationError(f"ρ must be a positive finite number; got {rho!r}")
    if not (float(sensitivity) > 0):
        raise ValidationError(f"sensitivity Δ must be positive; got {sensitivity!r}")
    return float(sensitivity) ** 2 / (2.0 * r)


def moe_bound(sigma: float, confidence: float = 0.90) -> int:
    """Continuous bound ⌊z·σ⌋ on the MOE (PHS §7.1)."""
    # A tiny tolerance keeps ⌊1.645·σ⌋ exact when z·σ is an integer up to rounding (e.g. ρ from a target).
    return int(math.floor(z_for_confidence(confidence) * float(sigma) + 1e-9))


def moe_for_rho(rho: float, sensitivity: float, confidence: float = 0.90) -> int:
    """⌊z·σ⌋ with σ² = Δ²/(2ρ): the PHSafe MOE bound at ``confidence`` (PHS §7.1)."""
    return moe_bound(math.sqrt(sigma2_for_rho(rho, sensitivity)), confidence)


def moe_exact(sigma2: float, confidence: float = 0.90) -> int:
    """Exact discrete-Gaussian MOE from the pmf (docs/science.md §2)."""
    return discrete_gaussian_moe(sigma2, confidence)


def moe_exact_geometric(z: float, confidence: float = 0.90) -> int:
    """Exact MOE of two-sided geometric noise G(z) (pure-DP runs)."""
    return geometric_moe(z, confidence)


def rho_for_moe(moe: float, sensitivity: float, confidence: float = 0.90) -> float:
    """ρ needed so that ⌊zσ⌋ ≤ MOE: ρ = z²Δ²/(2·MOE²) (PHS Corollary 2 with z = 1.645)."""
    m = float(moe)
    if not math.isfinite(m) or m <= 0:
        raise ValidationError(f"target MOE must be a positive number; got {moe!r}")
    z = z_for_confidence(confidence)
    return z * z * float(sensitivity) ** 2 / (2.0 * m * m)


def phsafe_sensitivity(table: str, tau: int | None) -> int:
    """L2 sensitivity of a PHSafe table: 2τ+2 (Algorithm 1) or 2 (Algorithm 2 denominators)."""
    if table not in PHSAFE_TABLES:
        raise ValidationError(f"unknown PHSafe table {table!r}; known: {', '.join(PHSAFE_TABLES)}")
    if table in PHSAFE_DENOMINATOR_TABLES:
        return 2
    if tau is None or int(tau) != tau or int(tau) < 1:
        raise ValidationError(
            f"{table} needs a truncation threshold τ ≥ 1 (whole number); got {tau!r}"
        )
    return 2 * int(tau) + 2
