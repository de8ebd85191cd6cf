"""Tests of engine.dp.accounting against the papers' printed numbers and OpenDP's CKS conversion."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from engine.core.errors import ValidationError
from engine.dp.accounting import (
    bounded_from_unbounded,
    conversions,
    delta_for_epsilon,
    delta_grid,
    epsilon_bun_steinke,
    epsilon_curves,
    epsilon_for_delta,
)


@pytest.mark.parametrize(("rho", "eps"), [(1.095, 11.14), (0.1885, 4.36)])
def test_bun_steinke_reproduces_tda_section_8_1(rho: float, eps: float) -> None:
    assert round(epsilon_bun_steinke(rho, 1e-10), 2) == eps


@pytest.mark.parametrize(("rho", "eps"), [(293764 / 114921, 17.14), ((3379 / 12343) ** 2, 2.47)])
def test_cks_reproduces_production_certificates(rho: float, eps: float) -> None:
    assert round(epsilon_for_delta(rho, 1e-10, "cks"), 2) == eps


@pytest.mark.parametrize("rho", [0.01, 0.1885, 1.0, 2.5562, 10.0])
@pytest.mark.parametrize("delta", [1e-12, 1e-10, 1e-6, 1e-3])
def test_cks_matches_opendp(rho: float, delta: float) -> None:
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    scale = 1.0 / math.sqrt(2.0 * rho)
    meas = dp.m.make_gaussian(
        dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=scale
    )
    approx = dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(meas), delta)
    ref_eps, _ = approx.map(1.0)
    assert epsilon_for_delta(rho, delta, "cks") == pytest.approx(ref_eps, abs=1e-4)


@pytest.mark.parametrize("conv", ["bun_steinke", "cks", "gaussian"])
def test_delta_and_epsilon_are_inverse(conv: str) -> None:
    for rho in (0.05, 1.0, 5.0):
        for delta in (1e-12, 1e-8, 1e-4):
            eps = epsilon_for_delta(rho, delta, conv)
            assert delta_for_epsilon(rho, eps, conv) == pytest.approx(delta, rel=1e-6)


def test_conversions_are_ordered() -> None:
    # The tight CKS bound never exceeds Bun–Steinke; the Gaussian profile is the tightest.
    for rho in (0.1, 1.0, 2.56):
        c = conversions(rho, delta=1e-10)
        assert c["gaussian"]["epsilon"] < c["cks"]["epsilon"] < c["bun_steinke"]["epsilon"]


def test_curves_are_vectorised_and_fast() -> None:
    grid = delta_grid(points=200)
    epsilon_curves(2.56, grid)  # warm-up
    start = time.perf_counter()
    curves = epsilon_curves(2.56, grid)
    elapsed = time.perf_counter() - start
    assert set(curves) == {"bun_steinke", "cks", "gaussian"}
    assert all(v.shape == (200,) and np.all(np.diff(v) < 0) for v in curves.values())
    assert elapsed < 0.2  # generous bound; measured ≈ 5 ms (docs/analytic.md)


def test_bounded_neighbours_double_rho() -> None:
    assert bounded_from_unbounded(1.257281) == pytest.approx(2.514562)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rho": 0.0, "delta": 1e-10}, "ρ must be a positive, finite number; got 0.0"),
        ({"rho": -1.0, "delta": 1e-10}, "ρ must be a positive, finite number; got -1.0"),
        ({"rho": math.inf, "delta": 1e-10}, "ρ must be a positive, finite number"),
        ({"rho": 1.0, "delta": 0.0}, "δ must satisfy 0 < δ < 1; got 0.0"),
        ({"rho": 1.0, "delta": 1.5}, "δ must satisfy 0 < δ < 1; got 1.5"),
        ({"rho": 1.0, "epsilon": -2.0}, "ε must be a finite number ≥ 0; got -2.0"),
    ],
)
def test_invalid_inputs_have_clear_messages(kwargs: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        conversions(**kwargs)
