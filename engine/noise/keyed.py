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
from collections.abc import Iterator, Sequence

import numpy as np
from numpy.typing import ArrayLike

from engine.core.errors import ValidationError
from engine.noise.dg_continuous import acceptance_threshold, proposal_gap

GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_ATTEMPT = np.uint64(1 << 32)
MAX_INDEX = (1 << 32) - 1
"""Largest position of a value inside one unit (cells × trials of one unit stay below 2³²)."""
MAX_ATTEMPTS = 100_000
"""Rejection attempts after which the sampler stops with an error (acceptance ≥ 3% for σ ≥ 0.03)."""
_INV_2_53 = 1.0 / float(1 << 53)
CHUNK = 1 << 16
"""Values drawn at a time: the arrays of a chunk stay in the CPU's cache
(``benchmarks/keyed_sampler.py``: 3.2–5.4× the whole-array sampler, the same integers)."""


def mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser of uint64 values (a bijection; wraps modulo 2⁶⁴)."""
    return _mix64_inplace(np.asarray(x, dtype=np.uint64).copy())


def _mix64_inplace(z: np.ndarray) -> np.ndarray:
    """:func:`mix64` of a uint64 array the caller owns, overwriting it (no temporaries beyond one
    shift buffer: the sampler mixes tens of millions of values per run)."""
    t = np.empty_like(z)
    with np.errstate(over="ignore"):
        np.right_shift(z, np.uint64(30), out=t)
        z ^= t
        z *= _M1
        np.right_shift(z, np.uint64(27), out=t)
        z ^= t
        z *= _M2
        np.right_shift(z, np.uint64(31), out=t)
        z ^= t
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
    return _uniforms_mixed(mix64(keys), counters)


def _uniforms_mixed(mixed_keys: np.ndarray, counters: np.ndarray) -> np.ndarray:
    """:func:`uniforms` from ``mix64(keys)`` (computed once per value, not once per draw)."""
    x = np.asarray(counters, dtype=np.uint64) + np.uint64(1)
    with np.errstate(over="ignore"):
        x *= GAMMA
        x += mixed_keys
    x = _mix64_inplace(x)
    x >>= np.uint64(11)
    return x.astype(np.float64) * _INV_2_53


def _exponential(mixed_keys: np.ndarray, counters: np.ndarray) -> np.ndarray:
    """Standard exponentials −log(1 − u) of :func:`_uniforms_mixed` (1 − u ∈ (0, 1]: finite)."""
    e = np.log1p(-_uniforms_mixed(mixed_keys, counters))
    return np.negative(e, out=e)


def _chunks(n: int) -> Iterator[slice]:
    """The slices of ``n`` values, :data:`CHUNK` at a time."""
    for start in range(0, n, CHUNK):
        yield slice(start, min(start + CHUNK, n))


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
    """int64 N_Z(0, σ²) of each value (key, index) with its σ² (all three broadcast together).

    Arithmetic is arranged for speed (each key mixed once, σ²'s constants computed once when σ²
    is one value, the first attempt without gathers); every value is the same double as the
    definition in the module docstring gives (``tests/engine/noise/test_keyed.py`` checks it
    against a literal transcription)."""
    s2, k, idx, shape = _broadcast(sigma2, keys, index)
    if s2.size and (not np.all(np.isfinite(s2)) or np.any(s2 <= 0)):
        raise ValidationError(
            "σ² must be finite and positive for every keyed draw (docs/science.md §1)"
        )
    one = s2.size > 0 and s2.min() == s2.max()
    s2_one = np.float64(s2[0]) if one else None
    out = np.empty(s2.size, dtype=np.int64)
    for c in _chunks(s2.size):
        out[c] = _dg_chunk(s2_one if one else s2[c], mix64(k[c]), idx[c])
    return out.reshape(shape)


def _dg_chunk(s2: np.ndarray | np.float64, mk: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The keyed discrete Gaussian of one chunk: σ² (one value, or one per value), mixed keys,
    positions."""
    one = np.ndim(s2) == 0
    out = np.empty(mk.size, dtype=np.int64)
    pending: np.ndarray | None = None  # None: every value (the first attempt)
    attempt = np.uint64(0)
    while pending is None or pending.size:
        if int(attempt) >= MAX_ATTEMPTS:
            raise ValidationError("the keyed discrete Gaussian did not accept within the limit")
        kp = mk if pending is None else mk[pending]
        sp = s2 if one or pending is None else s2[pending]
        base = idx if pending is None else idx[pending]
        base = (attempt * _ATTEMPT + base) * np.uint64(3)
        z = np.log1p(-_uniforms_mixed(kp, base))
        z *= -2.0
        np.sqrt(z, out=z)
        base += np.uint64(1)
        z *= np.cos(2.0 * np.pi * _uniforms_mixed(kp, base))
        base += np.uint64(1)
        e = _exponential(kp, base)
        d = proposal_gap(sp)
        kk = np.rint(z * np.sqrt(sp + d))
        accept = e >= acceptance_threshold(kk, z, sp, d)
        if pending is None:
            out[:] = kk
            pending = np.flatnonzero(~accept)
        else:
            out[pending[accept]] = kk[accept]
            pending = pending[~accept]
        attempt += np.uint64(1)
    return out


def two_sided_geometric(z: ArrayLike, keys: ArrayLike, index: ArrayLike) -> np.ndarray:
    """int64 two-sided geometric G(z) of each value (key, index) with its scale z."""
    zz, k, idx, shape = _broadcast(z, keys, index)
    if zz.size and (not np.all(np.isfinite(zz)) or np.any(zz <= 0)):
        raise ValidationError(
            "z must be finite and positive for every keyed draw (docs/science.md §4)"
        )
    out = np.empty(zz.size, dtype=np.int64)
    for c in _chunks(zz.size):
        mk, zc, base = mix64(k[c]), zz[c], idx[c] * np.uint64(3)
        a = np.floor(_exponential(mk, base) / zc)
        b = np.floor(_exponential(mk, base + np.uint64(1)) / zc)
        out[c] = a - b
    return out.reshape(shape)
