"""Vectorised two-sided geometric sampler G(z): P(k) = (1 − e^{−z}) e^{−z|k|} / (1 + e^{−z}).

This is the pure-DP noise of the 2018 End-to-End test (docs/science.md §4; Petti & Flaxman 2020,
"TopDown options") and PHSafe's ``puredp`` option. Construction: if E ~ Exp(1) then G = ⌊E/z⌋
satisfies P(G ≥ g) = P(E ≥ gz) = e^{−gz}, a one-sided geometric with ratio q = e^{−z} on {0, 1, …};
the difference of two independent copies has P(G₁ − G₂ = k) = (1 − q)² Σ_g q^{g} q^{g+|k|} = (1 − q)
q^{|k|} / (1 + q), the two-sided geometric. Exact up to floating-point rounding of E/z.
"""

from __future__ import annotations

import numpy as np

from engine.noise._arguments import ScaleArray

CHUNK = 1 << 16


def sample(scale: ScaleArray, rng: np.random.Generator) -> np.ndarray:
    """Draw ``scale.count`` values from G(z) with z = ``scale.values`` (validated)."""
    out = np.empty(scale.count, dtype=np.int64)
    for start in range(0, scale.count, CHUNK):
        stop = min(start + CHUNK, scale.count)
        z = scale.values if scale.is_scalar else scale.values[start:stop]
        m = stop - start
        a = rng.standard_exponential(m)
        a /= z
        b = rng.standard_exponential(m)
        b /= z
        out[start:stop] = np.floor(a).astype(np.int64) - np.floor(b).astype(np.int64)
    return out.reshape(scale.shape)
