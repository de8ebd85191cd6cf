"""PHSafe error analysis (PHS §7.1, docs/science.md §5) from plain truth, estimates and analytic
noise."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from engine.core.errors import ValidationError
from engine.metrics.phsafe_errors import (
    LevelTruth,
    cell_errors,
    empirical_moe,
    level_summary,
    mean_absolute,
    truncation_at_scale,
)

TRUE = np.array([10, 4, 0])
TRUNCATED = np.array([8, 4, 0])  # truncation dropped 2 persons of cell 0
NOISE = np.array([[1, -2, 0], [3, 0, -1]])  # two trials
ANALYTIC = {"budget": 0.5, "sensitivity": 2, "variance": 4.0, "moe90": 2, "moe90_bound": 3}


def test_errors_split_into_noise_and_truncation() -> None:
    basis = pd.DataFrame({"table": "PH1_num", "cell": [0, 1, 2], "true": TRUE})
    basis["true_truncated"] = TRUNCATED
    frame = cell_errors([(basis, TRUNCATED + NOISE[0])])
    assert frame["truncation_error"].tolist() == [-2, 0, 0]
    assert frame["noise_error"].tolist() == NOISE[0].tolist()
    assert (frame["total_error"] == frame["noise_error"] + frame["truncation_error"]).all()
    assert "noisy" not in basis  # the input is left as it was
    assert "noisy" not in cell_errors([(basis, None)])  # a non-private run: truncation only


def test_level_summary_compares_empirical_with_analytic_noise() -> None:
    level = LevelTruth("PH1_num", "usa_*", TRUE, TRUNCATED, TRUNCATED + NOISE, ANALYTIC)
    row = level_summary([level]).iloc[0]
    assert row["cells"] == 3 and row["true_total"] == 14 and row["trials"] == 2
    assert row["mae_truncation"] == pytest.approx(2 / 3)
    assert row["mean_truncation_error"] == pytest.approx(-2 / 3)
    assert row["cells_truncated"] == 1
    assert row["mae_noise"] == pytest.approx(7 / 6)
    assert row["mae"] == pytest.approx((1 + 2 + 0 + 1 + 0 + 1) / 6)  # noise − 2 on cell 0
    assert row["empirical_variance"] == pytest.approx((1 + 4 + 0 + 9 + 0 + 1) / 6)
    assert row["empirical_moe"] == 3  # the 6th of 6 sorted |noise| = 0,0,1,1,2,3
    assert row["coverage"] == pytest.approx(5 / 6)  # |noise| ≤ 2
    assert row["analytic_moe"] == 2 and row["analytic_variance"] == 4.0
    bare = level_summary([LevelTruth("PH1_num", "usa_*", TRUE, TRUNCATED)]).iloc[0]
    assert "mae_noise" not in bare.index


def test_empirical_moe_and_mean_absolute_edge_cases() -> None:
    assert empirical_moe(np.array([], dtype=np.int64)) == 0
    assert empirical_moe(np.arange(-10, 11)) == 9  # 19 of 21 values have |x| ≤ 9
    assert np.isnan(mean_absolute(np.array([])))


def test_truncation_at_scale_projects_only_truncation() -> None:
    """Truncation grows with population, noise does not: per 1,000 persons and ×1/scale."""
    le = pd.DataFrame(
        {
            "table": ["PH1_num"],
            "level": ["usa_*"],
            "cells": [1],
            "mean_truncation_error": [-123.0],
            "mae_truncation": [123.0],
            "analytic_moe": [500],
        }
    )
    out = truncation_at_scale(le, 308_746, 0.001).iloc[0]
    assert out["mean_truncation_error_per_1000"] == pytest.approx(-123 / 308.746)
    assert out["mean_truncation_error_projected"] == pytest.approx(-123_000)
    assert out["analytic_moe"] == 500  # the noise MOE is not scaled
    assert out["projected_bias_over_moe"] == pytest.approx(246)
    bare = truncation_at_scale(le, 308_746, None).iloc[0]
    assert np.isnan(bare["mean_truncation_error_projected"])
    with pytest.raises(ValidationError, match="scale"):
        truncation_at_scale(le, 10, 2.0)
    with pytest.raises(ValidationError, match="n_persons"):
        truncation_at_scale(le, 0, None)
