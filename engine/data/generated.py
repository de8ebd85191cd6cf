"""TopDown input from a generated population folder: PPMF persons + the block frame (docs/science.md
§6).

:func:`load_generated_population` reads ``ppmf.csv`` chunk by chunk into (block, cell, count)
triples (:mod:`engine.data.ppmf_cells`) summed into a sparse (CSR) block histogram — never the
dense ``blocks × 2,016`` array, 4.7 GB for a 10,000,000-person state (docs/topdown.md, "Sparse
block histograms from the file") — and ``blocks.csv``, the block frame written by
:mod:`engine.data.population`. Every block of the frame becomes a row of the histogram — also the
blocks without persons, which the PPMF alone cannot list — and the frame's housing units, occupied
units and GQ facilities go to ``extra`` (``housing_units``, ``occupied_units``, ``gq_facilities``),
which :mod:`engine.topdown.constraints` holds as structural zeros and lower bounds. A folder
written with places (``places.csv``, :mod:`engine.data.places`) gives each block's ``PLACEFP`` in
``extra["places"]`` (``"99999"``: in no place), the entities production's optimized spine targets
(:func:`engine.topdown.spine.entities.places_entity_set`); older folders have none. PHSafe reads
the same folder's ``persons.csv``/``units.csv``/``geo.csv`` with :mod:`engine.data.cef`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import scipy.sparse as sp

from engine.core.errors import ValidationError
from engine.core.sniff import compressed_pair
from engine.data.geography import BLOCK_LEVELS, geography_from_block_ids
from engine.data.histogram import BlockHistogram
from engine.data.population import MANIFEST, read_manifest
from engine.data.population_chunk import BLOCK_COLUMNS
from engine.data.ppmf_cells import CODE_RANGES, GEO_COLUMNS, read_block_cells, record_cells
from engine.schema.attributes import REDISTRICTING_SCHEMA


def _find(directory: Path, stem: str) -> Path:
    found = compressed_pair(directory, f"{stem}.csv")  # refuses x.csv beside a stale x.csv.gz
    if found is not None:
        return found
    raise ValidationError(f"{directory} has no {stem}.csv (or .csv.gz); generate the folder again")


def is_generated_population(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder written by :func:`engine.data.population.generate_population`."""
    return Path(path).is_dir() and (Path(path) / MANIFEST).is_file()


def _block_ids(frame: pd.DataFrame) -> pd.DataFrame:
    ids = (
        frame["TABBLKST"].astype(str)
        + frame["TABBLKCOU"].astype(str)
        + frame["TABTRACTCE"].astype(str)
        + frame["TABBLK"].astype(str)
    )
    return geography_from_block_ids(ids.to_numpy(dtype=object))


PPMF_GEO = GEO_COLUMNS
"""The ``ppmf.csv`` columns whose concatenation is a person's 15-digit block id."""
PPMF_TYPES: dict[str, str] = {
    **{c: "string" for c in PPMF_GEO},
    **{c: "int16" for c in CODE_RANGES},
}
"""Arrow types of the ``ppmf.csv`` columns read (geography as text, codes as integers)."""


def generated_cells(
    table: pa.Table | pa.RecordBatch, name: str, first_line: int = 2
) -> tuple[pa.Array, np.ndarray]:
    """Each record's block id and 2,016-cell index, from ``ppmf.csv`` columns typed as
    :data:`PPMF_TYPES`; ``first_line`` is the file line (1-based, the header on line 1) of the
    first record, which the messages call its row (:func:`engine.data.ppmf_cells.record_cells`).

    Raises a ValidationError naming the file row of the first code out of its domain. The Spark
    backend calls it on each batch of records on the executors (:mod:`engine.spark.persons`).
    """
    return record_cells(table, file=name, first_row=first_line)


def load_generated_population(directory: str | os.PathLike[str]) -> BlockHistogram:
    """The 2,016-cell block histogram of every block of the frame, with its unit frame; the
    persons read chunk by chunk into a sparse histogram (:func:`read_block_cells`)."""
    folder = Path(directory)
    manifest = read_manifest(folder)
    frame = _block_frame(folder)
    read = read_block_cells(_find(folder, "ppmf"), blocks=frame.index)
    return _histogram(folder, manifest, frame, read.counts, read.persons)


def generated_histogram(
    folder: Path,
    manifest: dict[str, object],
    blocks_ppmf: np.ndarray,
    block_index: np.ndarray,
    cell: np.ndarray,
    count: np.ndarray | None = None,
) -> BlockHistogram:
    """The histogram of every block of the folder's ``blocks.csv`` frame, with its unit frame,
    from the persons' cells: ``blocks_ppmf[block_index[i]]`` is the block of person (or, with
    ``count``, of the ``count[i]`` persons of) cell ``cell[i]``; the frame's person counts are
    checked against them. Sparse (CSR), as :func:`load_generated_population`'s. The Spark backend
    passes the ``groupBy(block, cell)`` counts its executors made of ``ppmf.csv``
    (:mod:`engine.spark.persons`)."""
    frame = _block_frame(folder)
    rows = frame.index.get_indexer(blocks_ppmf)
    if np.any(rows < 0):
        bad = blocks_ppmf[rows < 0][0]
        raise ValidationError(f"ppmf.csv has persons in block {bad}, which blocks.csv lacks")
    cell = np.asarray(cell, dtype=np.int64)
    weights = np.ones(cell.size, dtype=np.int64) if count is None else np.asarray(count, np.int64)
    counts = sp.csr_matrix(
        (weights, (rows[np.asarray(block_index, dtype=np.int64)], cell)),
        shape=(len(frame.index), REDISTRICTING_SCHEMA.size),
        dtype=np.int64,
    )
    return _histogram(folder, manifest, frame, counts, int(weights.sum()))


@dataclass(frozen=True)
class _Frame:
    """A folder's ``blocks.csv``: the table, the blocks' geography and their unique ids."""

    table: pd.DataFrame
    geography: pd.DataFrame
    index: pd.Index


def _block_frame(folder: Path) -> _Frame:
    table = pacsv.read_csv(
        _find(folder, "blocks"),
        convert_options=pacsv.ConvertOptions(column_types={c: "string" for c in BLOCK_COLUMNS[:5]}),
    ).to_pandas()
    missing = [c for c in BLOCK_COLUMNS if c not in table.columns]
    if missing:
        raise ValidationError(f"{folder / 'blocks.csv'} lacks column(s) {missing}")
    geography = _block_ids(table)
    index = pd.Index(geography["Block"])
    if not index.is_unique:
        raise ValidationError(f"{folder / 'blocks.csv'} repeats a block")
    return _Frame(table, geography, index)


def _histogram(
    folder: Path,
    manifest: dict[str, object],
    frame: _Frame,
    counts: sp.spmatrix,
    persons: int,
) -> BlockHistogram:
    """The histogram of the frame's blocks (persons checked against the frame's PERSONS)."""
    table, geography = frame.table, frame.geography
    totals = np.asarray(counts.sum(axis=1), dtype=np.int64).reshape(-1)
    frame_persons = table["PERSONS"].to_numpy(dtype=np.int64)
    if not np.array_equal(totals, frame_persons):
        block = geography["Block"].to_numpy()[np.flatnonzero(totals != frame_persons)[0]]
        raise ValidationError(f"blocks.csv and ppmf.csv disagree on the persons of block {block}")
    gq = table[[f"GQ_FACILITIES_{t}" for t in range(1, 8)]].to_numpy(dtype=np.int64)
    places = _places(folder, frame)
    return BlockHistogram(
        schema=REDISTRICTING_SCHEMA,
        levels=BLOCK_LEVELS,
        geography=geography,
        counts=counts,
        source=f"PHExplore generated population (seed {manifest['seed']})",
        licence="generated data (no licence restriction)",
        extra={
            "persons_read": int(persons),
            "housing_units": table["HOUSING_UNITS"].to_numpy(dtype=np.int64),
            "occupied_units": table["OCCUPIED_UNITS"].to_numpy(dtype=np.int64),
            "gq_facilities": gq,
            "manifest": manifest,
            **({} if places is None else {"places": places}),
        },
    )


def _places(folder: Path, frame: _Frame) -> np.ndarray | None:
    """Each block's PLACEFP (object array in the frame's order) from ``places.csv``; None for a
    folder written before places existed."""
    found = compressed_pair(folder, "places.csv")
    if found is None:
        return None
    columns = {c: "string" for c in (*BLOCK_COLUMNS[:5], "PLACEFP")}
    table = pacsv.read_csv(
        found, convert_options=pacsv.ConvertOptions(column_types=columns)
    ).to_pandas()
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValidationError(f"{found} lacks column(s) {missing}; generate the folder again")
    rows = frame.index.get_indexer(_block_ids(table)["Block"])
    if np.any(rows < 0) or len(rows) != len(frame.index) or len(set(rows)) != len(rows):
        raise ValidationError(
            f"{found} does not list every block of blocks.csv exactly once; generate the folder "
            "again"
        )
    out = np.empty(len(frame.index), dtype=object)
    out[rows] = table["PLACEFP"].to_numpy(dtype=object)
    return out
