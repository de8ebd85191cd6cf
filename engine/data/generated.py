"""TopDown input from a generated population folder: PPMF persons + the block frame (docs/data.md).

:func:`load_generated_population` reads ``ppmf.csv`` with the PPMF loader's reader and checks
(:func:`engine.data.ppmf.ppmf_cells`: batch by batch, located problems), each batch's persons
summed into their non-zero (block, cell) counts and then into a sparse (CSR) block histogram —
never the dense ``blocks × 2,016`` array, 4.7 GB for a 10,000,000-person state — and ``blocks.csv``,
the block frame written by :mod:`engine.data.population`. Every block of the frame becomes a row of
the histogram — also the blocks without persons, which the PPMF alone cannot list — and the
frame's housing units, occupied units and GQ facilities go to ``extra`` (``housing_units``,
``occupied_units``, ``gq_facilities``), which :mod:`engine.topdown.constraints` holds as structural
zeros and lower bounds. A folder written with places (``places.csv``, :mod:`engine.data.places`)
gives each block's ``PLACEFP`` in ``extra["places"]`` (``"99999"``: in no place), the entities
production's optimized spine targets (:func:`engine.topdown.spine.entities.places_entity_set`);
older folders have none. PHSafe reads the same folder's ``persons.csv``/``units.csv``/``geo.csv``
with :mod:`engine.data.cef`. A generated folder is our own output: its files are read without the
size limit of a user's file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

from engine.core.errors import DataValidationError, Problem, ValidationError
from engine.data.columns import Integers
from engine.data.csv_reader import CsvReader
from engine.data.folders import file_if_any, one_file
from engine.data.geography import (
    BLOCK_LEVELS,
    block_numbers_to_ids,
    component_blocks,
    geography_from_block_ids,
    repeated_block_problems,
)
from engine.data.histogram import BlockHistogram
from engine.data.population import MANIFEST, read_manifest
from engine.data.population_chunk import BLOCK_COLUMNS
from engine.data.ppmf import COLUMNS as PPMF_COLUMNS
from engine.data.ppmf import block_cell_counts, ppmf_cells
from engine.data.problems import raise_if
from engine.schema.attributes import REDISTRICTING_SCHEMA

NO_LIMIT = 1 << 62
"""Our own files are read without a size limit."""


def find_file(directory: Path, stem: str) -> Path:
    """The folder's ``stem.csv`` (or ``.csv.gz``); refused when missing or ambiguous."""
    return one_file(directory, stem, what="generated population", fix="generate the folder again")


def is_generated_population(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder written by :func:`engine.data.population.generate_population`."""
    return Path(path).is_dir() and (Path(path) / MANIFEST).is_file()


def load_generated_population(
    directory: str | os.PathLike[str], *, block_bytes: int | None = None
) -> BlockHistogram:
    """The 2,016-cell block histogram of every block of the frame, with its unit frame; the
    persons read batch by batch into their non-zero block cells (``block_bytes`` of text a
    batch)."""
    folder = Path(directory)
    manifest = read_manifest(folder)
    frame = _block_frame(folder)
    path = find_file(folder, "ppmf")
    options = {} if block_bytes is None else {"block_bytes": block_bytes}
    reader = CsvReader(path, PPMF_COLUMNS, max_bytes=NO_LIMIT, **options)
    blocks, index, cell, count = block_cell_counts(ppmf_cells(reader), reader.problems, path.name)
    return _from_counts(folder, manifest, frame, blocks, index, cell, count)


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
    return _from_counts(
        folder, manifest, _block_frame(folder), blocks_ppmf, block_index, cell, count
    )


def _from_counts(
    folder: Path,
    manifest: dict[str, object],
    frame: _Frame,
    blocks_ppmf: np.ndarray,
    block_index: np.ndarray,
    cell: np.ndarray,
    count: np.ndarray | None,
) -> BlockHistogram:
    rows = frame.index.get_indexer(np.asarray(blocks_ppmf, dtype=object))
    if np.any(rows < 0):
        bad = np.asarray(blocks_ppmf)[rows < 0][0]
        raise DataValidationError(
            [
                Problem(
                    "ppmf.csv",
                    f"persons in block {bad}, which blocks.csv lacks: the files are not of one "
                    "generated population; generate the folder again",
                )
            ]
        )
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
    """A folder's ``blocks.csv``: its counts, the blocks' geography and their unique ids."""

    values: dict[str, np.ndarray]
    geography: pd.DataFrame
    index: pd.Index


def _block_frame(folder: Path) -> _Frame:
    path = find_file(folder, "blocks")
    reader = CsvReader(path, BLOCK_COLUMNS, max_bytes=NO_LIMIT)
    table = reader.read({c: Integers() for c in BLOCK_COLUMNS[5:]})
    names = dict(zip(BLOCK_LEVELS, BLOCK_COLUMNS[:5], strict=True))
    problems = reader.problems
    numbers, valid = component_blocks(
        problems, path.name, {lv: table.text[c] for lv, c in names.items()}, names, table.rows
    )
    repeated_block_problems(problems, path.name, "TABBLK", numbers, table.rows, valid)
    raise_if(problems, summary=f"{path.name}: not a usable block frame")
    geography = geography_from_block_ids(block_numbers_to_ids(numbers))
    return _Frame(table.values, geography, pd.Index(geography["Block"]))


def _histogram(
    folder: Path,
    manifest: dict[str, object],
    frame: _Frame,
    counts: sp.spmatrix,
    persons: int,
) -> BlockHistogram:
    """The histogram of the frame's blocks (persons checked against the frame's PERSONS)."""
    values, geography = frame.values, frame.geography
    totals = np.asarray(counts.sum(axis=1), dtype=np.int64).reshape(-1)
    frame_persons = values["PERSONS"]
    if not np.array_equal(totals, frame_persons):
        block = geography["Block"].to_numpy()[np.flatnonzero(totals != frame_persons)[0]]
        raise ValidationError(f"blocks.csv and ppmf.csv disagree on the persons of block {block}")
    gq = np.column_stack([values[f"GQ_FACILITIES_{t}"] for t in range(1, 8)]).astype(np.int64)
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
            "housing_units": values["HOUSING_UNITS"].astype(np.int64),
            "occupied_units": values["OCCUPIED_UNITS"].astype(np.int64),
            "gq_facilities": gq,
            "manifest": manifest,
            **({} if places is None else {"places": places}),
        },
    )


def _places(folder: Path, frame: _Frame) -> np.ndarray | None:
    """Each block's PLACEFP (object array in the frame's order) from ``places.csv``, read by the
    one reader with the block frame's checks; None for a folder written before places existed."""
    path = file_if_any(folder, "places")
    if path is None:
        return None
    columns = (*BLOCK_COLUMNS[:5], "PLACEFP")
    reader = CsvReader(path, columns, max_bytes=NO_LIMIT)
    table = reader.read()
    names = dict(zip(BLOCK_LEVELS, BLOCK_COLUMNS[:5], strict=True))
    problems = reader.problems
    numbers, valid = component_blocks(
        problems, path.name, {lv: table.text[c] for lv, c in names.items()}, names, table.rows
    )
    repeated_block_problems(problems, path.name, "TABBLK", numbers, table.rows, valid)
    raise_if(problems, summary=f"{path.name}: not a usable list of places")
    ids = np.asarray(block_numbers_to_ids(numbers).to_numpy(zero_copy_only=False), dtype=object)
    rows = frame.index.get_indexer(ids)
    if np.any(rows < 0) or len(rows) != len(frame.index):
        raise ValidationError(
            f"{path} does not list every block of blocks.csv exactly once; generate the folder "
            "again"
        )
    out = np.empty(len(frame.index), dtype=object)
    out[rows] = table.strings("PLACEFP").astype(object)
    return out
