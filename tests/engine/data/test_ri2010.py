"""Tests of the Rhode Island 2010 loader against the shipped sample's documented totals."""

from __future__ import annotations

import numpy as np
import pytest

from engine.core.errors import DataValidationError
from engine.data.geography import BLOCK_LEVELS
from engine.data.ri2010 import COLUMNS, load_ri2010
from engine.data.samples import samples_dir
from engine.schema.attributes import RI2010_SCHEMA

SAMPLE = samples_dir() / "ri2010" / "ri2010_blocks.csv"


@pytest.fixture(scope="module")
def ri2010():
    return load_ri2010(SAMPLE)


def test_documented_totals(ri2010):
    assert ri2010.total == 1_052_567
    assert ri2010.n_blocks == 25_181
    assert ri2010.counts.dtype == np.int64
    assert ri2010.counts.shape == (25_181, 16)
    assert ri2010.schema == RI2010_SCHEMA


def test_spine_sizes_and_full_ids(ri2010):
    geo = ri2010.geography
    assert ri2010.levels == BLOCK_LEVELS
    assert [geo[level].nunique() for level in BLOCK_LEVELS] == [1, 5, 244, 815, 25_181]
    first = geo.iloc[0]
    assert first["Block"] == "440010301001000"
    assert first["Block_Group"] == "440010301001"
    assert first["Tract"] == "44001030100"
    assert first["County"] == "44001"
    assert first["State"] == "44"


def test_cells_follow_votingage_then_raceeth(ri2010):
    # first block: pop 23 (19 white, 4 hisp), vap 12 (8 white, 4 hisp)
    cube = ri2010.counts[0].reshape(RI2010_SCHEMA.shape)
    assert cube[0, 1] == 11 and cube[1, 1] == 8  # white under 18 / 18+
    assert cube[0, 0] == 0 and cube[1, 0] == 4  # hisp
    vap_total = ri2010.counts.reshape(-1, 2, 8)[:, 1, :].sum()
    assert vap_total == 828_611  # RI 2010 voting-age population


def test_accepts_bytes_and_file_like(tmp_path):
    header = ",".join(COLUMNS)
    row = "440010301001000,3,0,3,0,0,0,0,0,0,2,0,2,0,0,0,0,0,0"
    data = f"{header}\n{row}\n".encode()
    import io

    for source in (data, io.BytesIO(data)):
        h = load_ri2010(source)
        assert h.total == 3 and h.counts[0].tolist()[1] == 1


def test_group_sum_mismatch_is_located():
    header = ",".join(COLUMNS)
    row = "440010301001000,4,0,3,0,0,0,0,0,0,2,0,2,0,0,0,0,0,0"
    with pytest.raises(DataValidationError) as info:
        load_ri2010(f"{header}\n{row}\n".encode(), name="x.csv")
    (problem,) = info.value.problems
    assert (problem.file, problem.row, problem.column) == ("x.csv", 1, "pop")
    assert "sum to 3" in problem.message
