"""Privacy accounting for zCDP: composition, neighbour conversion and ρ → (ε, δ) (docs/science.md
§1).

- Composition: ρ adds over sequentially composed mechanisms (TDA Def. 2, PHS Def. 4).
- Neighbours: PHSafe's guarantees are stated for *unbounded* neighbours; the bounded guarantee is
  exactly twice the unbounded ρ (PHS Thm 3–4, Table 10 last column).
- ρ-zCDP → (ε, δ)-DP, three conversions, all labelled for the user:
  1. ``bun_steinke``: ε = ρ + 2√(ρ ln(1/δ)) (Bun & Steinke 2016, Prop. 1.3; the conversion the TDA
     paper quotes, TDA §2.1 and App. B — not the one behind the production certificates).
  2. ``cks``: the tight conversion of Canonne, Kamath & Steinke (2020, Prop. 12 / Cor. 13), which
     the production privacy-loss certificates use (persons ρ ≈ 2.5562 → ε = 17.14 at δ = 1e-10),
     δ(ε) = inf_{α>1} exp((α−1)(αρ−ε))/(α−1) · (1−1/α)^α; equivalently
     ε(δ) = inf_{α>1} αρ + ln(1−1/α) + (ln(1/δ) − ln α)/(α−1), which we minimise directly.
  3. ``gaussian``: the exact privacy profile of a continuous Gaussian mechanism with μ = √(2ρ),
     δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Balle & Wang 2018) — approximate for discrete noise.

All functions are vectorised over δ (or ε) so a curve of a few hundred points costs milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
from scipy.special import log_ndtr

from engine.core.errors import ValidationError
from engine.dp.conversions import CONVERSIONS

# Golden-section search over t = ln(α − 1) ∈ [T_LO, T_HI] for the CKS infimum (α ∈ (1 + 1e-9, 1 + e^25)).
_T_LO, _T_HI = -20.0, 25.0
_GOLDEN_ITERS = 90
_BISECT_ITERS = 120


def check_rho(rho: float, *, name: str = "ρ") -> float:
    """Return ρ as a float, or raise a ValidationError unless 0 < ρ < ∞."""
    try:
        value = float(rho)
    except (TypeError, ValueError):
        raise ValidationError(f"{name} must be a number; got {rho!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValidationError(f"{name} must be a positive, finite number; got {rho!r}")
    return value


def _check_delta(delta: np.ndarray | float) -> np.ndarray:
    arr = np.asarray(delta, dtype=np.float64)
    if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 0) or np.any(arr >= 1):
        raise ValidationError(f"δ must satisfy 0 < δ < 1; got {delta!r}")
    return arr


def _check_epsilon(epsilon: np.ndarray | float) -> np.ndarray:
    arr = np.asarray(epsilon, dtype=np.float64)
    if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValidationError(f"ε must be a finite number ≥ 0; got {epsilon!r}")
    return arr


def bounded_from_unbounded(rho_unbounded: float) -> float:
    """Bounded-neighbour ρ of a mechanism that is ρ-zCDP under unbounded neighbours (PHS Thm 3–4)."""
    return 2.0 * float(rho_unbounded)


# ---------------------------------------------------------------- Bun–Steinke


def epsilon_bun_steinke(rho: float, delta: np.ndarray | float) -> np.ndarray | float:
    """ε = ρ + 2√(ρ ln(1/δ)) (Bun & Steinke 2016, Prop. 1.3)."""
    r = check_rho(rho)
    d = _check_delta(delta)
    out = r + 2.0 * np.sqrt(r * np.log(1.0 / d))
    return float(out) if out.ndim == 0 else out


def delta_bun_steinke(rho: float, epsilon: np.ndarray | float) -> np.ndarray | float:
    """Inverse of :func:`epsilon_bun_steinke`: δ = exp(−(ε−ρ)²/(4ρ)) for ε ≥ ρ, else 1."""
    r = check_rho(rho)
    e = _check_epsilon(epsilon)
    out = np.where(e > r, np.exp(-((e - r) ** 2) / (4.0 * r)), 1.0)
    return float(out) if out.ndim == 0 else out


# ---------------------------------------------------------------- CKS (tight)


def _cks_eps_of_alpha(t: np.ndarray, rho: float, log_inv_delta: np.ndarray) -> np.ndarray:
    am1 = np.exp(t)  # α − 1
    alpha = 1.0 + am1
    return alpha * rho + np.log(am1 / alpha) + (log_inv_delta - np.log(alpha)) / am1


def _golden_min(f, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised golden-section minimisation of a unimodal ``f`` on [lo, hi] (one new f per step)."""
    g = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = lo.astype(np.float64), hi.astype(np.float64)
    c = b - g * (b - a)
    d = a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(_GOLDEN_ITERS):
        left = fc < fd  # minimum lies in [a, d]
        a = np.where(left, a, c)
        b = np.where(left, d, b)
        x_new = np.where(left, b - g * (b - a), a + g * (b - a))
        f_new = f(x_new)
        c, d = np.where(left, x_new, d), np.where(left, c, x_new)
        fc, fd = np.where(left, f_new, fd), np.where(left, fc, f_new)
    x = (a + b) / 2.0
    return x, f(x)


def epsilon_cks(rho: float, delta: np.ndarray | float) -> np.ndarray | float:
    """Tight ε(δ) for ρ-zCDP (Canonne, Kamath & Steinke 2020, Prop. 12), minimised over α > 1."""
    r = check_rho(rho)
    d = _check_delta(delta)
    flat = np.atleast_1d(d).astype(np.float64)
    log_inv = np.log(1.0 / flat)
    lo = np.full(flat.shape, _T_LO)
    hi = np.full(flat.shape, _T_HI)
    _, eps = _golden_min(lambda t: _cks_eps_of_alpha(t, r, log_inv), lo, hi)
    eps = np.maximum(eps, 0.0)
    return float(eps[0]) if np.ndim(d) == 0 else eps.reshape(d.shape)


def delta_cks(rho: float, epsilon: np.ndarray | float) -> np.ndarray | float:
    """Tight δ(ε) = inf_{α>1} exp((α−1)(αρ−ε))/(α−1) · (1−1/α)^α (CKS 2020, Prop. 12)."""
    r = check_rho(rho)
    e = _check_epsilon(epsilon)
    flat = np.atleast_1d(e).astype(np.float64)

    def log_delta(t: np.ndarray) -> np.ndarray:
        am1 = np.exp(t)
        alpha = 1.0 + am1
        return am1 * (alpha * r - flat) - np.log(am1) + alpha * np.log(am1 / alpha)

    lo = np.full(flat.shape, _T_LO)
    hi = np.full(flat.shape, _T_HI)
    _, logd = _golden_min(log_delta, lo, hi)
    out = np.minimum(np.exp(logd), 1.0)
    return float(out[0]) if np.ndim(e) == 0 else out.reshape(e.shape)


# ---------------------------------------------------------------- Gaussian profile


def delta_gaussian(rho: float, epsilon: np.ndarray | float) -> np.ndarray | float:
    """Exact δ(ε) of a continuous Gaussian mechanism with μ = √(2ρ) (Balle & Wang 2018, Thm 8)."""
    r = check_rho(rho)
    e = _check_epsilon(epsilon)
    out = _delta_gaussian(np.atleast_1d(e).astype(np.float64), math.sqrt(2.0 * r))
    return float(out[0]) if np.ndim(e) == 0 else out.reshape(e.shape)


def _delta_gaussian(eps: np.ndarray, mu: float) -> np.ndarray:
    a = log_ndtr(-eps / mu + mu / 2.0)
    b = eps + log_ndtr(-eps / mu - mu / 2.0)
    # Φ(a) − e^ε Φ(b) computed as e^a (1 − e^{b−a}) to keep precision at tiny δ.
    return np.maximum(np.exp(a) * -np.expm1(np.minimum(b - a, 0.0)), 0.0)


def epsilon_gaussian(rho: float, delta: np.ndarray | float) -> np.ndarray | float:
    """ε(δ) of the Gaussian-mechanism profile, by vectorised bisection on the decreasing δ(ε)."""
    r = check_rho(rho)
    d = _check_delta(delta)
    flat = np.atleast_1d(d).astype(np.float64)
    mu = math.sqrt(2.0 * r)
    lo = np.zeros_like(flat)
    hi = np.full_like(flat, epsilon_bun_steinke(r, float(flat.min())) + 1.0)  # BS upper-bounds ε
    below = _delta_gaussian(lo, mu) <= flat  # δ(0) already small enough → ε = 0
    for _ in range(_BISECT_ITERS):
        mid = (lo + hi) / 2.0
        too_big = _delta_gaussian(mid, mu) > flat
        lo = np.where(too_big, mid, lo)
        hi = np.where(too_big, hi, mid)
    eps = np.where(below, 0.0, hi)
    return float(eps[0]) if np.ndim(d) == 0 else eps.reshape(d.shape)


# ---------------------------------------------------------------- dispatch


_EPS_FUNCS = {"bun_steinke": epsilon_bun_steinke, "cks": epsilon_cks, "gaussian": epsilon_gaussian}
_DELTA_FUNCS = {"bun_steinke": delta_bun_steinke, "cks": delta_cks, "gaussian": delta_gaussian}


def _check_conversion(conversion: str) -> None:
    if conversion not in _EPS_FUNCS:
        raise ValidationError(
            f"unknown conversion {conversion!r}; choose one of {', '.join(CONVERSIONS)}"
        )


def epsilon_for_delta(
    rho: float, delta: np.ndarray | float, conversion: str = "cks"
) -> np.ndarray | float:
    """ε at δ under the named conversion."""
    _check_conversion(conversion)
    return _EPS_FUNCS[conversion](rho, delta)


def delta_for_epsilon(
    rho: float, epsilon: np.ndarray | float, conversion: str = "cks"
) -> np.ndarray | float:
    """δ at ε under the named conversion."""
    _check_conversion(conversion)
    return _DELTA_FUNCS[conversion](rho, epsilon)


def conversions(
    rho: float, *, delta: float | None = None, epsilon: float | None = None
) -> dict[str, dict[str, float]]:
    """All three conversions at one δ (default 1e-10) or one ε: ``{name: {"epsilon", "delta"}}``."""
    if delta is not None and epsilon is not None:
        raise ValidationError("give either δ or ε, not both")
    out: dict[str, dict[str, float]] = {}
    for name in CONVERSIONS:
        if epsilon is None:
            d = 1e-10 if delta is None else float(_check_delta(delta))
            out[name] = {"epsilon": float(epsilon_for_delta(rho, d, name)), "delta": d}
        else:
            e = float(_check_epsilon(epsilon))
            out[name] = {"epsilon": e, "delta": float(delta_for_epsilon(rho, e, name))}
    return out


def delta_grid(lo: float = 1e-15, hi: float = 1e-2, points: int = 200) -> np.ndarray:
    """Log-spaced δ grid for (ε, δ) curves (TDA Figure 1)."""
    if not (0 < lo < hi < 1) or points < 2:
        raise ValidationError(
            f"δ grid needs 0 < lo < hi < 1 and ≥ 2 points; got {lo}, {hi}, {points}"
        )
    return np.logspace(math.log10(lo), math.log10(hi), points)


def epsilon_curves(
    rho: float, deltas: np.ndarray | None = None, methods: Iterable[str] = CONVERSIONS
) -> dict[str, np.ndarray]:
    """ε over a δ grid for each conversion: the (ε, δ) curves of a scenario."""
    grid = delta_grid() if deltas is None else _check_delta(deltas)
    return {m: np.asarray(epsilon_for_delta(rho, grid, m)) for m in methods}
