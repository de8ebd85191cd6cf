"""Error metrics of residuals given as counts, not rows: the sparse path of metrics.json (SPEC §5).

At production scale a TopDown run's residuals (estimate − true, per geounit × query cell) are
almost all 0: both the true and the estimated count are 0 in most of the 2,016 cells of most
blocks. Those zeros are counted here, never stored. A residual set is a :class:`CountedResiduals`:
its sorted distinct values and how many residuals take each value (the zero's count included).
From it follow, with the same numbers as :func:`engine.metrics.errors.mae_table` on the dense
table (residuals are integers, so every sum is exact):

* MAE (TDA §9) = Σ |r| over the non-zero residuals / number of cells;
* the median absolute error (PF Table 1) from the counts of the distinct |r|;
* EPL with its bootstrap (PF Methods) by :func:`engine.metrics.epl.epl_details_counted`.

:func:`counted_residuals` builds a set from a SciPy sparse residual matrix (rows = geounits of one
geolevel, columns = cells of one query); this module takes plain arrays and sparse matrices and
imports no engine.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from phexplore.errors import ValidationError


@dataclass(frozen=True)
class CountedResiduals:
    """Residuals as sorted distinct ``values`` (float64) with their multiplicities ``counts``."""

    values: np.ndarray
    counts: np.ndarray

    @property
    def n(self) -> int:
        """Number of residuals (cells) the set stands for."""
        return int(self.counts.sum())


def counted_residuals(residuals: sp.spmatrix | sp.sparray) -> CountedResiduals:
    """The residual set of every entry of the sparse matrix ``residuals`` (implicit zeros counted).

    The matrix stands for ``rows × columns`` residuals; only its non-zero entries are read.
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
    return CountedResiduals(values.astype(np.float64), counts.astype(np.float64))


def counted_error_summary(residuals: CountedResiduals) -> dict[str, float | int]:
    """``n_cells``, ``mae``, ``median_ae`` of one residual set (NaN for an empty set)."""
    n = residuals.n
    if n == 0:
        return {"n_cells": 0, "mae": float("nan"), "median_ae": float("nan")}
    magnitude = np.abs(residuals.values)
    mae = float(magnitude @ residuals.counts) / n
    distinct, inverse = np.unique(magnitude, return_inverse=True)
    counts = np.bincount(inverse.reshape(-1), weights=residuals.counts)
    ends = np.cumsum(counts)
    # the median of the expanded sorted |r|: the mean of ranks ⌊(n−1)/2⌋ and ⌈(n−1)/2⌉
    lo = distinct[np.searchsorted(ends, (n - 1) // 2, side="right")]
    hi = distinct[np.searchsorted(ends, n // 2, side="right")]
    median = float(lo) if lo == hi else float((lo + hi) / 2.0)
    return {"n_cells": n, "mae": mae, "median_ae": median}
