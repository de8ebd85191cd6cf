"""The seeded discrete Gaussian sampler behind ``discrete_gaussian(..., method="fast")``.

Every route draws N_Z(0, σ²) (docs/science.md §1; Canonne, Kamath & Steinke 2020) by rejection from
a rounded continuous Gaussian, exact up to floating-point rounding; they differ only in speed:

- ``TABLE``: :func:`engine.noise.dg_cell_table.sample`, per-integer acceptance looked up in a table
  of ≈ 39σ entries (acceptance ≥ 0.856 for every σ, lowest near σ = 0.42). Used for
  σ² ≤ ``TABLE_MAX_SIGMA2`` drawn often enough to pay for building the table.
- ``CELL``: :func:`engine.noise.dg_cell_table.sample_untabled`, the same acceptance evaluated per
  proposal. Used for rarely drawn σ² < ``CONTINUOUS_MIN_SIGMA2``.
- ``CONTINUOUS``: :mod:`engine.noise.dg_continuous`, a closed-form test (acceptance ≈ 1 − 1/(2σ)).
  Used for every other σ².

Per-element σ² arrays are grouped by distinct value with a hash factorisation (O(n)), since the
engines pass one σ² per query, repeated over all cells of that query.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from engine.noise import dg_cell_table, dg_continuous
from engine.noise._arguments import ScaleArray

TABLE, CELL, CONTINUOUS = 0, 1, 2
# Tables beyond this σ² (σ ≈ 316, 12k entries) stop fitting in cache and gain little, since the
# continuous test already accepts > 99.8% of proposals there.
TABLE_MAX_SIGMA2 = 1.0e5
# A table is built only for σ² values drawn at least this many times (and at least one table length).
TABLE_MIN_DRAWS = 256
# The continuous test accepts ≥ 85% of proposals from σ = 3 upwards (and ≈ 0.6σ below σ ≈ 0.5).
CONTINUOUS_MIN_SIGMA2 = 9.0


def route(sigma2: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """TABLE, CELL or CONTINUOUS for each distinct σ², drawn ``draws`` times."""
    s2 = np.asarray(sigma2, dtype=np.float64)
    length = np.floor(39.0 * np.sqrt(np.minimum(s2, TABLE_MAX_SIGMA2))) + 2
    tabled = (s2 <= TABLE_MAX_SIGMA2) & (draws >= np.maximum(length, TABLE_MIN_DRAWS))
    return np.where(tabled, TABLE, np.where(s2 < CONTINUOUS_MIN_SIGMA2, CELL, CONTINUOUS))


def sample(scale: ScaleArray, rng: np.random.Generator) -> np.ndarray:
    """Draw ``scale.count`` values from N_Z(0, σ²) with σ² = ``scale.values`` (validated)."""
    n = scale.count
    if scale.is_scalar:
        how = int(route(scale.values, np.asarray(n)))
        if how == TABLE:
            tables = dg_cell_table.build_tables(scale.values.reshape(1))
            out = dg_cell_table.sample(tables, None, n, rng)
        elif how == CELL:
            out = dg_cell_table.sample_untabled(scale.values, n, rng)
        else:
            out = dg_continuous.sample(scale.values, n, rng)
        return out.reshape(scale.shape)

    codes, uniques = pd.factorize(scale.values, sort=False)
    values = np.asarray(uniques, dtype=np.float64)
    how_of_value = route(values, np.bincount(codes, minlength=values.size))
    how = how_of_value[codes]
    out = np.empty(n, dtype=np.int64)
    for method in (TABLE, CELL, CONTINUOUS):
        chosen = how_of_value == method
        if not chosen.any():
            continue
        where = None if chosen.all() else np.flatnonzero(how == method)
        s2 = scale.values if where is None else scale.values[where]
        m = n if where is None else where.size
        if method == TABLE:
            tables = dg_cell_table.build_tables(values[chosen])
            table_of_value = np.cumsum(chosen) - 1  # position in ``tables`` of each distinct value
            group = (
                None
                if chosen.sum() == 1
                else table_of_value[codes if where is None else codes[where]]
            )
            drawn = dg_cell_table.sample(tables, group, m, rng)
        elif method == CELL:
            drawn = dg_cell_table.sample_untabled(s2, m, rng)
        else:
            drawn = dg_continuous.sample(s2, m, rng)
        if where is None:
            out = drawn
        else:
            out[where] = drawn
    return out.reshape(scale.shape)
