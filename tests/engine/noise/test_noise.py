"""Tests of engine.noise: goodness of fit against the exact pmf, moments, symmetry, seeding, errors.

The reference pmfs and variances are those of :mod:`engine.dp.distributions` (docs/science.md §1,
§4). Every statistical test uses a fixed seed, so it is deterministic; the thresholds (p > 1e-3, 5
standard errors) are loose enough for a correct sampler and tight enough that a plainly rounded
Gaussian is rejected (checked by ``test_goodness_of_fit_detects_a_rounded_gaussian``).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.special import ndtr

from engine import noise
from engine.core.errors import PHExploreError, ValidationError
from engine.dp import distributions
from engine.noise import (
    dg_cell_table,
    dg_continuous,
    discrete_gaussian,
    discrete_gaussian_variance,
    fast_discrete_gaussian,
    noise_variance,
    two_sided_geometric,
    two_sided_geometric_variance,
)
from engine.noise._arguments import check_scale

SIGMAS = (0.5, 1.0, 3.0, 30.0, 300.0)
GEOMETRIC_Z = (0.05, 0.5, 2.0)
N_FAST = 1_000_000
N_EXACT = 20_000
ALPHA = 1e-3


# ----------------------------------------------------------------------------- helpers


def dg_pmf(sigma2: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda k: distributions.discrete_gaussian_pmf(k, sigma2)


def geo_pmf(z: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda k: distributions.geometric_pmf(k, z)


def chi_square_pvalue(
    draws: np.ndarray, pmf: Callable[[np.ndarray], np.ndarray], min_expected: float = 10.0
) -> float:
    """Chi-square test of integer draws against a symmetric pmf on the integers.

    Bins are single integers with expected count ≥ ``min_expected``; everything beyond is pooled into
    the two outermost bins (which then hold the tails).
    """
    n = draws.size
    reach = max(int(np.abs(draws).max()) + 1, 4)
    k = np.arange(-reach * 4, reach * 4 + 1)
    p = pmf(k)
    inner = k[n * p >= min_expected]
    lo, hi = int(inner.min()), int(inner.max())
    if lo == hi:  # almost all mass at one integer: test it against the two pooled tails
        lo, hi = lo - 1, hi + 1
    ks = np.arange(lo, hi + 1)
    expected = n * pmf(ks)
    tail = (1.0 - expected.sum() / n) / 2.0  # symmetric pmf: each tail holds half the rest
    expected[0] += n * tail
    expected[-1] += n * tail
    observed = np.bincount(np.clip(draws, lo, hi) - lo, minlength=ks.size).astype(np.float64)
    expected *= n / expected.sum()
    return float(stats.chisquare(observed, expected).pvalue)


def pmf_moments(sigma2: float) -> tuple[float, float]:
    """(variance, fourth moment) of N_Z(0, σ²) summed from the pmf."""
    sigma = math.sqrt(sigma2)
    k = np.arange(-math.ceil(40 * sigma) - 2, math.ceil(40 * sigma) + 3, dtype=np.float64)
    p = distributions.discrete_gaussian_pmf(k, sigma2)
    return float((k**2 * p).sum()), float((k**4 * p).sum())


def assert_moments(draws: np.ndarray, variance: float, fourth: float) -> None:
    n = draws.size
    x = draws.astype(np.float64)
    se_mean = math.sqrt(variance / n)
    se_var = math.sqrt((fourth - variance**2) / n)
    assert abs(x.mean()) < 5 * se_mean, (x.mean(), se_mean)
    assert abs((x**2).mean() - variance) < 5 * se_var, ((x**2).mean(), variance, se_var)


def assert_symmetric_tails(draws: np.ndarray, sd: float) -> None:
    for t in (0.5 * sd, sd, 2 * sd, 3 * sd):
        cut = max(1, math.ceil(t))
        upper = int((draws >= cut).sum())
        lower = int((draws <= -cut).sum())
        assert abs(upper - lower) <= 5 * math.sqrt(upper + lower + 1), (cut, upper, lower)


# ----------------------------------------------------------------------------- fast discrete Gaussian


@pytest.mark.parametrize("sigma", SIGMAS)
def test_fast_discrete_gaussian_fits_exact_pmf(sigma: float) -> None:
    s2 = sigma**2
    draws = discrete_gaussian(s2, N_FAST, np.random.default_rng(20261122))
    assert draws.dtype == np.int64 and draws.shape == (N_FAST,)
    assert chi_square_pvalue(draws, dg_pmf(s2)) > ALPHA
    variance, fourth = pmf_moments(s2)
    assert variance == pytest.approx(float(discrete_gaussian_variance(s2)), rel=1e-12)
    assert_moments(draws, variance, fourth)
    assert_symmetric_tails(draws, sigma)


@pytest.mark.parametrize("sigma", SIGMAS)
def test_continuous_test_sampler_fits_exact_pmf(sigma: float) -> None:
    """The closed-form-test sampler (used for large σ² and for rarely drawn σ²) on its own."""
    s2 = sigma**2
    draws = dg_continuous.sample(np.asarray(s2), N_FAST, np.random.default_rng(7))
    assert chi_square_pvalue(draws, dg_pmf(s2)) > ALPHA
    assert_moments(draws, *pmf_moments(s2))
    assert_symmetric_tails(draws, sigma)


@pytest.mark.parametrize("sigma", (0.2, 0.3, 0.5, 1.0, 3.0, 300.0))
def test_cell_table_sampler_fits_exact_pmf(sigma: float) -> None:
    s2 = sigma**2
    tables = dg_cell_table.build_tables(np.array([s2]))
    draws = dg_cell_table.sample(tables, None, N_FAST, np.random.default_rng(8))
    assert chi_square_pvalue(draws, dg_pmf(s2)) > ALPHA
    assert_moments(draws, *pmf_moments(s2))


def test_per_element_sigma2_routes_each_group_to_its_own_distribution() -> None:
    """A per-query σ² array mixing all three routes (the engines' case: few distinct σ²)."""
    values = np.array([0.25, 4.0, 1.0e6, 2.5, 20.0])
    counts = np.array([300_000, 300_000, 300_000, 50, 50])
    routes = fast_discrete_gaussian.route(values, counts)
    fdg = fast_discrete_gaussian
    assert list(routes) == [fdg.TABLE, fdg.TABLE, fdg.CONTINUOUS, fdg.CELL, fdg.CONTINUOUS]
    sigma2 = np.repeat(values, counts)[np.random.default_rng(1).permutation(counts.sum())]
    draws = discrete_gaussian(sigma2, None, np.random.default_rng(2))
    assert draws.shape == sigma2.shape
    for v in values[:3]:
        sub = draws[sigma2 == v]
        assert chi_square_pvalue(sub, dg_pmf(v)) > ALPHA, v
        assert_moments(sub, *pmf_moments(v))
    for v in values[3:]:
        assert np.abs(draws[sigma2 == v]).max() < 8 * math.sqrt(v)


@pytest.mark.parametrize("sigma", (0.3, 0.5, 1.0, 2.9))
def test_untabled_cell_sampler_fits_exact_pmf(sigma: float) -> None:
    s2 = sigma**2
    draws = dg_cell_table.sample_untabled(np.asarray(s2), 400_000, np.random.default_rng(9))
    assert chi_square_pvalue(draws, dg_pmf(s2)) > ALPHA
    assert_moments(draws, *pmf_moments(s2))


def test_many_distinct_tiny_sigma2_values_are_handled_without_tables() -> None:
    """10⁵ distinct σ² ≤ 0.01 each drawn once: the per-proposal route, acceptance ≈ 1 (not ≈ σ)."""
    sigma2 = np.linspace(1e-4, 1e-2, 100_000)
    assert (
        fast_discrete_gaussian.route(sigma2, np.ones_like(sigma2)) == fast_discrete_gaussian.CELL
    ).all()
    draws = discrete_gaussian(sigma2, None, np.random.default_rng(4))
    assert not draws.any()  # P(X ≠ 0) ≤ 2e^{−50} at σ² = 0.01
    mixed = np.tile([0.5, 1.5], 50_000)
    draws = discrete_gaussian(mixed + np.arange(mixed.size) * 1e-12, None, np.random.default_rng(5))
    for offset, s2 in enumerate((0.5, 1.5)):
        assert chi_square_pvalue(draws[offset::2], dg_pmf(s2)) > ALPHA


def test_goodness_of_fit_detects_a_rounded_gaussian() -> None:
    """The chi-square harness has power: rounding N(0, σ²) is not the discrete Gaussian."""
    rng = np.random.default_rng(3)
    for sigma in (0.5, 1.0):
        rounded = np.rint(rng.normal(0.0, sigma, N_FAST)).astype(np.int64)
        assert chi_square_pvalue(rounded, dg_pmf(sigma**2)) < 1e-10


def test_acceptance_table_is_the_exact_ratio_and_at_most_one() -> None:
    for sigma in (0.1, 0.5, 1.0, 3.0, 30.0, 300.0):
        s2 = sigma**2
        a = dg_cell_table.acceptance_table(s2)
        assert a[0] == pytest.approx(1.0) and a.max() <= 1.0 and (a >= 0).all()
        k = np.arange(a.size, dtype=np.float64)
        q = ndtr((k + 0.5) / sigma) - ndtr((k - 0.5) / sigma)
        # Σ_k q(k)·a(k) over all integers equals Z_σ·q(0) when a = p̃·q(0)/q.
        accepted = q[0] * a[0] + 2.0 * (q[1:] * a[1:]).sum()
        assert accepted == pytest.approx(dg_cell_table.acceptance_rate(s2), rel=1e-9)
        assert dg_cell_table.acceptance_rate(s2) >= 0.86


def test_continuous_acceptance_test_never_exceeds_one() -> None:
    """ln M = 1/(8d) bounds (|k|+½)²/(2s²) − k²/(2σ²) for every integer k (module docstring)."""
    for sigma in (0.1, 0.5, 1.0, 3.0, 30.0, 300.0):
        s2 = sigma**2
        d = dg_continuous.proposal_gap(s2)
        k = np.arange(0, math.ceil(50 * sigma) + 2, dtype=np.float64)
        log_ratio = (k + 0.5) ** 2 / (2 * (s2 + d)) - k**2 / (2 * s2)
        assert log_ratio.max() <= 1.0 / (8.0 * d) + 1e-12


# ----------------------------------------------------------------------------- two-sided geometric


@pytest.mark.parametrize("z", GEOMETRIC_Z)
def test_fast_geometric_fits_exact_pmf(z: float) -> None:
    draws = two_sided_geometric(z, N_FAST, np.random.default_rng(11))
    assert draws.dtype == np.int64
    assert chi_square_pvalue(draws, geo_pmf(z)) > ALPHA
    variance = distributions.geometric_variance(z)
    q = math.exp(-z)
    # Fourth moment of the two-sided geometric: 2q(1 + 10q + q²)/(1 − q)⁴.
    fourth = 2 * q * (1 + 10 * q + q**2) / (1 - q) ** 4
    assert_moments(draws, variance, fourth)
    assert_symmetric_tails(draws, math.sqrt(variance))


def test_geometric_with_per_element_scale() -> None:
    z = np.array([[0.1], [3.0]])
    draws = two_sided_geometric(z, (2, 400_000), np.random.default_rng(12))
    assert draws.shape == (2, 400_000)
    for row, zz in zip(draws, z[:, 0], strict=True):
        assert chi_square_pvalue(row, geo_pmf(zz)) > ALPHA


# ----------------------------------------------------------------------------- exact (OpenDP)


@pytest.mark.slow
@pytest.mark.parametrize("sigma", SIGMAS)
def test_exact_discrete_gaussian_fits_exact_pmf(sigma: float) -> None:
    pytest.importorskip("opendp")
    s2 = sigma**2
    draws = discrete_gaussian(s2, N_EXACT, None, method="exact")
    assert draws.dtype == np.int64 and draws.shape == (N_EXACT,)
    if sigma <= 30:
        assert chi_square_pvalue(draws, dg_pmf(s2)) > ALPHA
    else:  # 2·10⁴ draws over ~2000 integers: bin in groups so each bin is well filled
        width = 25
        assert (
            chi_square_pvalue(np.floor_divide(draws + width // 2, width), _binned_dg(s2, width))
            > ALPHA
        )
    assert_moments(draws, *pmf_moments(s2))
    assert_symmetric_tails(draws, sigma)


def _binned_dg(sigma2: float, width: int) -> Callable[[np.ndarray], np.ndarray]:
    """pmf of ⌊(X + width//2)/width⌋ for X ~ N_Z(0, σ²) (symmetric for odd width)."""

    def pmf(b: np.ndarray) -> np.ndarray:
        b = np.asarray(b)
        offsets = np.arange(width) - width // 2
        return distributions.discrete_gaussian_pmf(b[..., None] * width + offsets, sigma2).sum(-1)

    return pmf


@pytest.mark.slow
def test_exact_per_element_sigma2_and_geometric() -> None:
    pytest.importorskip("opendp")
    sigma2 = np.repeat([1.0, 100.0], 10_000).reshape(2, 10_000)
    draws = discrete_gaussian(sigma2, None, np.random.default_rng(0), method="exact")
    assert draws.shape == (2, 10_000)
    assert chi_square_pvalue(draws[0], dg_pmf(1.0)) > ALPHA
    assert chi_square_pvalue(draws[1], dg_pmf(100.0)) > ALPHA
    geo = two_sided_geometric(0.5, N_EXACT, None, method="exact")
    assert chi_square_pvalue(geo, geo_pmf(0.5)) > ALPHA


def test_exact_method_is_not_seeded() -> None:
    pytest.importorskip("opendp")
    a = discrete_gaussian(100.0, 1000, np.random.default_rng(5), method="exact")
    b = discrete_gaussian(100.0, 1000, np.random.default_rng(5), method="exact")
    assert not np.array_equal(a, b)


def test_exact_without_opendp_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opendp.prelude", None)
    with pytest.raises(noise.ExactSamplerUnavailable, match="pip install") as info:
        discrete_gaussian(1.0, 3, None, method="exact")
    assert isinstance(info.value, PHExploreError)


# ----------------------------------------------------------------------------- seeding and shapes


@pytest.mark.parametrize(
    "draw",
    [
        lambda rng: discrete_gaussian(2.0, 200_000, rng),
        lambda rng: discrete_gaussian(1.0e6, 200_000, rng),
        lambda rng: discrete_gaussian(np.linspace(0.1, 50.0, 1000), None, rng),
        lambda rng: two_sided_geometric(0.3, 200_000, rng),
    ],
)
def test_same_seed_same_output_different_seed_different_output(
    draw: Callable[[np.random.Generator], np.ndarray],
) -> None:
    a = draw(np.random.default_rng(42))
    b = draw(np.random.default_rng(42))
    c = draw(np.random.default_rng(43))
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_broadcasting_and_shapes() -> None:
    rng = np.random.default_rng(0)
    col = np.array([[1.0], [4.0], [9.0]])
    assert discrete_gaussian(col, (3, 4), rng).shape == (3, 4)
    assert discrete_gaussian(col, None, rng).shape == (3, 1)
    assert discrete_gaussian(2.0, None, rng).shape == ()
    assert discrete_gaussian(2.0, 0, rng).shape == (0,)
    assert discrete_gaussian(2.0, (2, 0), rng).shape == (2, 0)
    assert discrete_gaussian(2.0, np.int64(5), rng).shape == (5,)
    assert two_sided_geometric([0.5, 1.0], (7, 2), rng).shape == (7, 2)
    assert two_sided_geometric(0.5, 0, rng).dtype == np.int64
    assert discrete_gaussian(np.array([]), None, rng).shape == (0,)
    assert two_sided_geometric(np.ones((0, 3)), None, rng).shape == (0, 3)


@settings(max_examples=40, deadline=None)
@given(
    sigma2=st.lists(
        st.floats(min_value=1e-3, max_value=1e8, allow_nan=False), min_size=1, max_size=6
    ),
    repeat=st.integers(min_value=0, max_value=400),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_any_valid_sigma2_array_gives_int64_noise_of_its_shape(
    sigma2: list[float], repeat: int, seed: int
) -> None:
    arr = np.repeat(np.asarray(sigma2), repeat)
    draws = discrete_gaussian(arr, None, np.random.default_rng(seed))
    assert draws.dtype == np.int64 and draws.shape == arr.shape
    if arr.size:
        assert (np.abs(draws) <= np.ceil(40 * np.sqrt(arr)) + 1).all()


# ----------------------------------------------------------------------------- variances


def test_noise_variance_matches_the_distributions_module() -> None:
    s2 = np.array([[0.01, 0.25, 1.0], [2.0, 9.0, 1.0e4]])
    got = discrete_gaussian_variance(s2)
    assert got.shape == s2.shape
    want = np.vectorize(distributions.discrete_gaussian_variance)(s2)
    np.testing.assert_allclose(got, want, rtol=1e-14)
    assert got[0, 1] < 0.25  # smaller than σ² for small σ
    np.testing.assert_array_equal(noise_variance("discrete_gaussian", s2), got)
    z = np.array([0.05, 0.5, 2.0])
    np.testing.assert_allclose(
        two_sided_geometric_variance(z),
        [distributions.geometric_variance(v) for v in z],
        rtol=1e-12,
    )
    np.testing.assert_array_equal(
        noise_variance("two_sided_geometric", z), two_sided_geometric_variance(z)
    )
    with pytest.raises(ValidationError, match="unknown noise mechanism 'laplace'"):
        noise_variance("laplace", 1.0)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("sigma2", "message"),
    [
        (0.0, "sigma2 must be positive and finite"),
        (-1.0, "sigma2 must be positive and finite"),
        (float("nan"), "sigma2 must be positive and finite"),
        (float("inf"), "sigma2 must be positive and finite"),
        ([1.0, 2.0, -3.0], "first at index 2: -3"),
        (1.0e30, "must be at most 1e.* the scalar value is 1e"),
        (np.array([[1.0, 2.0], [3.0, np.nan]]), r"first at index \(1, 1\): nan"),
        ("abc", "must be a number"),
    ],
)
def test_bad_sigma2_is_a_clear_validation_error(sigma2: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        discrete_gaussian(sigma2, None, np.random.default_rng(0))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("size", "message"),
    [
        (-1, "size must not be negative"),
        ((3, -2), "size must not be negative"),
        (2.5, "non-negative integer"),
        (True, "non-negative integer"),
        ((2, "a"), "element 1"),
    ],
)
def test_bad_size_is_a_clear_validation_error(size: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        discrete_gaussian(1.0, size, np.random.default_rng(0))  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=message):
        two_sided_geometric(1.0, size, np.random.default_rng(0))  # type: ignore[arg-type]


def test_other_bad_arguments() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValidationError, match="does not broadcast to size"):
        discrete_gaussian(np.ones(3), (4,), rng)
    with pytest.raises(ValidationError, match="numpy.random.Generator"):
        discrete_gaussian(1.0, 3, 12345)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="numpy.random.Generator"):
        two_sided_geometric(1.0, 3, None)
    with pytest.raises(ValidationError, match="unknown sampling method 'slow'"):
        discrete_gaussian(1.0, 3, rng, method="slow")  # type: ignore[arg-type]
    for z in (0.0, -0.5, float("nan"), float("inf")):
        with pytest.raises(ValidationError, match="z must be positive and finite"):
            two_sided_geometric(z, 3, rng)
    with pytest.raises(ValidationError, match="z must be at least 1e-12"):
        two_sided_geometric(1e-15, 3, rng)
    with pytest.raises(ValidationError, match="must be positive and finite"):
        discrete_gaussian_variance([1.0, 0.0])


def test_check_scale_returns_flat_values_in_c_order() -> None:
    scale = check_scale(np.array([[1.0], [2.0]]), (2, 3), name="x", lower=0.0, upper=10.0, hint="")
    assert scale.shape == (2, 3) and scale.count == 6 and not scale.is_scalar
    np.testing.assert_array_equal(scale.values, [1, 1, 1, 2, 2, 2])


def test_constant_array_is_drawn_like_its_scalar() -> None:
    """An array holding one σ² repeated gives exactly the noise of the scalar (same stream)."""
    a = discrete_gaussian(np.full((4, 1), 2.0), (4, 1000), np.random.default_rng(6))
    b = discrete_gaussian(2.0, (4, 1000), np.random.default_rng(6))
    np.testing.assert_array_equal(a, b)
    scale = check_scale(np.full((4, 1), 2.0), (4, 3), name="x", lower=0.0, upper=10.0, hint="")
    assert scale.is_scalar and scale.count == 12
