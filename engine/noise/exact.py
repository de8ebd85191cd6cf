"""Release-grade integer noise from OpenDP's exact samplers (optional dependency ``opendp``).

OpenDP's ``make_gaussian`` on an integer vector domain samples the discrete Gaussian N_Z(0, σ²) with
the exact rational-arithmetic algorithm of Canonne, Kamath & Steinke 2020 (Algorithms 1–3;
docs/science.md §1), and ``make_laplace`` on integers samples the discrete Laplace P(k) ∝
e^{−|k|/b}, which is the two-sided geometric G(z) of docs/science.md §4 with b = 1/z. Both draw
their random bits in the Rust core through OpenDP's ``fill_bytes`` (OpenSSL's CSPRNG under its
``use-openssl`` feature, otherwise the OS generator), so they cannot be seeded or reproduced.

Why OpenDP rather than our own implementation: it is the peer-reviewed, maintained implementation
of CKS 2020 (with proofs), it runs in Rust, several times faster than the Census Bureau's
pure-Python reference sampler (measured: docs/noise.md), and a second pure-Python copy would be
both slower and less scrutinised.

One caveat, stated where a user sees it (``docs/noise.md``): OpenDP takes the scale as a
float64 standard deviation, so the sampled variance is ``float(√σ²)²``, which differs from σ² by at
most a few units in the 16th significant digit.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from engine.core.errors import PHExploreError
from engine.noise._arguments import ScaleArray

# Vectors handed to OpenDP per call (its input and output are Python lists).
CHUNK = 1 << 16


class ExactSamplerUnavailable(PHExploreError, RuntimeError):
    """method='exact' was requested but OpenDP is not installed."""


def discrete_gaussian(scale: ScaleArray) -> np.ndarray:
    """Exact N_Z(0, σ²) draws, σ² = ``scale.values``; one OpenDP measurement per distinct σ²."""
    dp = _opendp()
    return _per_distinct_value(
        scale,
        lambda s2: dp.m.make_gaussian(
            dp.vector_domain(dp.atom_domain(T="i64")),
            dp.l2_distance(T="i64"),
            scale=math.sqrt(s2),
        ),
    )


def two_sided_geometric(scale: ScaleArray) -> np.ndarray:
    """Exact G(z) draws, z = ``scale.values``, as OpenDP discrete Laplace noise with b = 1/z."""
    dp = _opendp()
    return _per_distinct_value(
        scale,
        lambda z: dp.m.make_laplace(
            dp.vector_domain(dp.atom_domain(T="i64")),
            dp.l1_distance(T="i64"),
            scale=1.0 / z,
        ),
    )


def _per_distinct_value(scale: ScaleArray, build: Callable[[float], Any]) -> np.ndarray:
    out = np.empty(scale.count, dtype=np.int64)
    if scale.count == 0:
        return out.reshape(scale.shape)
    if scale.is_scalar:
        groups = [(float(scale.values), np.arange(scale.count))]
    else:
        values, inverse = np.unique(scale.values, return_inverse=True)
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(values.size + 1))
        groups = [(float(v), order[bounds[i] : bounds[i + 1]]) for i, v in enumerate(values)]
    for value, idx in groups:
        measurement = build(value)
        for start in range(0, idx.size, CHUNK):
            part = idx[start : start + CHUNK]
            out[part] = np.fromiter(measurement([0] * part.size), dtype=np.int64, count=part.size)
    return out.reshape(scale.shape)


def _opendp() -> ModuleType:
    try:  # optional dependency (the exact extra): imported when an exact draw is asked for
        import opendp.prelude as dp
    except ImportError:
        raise ExactSamplerUnavailable(
            "method='exact' uses OpenDP's exact samplers, which are not installed; run "
            "`pip install 'opendp>=0.10'` (or `pip install phexplore[exact]`), or use method='fast'"
        ) from None
    dp.enable_features("contrib")
    return dp
