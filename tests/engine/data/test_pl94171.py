"""Tests of the P.L. 94-171 loader on the 2018 End-to-End prototype (2020-style files and wide CSV)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.data.pl94171 import (
    TABLE_SIZES,
    histogram_from_tables,
    read_pl94171,
    read_pl94171_csv,
    variables,
)
from engine.data.samples import samples_dir
from engine.schema.attributes import PL94171_SCHEMA

FOLDER = samples_dir() / "pl94171_ri2018"
RAW = [
    FOLDER / name
    for name in (
        "rigeo2018_2020Style.pl",
        "ri000012018_2020Style.pl",
        "ri000022018_2020Style.pl",
        "ri000032018_2020Style.pl",
    )
]


@pytest.fixture(scope="module")
def tables():
    return read_pl94171(*RAW)


def test_block_tables(tables):
    assert len(tables.geography) == 569
    assert set(tables.tables) == {"P1", "P2", "P3", "P4", "P5", "H1"}
    for name, frame in tables.tables.items():
        assert frame.shape == (569, TABLE_SIZES[name])
        assert list(frame.columns) == list(variables(name))
        assert (frame.to_numpy() >= 0).all()
    assert tables.tables["P1"]["P0010001"].sum() == 29_225
    assert tables.tables["P3"]["P0030001"].sum() == 22_713
    assert tables.tables["H1"]["H0010001"].sum() == 11_425
    assert tables.tables["P5"]["P0050001"].sum() == 995
    assert tables.geography["Tract"].nunique() == 7
    assert tables.geography["Block_Group"].nunique() == 28


def test_wide_csv_gives_the_same_tables(tables):
    wide = read_pl94171_csv(FOLDER / "ri_prototype_2018e2e_wide.csv")
    assert wide.geography.equals(tables.geography)
    for name in TABLE_SIZES:
        assert wide.tables[name].equals(tables.tables[name])


def test_histogram_from_p2_p4_h1_p5(tables):
    h = histogram_from_tables(tables)
    assert h.schema == PL94171_SCHEMA
    assert h.total == 29_225
    cube = h.counts.reshape(-1, *PL94171_SCHEMA.shape)
    np.testing.assert_array_equal(cube[:, 1].sum(axis=1), tables.tables["P4"]["P0040001"])
    np.testing.assert_array_equal(cube[:, :, 0].sum(axis=1), tables.tables["P2"]["P0020002"])
    np.testing.assert_array_equal(cube[:, :, 7].sum(axis=1), tables.tables["P2"]["P0020011"])
    assert h.units.shape == (569, 2)
    np.testing.assert_array_equal(h.units.sum(axis=1), tables.tables["H1"]["H0010001"])
    assert h.extra["gq_population"].sum() == 995


def test_long_form(tables):
    long = tables.long()
    assert list(long.columns) == ["Block", "table", "variable", "count"]
    assert len(long) == 569 * sum(TABLE_SIZES.values())
    assert long.loc[long["variable"] == "P0010001", "count"].sum() == 29_225
