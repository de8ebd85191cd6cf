"""Loader of PPMF / MDF person records into the 2,016-cell redistricting block histogram (TDA §5.1).

Format: the Census Bureau's Privacy-Protected Microdata File (PPMF) and Microdata Detail File (MDF)
person records, one row per person (``data/samples/ppmf_perry_al``; columns as documented in
``/work/shared/data/README.md``). Only these columns are read:

* geography ``TABBLKST`` (2 digits), ``TABBLKCOU`` (3), ``TABTRACTCE`` (6), ``TABBLKGRPCE`` (1),
  ``TABBLK`` (4) — combined into the full ids of :data:`~engine.data.geography.BLOCK_LEVELS`;
* ``RTYPE``: 3 = person in a housing unit, 5 = person in group quarters;
* ``GQTYPE_PL`` (0 = household, 1–7 = GQ major type), or else ``GQTYPE`` (MDF detailed 3-digit
  code: ``000`` household, first digit = major type, with 7xx, 8xx and 9xx all "other
  noninstitutional" = 7);
* ``VOTING_AGE`` (1 = under 18, 2 = 18 or over), or else ``QAGE`` (age in years, 0–115);
* ``CENHISP`` (1 = not Hispanic, 2 = Hispanic); ``CENRACE`` (``01``–``63``).

Records become :data:`~engine.schema.attributes.REDISTRICTING_SCHEMA` cells HHGQ × VOTINGAGE × HISPANIC ×
CENRACE, summed per block into a sparse (CSR) histogram (:attr:`BlockHistogram.sparse_counts`; the
dense form only on request, for small areas); only blocks with at least one person appear. A person's RTYPE must agree
with the GQ type (RTYPE 3 ⇔ household); a GQ person without a GQ type, or a household person with
one, is a person without a valid unit and is reported. The Perry County, AL sample holds 10,588
persons in 511 blocks.

``extra["gq_types_present"]`` ``(n_blocks, 7)`` marks the GQ types with persons in each block: GQ
facilities are invariant in production, so a type present has at least one facility (≥ 1 person)
and a type absent holds nobody (:mod:`engine.topdown.constraints`).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from engine.data.columns import Codes, Integers, digits_mask, texts_at
from engine.data.csv_reader import CsvReader
from engine.data.csv_records import CsvBatch
from engine.data.geography import (
    BLOCK_LEVELS,
    block_numbers_to_ids,
    component_blocks,
    geography_from_block_ids,
)
from engine.data.histogram import BlockHistogram
from engine.data.problems import Problems, clip, raise_if
from engine.data.sources import DEFAULT_MAX_BYTES, DataSource
from engine.schema.attributes import REDISTRICTING_SCHEMA

GEO_COLUMNS: dict[str, str] = {
    "State": "TABBLKST",
    "County": "TABBLKCOU",
    "Tract": "TABTRACTCE",
    "Block_Group": "TABBLKGRPCE",
    "Block": "TABBLK",
}
COLUMNS = (
    *GEO_COLUMNS.values(),
    "RTYPE",
    ("GQTYPE_PL", "GQTYPE"),
    ("VOTING_AGE", "QAGE"),
    "CENHISP",
    "CENRACE",
)
MAX_AGE = 115

HOUSEHOLD_RTYPE = "3"
GQ_RTYPE = "5"
GQTYPE_PL_CODES = ("0", "1", "2", "3", "4", "5", "6", "7")
"""GQTYPE_PL codes in HHGQ level order (0 = household)."""
MDF_GQTYPE = r"^(0{1,3}|[1-9][0-9][0-9])$"
"""An MDF detailed GQTYPE: ``000`` (household) or a 3-digit group-quarters type."""

SOURCE = "Census Bureau Privacy-Protected Microdata File (person records)"
LICENCE = "US Government work (public domain)"

HHGQ_STRIDE = REDISTRICTING_SCHEMA.size // REDISTRICTING_SCHEMA.shape[0]
"""Cells per HHGQ level: a cell's HHGQ level index is ``cell // HHGQ_STRIDE`` (C order)."""


def load_ppmf(
    source: DataSource,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    name: str | None = None,
) -> BlockHistogram:
    """Load PPMF/MDF person records as a redistricting (2,016-cell) :class:`BlockHistogram`.

    Read batch by batch (:func:`ppmf_cells`), each batch's persons summed into their non-zero
    (block, cell) counts, so memory holds those, never a column of the file. Raises
    :class:`~engine.core.errors.DataValidationError` listing every located problem.
    """
    reader = CsvReader(source, COLUMNS, max_bytes=max_bytes, name=name)
    return ppmf_histogram(*block_cell_counts(ppmf_cells(reader), reader.problems, reader.label))


def block_cell_counts(
    batches: Iterator[tuple[np.ndarray, np.ndarray]], problems: Problems, file: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(sorted 15-digit block ids, block index, cell, count)``: the non-zero (block, cell)
    counts of the ``(block number, cell)`` batches, summed batch by batch; raises every problem
    of ``problems`` once all batches are read."""
    n_cells = REDISTRICTING_SCHEMA.size
    keys: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    for numbers, cell in batches:
        if problems:
            continue  # the file is refused: only its problems are still gathered
        key, count = np.unique(numbers * n_cells + cell, return_counts=True)
        keys.append(key)
        counts.append(count.astype(np.int64))
    raise_if(problems, summary=not_usable(file))
    key = np.concatenate(keys) if keys else np.zeros(0, dtype=np.int64)
    count = np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64)
    key, inverse = np.unique(key, return_inverse=True)
    count = np.bincount(inverse.reshape(-1), weights=count, minlength=key.size).astype(np.int64)
    numbers, block_index = np.unique(key // n_cells, return_inverse=True)
    blocks = np.asarray(block_numbers_to_ids(numbers).to_numpy(zero_copy_only=False), dtype=object)
    return blocks, block_index.reshape(-1).astype(np.int64), key % n_cells, count


def ppmf_histogram(
    blocks: np.ndarray, block_index: np.ndarray, cell: np.ndarray, count: np.ndarray | None = None
) -> BlockHistogram:
    """The redistricting :class:`BlockHistogram` of the sorted 15-digit block ids ``blocks``:
    ``count[i]`` persons (1 without ``count``) of block ``blocks[block_index[i]]`` in cell
    ``cell[i]``; ``extra`` holds ``persons_read`` and ``gq_types_present`` (module docstring).

    :func:`load_ppmf` passes the summed counts of its batches; the Spark backend the
    ``groupBy(block, cell)`` counts its executors made (:mod:`engine.spark.persons`)."""
    weights = np.ones(cell.size, dtype=np.int64) if count is None else count.astype(np.int64)
    # Sparse from the start (docs/data.md, "Sparse block histograms"): summed (block, cell) pairs,
    # never a dense blocks × 2,016.
    counts = sp.csr_matrix(
        (weights, (block_index, cell)),
        shape=(len(blocks), REDISTRICTING_SCHEMA.size),
        dtype=np.int64,
    )
    hhgq = cell // HHGQ_STRIDE
    gq_present = np.zeros((len(blocks), len(GQTYPE_PL_CODES) - 1), dtype=np.int64)
    in_gq = hhgq > 0
    gq_present[block_index[in_gq], hhgq[in_gq] - 1] = 1
    return BlockHistogram(
        schema=REDISTRICTING_SCHEMA,
        levels=BLOCK_LEVELS,
        geography=geography_from_block_ids(np.asarray(blocks, dtype=object)),
        counts=counts,
        source=SOURCE,
        licence=LICENCE,
        extra={"persons_read": int(weights.sum()), "gq_types_present": gq_present},
    )


def not_usable(file: str) -> str:
    """The summary line of a PPMF/MDF file's problems."""
    return f"{file}: not usable PPMF/MDF person records"


def ppmf_kinds(found: dict[str, str]) -> dict[str, Codes | Integers]:
    """How the reader types the columns of a PPMF (GQTYPE_PL, VOTING_AGE) or MDF (GQTYPE, QAGE)
    file; an MDF GQTYPE is read as text (:func:`_hhgq`)."""
    kinds: dict[str, Codes | Integers] = {
        "RTYPE": Codes((HOUSEHOLD_RTYPE, GQ_RTYPE)),
        "CENHISP": Codes(("1", "2")),
        "CENRACE": Codes(REDISTRICTING_SCHEMA.attributes[3].levels, width=2),
    }
    if found["GQTYPE_PL"].upper() == "GQTYPE_PL":
        kinds["GQTYPE_PL"] = Codes(GQTYPE_PL_CODES, keep_text=True)
    if found["VOTING_AGE"].upper() == "VOTING_AGE":
        kinds["VOTING_AGE"] = Codes(("1", "2"))
    else:
        kinds["VOTING_AGE"] = Integers(minimum=0, maximum=MAX_AGE, what="age")
    return kinds


def ppmf_cells(reader: CsvReader) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Each batch's ``(block numbers, cells)`` of the records of a PPMF/MDF file (module
    docstring); problems go to ``reader.problems`` (the values of a batch with any are not
    usable). The Spark backend runs it on each batch of lines on the executors
    (:mod:`engine.spark.persons`)."""
    found = reader.layout.found
    kinds = ppmf_kinds(found)
    for batch in reader.batches(kinds):
        yield batch_cells(batch, reader.problems, reader.label, found)


def batch_cells(
    batch: CsvBatch, problems: Problems, file: str, found: dict[str, str]
) -> tuple[np.ndarray, np.ndarray]:
    """``(block numbers, cells)`` of one batch of PPMF/MDF records; problems added."""
    names = {level: found[column] for level, column in GEO_COLUMNS.items()}
    text = {level: batch.text[column] for level, column in GEO_COLUMNS.items()}
    numbers, _ = component_blocks(problems, file, text, names, batch.rows)
    rtype = batch.values["RTYPE"]
    hhgq, hhgq_ok = _hhgq(batch, problems, file, found)
    if "VOTING_AGE" in batch.values and found["VOTING_AGE"].upper() != "VOTING_AGE":
        votingage = (batch.values["VOTING_AGE"] >= 18).astype(np.int64)
    else:
        votingage = batch.values["VOTING_AGE"].astype(np.int64)
    rtype_ok = batch.valid["RTYPE"]
    known = hhgq_ok if rtype_ok is None else hhgq_ok & rtype_ok
    _unit_problems(problems, file, batch, rtype, hhgq, known, found["GQTYPE_PL"])
    cell = np.ravel_multi_index(
        (
            hhgq,
            votingage,
            batch.values["CENHISP"].astype(np.int64),
            batch.values["CENRACE"].astype(np.int64),
        ),
        REDISTRICTING_SCHEMA.shape,
    )
    return numbers, cell.astype(np.int64)


def _hhgq(
    batch: CsvBatch, problems: Problems, file: str, found: dict[str, str]
) -> tuple[np.ndarray, np.ndarray]:
    """HHGQ level index from GQTYPE_PL, or from an MDF detailed GQTYPE (first digit, 7–9 → 7)."""
    if "GQTYPE_PL" in batch.values:
        valid = batch.valid["GQTYPE_PL"]
        ok = np.ones(batch.n_rows, dtype=bool) if valid is None else valid
        return batch.values["GQTYPE_PL"].astype(np.int64), ok
    raw = batch.text["GQTYPE_PL"]
    ok = digits_mask(raw, 1, 3) & np.asarray(
        pc.match_substring_regex(raw, MDF_GQTYPE).to_numpy(zero_copy_only=False), dtype=bool
    )
    first = pc.utf8_slice_codeunits(pc.if_else(pa.array(ok), raw, "0"), 0, 1)
    major = np.minimum(np.asarray(pc.cast(first, pa.int64()).to_numpy(zero_copy_only=False)), 7)
    bad = np.flatnonzero(~ok)
    column = found["GQTYPE_PL"]
    problems.add(
        (column, "gqtype"),
        file,
        column,
        batch.rows[bad],
        lambda take: [
            f"unknown GQTYPE {clip(v)!r} (expected 000 for a household or a 3-digit GQ type "
            "101–999)"
            for v in texts_at(raw, bad[take])
        ],
        "with unknown GQTYPE codes",
    )
    return np.where(ok, major, 0).astype(np.int64), ok


def _unit_problems(
    problems: Problems,
    file: str,
    batch: CsvBatch,
    rtype: np.ndarray,
    hhgq: np.ndarray,
    known: np.ndarray,
    column: str,
) -> None:
    """RTYPE 3 persons must be in households and RTYPE 5 persons in a GQ type."""
    no_type = np.flatnonzero(known & (rtype == 1) & (hhgq == 0))
    problems.add(
        (column, "no unit"),
        file,
        column,
        batch.rows[no_type],
        lambda take: (
            [
                "person in group quarters (RTYPE 5) without a group-quarters type: the person has "
                "no unit"
            ]
            * len(take)
        ),
        "of persons in group quarters without a group-quarters type",
    )
    with_type = np.flatnonzero(known & (rtype == 0) & (hhgq != 0))
    if with_type.size:
        gq = batch.text["GQTYPE_PL"]
        problems.add(
            (column, "disagree"),
            file,
            column,
            batch.rows[with_type],
            lambda take: [
                f"person in a housing unit (RTYPE 3) with group-quarters type {clip(v)!r}: "
                "RTYPE and GQ type disagree"
                for v in texts_at(gq, with_type[take])
            ],
            "of persons whose RTYPE and GQ type disagree",
        )
