"""PF's appendix check (Supplementary Appendix Table SA1): geometric noise on 2,663 counts → EPL ≈ ε."""

from __future__ import annotations

import pytest

from engine.core.errors import ValidationError
from engine.metrics.epl_check import SA1_COUNTS, geometric_epl_check
from engine.metrics.epl_settings import PF_FUNCTION_DEFAULT
from engine.metrics.reference import PF_TABLE_SA1

CHECKED = [row for row in PF_TABLE_SA1 if row[0] >= 0.01]  # ε ≥ 0.01: fast grids


@pytest.mark.parametrize(("epsilon", "pf_mean", "pf_low", "pf_high"), CHECKED)
def test_reproduces_table_sa1(
    epsilon: float, pf_mean: float, pf_low: float, pf_high: float
) -> None:
    check = geometric_epl_check(epsilon, seeds=range(40))
    assert check.n_residuals == SA1_COUNTS == 2663 and check.n_seeds == 40
    # Our mean over 40 seeds lies inside PF's printed 2.5–97.5% range and within 10% of ε …
    assert pf_low <= check.mean <= pf_high
    assert check.mean == pytest.approx(epsilon, rel=0.10)
    assert check.mean == pytest.approx(pf_mean, rel=0.10)
    # … and the across-seed sampling interval covers ε and overlaps PF's.
    assert check.low <= epsilon <= check.high
    assert check.low < pf_high and pf_low < check.high


def test_function_defaults_do_not_reproduce_sa1() -> None:
    """p = 99, m = 1.5 (the old default) overshoots ε several-fold on the same residuals."""
    check = geometric_epl_check(0.1, seeds=range(20), settings=PF_FUNCTION_DEFAULT)
    assert check.mean > 3 * 0.1


def test_bad_arguments() -> None:
    with pytest.raises(ValidationError):
        geometric_epl_check(0.0)
    with pytest.raises(ValidationError):
        geometric_epl_check(0.1, seeds=())
