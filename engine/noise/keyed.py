"""Noise that does not depend on how work is split: a counter-based generator keyed by
(seed, level, geounit, query) (docs/science.md §8).

Every noisy value is a pure function of its key and its position: the key of a *unit* — one query
of one geounit of one level, for one seed — and the index of the value inside the unit (the cell,
and for PHSafe the trial). So a rerun, a retried task, any number of workers, any chunking and any
backend draw the same numbers for the same seed, whatever order the units are measured in.

Construction. A unit key is ``mix(H(level, geounit) ⊕ mix(H(seed, query)))`` with ``H`` the first 8
bytes of BLAKE2b of the UTF-8 fields (stable across processes, platforms and Python's hash
randomisation) and ``mix`` the SplitMix64 finaliser (Steele, Lea & Flood 2014), a bijection of 64-bit
integers. Uniform number ``c`` of a unit is ``mix(mix(key) + (c + 1)·γ)`` (γ = the golden-ratio
constant), i.e. position ``c`` of the SplitMix64 sequence started at the unit's key — a
counter-based generator (Salmon et al. 2011), evaluated for millions of cells at once in NumPy.
The top 53 bits give a double in [0, 1).

Samplers (exact up to floating-point rounding, like the seeded NumPy samplers of
:mod:`engine.noise`):

* :func:`discrete_gaussian` — N_Z(0, σ²) (docs/science.md §1) by the rounded-Gaussian rejection test
  of :mod:`engine.noise.dg_continuous`: attempt ``t`` of value ``c`` uses counters
  ``3·(t·2³² + c) + {0, 1, 2}`` (Box–Muller normal from two uniforms, an exponential from the
  third). Rejected values are redrawn with the next attempt, so the accepted value depends only on
  (key, c).
* :func:`two_sided_geometric` — G(z), P(k) ∝ e^{−z|k|} (docs/science.md §4): ⌊E₁/z⌋ − ⌊E₂/z⌋ with
  E₁, E₂ exponentials from counters ``3c`` and ``3c + 1``.

The exact OpenDP samplers (:mod:`engine.noise.exact`) stay available for release-grade noise; they
draw from OS randomness and are not keyed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from engine.core.errors import ValidationError
from engine.noise.dg_continuous import proposal_gap

GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_ATTEMPT = np.uint64(1 << 32)
MAX_INDEX = (1 << 32) - 1
"""Largest position of a value inside one unit (cells × trials of one unit stay below 2³²)."""
MAX_ATTEMPTS = 100_000
"""Rejection attempts after which the sampler stops with an error (acceptance ≥ 3% for σ ≥ 0.03)."""
_INV_2_53 = 1.0 / float(1 << 53)


def mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser of uint64 values (a bijection; wraps modulo 2⁶⁴)."""
    z = np.asarray(x, dtype=np.uint64).copy()
    with np.errstate(over="ignore"):
        z ^= z >> np.uint64(30)
        z *= _M1
        z ^= z >> np.uint64(27)
        z *= _M2
        z ^= z >> np.uint64(31)
    return z


def field_hash(*fields: object) -> int:
    """64-bit BLAKE2b of the fields (as text, separated by an unambiguous byte)."""
    data = "\x1f".join(str(f) for f in fields).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def geounit_hashes(levels: Sequence[object], geounits: Sequence[object]) -> np.ndarray:
    """``H(level, geounit)`` of every geounit (uint64), computed once per run and spine."""
    if len(levels) != len(geounits):
        raise ValidationError("every geounit needs its level to be keyed")
    return np.fromiter(
        (field_hash(lv, g) for lv, g in zip(levels, geounits, strict=True)),
        dtype=np.uint64,
        count=len(geounits),
    )


def check_seed(seed: object) -> int:
    """The seed as a non-negative int (the key's first field)."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or int(seed) < 0:
        raise ValidationError(f"seed must be a non-negative whole number; got {seed!r}")
    return int(seed)


def unit_keys(seed: int, query: str, geounit_hash: ArrayLike) -> np.ndarray:
    """Keys of the units (seed, level, geounit, query) for ``geounit_hash`` = H(level, geounit)."""
    sq = mix64(np.array([field_hash("seed", check_seed(seed), "query", query)], dtype=np.uint64))
    return mix64(np.asarray(geounit_hash, dtype=np.uint64) ^ sq[0])


def uniforms(keys: np.ndarray, counters: np.ndarray) -> np.ndarray:
    """Doubles in [0, 1): number ``counters[i]`` of the stream keyed ``keys[i]``."""
    with np.errstate(over="ignore"):
        x = mix64(keys) + (np.asarray(counters, dtype=np.uint64) + np.uint64(1)) * GAMMA
    return (mix64(x) >> np.uint64(11)).astype(np.float64) * _INV_2_53


def _exponential(keys: np.ndarray, counters: np.ndarray) -> np.ndarray:
    return -np.log1p(-uniforms(keys, counters))  # 1 − u ∈ (0, 1]: finite


def _broadcast(
    scale: ArrayLike, keys: ArrayLike, index: ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, ...]]:
    k = np.asarray(keys, dtype=np.uint64)
    i = np.asarray(index, dtype=np.uint64)
    s = np.asarray(scale, dtype=np.float64)
    shape = np.broadcast_shapes(k.shape, i.shape, s.shape)
    k, i, s = (np.broadcast_to(a, shape).reshape(-1) for a in (k, i, s))
    if i.size and int(i.max()) > MAX_INDEX:
        raise ValidationError(f"a unit holds at most {MAX_INDEX + 1:,} values (cells × trials)")
    return s, k, i, shape


def discrete_gaussian(sigma2: ArrayLike, keys: ArrayLike, index: ArrayLike) -> np.ndarray:
    """int64 N_Z(0, σ²) of each value (key, index) with its σ² (all three broadcast together)."""
    s2, k, idx, shape = _broadcast(sigma2, keys, index)
    if s2.size and (not np.all(np.isfinite(s2)) or np.any(s2 <= 0)):
        raise ValidationError(
            "σ² must be finite and positive for every keyed draw (docs/science.md §1)"
        )
    out = np.empty(s2.size, dtype=np.int64)
    pending = np.arange(s2.size)
    attempt = np.uint64(0)
    while pending.size:
        if int(attempt) >= MAX_ATTEMPTS:
            raise ValidationError("the keyed discrete Gaussian did not accept within the limit")
        kp, sp = k[pending], s2[pending]
        base = (attempt * _ATTEMPT + idx[pending]) * np.uint64(3)
        u1 = uniforms(kp, base)
        u2 = uniforms(kp, base + np.uint64(1))
        z = np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(2.0 * np.pi * u2)
        e = _exponential(kp, base + np.uint64(2))
        d = proposal_gap(sp)
        kk = np.rint(z * np.sqrt(sp + d))
        accept = e >= kk * kk / (2.0 * sp) - 0.5 * z * z + 1.0 / (8.0 * d)
        out[pending[accept]] = kk[accept].astype(np.int64)
        pending = pending[~accept]
        attempt += np.uint64(1)
    return out.reshape(shape)


def two_sided_geometric(z: ArrayLike, keys: ArrayLike, index: ArrayLike) -> np.ndarray:
    """int64 two-sided geometric G(z) of each value (key, index) with its scale z."""
    zz, k, idx, shape = _broadcast(z, keys, index)
    if zz.size and (not np.all(np.isfinite(zz)) or np.any(zz <= 0)):
        raise ValidationError(
            "z must be finite and positive for every keyed draw (docs/science.md §4)"
        )
    base = idx * np.uint64(3)
    a = np.floor(_exponential(k, base) / zz)
    b = np.floor(_exponential(k, base + np.uint64(1)) / zz)
    return (a - b).astype(np.int64).reshape(shape)
