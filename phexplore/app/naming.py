"""Human-readable names of tables, population-group levels and columns — one place for every page.

The planners, Run, Results, Scenarios and Budget-session pages and the HTML report all show the
names produced here, so "PH1_num" is "PH1 numerator" and ``state_A-G`` is "State · A-G" everywhere,
and no table shows a snake_case column. Table and level names follow PHS §3.2 (Table 10); column
names say what the number is and its unit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pandas as pd

from engine.dp.budget.phsafe import LEVEL_LABELS

_TABLE_PARTS = {"num": "numerator", "denom": "denominator"}

COLUMN_LABELS: dict[str, str] = {
    "rho_spent": "ρ spent on noisy measurements",
    "status": "Measured?",
    # PHSafe MOE rows (phexplore.planning.targets.moe_tables.phsafe_rows)
    "table": "Table",
    "geo_level": "Geography",
    "iteration_level": "Population group",
    "level_key": "Level",
    "level": "Level",
    "cell": "Table · level",
    "tau": "τ (persons per household)",
    "sensitivity": "Sensitivity Δ",
    "rho_unbounded": "ρ (unbounded)",
    "rho_bounded": "ρ (bounded, 2×)",
    "sigma": "σ (persons)",
    "moe_target": "MOE target (90%)",
    "moe_bound": "MOE bound ⌊zσ⌋",
    "moe_exact": "MOE exact (90%)",
    "ratio": "MOE / target",
    "binding": "Binding target",
    # TopDown MOE rows (phexplore.planning.targets.moe_tables.topdown_rows)
    "run": "Run",
    "universe": "Universe",
    "geolevel": "Geolevel",
    "query": "Query group",
    "cells": "Cells",
    "budget": "Budget kind",
    "rho_query": "ρ of the query",
    "share_level": "Level share c",
    "share_query": "Query share d",
    "moe90": "90% MOE (persons)",
    "post_processed_rmse": "Published count RMSE (predicted, persons)",
    "post_processed_moe": "Published count 90% MOE (predicted, persons)",
    "post_processed_holds": "Published count: within the validated range",
    "post_processed_reason": "Published count: why not validated",
    "validity": "Why not validated",
    "rho": "ρ",
    "epsilon": "ε",
    "delta": "δ",
    # run metrics (engine.metrics)
    "mae": "MAE per cell (persons; mean over geounit × cell)",
    "tda_mae": "Absolute error, TDA's definition (persons; Σ over the query's cells, mean over geounits)",
    "this_run": "This run (persons)",
    "tda": "TDA, published (persons)",
    "ratio_to_tda": "This run ÷ TDA",
    "tda_count": "TDA's geounits in class",
    "this_run_mae": "This run: mean |error| (persons)",
    "this_run_mean_error": "This run: mean signed error (persons)",
    "size_class": "Size class (true count)",
    "median_ae": "Median absolute error per cell (persons)",
    "n_cells": "Cells (geounit × query cell)",
    "rmse": "Root mean squared error (persons)",
    "measured_rmse": "Measured RMSE (persons)",
    "predicted_rmse": "Predicted RMSE (persons)",
    "mean_signed_error": "Mean signed error (persons)",
    "quintile": "Blau-index quintile",
    "blau": "Blau index",
    "epl": "Empirical privacy loss",
    "epl_low": "EPL interval, low",
    "epl_high": "EPL interval, high",
    "n_residuals": "Residuals",
    "n": "Count",
    "estimate": "Estimate (persons)",
    "true": "True count (persons)",
    "mae_noise": "Noise MAE",
    "mae_truncation": "Truncation MAE",
    "mean_truncation_error": "Truncation bias per cell (sample scale)",
    "mean_truncation_error_per_1000": "Truncation bias per 1,000 persons",
    "mae_truncation_per_1000": "Truncation MAE per 1,000 persons",
    "projection_factor": "Projection factor (1 / sample scale)",
    "mean_truncation_error_projected": "Truncation bias, projected to full scale",
    "mae_truncation_projected": "Truncation MAE, projected to full scale",
    "projected_bias_over_moe": "|Projected bias| / MOE",
    "ri_sigma": "RI RACEETH σ per group",
    "production_cell_sigma": "Production HISPANIC × CENRACE σ per cell",
    "production_sigma_two_or_more": "Production σ, Two or more races (57 cells)",
    "production_sigma_hispanic": "Production σ, Hispanic (63 cells)",
    "ri_votingage_sigma": "RI σ, VOTINGAGE 18+ (all measurements combined)",
    "production_votingage_sigma": "Production σ, VOTINGAGE 18+ (all measurements combined)",
    "ri_hispanic_sigma": "RI σ, Hispanic (all measurements combined)",
    "production_hispanic_combined_sigma": "Production σ, Hispanic (all measurements combined)",
    "analytic_moe": "Analytic MOE (90%)",
    "empirical_moe": "Empirical MOE (90%)",
    "trials": "Trials",
    "unit": "Geounit",
    "kind": "Kind",
    "scale": "Budget scale",
    "parameter": "Budget or sampling fraction",
    "design": "Design",
    "error": "Error (persons)",
    # scenario comparison (phexplore.planning.targets.scenarios.compare)
    "measure": "Measure",
    "difference": "Difference (B − A)",
    "relative_difference": "Relative difference (B / A − 1)",
}


CONVERSION_SHORT: dict[str, str] = {
    "bun_steinke": "Bun–Steinke",
    "cks": "CKS",
    "gaussian": "Gaussian profile",
}
"""Short names of the ρ → (ε, δ) conversions for table cells and columns."""


SPINE_ORDER: tuple[str, ...] = (
    "US",
    "State",
    "AIAN_State",
    "AIAN_Area",
    "County",
    "Tract_Group",
    "Tract",
    "Optimized_Block_Group",
    "Block_Group",
    "Block",
)
"""Geolevels from the root down (TDA §3, SPN §3–§4): the order every table and chart shows them in."""


def spine_order(levels: Iterable[str], spine: Iterable[str] | None = None) -> list[str]:
    """``levels`` (each once) from the root down, by :data:`SPINE_ORDER`; a level it does not know
    sits after the level that precedes it in ``spine`` (e.g. a run's allocation geolevels), else
    at the end in the order given."""
    known = {lv: float(i) for i, lv in enumerate(SPINE_ORDER)}
    rank = dict(known)
    previous = -0.5
    for level in spine or ():
        if level in known:
            previous = known[level]
        elif level not in rank:
            previous += 0.01
            rank[level] = previous
    unique = list(dict.fromkeys(str(lv) for lv in levels))
    last = float(len(SPINE_ORDER))
    return sorted(unique, key=lambda lv: (rank.get(lv, last), unique.index(lv)))


def geolevel_label(level: str) -> str:
    """``"Block_Group"`` → "Block group", ``"US"`` → "US" (words, as on the spine)."""
    parts = str(level).split("_")
    return " ".join(
        [parts[0], *(p if p.isupper() and len(p) > 1 else p.lower() for p in parts[1:])]
    )


def measure_label(text: str) -> str:
    """``"ε (bun_steinke)"`` → ``"ε (Bun–Steinke)"``: conversion keys inside a label spelled out."""
    for key, short in CONVERSION_SHORT.items():
        text = text.replace(f"({key})", f"({short})")
    return text


def table_label(table: str) -> str:
    """``"PH1_num"`` → ``"PH1 numerator"``, ``"PH5_denom"`` → ``"PH5 denominator"``, else as is."""
    base, _, part = str(table).partition("_")
    if part in _TABLE_PARTS:
        return f"{base} {_TABLE_PARTS[part]}"
    return str(table)


def level_label(key: str) -> str:
    """``"state_A-G"`` → ``"State · A-G"`` (unknown keys unchanged)."""
    if key in LEVEL_LABELS:
        geo, it = LEVEL_LABELS[key]
        return f"{geo} · {it}"
    return str(key)


def short_level_label(key: str) -> str:
    """``"state_A-G"`` → "State A-G", ``"usa_*"`` → "Nation" (Unattributed = everyone): a column
    header that fits a grid of six levels at 1366×768 (the full name goes in its help)."""
    if key in LEVEL_LABELS:
        geo, it = LEVEL_LABELS[key]
        return geo if it == "Unattributed" else f"{geo} {it}"
    return str(key)


def cell_label(table: str, level: str) -> str:
    """``("PH1_num", "state_*")`` → ``"PH1 numerator · State · Unattributed"``."""
    return f"{table_label(table)} · {level_label(level)}"


def column_label(name: str) -> str:
    """A column's display name: words with the unit; unknown snake_case names spelled out."""
    if name in COLUMN_LABELS:
        return COLUMN_LABELS[name]
    text = str(name).replace("_", " ").strip()
    if text[:1].isascii():  # "ε bun steinke" must not become "Ε" (a capital epsilon reads as E)
        return text[:1].upper() + text[1:]
    return text or str(name)


def display_frame(
    frame: pd.DataFrame,
    *,
    extra: Mapping[str, str] | None = None,
    drop: Iterable[str] = (),
) -> pd.DataFrame:
    """A copy of ``frame`` for display: table and level values and all column names readable.

    ``extra`` overrides column names (e.g. scenario names for ``moe_a``/``moe_b``); ``drop`` lists
    columns not to show.
    """
    out = frame.drop(columns=[c for c in drop if c in frame.columns]).copy()
    if "table" in out.columns:
        out["table"] = out["table"].map(table_label)
    for col in ("level", "level_key"):
        if col in out.columns:
            out[col] = out[col].map(lambda v: level_label(str(v)))
    names = {c: (extra or {}).get(c, column_label(c)) for c in out.columns}
    return out.rename(columns=names)
