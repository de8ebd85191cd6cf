"""TopDown input from a generated population folder: PPMF persons + the block frame (SPEC §6).

:func:`load_generated_population` reads ``ppmf.csv`` with the PPMF loader
(:func:`engine.data.ppmf.load_ppmf`, same validation) and ``blocks.csv``, the block frame written by
:mod:`engine.data.population`. Every block of the frame becomes a row of the histogram — also the
blocks without persons, which the PPMF alone cannot list — and the frame's housing units, occupied
units and GQ facilities go to ``extra`` (``housing_units``, ``occupied_units``, ``gq_facilities``),
which :mod:`engine.topdown.constraints` holds as structural zeros and lower bounds. PHSafe reads the
same folder's ``persons.csv``/``units.csv``/``geo.csv`` with :mod:`engine.data.cef`.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute  # noqa: F401 - registers pa.compute
import pyarrow.csv as pacsv

from engine.data.geography import BLOCK_LEVELS, geography_from_block_ids
from engine.data.histogram import BlockHistogram
from engine.data.population import BLOCK_COLUMNS, MANIFEST, read_manifest
from engine.data.schemas import REDISTRICTING_SCHEMA
from engine.data.sniff import compressed_pair
from phexplore.errors import ValidationError

_CODES = {
    "RTYPE": (3, 5),
    "GQTYPE_PL": (0, 7),
    "VOTING_AGE": (1, 2),
    "CENHISP": (1, 2),
    "CENRACE": (1, 63),
}


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


PPMF_GEO = ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK")
"""The ``ppmf.csv`` columns whose concatenation is a person's 15-digit block id."""
PPMF_TYPES: dict[str, str] = {**{c: "string" for c in PPMF_GEO}, **{c: "int16" for c in _CODES}}
"""Arrow types of the ``ppmf.csv`` columns read (geography as text, codes as integers)."""


def _read_ppmf(path: Path) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Block ids (unique) and (block index, cell) of every person of a generated ``ppmf.csv``.

    A columnar read (Arrow) of our own output: tens of millions of rows in seconds. Codes are
    checked against their domains; the generic PPMF loader (:mod:`engine.data.ppmf`) validates
    uploads row by row with located messages.
    """
    table = pacsv.read_csv(
        path,
        convert_options=pacsv.ConvertOptions(
            include_columns=[*PPMF_GEO, *_CODES], column_types=PPMF_TYPES
        ),
    )
    block, cell = generated_cells(table, path.name)
    codes, uniques = pd.factorize(block.to_numpy(zero_copy_only=False))
    return np.asarray(uniques, dtype=object), (codes, cell)


def generated_cells(
    table: pa.Table | pa.RecordBatch, name: str, first_line: int = 2
) -> tuple[pa.Array, np.ndarray]:
    """Each record's block id and 2,016-cell index, from ``ppmf.csv`` columns typed as
    :data:`PPMF_TYPES`; ``first_line`` is the file line (1-based, the header on line 1) of the
    first record, which the messages call its row.

    Raises a ValidationError naming the file row of the first code out of its domain. The Spark
    backend calls it on each batch of records on the executors (:mod:`engine.spark.ppmf`).
    """
    values = {c: table.column(c).to_numpy(zero_copy_only=False) for c in _CODES}
    for column, (low, high) in _CODES.items():
        bad = (values[column] < low) | (values[column] > high)
        if column == "RTYPE":
            bad = ~np.isin(values[column], (3, 5))
        if np.any(bad):
            at = int(np.flatnonzero(bad)[0])
            raise ValidationError(
                f"{name} row {at + first_line}: {column} {values[column][at]} is out of range"
            )
    if np.any((values["RTYPE"] == 5) != (values["GQTYPE_PL"] > 0)):
        at = int(np.flatnonzero((values["RTYPE"] == 5) != (values["GQTYPE_PL"] > 0))[0])
        raise ValidationError(f"{name} row {at + first_line}: RTYPE and GQTYPE_PL disagree")
    block = pa.compute.binary_join_element_wise(*[table.column(c) for c in PPMF_GEO], "")
    cell = np.ravel_multi_index(
        (
            values["GQTYPE_PL"].astype(np.int64),
            values["VOTING_AGE"].astype(np.int64) - 1,
            values["CENHISP"].astype(np.int64) - 1,
            values["CENRACE"].astype(np.int64) - 1,
        ),
        REDISTRICTING_SCHEMA.shape,
    )
    return block, cell


def load_generated_population(directory: str | os.PathLike[str]) -> BlockHistogram:
    """The 2,016-cell block histogram of every block of the frame, with its unit frame."""
    folder = Path(directory)
    manifest = read_manifest(folder)
    blocks_ppmf, cells = _read_ppmf(_find(folder, "ppmf"))
    return generated_histogram(folder, manifest, blocks_ppmf, cells[0], cells[1])


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
    checked against them. The Spark backend passes the ``groupBy(block, cell)`` counts its
    executors made of ``ppmf.csv`` (:mod:`engine.spark.ppmf`)."""
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
    rows = index.get_indexer(blocks_ppmf)
    if np.any(rows < 0):
        bad = blocks_ppmf[rows < 0][0]
        raise ValidationError(f"ppmf.csv has persons in block {bad}, which blocks.csv lacks")
    counts = np.zeros((len(table), REDISTRICTING_SCHEMA.size), dtype=np.int64)
    np.add.at(counts, (rows[block_index], cell), 1 if count is None else count)
    frame_persons = table["PERSONS"].to_numpy(dtype=np.int64)
    if not np.array_equal(counts.sum(axis=1), frame_persons):
        block = geography["Block"].to_numpy()[
            np.flatnonzero(counts.sum(axis=1) != frame_persons)[0]
        ]
        raise ValidationError(f"blocks.csv and ppmf.csv disagree on the persons of block {block}")
    gq = table[[f"GQ_FACILITIES_{t}" for t in range(1, 8)]].to_numpy(dtype=np.int64)
    return BlockHistogram(
        schema=REDISTRICTING_SCHEMA,
        levels=BLOCK_LEVELS,
        geography=geography,
        counts=counts,
        source=f"PHExplore generated population (seed {manifest['seed']})",
        licence="generated data (no licence restriction)",
        extra={
            "persons_read": int(cell.size if count is None else count.sum()),
            "housing_units": table["HOUSING_UNITS"].to_numpy(dtype=np.int64),
            "occupied_units": table["OCCUPIED_UNITS"].to_numpy(dtype=np.int64),
            "gq_facilities": gq,
            "manifest": manifest,
        },
    )
