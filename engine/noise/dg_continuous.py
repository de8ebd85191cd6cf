"""Discrete Gaussian by rounding a wider N(0, s²) and accepting with a continuous test.

Target: N_Z(0, σ²), P(k) ∝ p̃(k) = exp(−k²/(2σ²)) on the integers (docs/science.md §1; Canonne,
Kamath & Steinke 2020, Def. 1). CKS Algorithm 3 uses a discrete-Laplace proposal; here the proposal
is a *continuous* Gaussian, which NumPy draws far faster (ziggurat), rounded to the nearest integer.

Construction (rejection sampling on the real line). Draw X ~ N(0, s²) with s² = σ² + d, d > 0, put
K = round(X) and accept with probability

    a(X) = p̃(K) / (M · g(X)),   g(x) = exp(−x²/(2s²)).

Then P(K = k, accepted) = ∫_{|x−k|≤½} g(x)/(s√(2π)) · p̃(k)/(M g(x)) dx = p̃(k)/(M s√(2π)), which
is proportional to p̃(k): accepted draws are exactly N_Z(0, σ²). We need a ≤ 1, i.e.
ln M ≥ sup_k [(|k|+½)²/(2s²) − k²/(2σ²)]; the supremum over real |k| of this concave quadratic is
1/(8d), so ln M = 1/(8d). The acceptance rate is (σ/s)·exp(−1/(8d)) · (1 + O(e^{−2π²σ²})); it is
maximised by d = (1 + √(1 + 16σ²))/8, giving ≈ 1 − 1/(2σ) for large σ (0.95 at σ = 10) and ≈ 0.45
at σ = 0.5. With X = sZ, Z ~ N(0, 1), and E = −ln U ~ Exp(1), the test a(X) > U becomes

    E ≥ K²/(2σ²) − Z²/2 + 1/(8d),

one normal, one exponential and a few flops per proposal. Rejected entries are redrawn (only
those), so the output is exact up to floating-point rounding of the test and of s·Z. Unlike
:mod:`engine.noise.dg_cell_table` it needs no per-σ² table, so it serves arrays with many distinct
large σ², where its acceptance rate is near 1.
"""

from __future__ import annotations

import numpy as np

CHUNK = 1 << 16
"""Draws generated at a time, to bound memory (why this size: docs/noise.md, the continuous
test)."""


def proposal_gap(sigma2: np.ndarray | float) -> np.ndarray | float:
    """The optimal d = s² − σ² of the Gaussian proposal (see module docstring)."""
    return (1.0 + np.sqrt(1.0 + 16.0 * np.asarray(sigma2, dtype=np.float64))) / 8.0


def acceptance_threshold(
    kk: np.ndarray, z: np.ndarray, sigma2: np.ndarray | float, d: np.ndarray | float
) -> np.ndarray:
    """K²/(2σ²) − Z²/2 + 1/(8d): a proposal is accepted when E ≥ it (module docstring).
    Arranged to reuse buffers: ``z`` is overwritten."""
    threshold = kk * kk
    threshold /= 2.0 * sigma2
    z *= z
    z *= 0.5
    threshold -= z
    threshold += 1.0 / (8.0 * d)
    return threshold


def sample(sigma2: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """n draws from N_Z(0, σ²); ``sigma2`` is a 0-d array or a length-n array of validated σ²."""
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, CHUNK):
        stop = min(start + CHUNK, n)
        s2 = sigma2 if sigma2.ndim == 0 else sigma2[start:stop]
        out[start:stop] = _sample_chunk(s2, stop - start, rng)
    return out


def _sample_chunk(sigma2: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """n draws; ``sigma2`` is a 0-d array or a length-n array."""
    k = np.empty(n, dtype=np.float64)
    pending: np.ndarray | None = None  # indices still to draw; None means all of them
    while True:
        s2 = sigma2 if sigma2.ndim == 0 or pending is None else sigma2[pending]
        m = n if pending is None else pending.size
        d = proposal_gap(s2)
        z = rng.standard_normal(m)
        kk = np.rint(z * np.sqrt(s2 + d))
        rejected = rng.standard_exponential(m) < acceptance_threshold(kk, z, s2, d)
        if pending is None:
            k[:] = kk
            pending = np.flatnonzero(rejected)
        else:
            k[pending] = kk
            pending = pending[rejected]
        if pending.size == 0:
            return k.astype(np.int64)
