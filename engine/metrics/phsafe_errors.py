"""Error analysis of a PHSafe run against the truth: noise vs truncation, per cell and per level.

PHS §7.1 notes that the MOEs PHSafe is tuned with cover only the noise; truncation adds an error
that depends on the data. With T = the untruncated true count, T_τ = the count after truncation at τ
(what PHSafe measures) and X = the noisy count, every basis cell's error splits exactly into

    total error X − T  =  noise error (X − T_τ)  +  truncation error (T_τ − T).

Per table × population-group level this module reports, over all cells and repeated noise trials
(the join runs once; only the noise is redrawn): MAE of the total, noise and truncation errors, the
mean signed truncation error (a bias, ≤ 0), the empirical noise variance and 90% MOE (smallest m
with at least 90% of |noise| ≤ m) next to the analytic VARIANCE and exact MOE, and the empirical
coverage of the analytic MOE (docs/science.md §5, "Empirical MOE coverage"); and the truncation
error at one scale with the noise (per 1,000 persons, projected to full scale).

Metrics run no engine: the inputs are plain arrays and frames — the truth before and after
truncation (an engine diagnostic), the noisy estimates of every trial and the analytic noise of
each level — assembled by the run pipeline (:mod:`engine.runs.phsafe`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from engine.core.errors import ValidationError


@dataclass(frozen=True)
class LevelTruth:
    """One table at one population-group level: its truth, estimates and analytic noise.

    ``true`` (T) and ``true_truncated`` (T_τ) have one value per basis cell (any shape, the same
    for both); ``estimates`` the noisy counts X of every trial, shaped (trials, *true.shape), or
    None (a non-private run); ``analytic`` the level's noise as planned — ``budget``,
    ``sensitivity``, ``variance``, ``moe90`` (exact 90% MOE) and ``moe90_bound`` — or None.
    """

    table: str
    level: str
    true: np.ndarray
    true_truncated: np.ndarray
    estimates: np.ndarray | None = None
    analytic: Mapping[str, float] | None = None


def mean_absolute(values: np.ndarray) -> float:
    """Mean of |values| (NaN for an empty array)."""
    return float(np.abs(values).mean()) if values.size else float("nan")


def empirical_moe(noise: np.ndarray, confidence: float = 0.90) -> int:
    """Smallest integer m with a share ≥ ``confidence`` of |noise| ≤ m (the empirical 90% MOE)."""
    if noise.size == 0:
        return 0
    a = np.sort(np.abs(noise).reshape(-1))
    k = int(np.ceil(confidence * a.size)) - 1
    return int(a[max(k, 0)])


def cell_errors(cells: Iterable[tuple[pd.DataFrame, np.ndarray | None]]) -> pd.DataFrame:
    """Per basis cell of one trial: true, true_truncated, noisy and the three error components.

    ``cells``: per level, the frame of its basis cells (identifying columns, ``true`` and
    ``true_truncated``) and that trial's noisy counts in the frame's row order (None: non-private).
    """
    frames = []
    for basis, noisy in cells:
        frame = basis.copy()
        frame["truncation_error"] = frame["true_truncated"] - frame["true"]
        if noisy is not None:
            frame["noisy"] = np.asarray(noisy).reshape(-1)
            frame["noise_error"] = frame["noisy"] - frame["true_truncated"]
            frame["total_error"] = frame["noisy"] - frame["true"]
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def level_summary(levels: Iterable[LevelTruth]) -> pd.DataFrame:
    """Per table × level, over all cells and trials: MAEs, empirical vs analytic variance and MOE."""
    rows = []
    for level in levels:
        true = np.asarray(level.true)
        truncated = np.asarray(level.true_truncated)
        trunc_err = (truncated - true).reshape(-1)
        row: dict[str, object] = {
            "table": level.table,
            "level": level.level,
            "cells": int(true.size),
            "true_total": int(true.sum()),
            "mae_truncation": mean_absolute(trunc_err),
            "mean_truncation_error": float(trunc_err.mean()) if trunc_err.size else float("nan"),
            "cells_truncated": int((trunc_err != 0).sum()),
        }
        if level.estimates is not None and level.analytic is not None:
            estimates = np.asarray(level.estimates)
            noise = (estimates - truncated[None, ...]).reshape(estimates.shape[0], -1)
            total = noise + trunc_err[None, :]
            spec = level.analytic
            row |= {
                "trials": int(noise.shape[0]),
                "budget": spec["budget"],
                "sensitivity": spec["sensitivity"],
                "mae": mean_absolute(total),
                "mae_noise": mean_absolute(noise),
                "analytic_variance": spec["variance"],
                "empirical_variance": float((noise.astype(np.float64) ** 2).mean())
                if noise.size
                else 0.0,
                "analytic_moe": spec["moe90"],
                "analytic_moe_bound": spec["moe90_bound"],
                "empirical_moe": empirical_moe(noise),
                "coverage": float((np.abs(noise) <= spec["moe90"]).mean()) if noise.size else 1.0,
                "total_error_coverage": float((np.abs(total) <= spec["moe90"]).mean())
                if total.size
                else 1.0,
            }
        rows.append(row)
    return pd.DataFrame(rows)


PER_PERSONS = 1_000
"""Truncation error is also reported per this many persons of the run."""


def truncation_at_scale(
    level_errors: pd.DataFrame, n_persons: int, scale: float | None
) -> pd.DataFrame:
    """Truncation error at one scale with the noise: per 1,000 persons and projected to full scale.

    Truncation drops the persons of households larger than τ, so its error grows in proportion to
    the population; the noise of a cell does not depend on the population (PHS §7.1). A sample
    holding the fraction ``scale`` of a full population (e.g. 0.001 for the 1/1000 synthetic US)
    therefore shows a truncation error ``scale`` times its full-scale size next to full-scale noise.
    Per table × level (``level_errors`` from :func:`level_summary`) this returns:
    ``mean_truncation_error`` and ``mae_truncation`` as measured (sample scale), the same per 1,000
    persons of the run (``…_per_1000``), and — when ``scale`` is declared — projected to full scale
    (``…_projected`` = measured / scale; a projection that assumes the same household-size mix),
    beside the noise's ``analytic_moe`` (any scale) and ``projected_bias_over_moe`` = |projected
    mean truncation error| / analytic MOE. Without a declared scale the projected columns are NaN
    (the data are taken as the full population).
    """
    if isinstance(n_persons, bool) or not isinstance(n_persons, int | np.integer) or n_persons < 1:
        raise ValidationError(f"n_persons must be a positive whole number; got {n_persons!r}")
    if scale is not None and not 0 < float(scale) <= 1:
        raise ValidationError(
            f"the sample's scale must satisfy 0 < scale ≤ 1 (e.g. 0.001 for 1/1000); got {scale!r}"
        )
    columns = ["table", "level", "cells", "mean_truncation_error", "mae_truncation"]
    out = level_errors[[c for c in columns if c in level_errors.columns]].copy()
    per = PER_PERSONS / float(n_persons)
    out["mean_truncation_error_per_1000"] = out["mean_truncation_error"] * per
    out["mae_truncation_per_1000"] = out["mae_truncation"] * per
    factor = np.nan if scale is None else 1.0 / float(scale)
    out["projection_factor"] = factor
    out["mean_truncation_error_projected"] = out["mean_truncation_error"] * factor
    out["mae_truncation_projected"] = out["mae_truncation"] * factor
    moe = (
        level_errors["analytic_moe"].to_numpy(np.float64)
        if "analytic_moe" in level_errors.columns
        else np.full(len(out), np.nan)
    )
    out["analytic_moe"] = moe
    with np.errstate(divide="ignore", invalid="ignore"):
        out["projected_bias_over_moe"] = np.abs(out["mean_truncation_error_projected"]) / moe
    return out.reset_index(drop=True)
