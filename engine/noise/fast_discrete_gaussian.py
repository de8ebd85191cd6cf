"""The seeded discrete Gaussian sampler behind ``discrete_gaussian(..., method="fast")``.

Both samplers it dispatches to draw N_Z(0, σ²) (SPEC §1; Canonne, Kamath & Steinke 2020) by
rejection from a rounded continuous Gaussian, exact up to floating-point rounding:

- :mod:`engine.noise.dg_cell_table` accepts with a per-integer table; acceptance ≥ 0.87 for every σ,
  but it needs one table of ≈ 39σ entries per distinct σ², so it is used for σ² values with
  enough draws to pay for their table and σ² ≤ ``TABLE_MAX_SIGMA2``;
- :mod:`engine.noise.dg_continuous` accepts with a closed-form test (acceptance ≈ 1 − 1/(2σ)), for
  everything else.

Per-element σ² arrays are grouped by distinct value with a hash factorisation (O(n)), since the
engines pass one σ² per query, repeated over all cells of that query.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from engine.noise import dg_cell_table, dg_continuous
from engine.noise._arguments import ScaleArray

# Tables beyond this σ² (σ ≈ 316, 12k entries) stop fitting in cache and gain nothing, since the
# continuous test already accepts > 99.8% of proposals there.
TABLE_MAX_SIGMA2 = 1.0e5
# A table is built only for σ² values drawn at least this many times (and at least one table length).
TABLE_MIN_DRAWS = 256


def uses_table(sigma2: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """Whether each distinct σ², drawn ``draws`` times, is sampled with the cell-table method."""
    s2 = np.asarray(sigma2, dtype=np.float64)
    length = np.floor(39.0 * np.sqrt(np.minimum(s2, TABLE_MAX_SIGMA2))) + 2
    return (s2 <= TABLE_MAX_SIGMA2) & (draws >= np.maximum(length, TABLE_MIN_DRAWS))


def sample(scale: ScaleArray, rng: np.random.Generator) -> np.ndarray:
    """Draw ``scale.count`` values from N_Z(0, σ²) with σ² = ``scale.values`` (validated)."""
    n = scale.count
    if scale.is_scalar:
        if uses_table(scale.values, np.asarray(n)):
            tables = dg_cell_table.build_tables(scale.values.reshape(1))
            return dg_cell_table.sample(tables, None, n, rng).reshape(scale.shape)
        return dg_continuous.sample(scale.values, n, rng).reshape(scale.shape)

    codes, values = pd.factorize(scale.values, sort=False)
    values = np.asarray(values, dtype=np.float64)
    tabled = uses_table(values, np.bincount(codes, minlength=values.size))
    if not tabled.any():
        return dg_continuous.sample(scale.values, n, rng).reshape(scale.shape)
    tables = dg_cell_table.build_tables(values[tabled])
    table_of_value = np.cumsum(tabled) - 1  # index into ``tables`` of each tabled distinct value
    if tabled.all():
        group = None if values.size == 1 else table_of_value[codes]
        return dg_cell_table.sample(tables, group, n, rng).reshape(scale.shape)
    out = np.empty(n, dtype=np.int64)
    in_table = tabled[codes]
    where = np.flatnonzero(in_table)
    out[where] = dg_cell_table.sample(tables, table_of_value[codes[where]], where.size, rng)
    where = np.flatnonzero(~in_table)
    out[where] = dg_continuous.sample(scale.values[where], where.size, rng)
    return out.reshape(scale.shape)
