"""Error tables on tidy (geolevel, geounit, query, cell, true, estimate) results (docs/science.md
§5).

Error = estimate − true, per geounit and query cell. This module computes, by any grouping (default
geolevel × query):

* TDA's absolute error (TDA §9, Tables 9–10): per geounit the absolute error summed over the
  query's cells, averaged over the geounits (``tda_mae``); for TOTAL it equals the per-cell MAE;
* the per-cell MAE (``mae``: mean over geounit × cell; TDA's figure divided by the query's number of
  cells) and median absolute error (PF Table 1, Fig. 2), with the mean signed error, the 95th
  percentile and maximum of the absolute error (PF Extended Data);
* relative error |estimate − true| / true over cells with a positive true value;
* the share of cells whose error lies within ±k;
* the error distribution by size class of the true count, like TDA Tables 11 (counties: 0–1,000,
  1,001–9,999, 10k–99,999, 100k–999,999, 1,000k+) and 12 (blocks: 0, 1–9, 10–99, 100–999, 1,000+):
  the number of geounits, the mean absolute error and quantiles of the signed error.

Both engines produce this table shape (PHSafe adds grouping columns such as table or region, which
callers pass in ``by``). Every function is pure and returns a new tidy frame.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from engine.core.errors import ValidationError

TIDY_COLUMNS: tuple[str, ...] = ("geolevel", "geounit", "query", "cell", "true", "estimate")
"""Columns of the tidy comparison table shared by the engines, the CLI and the app."""
DEFAULT_BY: tuple[str, ...] = ("geolevel", "query")

BLOCK_SIZE_CLASSES: tuple[tuple[str, float, float], ...] = (
    ("0", 0, 0),
    ("1 to 9", 1, 9),
    ("10 to 99", 10, 99),
    ("100 to 999", 100, 999),
    ("1,000+", 1000, np.inf),
)
"""Size classes of TDA Table 12 (blocks): (label, smallest true count, largest true count)."""
COUNTY_SIZE_CLASSES: tuple[tuple[str, float, float], ...] = (
    ("0 to 1,000", 0, 1000),
    ("1,001 to 9,999", 1001, 9999),
    ("10k to 99,999", 10_000, 99_999),
    ("100k to 999,999", 100_000, 999_999),
    ("1,000k+", 1_000_000, np.inf),
)
"""Size classes of TDA Table 11 (counties)."""
SIGNED_ERROR_QUANTILES: tuple[float, ...] = (0.005, 0.025, 0.25, 0.5, 0.75, 0.975, 0.995)
"""The signed-error quantiles printed in TDA Tables 11–12."""


def check_tidy(
    tidy: pd.DataFrame,
    *,
    by: Sequence[str] = DEFAULT_BY,
    true_col: str = "true",
    estimate_col: str = "estimate",
) -> None:
    """Raise :class:`ValidationError` unless ``tidy`` has the ``by`` columns and finite numbers."""
    if not isinstance(tidy, pd.DataFrame):
        raise ValidationError(f"expected a tidy pandas DataFrame; got {type(tidy).__name__}")
    if isinstance(by, str):
        raise ValidationError(f"'by' must be a sequence of column names, not the string {by!r}")
    needed = [*by, true_col, estimate_col]
    missing = [c for c in needed if c not in tidy.columns]
    if missing:
        raise ValidationError(
            f"tidy table lacks column(s) {missing}; it has {list(tidy.columns)} "
            f"(expected {list(TIDY_COLUMNS)})"
        )
    for col in (true_col, estimate_col):
        values = pd.to_numeric(tidy[col], errors="coerce").to_numpy(np.float64)
        bad = ~np.isfinite(values)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ValidationError(
                f"column {col!r} must hold finite numbers; row {row} holds {tidy[col].iloc[row]!r} "
                f"({int(bad.sum())} such row(s))"
            )


def error_table(
    tidy: pd.DataFrame, *, true_col: str = "true", estimate_col: str = "estimate"
) -> pd.DataFrame:
    """``tidy`` plus ``error`` (estimate − true) and ``abs_error`` columns."""
    check_tidy(tidy, by=(), true_col=true_col, estimate_col=estimate_col)
    error = tidy[estimate_col].to_numpy(np.float64) - tidy[true_col].to_numpy(np.float64)
    return tidy.assign(error=error, abs_error=np.abs(error))


def _grouped(errors: pd.DataFrame, by: Sequence[str]):
    if by:
        return errors.groupby(list(by), sort=True, observed=True, dropna=False)
    return errors.assign(_all="all").groupby("_all")


def _finish(frame: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    frame = frame.reset_index()
    if not by:
        frame = frame.drop(columns="_all")
    return frame


def mae_table(
    tidy: pd.DataFrame,
    *,
    by: Sequence[str] = DEFAULT_BY,
    true_col: str = "true",
    estimate_col: str = "estimate",
) -> pd.DataFrame:
    """Per group: ``n_cells``, ``mae`` (per cell), ``median_ae``, ``mean_error``, ``p95_ae``,
    ``max_ae`` and, when the table has a ``geounit`` column, ``tda_mae`` (TDA's absolute error:
    Σ over a geounit's cells of |error|, averaged over the group's geounits; TDA §9)."""
    check_tidy(tidy, by=by, true_col=true_col, estimate_col=estimate_col)
    errors = error_table(tidy, true_col=true_col, estimate_col=estimate_col)
    g = _grouped(errors, by)
    out = pd.DataFrame(
        {
            "n_cells": g["abs_error"].size(),
            "mae": g["abs_error"].mean(),
            "median_ae": g["abs_error"].median(),
            "mean_error": g["error"].mean(),
            "p95_ae": g["abs_error"].quantile(0.95),
            "max_ae": g["abs_error"].max(),
        }
    )
    if "geounit" in errors.columns and "geounit" not in by:
        out["tda_mae"] = _per_geounit_sums(errors, by).reindex(out.index)
    return _finish(out, by)


def _per_geounit_sums(errors: pd.DataFrame, by: Sequence[str]) -> pd.Series:
    """Mean over the geounits of each ``by`` group of Σ |error| over the geounit's cells."""
    keys = [*by, "geounit"] if by else ["geounit"]
    sums = errors.groupby(keys, sort=True, observed=True, dropna=False)["abs_error"].sum()
    if not by:
        return pd.Series([float(sums.mean())], index=pd.Index(["all"], name="_all"))
    return sums.groupby(level=list(range(len(by))), sort=True, observed=True, dropna=False).mean()


def tda_mae_table(
    tidy: pd.DataFrame,
    *,
    by: Sequence[str] = DEFAULT_BY,
    true_col: str = "true",
    estimate_col: str = "estimate",
) -> pd.DataFrame:
    """Per group: ``n_geounits`` and ``tda_mae`` — TDA's absolute error (TDA §9, Tables 9–10):
    per geounit Σ_i |θ̂_i − θ_i| over the query's cells, averaged over the geounits."""
    check_tidy(tidy, by=[*by, "geounit"], true_col=true_col, estimate_col=estimate_col)
    errors = error_table(tidy, true_col=true_col, estimate_col=estimate_col)
    keys = [*by, "geounit"]
    sums = errors.groupby(keys, sort=True, observed=True, dropna=False)["abs_error"].sum()
    if not by:
        return pd.DataFrame({"n_geounits": [int(sums.size)], "tda_mae": [float(sums.mean())]})
    g = sums.groupby(level=list(range(len(by))), sort=True, observed=True, dropna=False)
    return pd.DataFrame({"n_geounits": g.size(), "tda_mae": g.mean()}).reset_index()


def relative_error_table(
    tidy: pd.DataFrame,
    *,
    by: Sequence[str] = DEFAULT_BY,
    true_col: str = "true",
    estimate_col: str = "estimate",
) -> pd.DataFrame:
    """Relative error |estimate − true| / true over cells with true > 0.

    Per group: ``n_cells`` (with true > 0), ``n_zero_true`` (cells left out because the relative
    error is undefined), ``mean_relative_error`` and ``median_relative_error``.
    """
    check_tidy(tidy, by=by, true_col=true_col, estimate_col=estimate_col)
    errors = error_table(tidy, true_col=true_col, estimate_col=estimate_col)
    true = errors[true_col].to_numpy(np.float64)
    positive = true > 0
    rel = np.full(true.shape, np.nan)
    rel[positive] = errors["abs_error"].to_numpy()[positive] / true[positive]
    errors = errors.assign(relative_error=rel, _zero=~positive)
    g = _grouped(errors, by)
    out = pd.DataFrame(
        {
            "n_cells": g["relative_error"].count(),
            "n_zero_true": g["_zero"].sum().astype(np.int64),
            "mean_relative_error": g["relative_error"].mean(),
            "median_relative_error": g["relative_error"].median(),
        }
    )
    return _finish(out, by)


def within_k_table(
    tidy: pd.DataFrame,
    k: float | Sequence[float],
    *,
    by: Sequence[str] = DEFAULT_BY,
    true_col: str = "true",
    estimate_col: str = "estimate",
) -> pd.DataFrame:
    """Share of cells (geounit × query cell) whose |error| ≤ k, one column ``within_<k>`` per k."""
    ks = [k] if np.isscalar(k) else list(k)
    if not ks or any(
        isinstance(v, bool) or not isinstance(v, int | float | np.number) or not v >= 0 for v in ks
    ):
        raise ValidationError(f"k must be one or more non-negative numbers; got {k!r}")
    check_tidy(tidy, by=by, true_col=true_col, estimate_col=estimate_col)
    errors = error_table(tidy, true_col=true_col, estimate_col=estimate_col)
    names = {f"within_{v:g}": errors["abs_error"] <= v for v in ks}
    errors = errors.assign(**names)
    g = _grouped(errors, by)
    out = pd.DataFrame({"n_cells": g["abs_error"].size()})
    for name in names:
        out[name] = g[name].mean()
    return _finish(out, by)


def size_class_table(
    tidy: pd.DataFrame,
    *,
    query: str = "TOTAL",
    classes: Sequence[tuple[str, float, float]] = BLOCK_SIZE_CLASSES,
    by: Sequence[str] = ("geolevel",),
    quantiles: Sequence[float] = SIGNED_ERROR_QUANTILES,
    true_col: str = "true",
    estimate_col: str = "estimate",
) -> pd.DataFrame:
    """Error of ``query`` by size class of the true count (TDA Tables 11–12).

    ``classes`` are (label, lowest, highest) true counts, inclusive and non-overlapping; cells whose
    true count falls in no class are left out. Per ``by`` group and class: ``n``, ``mae``,
    ``mean_error`` and one ``q<quantile>`` column of the signed error per entry of ``quantiles``.
    """
    check_tidy(tidy, by=[*by, "query"], true_col=true_col, estimate_col=estimate_col)
    if not classes:
        raise ValidationError("size classes must not be empty")
    lows = [float(c[1]) for c in classes]
    highs = [float(c[2]) for c in classes]
    for i, (label, low, high) in enumerate(classes):
        if not low <= high:
            raise ValidationError(f"size class {label!r} has lowest {low} above highest {high}")
        if i and low <= highs[i - 1]:
            raise ValidationError(
                f"size classes must be increasing and disjoint; {label!r} starts at {low} "
                f"but the previous class ends at {highs[i - 1]}"
            )
    subset = tidy[tidy["query"] == query]
    if subset.empty:
        raise ValidationError(
            f"query {query!r} is not in the tidy table; it has {sorted(tidy['query'].unique())}"
        )
    errors = error_table(subset, true_col=true_col, estimate_col=estimate_col)
    true = errors[true_col].to_numpy(np.float64)
    labels = np.full(true.shape, None, dtype=object)
    for (label, _, _), low, high in zip(classes, lows, highs, strict=True):
        labels[(true >= low) & (true <= high)] = label
    errors = errors.assign(size_class=labels).dropna(subset=["size_class"])
    order = pd.CategoricalDtype([c[0] for c in classes], ordered=True)
    errors["size_class"] = errors["size_class"].astype(order)
    g = errors.groupby([*by, "size_class"], sort=True, observed=True)
    out = pd.DataFrame(
        {"n": g["error"].size(), "mae": g["abs_error"].mean(), "mean_error": g["error"].mean()}
    )
    for q in quantiles:
        out[f"q{q:g}"] = g["error"].quantile(q)
    out = out.reset_index()
    out["size_class"] = out["size_class"].astype(str)
    return out
