"""Discrete Gaussian by rounding N(0, σ²) and accepting with a per-integer probability table.

Target: N_Z(0, σ²), P(k) ∝ p̃(k) = exp(−k²/(2σ²)) (docs/science.md §1; Canonne, Kamath & Steinke
2020, Def. 1). Proposal: K = round(σZ), Z ~ N(0, 1), whose pmf is the Gaussian mass of the cell [k −
½, k + ½],

    q(k) = Φ((k + ½)/σ) − Φ((k − ½)/σ).

Accept K with probability a(k) = p̃(k)·q(0)/q(k) (standard discrete rejection sampling): accepted
draws have pmf ∝ q(k)·a(k) ∝ p̃(k), exactly the discrete Gaussian. a(k) ≤ 1 because

    q(k)/p̃(k) = (σ√(2π))⁻¹ ∫_{−½}^{½} e^{−u²/(2σ²)} cosh(ku/σ²) du

increases with |k|, so p̃/q is largest at k = 0 where a(0) = 1. The acceptance rate is Z_σ·q(0), with
Z_σ = Σ_k p̃(k): 0.87 at σ = 0.5, 0.96 at σ = 1 and 1 − O(σ⁻²) beyond — far above the continuous test
of :mod:`engine.noise.dg_continuous` for small σ, and the test is a table lookup plus one uniform.

The table holds a(k) for |k| < L = ⌊39σ⌋ + 2, computed in log space (``scipy.special.log_ndtr``) so
it is accurate deep in the tails, followed by one entry 0 at |k| = L that every proposal beyond the
table is clipped to: such a proposal needs |Z| > 39, an event of probability below 1e−330 (and beyond
what NumPy's normal generator can produce), and is simply redrawn. The output
is therefore N_Z(0, σ²) up to floating-point rounding of the table and of σZ.

:func:`sample_untabled` is the same scheme with a(k) evaluated per proposal (two ``log_ndtr`` calls)
instead of looked up, for σ² values drawn too rarely to be worth a table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import erf, log_ndtr

from engine.dp.distributions import discrete_gaussian_normaliser

# Proposals are tabulated out to |Z| ≤ 39 standard deviations (see module docstring).
_Z_REACH = 39.0
CHUNK = 1 << 16


@dataclass(frozen=True)
class CellTables:
    """Acceptance tables for several σ² values, concatenated: a(|k|) of value i is
    ``accept[offset[i] + min(|k|, length[i])]``, with ``accept[offset[i] + length[i]] = 0``."""

    sigma: np.ndarray
    sigma2: np.ndarray
    offset: np.ndarray
    length: np.ndarray
    accept: np.ndarray


def table_length(sigma2: float) -> int:
    """Number of entries |k| = 0 … L − 1 tabulated for one σ²."""
    return int(math.floor(_Z_REACH * math.sqrt(sigma2))) + 2


def log_acceptance(k_abs: np.ndarray, sigma: np.ndarray | float) -> np.ndarray:
    """ln a(k) = −k²/(2σ²) + ln q(0) − ln q(k) for |k| = ``k_abs`` (elementwise with ``sigma``)."""
    k = np.asarray(k_abs, dtype=np.float64)
    upper = log_ndtr(-(k - 0.5) / sigma)  # ln P(Z > (k − ½)/σ)
    lower = log_ndtr(-(k + 0.5) / sigma)  # ln P(Z > (k + ½)/σ)
    log_q = upper + np.log(-np.expm1(lower - upper))
    log_q0 = np.log(erf(0.5 / (np.sqrt(2.0) * sigma)))
    return np.minimum(-(k * k) / (2.0 * np.square(sigma)) + log_q0 - log_q, 0.0)


def acceptance_table(sigma2: float) -> np.ndarray:
    """a(k) = p̃(k)·q(0)/q(k) for k = 0 … L − 1 (see module docstring)."""
    return np.exp(log_acceptance(np.arange(table_length(sigma2)), math.sqrt(sigma2)))


def acceptance_rate(sigma2: float) -> float:
    """P(one proposal is accepted) = Σ_k q(k)·a(k) = Z_σ·q(0)."""

    q0 = math.erf(0.5 / math.sqrt(2.0 * sigma2))
    return discrete_gaussian_normaliser(sigma2) * q0


def build_tables(sigma2_values: np.ndarray) -> CellTables:
    """Tables for each of the (distinct) ``sigma2_values``."""
    parts = [np.append(acceptance_table(float(v)), 0.0) for v in sigma2_values]
    length = np.array([p.size - 1 for p in parts], dtype=np.intp)
    offset = np.concatenate([[0], np.cumsum(length + 1)[:-1]]).astype(np.intp)
    s2 = np.asarray(sigma2_values, dtype=np.float64)
    return CellTables(np.sqrt(s2), s2, offset, length, np.concatenate(parts))


def sample(
    tables: CellTables, group: np.ndarray | None, n: int, rng: np.random.Generator
) -> np.ndarray:
    """n draws; draw j uses table ``group[j]`` (``group=None``: one table for all draws)."""
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, CHUNK):
        stop = min(start + CHUNK, n)
        g = None if group is None else group[start:stop]
        out[start:stop] = _sample_chunk(tables, g, stop - start, rng)
    return out


def _sample_chunk(
    tables: CellTables, group: np.ndarray | None, n: int, rng: np.random.Generator
) -> np.ndarray:
    k = np.empty(n, dtype=np.float64)
    pending: np.ndarray | None = None  # indices still to draw; None means all of them
    while True:
        m = n if pending is None else pending.size
        if group is None:
            sigma, length, offset = tables.sigma[0], tables.length[0], None
        else:
            g = group if pending is None else group[pending]
            sigma, length, offset = tables.sigma[g], tables.length[g], tables.offset[g]
        kk = rng.standard_normal(m)
        kk *= sigma
        np.rint(kk, out=kk)
        idx = np.abs(kk).astype(np.intp)
        np.minimum(idx, length, out=idx)  # beyond the table: the 0 entry, always rejected
        if group is not None:
            idx += offset
        rejected = rng.random(m) >= tables.accept.take(idx)
        if pending is None:
            k[:] = kk
            pending = np.flatnonzero(rejected)
        else:
            k[pending] = kk
            pending = pending[rejected]
        if pending.size == 0:
            return k.astype(np.int64)


def sample_untabled(sigma2: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """n draws with a(k) evaluated per proposal instead of looked up; ``sigma2`` is 0-d or length n.

    For σ² values drawn too rarely to pay for a table (and too small for the continuous test's
    acceptance rate, which falls like σ as σ → 0).
    """
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, CHUNK):
        stop = min(start + CHUNK, n)
        sigma = np.sqrt(sigma2 if sigma2.ndim == 0 else sigma2[start:stop])
        m = stop - start
        k = np.empty(m, dtype=np.float64)
        pending: np.ndarray | None = None
        while pending is None or pending.size:
            s = sigma if sigma.ndim == 0 or pending is None else sigma[pending]
            size = m if pending is None else pending.size
            kk = np.rint(rng.standard_normal(size) * s)
            rejected = rng.random(size) >= np.exp(log_acceptance(np.abs(kk), s))
            if pending is None:
                k[:] = kk
                pending = np.flatnonzero(rejected)
            else:
                k[pending] = kk
                pending = pending[rejected]
        out[start:stop] = k
    return out
