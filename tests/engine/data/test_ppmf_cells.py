"""PPMF persons read in chunks as (block, cell, count) triples, summed into a sparse histogram."""

from __future__ import annotations

import gzip
import shutil

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from engine.core.errors import ValidationError
from engine.data import histogram as histogram_module
from engine.data.generated import load_generated_population
from engine.data.population import generate_population
from engine.data.ppmf_cells import (
    TRIPLES_SCHEMA,
    batch_block_cells,
    block_cell_matrix,
    iter_block_cells,
    read_block_cells,
)
from engine.schema.attributes import REDISTRICTING_SCHEMA


@pytest.fixture(scope="module")
def population(tmp_path_factory):
    out = tmp_path_factory.mktemp("cells") / "pop"
    generate_population(6_000, seed=11, states=["RI"], out_dir=out)
    return out


def _reference(path) -> tuple[np.ndarray, np.ndarray]:
    """Block ids (sorted) and the dense histogram, by pandas and np.add.at (the old loader)."""
    frame = pd.read_csv(path, dtype=str)
    block = (frame["TABBLKST"] + frame["TABBLKCOU"] + frame["TABTRACTCE"] + frame["TABBLK"]).values
    index, blocks = pd.factorize(block, sort=True)
    cell = np.ravel_multi_index(
        (
            frame["GQTYPE_PL"].astype(int),
            frame["VOTING_AGE"].astype(int) - 1,
            frame["CENHISP"].astype(int) - 1,
            frame["CENRACE"].astype(int) - 1,
        ),
        REDISTRICTING_SCHEMA.shape,
    )
    dense = np.zeros((len(blocks), REDISTRICTING_SCHEMA.size), dtype=np.int64)
    np.add.at(dense, (index, cell), 1)
    return np.asarray(blocks, dtype=object), dense


@pytest.mark.parametrize("block_bytes", [4_096, 60_000, 32 << 20])
def test_chunks_sum_to_the_dense_histogram_whatever_their_size(population, block_bytes):
    blocks, dense = _reference(population / "ppmf.csv")
    read = read_block_cells(population / "ppmf.csv", block_bytes=block_bytes)
    assert read.persons == dense.sum()
    assert list(read.blocks) == list(blocks)
    assert read.counts.has_sorted_indices and read.counts.dtype == np.int64
    assert np.all(read.counts.data > 0)
    np.testing.assert_array_equal(read.counts.toarray(), dense)
    if block_bytes == 4_096:
        assert len(list(iter_block_cells(population / "ppmf.csv", block_bytes=block_bytes))) > 10


def test_gzip_file_and_block_frame_rows(population, tmp_path):
    with open(population / "ppmf.csv", "rb") as raw, gzip.open(tmp_path / "ppmf.csv.gz", "wb") as z:
        shutil.copyfileobj(raw, z)
    blocks, dense = _reference(population / "ppmf.csv")
    frame = pd.Index(["440019999999999", *blocks[::-1]])  # a frame row order, one empty block
    read = read_block_cells(tmp_path / "ppmf.csv.gz", blocks=frame, block_bytes=8_192)
    expected = np.vstack([np.zeros((1, dense.shape[1]), dtype=np.int64), dense[::-1]])
    np.testing.assert_array_equal(read.counts.toarray(), expected)
    with pytest.raises(ValidationError, match="persons in block .* block frame lacks"):
        read_block_cells(tmp_path / "ppmf.csv.gz", blocks=frame[:-1])


def test_bad_codes_name_the_file_row_even_in_a_later_chunk(population, tmp_path):
    lines = (population / "ppmf.csv").read_text().splitlines()
    header = lines[0].split(",")
    row = len(lines) - 3  # 0-based line index → file row len(lines) - 2
    values = lines[row].split(",")
    values[header.index("CENRACE")] = "64"
    lines[row] = ",".join(values)
    bad = tmp_path / "ppmf.csv"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(
        ValidationError, match=rf"ppmf.csv row {row + 1}: CENRACE 64 is out of range"
    ):
        read_block_cells(bad, block_bytes=4_096)
    values[header.index("CENRACE")] = "01"
    values[header.index("RTYPE")] = "5"
    values[header.index("GQTYPE_PL")] = "0"
    lines[row] = ",".join(values)
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValidationError, match=rf"row {row + 1}: RTYPE and GQTYPE_PL disagree"):
        read_block_cells(bad, block_bytes=4_096)


def test_any_arrow_batch_and_the_triples_back_as_arrow():
    batch = pa.RecordBatch.from_pydict(
        {
            "TABBLKST": ["44", "44", "44"],
            "TABBLKCOU": ["001", "001", "003"],
            "TABTRACTCE": ["000100", "000100", "000200"],
            "TABBLK": ["1000", "1000", "2001"],
            "RTYPE": ["3", "3", "5"],  # strings, as a reader without a schema gives them
            "GQTYPE_PL": [0, 0, 4],
            "VOTING_AGE": [2, 2, 1],
            "CENHISP": [1, 1, 2],
            "CENRACE": [1, 1, 63],
        }
    )
    cells = batch_block_cells(batch)
    assert cells.persons == 3
    table = cells.to_arrow()
    assert table.schema == TRIPLES_SCHEMA
    gq_cell = np.ravel_multi_index((4, 0, 1, 62), REDISTRICTING_SCHEMA.shape)
    household_cell = np.ravel_multi_index((0, 1, 0, 0), REDISTRICTING_SCHEMA.shape)
    assert table.to_pylist() == [
        {"block": "440010001001000", "cell": household_cell, "count": 2},
        {"block": "440030002002001", "cell": gq_cell, "count": 1},
    ]
    merged = block_cell_matrix([cells, cells])
    assert merged.persons == 6 and merged.counts[0, household_cell] == 4
    with pytest.raises(ValidationError, match="lacks column"):
        batch_block_cells(batch.drop_columns(["CENRACE"]))


def test_generated_population_loads_sparse_and_never_densifies(population, monkeypatch):
    hist = load_generated_population(population)
    assert hist.is_sparse
    monkeypatch.setattr(histogram_module, "MAX_DENSE_BLOCK_CELLS", 0)
    _blocks, dense = _reference(population / "ppmf.csv")
    assert hist.total == dense.sum() and hist.nnz == np.count_nonzero(dense)
    frame = pd.read_csv(population / "blocks.csv", dtype={"TABBLK": str})
    np.testing.assert_array_equal(hist.block_totals, frame["PERSONS"].to_numpy())
    with pytest.raises(ValidationError, match="too many for one dense array"):
        _ = hist.counts


def test_generated_histogram_from_records_or_counts_equals_the_chunked_read(population):
    """The Spark backend's entry (per-record cells, or groupBy counts) gives the same CSR."""
    import pyarrow.csv as pacsv

    from engine.data.generated import PPMF_TYPES, generated_cells, generated_histogram
    from engine.data.population import read_manifest

    table = pacsv.read_csv(
        population / "ppmf.csv",
        convert_options=pacsv.ConvertOptions(
            include_columns=list(PPMF_TYPES), column_types=PPMF_TYPES
        ),
    )
    block, cell = generated_cells(table, "ppmf.csv")
    codes, uniques = pd.factorize(np.asarray(block.to_numpy(zero_copy_only=False), dtype=object))
    manifest = read_manifest(population)
    chunked = load_generated_population(population)
    per_record = generated_histogram(population, manifest, np.asarray(uniques), codes, cell)
    triples = batch_block_cells(table)
    counted = generated_histogram(
        population, manifest, triples.blocks, triples.block_code, triples.cell, triples.count
    )
    for hist in (per_record, counted):
        assert hist.is_sparse and hist.extra["persons_read"] == chunked.extra["persons_read"]
        assert (hist.sparse_counts != chunked.sparse_counts).nnz == 0
