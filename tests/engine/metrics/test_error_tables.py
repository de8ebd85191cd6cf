"""Error tables: MAE, median AE, relative error, within ±k, size classes (TDA Tables 11–12)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from engine.core.errors import ValidationError
from engine.metrics.error_tables import (
    COUNTY_SIZE_CLASSES,
    error_table,
    mae_table,
    relative_error_table,
    size_class_table,
    within_k_table,
)


@pytest.fixture
def tidy() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "geolevel": ["County"] * 4 + ["Block"] * 5,
            "geounit": ["a", "b", "c", "d", "1", "2", "3", "4", "5"],
            "query": "TOTAL",
            "cell": "total",
            "true": [0, 10, 20, 2000, 0, 0, 5, 50, 500],
            "estimate": [1, 7, 20, 1990, 2, 0, 4, 57, 495],
        }
    )


def test_error_table_signs(tidy: pd.DataFrame) -> None:
    errors = error_table(tidy)
    assert errors["error"].tolist() == [1, -3, 0, -10, 2, 0, -1, 7, -5]
    assert (errors["abs_error"] == errors["error"].abs()).all()


def test_mae_and_median(tidy: pd.DataFrame) -> None:
    table = mae_table(tidy).set_index("geolevel")
    assert table.loc["County", "mae"] == pytest.approx((1 + 3 + 0 + 10) / 4)
    assert table.loc["County", "median_ae"] == pytest.approx(2.0)
    assert table.loc["Block", "mae"] == pytest.approx(3.0)
    assert table.loc["Block", "median_ae"] == pytest.approx(2.0)
    assert table.loc["Block", "mean_error"] == pytest.approx(3 / 5)
    assert table.loc["Block", "max_ae"] == 7
    assert table.loc["County", "n_cells"] == 4


def test_mae_without_grouping(tidy: pd.DataFrame) -> None:
    table = mae_table(tidy, by=())
    assert len(table) == 1 and table["mae"].iloc[0] == pytest.approx(29 / 9)


def test_relative_error_skips_zero_true(tidy: pd.DataFrame) -> None:
    table = relative_error_table(tidy).set_index("geolevel")
    assert table.loc["Block", "n_zero_true"] == 2
    assert table.loc["Block", "n_cells"] == 3
    expected = np.mean([1 / 5, 7 / 50, 5 / 500])
    assert table.loc["Block", "mean_relative_error"] == pytest.approx(expected)


def test_within_k(tidy: pd.DataFrame) -> None:
    table = within_k_table(tidy, [0, 2, 5]).set_index("geolevel")
    assert table.loc["Block", "within_0"] == pytest.approx(1 / 5)
    assert table.loc["Block", "within_2"] == pytest.approx(3 / 5)
    assert table.loc["Block", "within_5"] == pytest.approx(4 / 5)
    with pytest.raises(ValidationError):
        within_k_table(tidy, -1)


def test_size_classes_block_and_county(tidy: pd.DataFrame) -> None:
    blocks = size_class_table(tidy[tidy["geolevel"] == "Block"])
    assert blocks["size_class"].tolist() == ["0", "1 to 9", "10 to 99", "100 to 999"]
    assert blocks["n"].tolist() == [2, 1, 1, 1]
    assert blocks.loc[0, "mae"] == pytest.approx(1.0)
    assert blocks.loc[0, "mean_error"] == pytest.approx(1.0)
    assert blocks.loc[2, "q0.5"] == pytest.approx(7.0)
    counties = size_class_table(tidy[tidy["geolevel"] == "County"], classes=COUNTY_SIZE_CLASSES)
    assert counties["size_class"].tolist() == ["0 to 1,000", "1,001 to 9,999"]
    assert counties["n"].tolist() == [3, 1]


def test_size_classes_validation(tidy: pd.DataFrame) -> None:
    with pytest.raises(ValidationError, match="not in the tidy table"):
        size_class_table(tidy, query="RACEETH")
    with pytest.raises(ValidationError, match="increasing"):
        size_class_table(tidy, classes=(("a", 0, 10), ("b", 5, 20)))


def test_bad_tables_raise_specific_errors(tidy: pd.DataFrame) -> None:
    with pytest.raises(ValidationError, match="lacks column"):
        mae_table(tidy.drop(columns="estimate"))
    broken = tidy.assign(estimate=tidy["estimate"].astype(float))
    broken.loc[3, "estimate"] = np.nan
    with pytest.raises(ValidationError, match="finite"):
        mae_table(broken)
    with pytest.raises(ValidationError):
        mae_table([1, 2, 3])  # type: ignore[arg-type]


def test_custom_grouping_columns(tidy: pd.DataFrame) -> None:
    phsafe_like = tidy.rename(columns={"geolevel": "region"}).assign(table="PH1")
    table = mae_table(phsafe_like, by=("region", "table"))
    assert set(table.columns) >= {"region", "table", "mae"}
