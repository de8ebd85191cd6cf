"""Keyed counter-based noise (docs/science.md §8): right distributions, and numbers that ignore the
split."""

from __future__ import annotations

import numpy as np
import pytest

from engine import noise
from engine.core.errors import ValidationError
from engine.dp.distributions import discrete_gaussian_pmf, geometric_pmf
from engine.noise import keyed

N = 200_000


def _tv(sample: np.ndarray, pmf) -> float:
    """Total-variation distance between a sample's frequencies and a pmf on its support ±."""
    values, counts = np.unique(sample, return_counts=True)
    lo, hi = int(values.min()) - 3, int(values.max()) + 3
    support = np.arange(lo, hi + 1)
    freq = np.zeros(support.size)
    freq[values - lo] = counts / sample.size
    return 0.5 * float(np.abs(freq - pmf(support)).sum())


@pytest.mark.parametrize("sigma2", [0.05, 0.5, 4.0, 150.0])
def test_keyed_discrete_gaussian_matches_the_pmf(sigma2: float) -> None:
    keys = keyed.unit_keys(3, "TOTAL", np.arange(N, dtype=np.uint64))
    x = noise.keyed_discrete_gaussian(sigma2, keys, np.uint64(0))
    assert x.dtype == np.int64 and x.shape == (N,)
    # TV of an exact sampler at n = 200k stays well below 0.01 for these supports.
    assert _tv(x, lambda k: discrete_gaussian_pmf(k, sigma2)) < 0.012


@pytest.mark.parametrize("z", [0.1, 1.0, 3.0])
def test_keyed_geometric_matches_the_pmf(z: float) -> None:
    keys = keyed.unit_keys(3, "TOTAL", np.arange(N, dtype=np.uint64))
    x = noise.keyed_two_sided_geometric(z, keys, np.uint64(0))
    assert _tv(x, lambda k: geometric_pmf(k, z)) < 0.015


def test_values_depend_only_on_key_and_position() -> None:
    hashes = keyed.geounit_hashes(["Block"] * 50, [f"44007{i:06d}" for i in range(50)])
    keys = keyed.unit_keys(7, "DETAILED", hashes)[:, None]
    cells = np.arange(16, dtype=np.uint64)[None, :]
    whole = noise.keyed_discrete_gaussian(2.0, keys, cells)
    # Any subset, any order, any chunking: the same numbers.
    order = np.random.default_rng(0).permutation(50)
    shuffled = noise.keyed_discrete_gaussian(2.0, keys[order], cells)
    assert np.array_equal(shuffled, whole[order])
    parts = [noise.keyed_discrete_gaussian(2.0, keys[a:b], cells) for a, b in ((0, 7), (7, 50))]
    assert np.array_equal(np.vstack(parts), whole)
    alone = noise.keyed_discrete_gaussian(2.0, keys[13], np.uint64(5))
    assert alone == whole[13, 5]


def test_every_key_field_matters() -> None:
    base = keyed.unit_keys(1, "TOTAL", keyed.geounit_hashes(["County"], ["44001"]))
    for seed, query, level, unit in (
        (2, "TOTAL", "County", "44001"),
        (1, "VOTINGAGE", "County", "44001"),
        (1, "TOTAL", "Tract", "44001"),
        (1, "TOTAL", "County", "44003"),
    ):
        other = keyed.unit_keys(seed, query, keyed.geounit_hashes([level], [unit]))
        assert other[0] != base[0]
    # Field boundaries are unambiguous ("a", "bc") ≠ ("ab", "c").
    assert keyed.field_hash("a", "bc") != keyed.field_hash("ab", "c")


def test_bad_inputs_are_refused() -> None:
    keys = keyed.unit_keys(1, "TOTAL", np.arange(3, dtype=np.uint64))
    with pytest.raises(ValidationError, match="sigma2"):
        noise.keyed_discrete_gaussian(-1.0, keys, np.uint64(0))
    with pytest.raises(ValidationError, match="z must"):
        noise.keyed_two_sided_geometric(0.0, keys, np.uint64(0))
    with pytest.raises(ValidationError, match="seed"):
        keyed.unit_keys(-1, "TOTAL", np.arange(3, dtype=np.uint64))
    with pytest.raises(ValidationError, match="at most"):
        noise.keyed_discrete_gaussian(1.0, keys, np.uint64(1 << 33))


def _literal_discrete_gaussian(sigma2: float, keys: np.ndarray, index: np.ndarray) -> np.ndarray:
    """The module docstring's definition, transcribed literally (one value at a time, in Python
    integers and floats): the oracle the vectorised sampler must equal bit for bit."""
    mask = (1 << 64) - 1

    def mix(x: int) -> int:
        x ^= x >> 30
        x = (x * 0xBF58476D1CE4E5B9) & mask
        x ^= x >> 27
        x = (x * 0x94D049BB133111EB) & mask
        return x ^ (x >> 31)

    def uniform(key: int, counter: int) -> float:
        return (mix((mix(key) + (counter + 1) * 0x9E3779B97F4A7C15) & mask) >> 11) / 2.0**53

    out = []
    d = (1.0 + np.sqrt(1.0 + 16.0 * sigma2)) / 8.0
    for key, c in zip(keys.tolist(), index.tolist(), strict=True):
        attempt = 0
        while True:
            base = 3 * ((attempt << 32) + c)
            z = np.sqrt(-2.0 * np.log1p(-uniform(key, base))) * np.cos(
                2.0 * np.pi * uniform(key, base + 1)
            )
            e = -np.log1p(-uniform(key, base + 2))
            k = np.rint(z * np.sqrt(sigma2 + d))
            if e >= k * k / (2.0 * sigma2) - 0.5 * z * z + 1.0 / (8.0 * d):
                out.append(int(k))
                break
            attempt += 1
    return np.array(out, dtype=np.int64)


@pytest.mark.parametrize("sigma2", [0.04, 3.0, 250.0])
def test_vectorised_sampler_equals_the_definition(sigma2: float) -> None:
    """Chunks, in-place mixing and the once-per-value key mix change no value (more values than
    one chunk, so chunk boundaries are crossed; σ² = 0.04 rejects about half the proposals)."""
    rng = np.random.default_rng(5)
    n = keyed.CHUNK + 3_000
    keys = keyed.unit_keys(11, "CENRACE", rng.integers(0, 2**63, 40, dtype=np.uint64))
    k = keys[rng.integers(0, keys.size, n)]
    i = rng.integers(0, keyed.MAX_INDEX, n, dtype=np.uint64)
    fast = keyed.discrete_gaussian(sigma2, k, i)
    pick = np.concatenate(
        [np.arange(300), keyed.CHUNK - 150 + np.arange(300), n - np.arange(1, 200)]
    )
    assert np.array_equal(fast[pick], _literal_discrete_gaussian(sigma2, k[pick], i[pick]))
    # one σ² per value takes the other path: the same numbers
    per_value = keyed.discrete_gaussian(np.full(n, sigma2), k, i)
    assert np.array_equal(per_value, fast)
