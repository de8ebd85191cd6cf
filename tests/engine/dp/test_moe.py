"""Tests of engine.dp.moe and the MOE tables: PHSafe Table 10 and the TopDown σ of docs/science.md
§4."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.core.errors import ValidationError
from engine.dp.distributions import discrete_gaussian_central_mass, discrete_gaussian_variance
from engine.dp.moe import (
    moe_bound,
    moe_exact,
    phsafe_sensitivity,
    rho_for_moe,
    sigma2_for_rho,
    z_for_confidence,
)
from engine.dp.presets import load_phsafe_preset, load_topdown_preset
from phexplore.planning.moe_tables import phsafe_rows, phsafe_summary, topdown_rows, topdown_summary

# PHS Table 10: (table, geo, iteration) -> (unbounded, bounded) as printed.
TABLE_10 = {
    ("PH1_num", "Nation"): (0.002619, 0.005238),
    ("PH1_num", "State", "Unattributed"): (0.016371, 0.032742),
    ("PH1_num", "State", "A-G"): (0.141622, 0.283244),
    ("PH1_denom", "Nation"): (0.000022, 0.000044),
    ("PH1_denom", "State", "Unattributed"): (0.000135, 0.00027),
    ("PH1_denom", "State", "A-G"): (0.00117, 0.00234),
    ("PH3", "Nation"): (0.001061, 0.002122),
    ("PH3", "State", "Unattributed"): (0.006630, 0.01326),
    ("PH3", "State", "A-G"): (0.662976, 1.325952),
}
SAME_AS = {"PH4": "PH1_num", "PH7": "PH1_num", "PH2": "PH1_num", "PH5_denom": "PH1_denom",
           "PH8_denom": "PH1_denom", "PH6": "PH3"}  # fmt: skip


def _printed(table: str, geo: str, it: str) -> tuple[float, float]:
    base = SAME_AS.get(table, table)
    if geo == "Nation":
        return TABLE_10[(base, "Nation")]
    key = (base, "State", "A-G" if it == "A-G" else "Unattributed")
    return TABLE_10[key]


def test_table_10_every_rho_both_columns() -> None:
    budget = load_phsafe_preset("phsafe-2020")
    rows = phsafe_rows(budget)
    assert len(rows) == 6 * 7 + 2 * 2  # 7 tables at six levels, PH2/PH6 at two
    for row in rows:
        unb, bnd = _printed(row["table"], row["geo_level"], row["iteration_level"])
        assert row["rho_unbounded"] == pytest.approx(unb, abs=5e-7)
        assert row["rho_bounded"] == pytest.approx(bnd, abs=1e-6)
        # ρ follows from the MOE target with z = 1.645 to the printed 6 decimals.
        derived = rho_for_moe(row["moe_target"], row["sensitivity"])
        assert round(derived, 6) == pytest.approx(unb, abs=1e-12)
    summary = phsafe_summary(budget)
    assert round(summary["rho_total_unbounded"], 6) == 1.257281
    assert round(summary["rho_total_bounded"], 6) == 2.514562


def test_z_is_1645_at_90_percent() -> None:
    assert z_for_confidence(0.90) == 1.645
    assert z_for_confidence(0.95) == 1.96


def test_moe_bound_and_exact_are_consistent() -> None:
    for rho, delta in [(0.002619, 22), (0.141622, 22), (0.5, 2), (0.662976, 14)]:
        s2 = sigma2_for_rho(rho, delta)
        exact = moe_exact(s2)
        assert discrete_gaussian_central_mass(exact, s2) >= 0.90
        assert discrete_gaussian_central_mass(exact - 1, s2) < 0.90
        assert abs(exact - moe_bound(math.sqrt(s2))) <= 1


def test_exact_variance_is_below_sigma2_for_small_sigma() -> None:
    assert discrete_gaussian_variance(0.25) < 0.25
    assert discrete_gaussian_variance(100.0) == 100.0


def test_sensitivities() -> None:
    assert phsafe_sensitivity("PH1_num", 10) == 22
    assert phsafe_sensitivity("PH3", 6) == 14
    assert phsafe_sensitivity("PH8_denom", None) == 2
    with pytest.raises(ValidationError, match="PH2 needs a truncation threshold τ ≥ 1"):
        phsafe_sensitivity("PH2", 0)
    with pytest.raises(ValidationError, match="unknown PHSafe table 'PH9'"):
        phsafe_sensitivity("PH9", 3)


@pytest.mark.parametrize(
    ("level", "query", "sigma"),
    [
        ("State", "TOTAL", 1.10),
        ("County", "TOTAL", 2.17),
        ("Tract", "TOTAL", 2.47),
        ("Tract", "HISPANIC*CENRACE", 2.23),
        ("Block", "DETAILED", 3.18),
        ("Block", "TOTAL", 89.2),
    ],
)
def test_topdown_production_sigma(level: str, query: str, sigma: float) -> None:
    rows = topdown_rows(load_topdown_preset("topdown-2020-production"))
    row = next(
        r for r in rows if r["run"] == "persons" and r["geolevel"] == level and r["query"] == query
    )
    assert round(row["sigma"], 2 if sigma < 10 else 1) == sigma
    assert row["moe90"] == pytest.approx(1.645 * row["sigma"])


def test_topdown_summary_epsilon() -> None:
    summary = topdown_summary(load_topdown_preset("topdown-2020-production"))
    assert round(summary["runs"]["persons"]["epsilon"]["cks"], 2) == 17.14
    assert round(summary["runs"]["units"]["epsilon"]["cks"], 2) == 2.47
    assert round(summary["runs"]["persons"]["rho"], 4) == 2.5562


def test_pure_dp_topdown_rows_use_exact_geometric_moe() -> None:
    from engine.dp.distributions import geometric_pmf

    rows = topdown_rows(load_topdown_preset("e2e-2018-1940"))
    row = next(r for r in rows if r["geolevel"] == "County" and r["query"] == "DETAILED")
    assert row["budget"] == "epsilon"
    z = 1.0 * 0.25 * 0.1 / 2
    m = int(row["moe90"])
    mass = lambda k: float(geometric_pmf(np.arange(-k, k + 1), z).sum())  # noqa: E731
    assert mass(m) >= 0.90 > mass(m - 1)
