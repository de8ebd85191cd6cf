"""PHSafe runs as tidy metric inputs, and PHSafe configurations rescaled to a total budget (PHS §3–§7).

Used by :mod:`engine.runs.experiments` for PHSafe grids (moved from ``engine.metrics``, which runs
no engine):

* :func:`phsafe_tidy` — the measured basis cells of a run (derived cells left out) as the tidy
  comparison table: ``geolevel`` = the population-group level (``state_A-G`` …), ``geounit`` =
  region and iteration (``36/D``), ``query`` = the table (``PH7``), ``cell``, ``true`` (the CEF count,
  before truncation) and ``estimate`` (the noisy count). MAE and EPL then come out per table × level.
* :func:`phsafe_noise_frame` — the same cells with the noise alone (noisy − truncated true count),
  its variance and the noise scale for MOE coverage: σ² = Δ²/(2ρ_i) for zCDP (PHS Lemma 3), or the
  geometric z = ε_i/Δ for pure DP.
* :func:`scaled_config` — a configuration whose per-table, per-level budgets are multiplied so that
  they sum to a given total (unbounded ρ, or ε; PHS Thm 1–2), keeping every share and τ.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from engine.core.errors import ValidationError
from engine.phsafe.config import PHSafeConfig


def _measured(result: Any) -> pd.DataFrame:
    frame = result.measurements
    if frame.empty:
        raise ValidationError("the PHSafe run has no measured cells (non-private run?)")
    return frame[~frame["derived"].astype(bool)]


def _geounit(frame: pd.DataFrame) -> pd.Series:
    return frame["region_id"].astype(str) + "/" + frame["iteration_code"].fillna("").astype(str)


def phsafe_tidy(result: Any) -> pd.DataFrame:
    """Tidy (geolevel, geounit, query, cell, true, estimate) of a private run's measured cells."""
    frame = _measured(result)
    return pd.DataFrame(
        {
            "geolevel": frame["level"].astype(str).to_numpy(),
            "geounit": _geounit(frame).to_numpy(),
            "query": frame["table"].astype(str).to_numpy(),
            "cell": frame["cell"].astype(str).to_numpy(),
            "true": frame["true"].to_numpy(float),
            "estimate": frame["noisy"].to_numpy(float),
        }
    )


def phsafe_noise_frame(result: Any, mechanism: str) -> pd.DataFrame:
    """Measured cells with ``noisy``, ``true`` (= truncated count), ``variance`` and noise ``scale``."""
    frame = _measured(result)
    budget = frame["budget"].to_numpy(float)
    delta = frame["sensitivity"].to_numpy(float)
    if mechanism == "zcdp":
        scale = delta**2 / (2.0 * budget)
    elif mechanism == "puredp":
        scale = budget / delta
    else:
        raise ValidationError(f"mechanism must be 'zcdp' or 'puredp'; got {mechanism!r}")
    return pd.DataFrame(
        {
            "geolevel": frame["level"].astype(str).to_numpy(),
            "query": frame["table"].astype(str).to_numpy(),
            "noisy": frame["noisy"].to_numpy(float),
            "true": frame["true_truncated"].to_numpy(float),
            "variance": frame["variance"].to_numpy(float),
            "scale": scale,
        }
    )


def scaled_config(config: Any, total: float) -> Any:
    """``config`` with every budget multiplied so that the budgets sum to ``total``."""
    current = config.total_budget()
    if not math.isfinite(current) or current <= 0:
        raise ValidationError(
            f"cannot rescale a PHSafe configuration whose total budget is {current}; "
            "give finite, positive budgets"
        )
    factor = float(total) / current
    budgets = {
        table: {level: float(value) * factor for level, value in levels.items()}
        for table, levels in config.privacy_budget.items()
    }
    return PHSafeConfig(
        privacy_budget=budgets,
        tau=dict(config.tau),
        state_filter=list(config.state_filter),
        privacy_defn=config.privacy_defn,
        extra=dict(config.extra),
    )
