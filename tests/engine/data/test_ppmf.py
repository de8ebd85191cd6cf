"""Tests of the PPMF/MDF person-record loader against the Perry County, AL sample."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from engine.data.geography import BLOCK_LEVELS
from engine.data.ppmf import load_ppmf
from engine.data.samples import samples_dir
from engine.schema.attributes import REDISTRICTING_SCHEMA, RI2010_SCHEMA
from engine.schema.ri_fold import raceeth_of

FOLDER = samples_dir() / "ppmf_perry_al"
PERSONS = FOLDER / "ppmf_perry_al_persons.csv"


@pytest.fixture(scope="module")
def perry():
    return load_ppmf(PERSONS)


@pytest.fixture(scope="module")
def blocks():
    return pd.read_csv(FOLDER / "ppmf_perry_al_blocks.csv", dtype={"GEOID10": str}).set_index(
        "GEOID10"
    )


def test_documented_totals(perry):
    assert perry.total == 10_588
    assert perry.n_blocks == 511
    assert perry.schema == REDISTRICTING_SCHEMA
    assert perry.counts.shape == (511, 2016)
    assert perry.levels == BLOCK_LEVELS
    assert perry.geography.iloc[0].tolist() == [
        "01",
        "01105",
        "01105686800",
        "011056868001",
        "011056868001000",
    ]


def test_matches_the_published_block_aggregation(perry, blocks):
    cube = perry.counts.reshape(-1, *REDISTRICTING_SCHEMA.shape)
    ref = blocks.loc[perry.geography["Block"].to_numpy()]
    np.testing.assert_array_equal(cube.sum(axis=(1, 2, 3, 4)), ref["pop"].to_numpy())
    np.testing.assert_array_equal(cube[:, :, 1].sum(axis=(1, 2, 3)), ref["vap"].to_numpy())
    np.testing.assert_array_equal(
        cube[:, 1:].sum(axis=(2, 3, 4)), ref[[f"gq_type_{k}" for k in range(1, 8)]].to_numpy()
    )
    # collapse HISPANIC x CENRACE to the eight RACEETH groups and compare with pop_<group>
    hisp_levels = REDISTRICTING_SCHEMA.attributes[2].levels
    race_levels = REDISTRICTING_SCHEMA.attributes[3].levels
    by_group = {
        g: np.zeros(perry.n_blocks, dtype=np.int64) for g in RI2010_SCHEMA.attributes[1].levels
    }
    for h, hisp in enumerate(hisp_levels):
        for r, race in enumerate(race_levels):
            by_group[raceeth_of(hisp, race)] += cube[:, :, :, h, r].sum(axis=(1, 2))
    for group, values in by_group.items():
        np.testing.assert_array_equal(values, ref[f"pop_{group}"].to_numpy(), err_msg=group)


def test_mdf_alternative_columns_give_the_same_histogram(perry, tmp_path):
    persons = pd.read_csv(PERSONS, dtype=str)
    mdf = persons.drop(columns=["GQTYPE_PL", "VOTING_AGE"])
    mdf["GQTYPE"] = persons["GQTYPE_PL"].map({"0": "000", "1": "101", "3": "301", "5": "501"})
    mdf["QAGE"] = np.where(persons["VOTING_AGE"] == "2", "40", "7")
    path = tmp_path / "mdf.csv"
    mdf.to_csv(path, index=False)
    again = load_ppmf(path)
    np.testing.assert_array_equal(again.counts, perry.counts)
    assert again.geography.equals(perry.geography)


def test_reads_only_needed_columns_and_tolerates_dropped_zeros():
    text = (
        "TABBLKST,TABBLKCOU,TABTRACTCE,TABBLKGRPCE,TABBLK,RTYPE,GQTYPE_PL,VOTING_AGE,CENHISP,CENRACE,NOTES\n"
        "1,105,686800,1,1000,3,0,2,1,1,anything at all\n"
        "1,105,686800,1,1000,5,3,2,2,7,\n"
    )
    h = load_ppmf(text.encode())
    assert h.geography["Block"].tolist() == ["011056868001000"]
    cube = h.counts.reshape(REDISTRICTING_SCHEMA.shape)
    assert cube[0, 1, 0, 0] == 1  # household, 18+, not Hispanic, CENRACE 01
    assert cube[3, 1, 1, 6] == 1  # GQ type 3, 18+, Hispanic, CENRACE 07
