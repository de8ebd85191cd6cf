"""Error metrics of residuals given as counts, not rows: the sparse path of metrics.json
(docs/science.md §5).

At production scale a TopDown run's residuals (estimate − true, per geounit × query cell) are
almost all 0: both the true and the estimated count are 0 in most of the 2,016 cells of most
blocks. Those zeros are counted here, never stored. A residual set is a :class:`CountedResiduals`:
its sorted distinct values and how many residuals take each value (the zero's count included).
From it follow, with the same numbers as :func:`engine.metrics.error_tables.mae_table` on the dense
table (residuals are integers, so every sum is exact):

* TDA's absolute error (TDA §9, Tables 9–10) = Σ |r| / number of geounits: per geounit the absolute
  error summed over the query's cells, averaged over the geounits (``tda_mae``);
* the per-cell MAE = Σ |r| over the non-zero residuals / number of cells (``mae``);
* the median absolute error (PF Table 1) from the counts of the distinct |r|;
* EPL with its bootstrap (PF Methods) by :func:`engine.metrics.epl.epl_details_counted`;
* the app's whole error table (:func:`counted_error_table`: mean signed error, 95th percentile and
  maximum of |r| too, PF Extended Data) and the measured RMSE beside the prediction
  (:func:`counted_rmse_table`, docs/science.md §7).

:func:`counted_residuals` builds a set from a SciPy sparse residual matrix (rows = geounits of one
geolevel, columns = cells of one query); this module takes plain arrays and sparse matrices and
imports no engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from engine.core.errors import ValidationError


@dataclass(frozen=True)
class CountedResiduals:
    """Residuals as sorted distinct ``values`` (float64) with their multiplicities ``counts``.

    ``n_units``: the geounits the residuals belong to (each contributes one residual per query
    cell), which TDA's per-geounit figure divides by; None when unknown."""

    values: np.ndarray
    counts: np.ndarray
    n_units: int | None = None

    @property
    def n(self) -> int:
        """Number of residuals (cells) the set stands for."""
        return int(self.counts.sum())


def counted_residuals(residuals: sp.spmatrix | sp.sparray) -> CountedResiduals:
    """The residual set of every entry of the sparse matrix ``residuals`` (implicit zeros counted).

    The matrix stands for ``rows × columns`` residuals (rows = geounits, columns = the query's
    cells); only its non-zero entries are read.
    """
    if not sp.issparse(residuals):
        raise ValidationError(
            f"expected a SciPy sparse residual matrix; got {type(residuals).__name__}"
        )
    coo = sp.coo_matrix(residuals)
    data = np.asarray(coo.data, dtype=np.float64)
    if not np.isfinite(data).all():
        raise ValidationError("residuals must be finite numbers")
    data = data[data != 0]
    total = int(coo.shape[0]) * int(coo.shape[1])
    values, counts = np.unique(data, return_counts=True)
    zeros = total - data.size
    if zeros:
        at = int(np.searchsorted(values, 0.0))
        values = np.insert(values, at, 0.0)
        counts = np.insert(counts, at, zeros)
    return CountedResiduals(
        values.astype(np.float64), counts.astype(np.float64), n_units=int(coo.shape[0])
    )


def tda_absolute_error(residuals: CountedResiduals) -> float:
    """TDA's absolute error (TDA §9, Tables 9–10): Σ |r| / geounits (NaN without geounits)."""
    units = residuals.n_units
    if not units:
        return float("nan")
    return float(np.abs(residuals.values) @ residuals.counts) / units


def counted_error_summary(residuals: CountedResiduals) -> dict[str, float | int]:
    """``n_cells``, ``mae``, ``median_ae`` and ``tda_mae`` of one residual set (NaN when empty)."""
    n = residuals.n
    if n == 0:
        return {
            "n_cells": 0,
            "mae": float("nan"),
            "median_ae": float("nan"),
            "tda_mae": float("nan"),
        }
    magnitude = np.abs(residuals.values)
    mae = float(magnitude @ residuals.counts) / n
    distinct, inverse = np.unique(magnitude, return_inverse=True)
    counts = np.bincount(inverse.reshape(-1), weights=residuals.counts)
    ends = np.cumsum(counts)
    # the median of the expanded sorted |r|: the mean of ranks ⌊(n−1)/2⌋ and ⌈(n−1)/2⌉
    lo = distinct[np.searchsorted(ends, (n - 1) // 2, side="right")]
    hi = distinct[np.searchsorted(ends, n // 2, side="right")]
    median = float(lo) if lo == hi else float((lo + hi) / 2.0)
    return {"n_cells": n, "mae": mae, "median_ae": median, "tda_mae": tda_absolute_error(residuals)}


def counted_error_table(
    residuals: Mapping[tuple[str, ...], CountedResiduals], by: Sequence[str]
) -> pd.DataFrame:
    """:func:`engine.metrics.error_tables.mae_table` of counted residual sets, one row per key.

    Columns ``[*by, n_cells, mae, median_ae, mean_error, p95_ae, max_ae, tda_mae]``, keys sorted as the
    dense table's sorted groupby sorts them, with the same numbers: residuals are integers, so
    every sum is exact, and the 95th percentile of |r| interpolates linearly between the ranks
    ``⌊0.95(n − 1)⌋`` and the next, as pandas' ``quantile`` does."""
    keys = list(by)
    rows = []
    for key in sorted(residuals, key=lambda k: tuple(str(v) for v in k)):
        if len(key) != len(keys):
            raise ValidationError(f"residual key {key!r} does not match the columns {keys}")
        part = residuals[key]
        summary = counted_error_summary(part)
        n = part.n
        magnitude = np.abs(part.values)
        if n:
            distinct, inverse = np.unique(magnitude, return_inverse=True)
            counts = np.bincount(inverse.reshape(-1), weights=part.counts)
            ends = np.cumsum(counts)
            position = 0.95 * (n - 1)
            below = np.floor(position)
            lo = distinct[np.searchsorted(ends, below, side="right")]
            hi = distinct[np.searchsorted(ends, min(below + 1, n - 1), side="right")]
            p95 = float(lo + (hi - lo) * (position - below))
            mean_error = float(part.values @ part.counts) / n
            max_ae = float(magnitude.max())
        else:
            p95 = mean_error = max_ae = float("nan")
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                **summary,
                "mean_error": mean_error,
                "p95_ae": p95,
                "max_ae": max_ae,
            }
        )
    columns = [*keys, "n_cells", "mae", "median_ae", "mean_error", "p95_ae", "max_ae", "tda_mae"]
    table = pd.DataFrame(rows, columns=columns)
    return table.astype({"n_cells": np.int64})


def counted_rmse_table(residuals: Mapping[tuple[str, str], CountedResiduals]) -> pd.DataFrame:
    """Per (geolevel, query) key: ``measured_rmse`` = √(Σ r² / n) and ``n_cells`` (the counted
    form of :func:`engine.metrics.prediction.rmse_table`, docs/science.md §7), in the mapping's
    order."""
    rows = []
    for (level, query), part in residuals.items():
        n = part.n
        squares = float((part.values**2) @ part.counts)
        rmse = float(np.sqrt(squares / n)) if n else float("nan")
        rows.append({"geolevel": level, "query": query, "measured_rmse": rmse, "n_cells": n})
    frame = pd.DataFrame(rows, columns=["geolevel", "query", "measured_rmse", "n_cells"])
    return frame.astype({"n_cells": np.int64})
