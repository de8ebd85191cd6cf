"""Noise per level (PHS Algorithm 5) and its pure-DP twin: scale, reported VARIANCE, MOE."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.dp.distributions import geometric_variance
from engine.phsafe.measure import (
    DISCRETE_GAUSSIAN,
    TWO_SIDED_GEOMETRIC,
    Z_90,
    draw_noise,
    noise_spec,
    sensitivity,
)


def test_sensitivities() -> None:
    assert sensitivity("PH1_num", 10) == 22
    assert sensitivity("PH3", 6) == 14
    assert sensitivity("PH8_denom", None) == 2


def test_zcdp_variance_and_table10_moe() -> None:
    # PHS Table 10: PH1_num State A-G, τ = 10, ρ = 0.141622 → MOE 68; PH3 State A-G → 20
    spec = noise_spec("PH1_num", "state_A-G", 0.141622, "zcdp", 10)
    assert spec.distribution == DISCRETE_GAUSSIAN
    assert spec.variance == pytest.approx(22**2 / (2 * 0.141622))
    # Table 10's ρ are rounded to 6 digits, so 1.645·σ lands within 0.01 of the target
    assert Z_90 * math.sqrt(spec.variance) == pytest.approx(68, abs=0.01)
    assert spec.moe90_bound in (67, 68)
    assert spec.moe90 == 68
    ph3 = noise_spec("PH3", "state_A-G", 0.662976, "zcdp", 6)
    assert Z_90 * math.sqrt(ph3.variance) == pytest.approx(20, abs=0.01)
    assert noise_spec("PH8_denom", "usa_*", 0.000022, "zcdp", None).variance == pytest.approx(
        4 / (2 * 0.000022)
    )


def test_puredp_geometric_variance() -> None:
    spec = noise_spec("PH2", "usa_*", 1.0, "puredp", 10)
    assert spec.distribution == TWO_SIDED_GEOMETRIC
    assert spec.scale == pytest.approx(1.0 / 22)
    assert spec.variance == pytest.approx(geometric_variance(1.0 / 22))


@pytest.mark.parametrize("defn", ["zcdp", "puredp"])
def test_infinite_budget_means_no_noise(defn: str) -> None:
    spec = noise_spec("PH7", "state_*", math.inf, defn, 5)
    assert spec.noiseless and spec.variance == 0 and spec.moe90 == 0
    rng = np.random.default_rng(0)
    assert not draw_noise(spec, (3, 4), rng).any()


def test_zero_budget_is_not_measured() -> None:
    with pytest.raises(ValueError, match="positive budget"):
        noise_spec("PH7", "state_*", 0.0, "zcdp", 5)


def test_noise_draws_have_the_reported_variance() -> None:
    rng = np.random.default_rng(11)
    for defn, budget in (("zcdp", 0.5), ("puredp", 0.3)):
        spec = noise_spec("PH4", "usa_*", budget, defn, 2)
        draws = draw_noise(spec, (200_000,), rng)
        assert draws.dtype == np.int64
        assert abs(draws.var() / spec.variance - 1) < 0.03, defn
