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

import numpy as np
import pandas as pd
import scipy.sparse as sp

from engine.core.errors import Problem
from engine.data.geography import (
    BLOCK_LEVELS,
    geography_from_block_ids,
    geography_from_components,
)
from engine.data.histogram import BlockHistogram
from engine.data.validate import (
    DEFAULT_MAX_BYTES,
    MAX_PROBLEMS_PER_CHECK,
    CsvTable,
    DataSource,
    clip,
    code_column,
    int_column,
    raise_if,
    read_csv_table,
)
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

SOURCE = "Census Bureau Privacy-Protected Microdata File (person records)"
LICENCE = "US Government work (public domain)"


def load_ppmf(
    source: DataSource,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    name: str | None = None,
) -> BlockHistogram:
    """Load PPMF/MDF person records as a redistricting (2,016-cell) :class:`BlockHistogram`.

    Raises :class:`~engine.core.errors.DataValidationError` listing every located problem.
    """
    table = read_csv_table(source, COLUMNS, max_bytes=max_bytes, name=name)
    records, problems = ppmf_records(table)
    raise_if(problems, summary=not_usable(table.file))
    assert records is not None
    geography, cell = records
    block_index, blocks = pd.factorize(geography["Block"], sort=True)
    return ppmf_histogram(np.asarray(blocks), block_index, cell)


def ppmf_histogram(
    blocks: np.ndarray, block_index: np.ndarray, cell: np.ndarray, count: np.ndarray | None = None
) -> BlockHistogram:
    """The redistricting :class:`BlockHistogram` of the sorted 15-digit block ids ``blocks``:
    ``count[i]`` persons (1 without ``count``) of block ``blocks[block_index[i]]`` in cell
    ``cell[i]``; ``extra`` holds ``persons_read`` and ``gq_types_present`` (module docstring).

    :func:`load_ppmf` passes one entry per record; the Spark backend the ``groupBy(block, cell)``
    counts its executors made (:mod:`engine.spark.persons`)."""
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


HHGQ_STRIDE = REDISTRICTING_SCHEMA.size // REDISTRICTING_SCHEMA.shape[0]
"""Cells per HHGQ level: a cell's HHGQ level index is ``cell // HHGQ_STRIDE`` (C order)."""


def not_usable(file: str) -> str:
    """The summary line of a PPMF/MDF file's problems."""
    return f"{file}: not usable PPMF/MDF person records"


def ppmf_records(table: CsvTable) -> tuple[tuple[pd.DataFrame, np.ndarray] | None, list[Problem]]:
    """The recode of PPMF/MDF records (module docstring): ``((geography, cell), problems)``.

    ``geography`` has one row per record (the columns of
    :data:`~engine.data.geography.BLOCK_LEVELS`, full ids) and ``cell`` is each record's
    :data:`~engine.schema.attributes.REDISTRICTING_SCHEMA` cell; ``None`` when any record has a
    problem. Works on any part of a file (the Spark backend applies it to each batch of records on
    the executors, :mod:`engine.spark.ppmf`), with the messages :func:`load_ppmf` reports.
    """
    problems: list[Problem] = []
    geography, found = geography_from_components(table, GEO_COLUMNS, unique_blocks=False)
    problems += found
    rtype, found = code_column(table, "RTYPE", (HOUSEHOLD_RTYPE, GQ_RTYPE))
    problems += found
    hhgq, found = _hhgq(table)
    problems += found
    votingage, found = _votingage(table)
    problems += found
    hispanic, found = code_column(table, "CENHISP", ("1", "2"))
    problems += found
    cenrace, found = code_column(
        table, "CENRACE", REDISTRICTING_SCHEMA.attributes[3].levels, width=2
    )
    problems += found
    if not problems:
        problems += _unit_problems(table, rtype, hhgq)
    if problems:
        return None, problems
    cell = np.ravel_multi_index((hhgq, votingage, hispanic, cenrace), REDISTRICTING_SCHEMA.shape)
    return (geography, cell), []


def _hhgq(table: CsvTable) -> tuple[np.ndarray, list[Problem]]:
    """HHGQ level index from GQTYPE_PL, or from an MDF detailed GQTYPE (first digit, 7–9 → 7)."""
    if table.found["GQTYPE_PL"].upper() == "GQTYPE_PL":
        return code_column(table, "GQTYPE_PL", GQTYPE_PL_CODES)
    raw = pd.Series(table.columns["GQTYPE_PL"], dtype=object).astype(str)
    ok = raw.str.fullmatch(r"0{1,3}|[1-9][0-9][0-9]").to_numpy(dtype=bool)
    major = np.where(ok, raw.str.slice(0, 1).where(ok, "0").astype(int), 0)
    major = np.minimum(major, 7).astype(np.int64)
    column = table.found["GQTYPE_PL"]
    bad = np.flatnonzero(~ok)
    problems = [
        Problem(
            table.file,
            f"unknown GQTYPE {clip(raw.iloc[i])!r} (expected 000 for a household or a 3-digit GQ type "
            "101–999)",
            int(table.rows[i]),
            column,
        )
        for i in bad[:MAX_PROBLEMS_PER_CHECK]
    ]
    if bad.size > MAX_PROBLEMS_PER_CHECK:
        problems.append(
            Problem(
                table.file,
                f"… and {bad.size - MAX_PROBLEMS_PER_CHECK:,} more unknown GQTYPE codes",
                None,
                column,
            )
        )
    return major, problems


def _votingage(table: CsvTable) -> tuple[np.ndarray, list[Problem]]:
    """VOTINGAGE level index from VOTING_AGE (1/2) or from QAGE (whole years, 0–115)."""
    if table.found["VOTING_AGE"].upper() == "VOTING_AGE":
        return code_column(table, "VOTING_AGE", ("1", "2"))
    age, problems = int_column(table, "VOTING_AGE", minimum=0, maximum=MAX_AGE, what="age")
    return (age >= 18).astype(np.int64), problems


def _unit_problems(table: CsvTable, rtype: np.ndarray, hhgq: np.ndarray) -> list[Problem]:
    """RTYPE 3 persons must be in households and RTYPE 5 persons in a GQ type."""
    gq_column = table.found["GQTYPE_PL"]
    in_gq_without_type = np.flatnonzero((rtype == 1) & (hhgq == 0))
    in_unit_with_gq = np.flatnonzero((rtype == 0) & (hhgq != 0))
    problems: list[Problem] = []
    for i in in_gq_without_type[:MAX_PROBLEMS_PER_CHECK]:
        problems.append(
            Problem(
                table.file,
                "person in group quarters (RTYPE 5) without a group-quarters type: the person has "
                "no unit",
                int(table.rows[i]),
                gq_column,
            )
        )
    for i in in_unit_with_gq[:MAX_PROBLEMS_PER_CHECK]:
        problems.append(
            Problem(
                table.file,
                f"person in a housing unit (RTYPE 3) with group-quarters type "
                f"{clip(table.columns['GQTYPE_PL'][i])!r}: RTYPE and GQ type disagree",
                int(table.rows[i]),
                gq_column,
            )
        )
    extra = in_gq_without_type.size + in_unit_with_gq.size - len(problems)
    if extra > 0:
        problems.append(
            Problem(
                table.file,
                f"… and {extra:,} more persons whose RTYPE and GQ type disagree",
                None,
                gq_column,
            )
        )
    return problems
