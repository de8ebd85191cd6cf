"""What the Results and Run pages show of a kept run: EPL curves, headline numbers, downloads.

Part of the app-facing API (:mod:`phexplore.api`). Numbers come from :mod:`engine.metrics`
(EPL, docs/science.md §5) and from the run's own tables; this module only selects and formats them.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from engine.core.csv_cells import frame_to_csv
from engine.dp.budget.invariants import SPREAD_LABEL, spent_label
from engine.metrics.epl import epl_details
from engine.metrics.reference import load_petti_flaxman_tradeoff
from engine.runs.topdown_metrics import bootstrap_rng
from phexplore.api.jobs import RunRecord
from phexplore.api.run_choices import EPL_BOOT, EPL_MULTIPLIER, EPL_PERCENTILE, epl_settings


def run_epl_settings(record: RunRecord) -> dict[str, Any]:
    """The EPL settings a run's EPLs were computed with (``as_dict`` form; PF's for old records)."""
    recorded = record.settings.get("epl_settings")
    return dict(recorded) if recorded else epl_settings().as_dict()


def pf_reference_epl(settings: Mapping[str, Any]) -> tuple[pd.DataFrame | None, str]:
    """PF's published TopDown EPLs (1940 Census, total counts) when ``settings`` are PF's.

    Returns ``(table, note)``: the table (epsilon, geolevel, epl) for County and Enumeration
    district total counts, or ``None`` with the reason it is not drawn when the run's EPL used other
    settings (values under other settings are not comparable — up to ~10× apart).
    """
    if not settings.get("pf_published"):
        return None, (
            "Petti & Flaxman's published EPLs are not drawn: this run's EPL uses "
            f"{settings.get('label', 'other settings')}, and PF computed theirs with "
            "±1 × max(|P5|, |P95|) (percentile 95, multiplier 1.0). EPLs under different "
            "density ranges are not comparable (up to ~10× apart on the same residuals)."
        )

    ref = load_petti_flaxman_tradeoff()
    part = ref[
        (ref["design"] == "topdown")
        & (ref["count_type"] == "tc")
        & ref["geolevel"].isin(["County", "Enumeration district"])
    ]
    return part[["epsilon", "geolevel", "epl"]].dropna().reset_index(drop=True), (
        "Grey: Petti & Flaxman's published EPLs of total counts (2018 End-to-End TopDown on the "
        "1940 Census, pure ε-DP), computed with the same settings (±1 × max(|P5|, |P95|)); "
        "their data, geography and mechanism differ from this run's."
    )


@st.cache_data(show_spinner="Computing EPL…", max_entries=64)
def epl_curves(
    token: str,
    seed: int,
    geolevel: str,
    query: str,
    _tidy: pd.DataFrame,
    percentile: float = EPL_PERCENTILE,
    multiplier: float = EPL_MULTIPLIER,
) -> dict[str, Any]:
    """EPL of one (geolevel, query) of a run with its interval and curves (cached per run token).

    Residuals are estimate − true over the group's cells (docs/science.md §5);
    :func:`engine.metrics.epl.epl_details` gives the value, the bootstrap interval (shifted by the
    resamples' median bias, so it contains the value; the resamples' own median and percentile
    interval beside it), the KDE and the EPL(x) curve, with the density range of ``percentile`` / ``multiplier`` (the run's settings).
    """
    part = _tidy[(_tidy["geolevel"] == geolevel) & (_tidy["query"] == query)]
    residuals = (part["estimate"] - part["true"]).to_numpy(dtype=float)
    result = epl_details(
        residuals,
        n_boot=EPL_BOOT,
        rng=bootstrap_rng(seed),
        settings=epl_settings(percentile, multiplier),
    )
    return {
        "residuals": residuals,
        "value": result.value,
        "low": result.low,
        "high": result.high,
        "boot_median": result.boot_median,
        "boot_low": result.boot_low,
        "boot_high": result.boot_high,
        "n_boot": result.n_boot,
        "n": result.n,
        "reason": result.reason,
        "x": result.x,
        "density": result.density,
        "curve": result.epl_curve,
    }


# ------------------------------------------------------------------ budget actually spent


def budget_caption(record: RunRecord) -> str | None:
    """ "ρ = 2.56 nominal, ρ spent on noisy measurements = 1.728 …" of a TopDown run, else None."""
    if record.engine != "topdown" or record.rho is None:
        return None
    what = "ε" if record.settings.get("mechanism") == "puredp" else "ρ"
    text = spent_label(record.rho, record.settings.get("rho_spent"), what)
    if record.settings.get("spread_invariant_share"):
        text += f". Allocation: {SPREAD_LABEL}"
    return text + "."


# ------------------------------------------------------------------ headline numbers


def finest_level(record: RunRecord) -> str:
    """The finest geolevel of a TopDown run in spine order (root first), e.g. ``Block``."""
    levels = record.settings.get("levels") or list(dict.fromkeys(record.tidy["geolevel"]))
    return str(levels[-1])


def headline_error(record: RunRecord) -> tuple[str, float | None, str]:
    """``(label, value, help)`` of a run's one-number error for the Run page.

    TopDown: the MAE of TOTAL at the finest geolevel (from the run's MAE table). PHSafe: the
    noise MAE over every measured cell and trial (each table × level's ``mae_noise`` weighted by
    its number of cells). ``value`` is None when the run has no such number.
    """
    if record.engine == "topdown":
        level = finest_level(record)
        mae = record.tables["mae"]
        row = mae[(mae["query"] == "TOTAL") & (mae["geolevel"] == level)]
        return (
            f"MAE of TOTAL ({level})",
            float(row["mae"].iloc[0]) if not row.empty else None,
            f"Mean absolute error of the total population over the {level} geounits, the finest "
            "geolevel of the run (blocks: those with housing units or group quarters where the "
            "data carry a unit frame, as TDA; metrics.json error_universe).",
        )
    le = record.tables.get("level_errors")
    value = None
    if le is not None and "mae_noise" in le:
        part = le.dropna(subset=["mae_noise"])
        weights = part["cells"].to_numpy(float)
        if weights.sum() > 0:
            value = float(np.average(part["mae_noise"].to_numpy(float), weights=weights))
    return (
        "Noise MAE (all cells)",
        value,
        "Mean absolute noise error over every measured cell and trial of the run (all tables "
        "and levels); truncation error is left out.",
    )


# ------------------------------------------------------------------ downloads


def tidy_bytes(frame: pd.DataFrame, fmt: str) -> bytes:
    """A table as CSV or Parquet bytes for ``st.download_button``."""
    if fmt == "csv":
        return frame_to_csv(frame).encode("utf-8")  # formula-like text made inert

    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()


def metrics_bytes(metrics: Mapping[str, Any]) -> bytes:
    """metrics.json bytes (NaN and ∞ written as null so any JSON reader accepts them)."""

    def clean(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, Mapping):
            return {str(k): clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [clean(v) for v in value]
        return value

    return json.dumps(clean(metrics), indent=2, default=str).encode("utf-8")


def prediction_sample_sentence(table: pd.DataFrame) -> str | None:
    """What a run's predicted-vs-measured rows were evaluated on, when some level used a sample
    of its families (``units_evaluated`` below ``units``); None when every geounit was used or
    the table predates the columns (docs/science.md §7; ``engine.runs.topdown_metrics.prediction_sampling_note``)."""
    if "units_evaluated" not in table or "units" not in table:
        return None
    levels = table.drop_duplicates("geolevel")
    sampled = levels[levels["units_evaluated"] < levels["units"]]
    if sampled.empty:
        return None
    parts = ", ".join(
        f"{r.geolevel} {int(r.units_evaluated):,} of {int(r.units):,}"
        for r in sampled.itertuples(index=False)
    )
    return (
        "The prediction's non-negativity correction was evaluated on a sample of whole families "
        f"(every k-th family of the level, the same for every run of this spine): {parts} "
        "geounits; the other levels on all of theirs."
    )
