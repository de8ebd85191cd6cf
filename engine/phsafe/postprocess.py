"""Post-processing for users: published PH1–PH8 with totals, averages and 90% intervals.

PHSafe itself outputs noisy basis counts that may be negative (PHS §2.5) and leaves the Census
Bureau's statistical post-processing model out of scope (PHS §6.4.2). PHExplore applies a simple,
documented substitute so a user sees publishable-looking tables (post-processing costs no privacy,
PHS §4.4.2):

1. **Non-negativity.** Each noisy basis count is clipped at 0.
2. **Totals.** Every derived cell (e.g. PH2 "In married couple household") is the sum of its clipped
   basis cells, so each published table adds up. PH5_num = PH4 and PH8_num = PH7 owner/renter sums
   (PHS §6.4.1).
3. **Averages** (PH1, PH5, PH8) = numerator / denominator of the same population group: PH1 and PH5
   divide every age cell by the one household (family) count; PH8 divides each tenure cell by the
   matching occupied-unit count (PHS §2.4). **Ratio sanity:** when the clipped denominator is 0 the
   average is undefined (NaN, ``average_flag = "denominator is zero"``), and an average above
   :data:`MAX_AVERAGE` persons per household is flagged ``"implausibly large"`` (the extremely large
   ratios §6.4.2 guards against).
4. **90% intervals** from the known noise variance (PHS §6.5): for a basis cell, the exact
   discrete-Gaussian (or geometric) MOE of its noise; for a derived total, ⌈1.645·√(Σ variances)⌉
   (normal approximation to the sum of independent noises); the interval [estimate − MOE,
   estimate + MOE] is clipped at 0. Averages get the delta-method interval
   avg ± 1.645·√(Var num + avg²·Var den)/den. Intervals cover noise only, not truncation.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from engine.dp.distributions import discrete_gaussian_moe
from engine.phsafe.measure import Z_90
from engine.phsafe.tables import OUTPUT_SHELLS

MAX_AVERAGE = 30.0
"""Averages (persons per household or family) above this are flagged as implausible."""

COUNT_TABLES: tuple[str, ...] = ("PH2", "PH3", "PH4", "PH6", "PH7")
AVERAGE_TABLES: dict[str, tuple[str, str]] = {
    "PH1": ("PH1_num", "PH1_denom"),
    "PH5": ("PH5_num", "PH5_denom"),
    "PH8": ("PH8_num", "PH8_denom"),
}
_GROUP = ["level", "region_type", "region_id", "iteration_code"]


def _counts_with_totals(rows: pd.DataFrame, shell_table: str) -> pd.DataFrame:
    """Clip basis cells at 0 and add the derived totals of the shell (sums of clipped cells)."""
    shell = OUTPUT_SHELLS[shell_table]
    basis = rows[_GROUP + ["cell", "true", "noisy", "variance", "moe90"]].copy()
    basis["estimate"] = basis["noisy"].clip(lower=0)
    basis["is_basis"] = True
    parts = [basis]
    for total, members in shell.totals.items():
        sub = basis[basis["cell"].isin(members)]
        if sub.empty:
            continue
        agg = sub.groupby(_GROUP, sort=False)[["true", "noisy", "variance", "estimate"]].sum()
        agg = agg.reset_index().assign(cell=total, is_basis=False)
        # Same rule as the basis cells and PH8_num: the exact 90% MOE of a discrete Gaussian with
        # the summed variance (the sum of independent noises is approximately that).
        moes = {v: (discrete_gaussian_moe(v) if v > 0 else 0) for v in agg["variance"].unique()}
        agg["moe90"] = agg["variance"].map(moes).astype(np.int64)
        parts.append(agg)
    out = pd.concat(parts, ignore_index=True)
    out["label"] = out["cell"].map(shell.label)
    out["ci90_low"] = (out["estimate"] - out["moe90"]).clip(lower=0)
    out["ci90_high"] = out["estimate"] + out["moe90"]
    return out


def published_tables(measurements: pd.DataFrame) -> pd.DataFrame:
    """Published PH1–PH8 from a private run's :func:`~engine.phsafe.outputs.measurement_frame`.

    One row per table × population group × cell with ``estimate`` (post-processed count, or the
    average for PH1/PH5/PH8), ``ci90_low``/``ci90_high``, ``true`` (untruncated truth of the same
    quantity), ``noisy`` (raw sum before clipping) and, for averages, ``numerator``/``denominator``
    and ``average_flag``.
    """
    if "noisy" not in measurements.columns:
        raise ValueError("published tables need a private run (noisy counts)")
    frames: list[pd.DataFrame] = []
    for table in COUNT_TABLES:
        rows = measurements[measurements["table"] == table]
        if rows.empty:
            continue
        counts = _counts_with_totals(rows, table)
        frames.append(counts.assign(table=table, kind="count"))
    for table, (num_name, den_name) in AVERAGE_TABLES.items():
        num_rows = measurements[measurements["table"] == num_name]
        den_rows = measurements[measurements["table"] == den_name]
        if num_rows.empty or den_rows.empty:
            continue
        num = _counts_with_totals(num_rows, num_name)
        if den_name == "PH8_denom":
            den = _counts_with_totals(den_rows, den_name)[
                _GROUP + ["cell", "estimate", "true", "variance"]
            ]
            merged = num.merge(den, on=_GROUP + ["cell"], suffixes=("", "_den"), how="inner")
        else:
            den = den_rows[_GROUP + ["true", "noisy", "variance"]].copy()
            den["estimate"] = den["noisy"].clip(lower=0)
            merged = num.merge(
                den[_GROUP + ["estimate", "true", "variance"]], on=_GROUP, suffixes=("", "_den")
            )
        frames.append(_averages(merged, table))
    if not frames:
        return pd.DataFrame()
    out = pd.concat(frames, ignore_index=True)
    cols = [
        "table",
        "kind",
        *_GROUP,
        "cell",
        "label",
        "is_basis",
        "estimate",
        "ci90_low",
        "ci90_high",
        "true",
        "noisy",
        "variance",
        "numerator",
        "denominator",
        "average_flag",
    ]
    for c in cols:
        if c not in out.columns:
            out[c] = np.nan if c not in ("average_flag",) else ""
    out["average_flag"] = out["average_flag"].fillna("")
    return out[cols]


def _averages(merged: pd.DataFrame, table: str) -> pd.DataFrame:
    num = merged["estimate"].astype(float)
    den = merged["estimate_den"].astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        avg = np.where(den > 0, num / den, np.nan)
        true_avg = np.where(
            merged["true_den"] > 0,
            merged["true"] / merged["true_den"].where(merged["true_den"] > 0),
            np.nan,
        )
        half = (
            Z_90
            * np.sqrt(merged["variance"] + np.nan_to_num(avg) ** 2 * merged["variance_den"])
            / den
        )
    flag = np.where(
        den <= 0, "denominator is zero", np.where(avg > MAX_AVERAGE, "implausibly large", "")
    )
    half = np.where(den > 0, half, np.nan)
    return pd.DataFrame(
        {
            "table": table,
            "kind": "average",
            **{c: merged[c].to_numpy() for c in _GROUP},
            "cell": merged["cell"].to_numpy(),
            "label": merged["label"].to_numpy(),
            "is_basis": merged["is_basis"].to_numpy(),
            "estimate": avg,
            "ci90_low": np.maximum(avg - half, 0.0),
            "ci90_high": avg + half,
            "true": true_avg,
            "noisy": merged["noisy"].to_numpy(),
            "variance": merged["variance"].to_numpy(),
            "numerator": num.to_numpy(),
            "denominator": den.to_numpy(),
            "average_flag": flag,
        }
    )
