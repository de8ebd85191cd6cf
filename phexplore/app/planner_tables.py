"""The planners' tables and curves, cached (docs/app.md, "Planners"): no science here.

PHSafe's MOE rows and grid (PHS §7.1), TopDown's per-level rows with the published-count
prediction (docs/science.md §7, docs/prediction.md), the MOE-for-ρ curve and the (ε, δ) curves
(docs/science.md §1), as pandas frames for the pages, wrapped with ``st.cache_data`` keyed by
plain JSON-ready values so reruns stay fast.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from engine.dp.accounting import delta_grid, epsilon_curves
from engine.dp.budget import LEVEL_KEYS, PHSafeBudget, TopDownAllocation, allowed_levels
from engine.dp.conversions import CONVERSIONS, DEFAULT_DELTA
from engine.dp.moe import PHSAFE_DENOMINATOR_TABLES, PHSAFE_TABLES, moe_for_rho
from engine.prediction import PLANNER_MAX_FAMILIES, PLANNER_MAX_UNITS, shipped_profile_for
from engine.prediction.tables import add_post_processed, predictions_for_runs
from phexplore.app.naming import display_frame, table_label
from phexplore.planning.moe_tables import phsafe_rows, phsafe_summary, topdown_rows, topdown_summary

# ------------------------------------------------------------------ cached tables


def phsafe_frames(
    budget: PHSafeBudget, delta: float = DEFAULT_DELTA, confidence: float | None = None
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Per-(table, level) rows of :func:`phexplore.planning.targets.moe_tables.phsafe_rows` as a frame, and totals."""
    return pd.DataFrame(phsafe_rows(budget, confidence)), phsafe_summary(budget, delta)


def phsafe_grid_frame(
    budget: PHSafeBudget, mode: str, rows: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Planner grid: one row per table, τ and one column per level (ρ, or the MOE it targets).

    Cells of skipped or non-existent levels are empty. In ``"moe"`` mode a cell shows its MOE
    target, or else the MOE bound of its ρ — taken from ``rows`` (the output of
    :func:`phexplore.planning.targets.moe_tables.phsafe_rows` for ``budget``) when given, so nothing is recomputed.
    """
    bounds: dict[tuple[str, str], float] = {}
    if mode == "moe":
        if rows is None:
            rows = pd.DataFrame(phsafe_rows(budget))
        if not rows.empty:
            bounds = {
                (t, k): float(m)
                for t, k, m in zip(rows["table"], rows["level_key"], rows["moe_bound"], strict=True)
            }
    out = []
    for table in PHSAFE_TABLES:
        tau = None if table in PHSAFE_DENOMINATOR_TABLES else budget.tau.get(table)
        row: dict[str, Any] = {"τ": tau}
        targets = budget.moe_targets.get(table, {})
        for level in LEVEL_KEYS:
            rho = budget.rho(table, level)
            if level not in allowed_levels(table) or rho <= 0:
                row[level] = None
            elif mode == "rho":
                row[level] = rho
            elif level in targets:
                row[level] = float(targets[level])
            else:
                row[level] = bounds.get((table, level))
        out.append(row)
    return pd.DataFrame(out, index=pd.Index([table_label(t) for t in PHSAFE_TABLES], name="Table"))


def phsafe_display(rows: pd.DataFrame) -> pd.DataFrame:
    """The MOE-table columns for display, named by :func:`phexplore.app.naming.display_frame`."""
    if rows.empty:
        return rows
    columns = [
        "table",
        "geo_level",
        "iteration_level",
        "moe_exact",
        "moe_bound",
        "moe_target",
        "sigma",
        "rho_unbounded",
        "rho_bounded",
        "tau",
        "sensitivity",
    ]
    return display_frame(rows[columns])


def topdown_frames(
    runs: Mapping[str, TopDownAllocation],
    delta: float = DEFAULT_DELTA,
    confidence: float = 0.90,
    n_states: int | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Per-(run, geolevel, query) rows of :func:`phexplore.planning.targets.moe_tables.topdown_rows`, and totals
    (with ``rho_spent``), for a geography of ``n_states`` states (default: by allocation)."""
    return (
        pd.DataFrame(topdown_rows(runs, confidence, n_states)),
        topdown_summary(runs, delta, n_states),
    )


@st.cache_data(show_spinner=False, max_entries=256)
def _post_processed_cached(
    runs_json: str, confidence: float, n_states: int | None = None
) -> dict[str, Any]:
    runs = {
        name: TopDownAllocation.from_dict(data, name=data.get("name"))
        for name, data in json.loads(runs_json).items()
    }
    predictions = predictions_for_runs(
        runs,
        shipped_profile_for(runs, n_states=n_states),
        confidence=confidence,
        max_units=PLANNER_MAX_UNITS,
        max_families=PLANNER_MAX_FAMILIES,
    )
    notes = sorted({n for p in predictions.values() for n in p.notes})
    rows = topdown_rows(runs, confidence, n_states)
    return {"rows": add_post_processed(rows, predictions), "notes": notes}


def topdown_post_processed(
    runs: Mapping[str, TopDownAllocation], confidence: float = 0.90, n_states: int | None = None
) -> tuple[pd.DataFrame, list[str]]:
    """:func:`topdown_frames` rows plus the predicted accuracy of the published counts
    (docs/science.md §7: ``post_processed_rmse``, ``post_processed_moe``, and whether each row is
    in the validated range, ``post_processed_holds`` / ``post_processed_reason``) on the shipped
    count profile of the allocation's schema (cached), and the prediction's notes."""

    payload = json.dumps({k: a.to_dict() for k, a in runs.items()}, sort_keys=True)
    out = _post_processed_cached(payload, confidence, n_states)
    return pd.DataFrame(out["rows"]), list(out["notes"])


@st.cache_data(show_spinner=False, max_entries=64)
def moe_curve(sensitivity: float, confidence: float = 0.90) -> pd.DataFrame:
    """MOE bound ⌊zσ⌋ over a log grid of ρ for one sensitivity Δ (cached per Δ and confidence)."""
    grid = np.logspace(-5, 1, 160)
    moes = [moe_for_rho(float(r), sensitivity, confidence) for r in grid]
    return pd.DataFrame({"rho": grid, "moe_bound": moes})


@st.cache_data(show_spinner=False, max_entries=128)
def epsilon_curve_frame(rho: float, lo: float = 1e-15, hi: float = 1e-2) -> pd.DataFrame:
    """Long frame (delta, epsilon, conversion) of the (ε, δ) curves of one ρ (cached)."""
    grid = delta_grid(lo, hi, 120)
    curves = epsilon_curves(rho, grid)
    parts = [
        pd.DataFrame({"delta": grid, "epsilon": np.asarray(curves[c]), "conversion": c})
        for c in CONVERSIONS
    ]
    return pd.concat(parts, ignore_index=True)
