"""Counted residuals give the dense error and RMSE tables to the bit (the sparse metrics path),
TDA's per-geounit absolute error included."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from engine.core.errors import ValidationError
from engine.metrics.counted import (
    counted_error_table,
    counted_residuals,
    counted_rmse_table,
)
from engine.metrics.error_tables import mae_table
from engine.metrics.prediction import rmse_table


def _tidy_and_counted(seed: int) -> tuple[pd.DataFrame, dict]:
    rng = np.random.default_rng(seed)
    frames, counted = [], {}
    for level, rows in (("County", 3), ("Tract", 17), ("Block", 101)):
        for query, cells in (("TOTAL", 1), ("VOTINGAGE", 2), ("DETAILED", 9)):
            residual = rng.integers(-6, 7, size=(rows, cells)) * (rng.random((rows, cells)) < 0.3)
            true = rng.integers(0, 20, size=residual.shape)
            frames.append(
                pd.DataFrame(
                    {
                        "geolevel": level,
                        "geounit": np.repeat([f"{level}{i}" for i in range(rows)], cells),
                        "query": query,
                        "true": true.ravel(),
                        "estimate": (true + residual).ravel(),
                    }
                )
            )
            counted[(level, query)] = counted_residuals(sp.csr_matrix(residual))
    return pd.concat(frames, ignore_index=True), counted


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_counted_error_table_equals_mae_table(seed: int) -> None:
    tidy, counted = _tidy_and_counted(seed)
    pd.testing.assert_frame_equal(
        counted_error_table(counted, ("geolevel", "query")), mae_table(tidy), check_exact=True
    )


def test_tda_mae_sums_a_geounits_cells_before_averaging() -> None:
    """TDA Tables 9–10: per geounit Σ over the query's cells of |error|, mean over geounits — the
    per-cell MAE times the number of cells, for the dense and the counted tables alike."""
    tidy, counted = _tidy_and_counted(3)
    table = counted_error_table(counted, ("geolevel", "query")).set_index(["geolevel", "query"])
    for (level, query), part in tidy.groupby(["geolevel", "query"]):
        per_geounit = (part["estimate"] - part["true"]).abs().groupby(part["geounit"]).sum()
        assert table.loc[(level, query), "tda_mae"] == pytest.approx(per_geounit.mean(), rel=1e-15)
        cells = {"TOTAL": 1, "VOTINGAGE": 2, "DETAILED": 9}[query]
        assert table.loc[(level, query), "tda_mae"] == pytest.approx(
            cells * table.loc[(level, query), "mae"], rel=1e-12
        )
    dense = mae_table(tidy).set_index(["geolevel", "query"])
    assert (dense["tda_mae"] == table["tda_mae"]).all()


def test_counted_rmse_table_equals_rmse_table() -> None:
    tidy, counted = _tidy_and_counted(4)
    dense = rmse_table(tidy).set_index(["geolevel", "query"]).sort_index()
    sparse = counted_rmse_table(counted).set_index(["geolevel", "query"]).sort_index()
    pd.testing.assert_frame_equal(sparse, dense, check_exact=True)


def test_counted_error_table_refuses_mismatched_keys() -> None:
    _, counted = _tidy_and_counted(0)
    with pytest.raises(ValidationError, match="does not match"):
        counted_error_table(counted, ("geolevel",))
