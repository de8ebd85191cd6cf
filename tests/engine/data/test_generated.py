"""A generated population's persons read batch by batch into a sparse block histogram.

``ppmf.csv`` goes through the PPMF loader's reader and checks (located problems, any batch); its
persons are summed into non-zero (block, cell) counts and placed on the rows of the block frame.
"""

from __future__ import annotations

import gzip
import shutil

import numpy as np
import pandas as pd
import pytest

from engine.core.errors import DataValidationError, ValidationError
from engine.data import histogram as histogram_module
from engine.data.generated import generated_histogram, load_generated_population
from engine.data.population import generate_population, read_manifest
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


def _on_frame(hist, blocks: np.ndarray) -> np.ndarray:
    """The histogram's rows of ``blocks`` (the frame also lists blocks without persons)."""
    rows = pd.Index(hist.geography["Block"]).get_indexer(blocks)
    return hist.sparse_counts[rows].toarray()


@pytest.mark.parametrize("block_bytes", [4_096, 60_000, 32 << 20])
def test_batches_sum_to_the_dense_histogram_whatever_their_size(population, block_bytes):
    blocks, dense = _reference(population / "ppmf.csv")
    hist = load_generated_population(population, block_bytes=block_bytes)
    assert hist.total == dense.sum() == hist.extra["persons_read"]
    assert hist.sparse_counts.has_sorted_indices and hist.sparse_counts.dtype == np.int64
    assert np.all(hist.sparse_counts.data > 0)
    np.testing.assert_array_equal(_on_frame(hist, blocks), dense)


def test_gzip_persons_give_the_same_histogram(population, tmp_path):
    folder = tmp_path / "pop"
    shutil.copytree(population, folder)
    with open(folder / "ppmf.csv", "rb") as raw, gzip.open(folder / "ppmf.csv.gz", "wb") as z:
        shutil.copyfileobj(raw, z)
    with pytest.raises(DataValidationError, match="ppmf.csv and ppmf.csv.gz"):
        load_generated_population(folder)  # two candidates: never one picked
    (folder / "ppmf.csv").unlink()
    packed = load_generated_population(folder, block_bytes=8_192)
    plain = load_generated_population(population)
    assert (packed.sparse_counts != plain.sparse_counts).nnz == 0


def test_bad_codes_are_located_even_in_a_later_batch(population, tmp_path):
    folder = tmp_path / "pop"
    shutil.copytree(population, folder)
    lines = (folder / "ppmf.csv").read_text().splitlines()
    header = lines[0].split(",")
    row = len(lines) - 3
    values = lines[row].split(",")
    values[header.index("CENRACE")] = "64"
    lines[row] = ",".join(values)
    other = lines[5].split(",")
    other[header.index("RTYPE")] = "5"
    other[header.index("GQTYPE_PL")] = "0"
    lines[5] = ",".join(other)
    (folder / "ppmf.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataValidationError) as caught:
        load_generated_population(folder, block_bytes=4_096)
    located = {(p.row, p.column): p.message for p in caught.value.problems}
    assert "unknown code '64'" in located[(row, "CENRACE")]
    assert "the person has no unit" in located[(5, "GQTYPE_PL")]


def test_generated_population_loads_sparse_and_never_densifies(population, monkeypatch):
    hist = load_generated_population(population)
    assert hist.is_sparse
    monkeypatch.setattr(histogram_module, "MAX_DENSE_BLOCK_CELLS", 0)
    _blocks, dense = _reference(population / "ppmf.csv")
    assert hist.total == dense.sum() and hist.nnz == np.count_nonzero(dense)
    frame = pd.read_csv(population / "blocks.csv", dtype={"TABBLK": str})
    np.testing.assert_array_equal(hist.block_totals, frame["PERSONS"].to_numpy())
    from engine.core.errors import ValidationError

    with pytest.raises(ValidationError, match="too many for one dense array"):
        _ = hist.counts


def test_generated_histogram_from_records_or_counts_equals_the_batched_read(population):
    """The Spark backend's entry (per-record cells, or groupBy counts) gives the same CSR."""
    blocks, dense = _reference(population / "ppmf.csv")
    manifest = read_manifest(population)
    loaded = load_generated_population(population)
    block_index, cell = np.nonzero(dense)
    count = dense[block_index, cell]
    counted = generated_histogram(population, manifest, blocks, block_index, cell, count)
    per_record = generated_histogram(
        population,
        manifest,
        blocks,
        np.repeat(block_index, count),
        np.repeat(cell, count),
    )
    for other in (counted, per_record):
        assert (other.sparse_counts != loaded.sparse_counts).nnz == 0
        assert other.geography.equals(loaded.geography)
        np.testing.assert_array_equal(other.extra["gq_facilities"], loaded.extra["gq_facilities"])
    with pytest.raises(DataValidationError, match="which blocks.csv lacks"):
        generated_histogram(population, manifest, np.array(["449999999999999"]), [0], [0])


def test_places_are_read_by_the_one_reader_with_located_problems(population, tmp_path):
    hist = load_generated_population(population)
    places = pd.read_csv(population / "places.csv", dtype=str)
    assert list(hist.extra["places"]) == list(places["PLACEFP"])  # the frame's order
    folder = tmp_path / "pop"
    shutil.copytree(population, folder)
    lines = (folder / "places.csv").read_text().splitlines()
    values = lines[3].split(",")
    values[3] = "X"  # TABBLKGRPCE
    lines[3] = ",".join(values)
    lines[6] = lines[5]  # a block listed twice
    (folder / "places.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataValidationError) as caught:
        load_generated_population(folder)
    located = {(p.file, p.row) for p in caught.value.problems}
    assert ("places.csv", 3) in located and ("places.csv", 6) in located
    (folder / "places.csv").write_text("\n".join(lines[:1] + lines[2:3]) + "\n")
    with pytest.raises(ValidationError, match="does not list every block"):
        load_generated_population(folder)
