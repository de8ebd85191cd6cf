"""Loader of the Rhode Island 2010 block counts: a VOTINGAGE × RACEETH block histogram.

Source: 2010 Census P.L. 94-171 block counts for Rhode Island as packaged by the ALARM Project's
``census-2020`` repository (Kenny & McCartan, CC BY-SA 4.0; see ``data/samples/ri2010/``). One row
per block: ``GEOID`` (15 digits), total population ``pop`` and ``pop_<g>``, voting-age population
``vap`` and ``vap_<g>`` for the eight race–ethnicity groups ``g`` of docs/science.md §5 (``hisp`` =
Hispanic of any race; non-Hispanic ``white``, ``black``, ``aian``, ``asian``, ``nhpi``, ``other``,
``two``).

The histogram is :data:`~engine.schema.attributes.RI2010_SCHEMA`: cell (under_18, g) = ``pop_g − vap_g``
and cell (18_plus, g) = ``vap_g``. Checks: every column present and a non-negative integer,
``vap_g ≤ pop_g``, the group columns summing to ``pop`` and ``vap``, 15-digit unique block ids.
The documented totals are 1,052,567 persons in 25,181 blocks.
"""

from __future__ import annotations

import numpy as np

from engine.core.errors import Problem
from engine.data.geography import BLOCK_LEVELS, block_id_problems, geography_from_block_ids
from engine.data.histogram import BlockHistogram
from engine.data.validate import (
    DEFAULT_MAX_BYTES,
    MAX_PROBLEMS_PER_CHECK,
    CsvTable,
    DataSource,
    int_column,
    raise_if,
    read_csv_table,
)
from engine.schema.attributes import RACEETH, RI2010_SCHEMA

GROUPS: tuple[str, ...] = RACEETH.levels
COLUMNS: tuple[str, ...] = (
    "GEOID",
    "pop",
    *(f"pop_{g}" for g in GROUPS),
    "vap",
    *(f"vap_{g}" for g in GROUPS),
)

SOURCE = (
    "2010 Census P.L. 94-171 block counts for Rhode Island, via the ALARM Project census-2020 "
    "repository (Kenny & McCartan)"
)
LICENCE = "CC BY-SA 4.0 (data); underlying Census data public domain"


def load_ri2010(
    source: DataSource,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    name: str | None = None,
) -> BlockHistogram:
    """Load an ALARM-style block file (``GEOID, pop, pop_<g>…, vap, vap_<g>…``) as a BlockHistogram.

    Raises :class:`~engine.core.errors.DataValidationError` listing every located problem.
    """
    table = read_csv_table(source, COLUMNS, max_bytes=max_bytes, name=name, integers=COLUMNS[1:])
    problems: list[Problem] = []
    ints: dict[str, np.ndarray] = {}
    for column in COLUMNS[1:]:
        ints[column], found = int_column(table, column, what="count")
        problems += found
    ids = table.columns["GEOID"]
    problems += block_id_problems(table, "GEOID", ids)
    if not problems:
        problems += _consistency_problems(table, ints)
    raise_if(problems, summary=f"{table.file}: not a usable block-count file")

    geography = geography_from_block_ids(ids)
    del table, ids  # the text of the block ids is no longer needed
    counts = np.empty((len(geography), 2 * len(GROUPS)), dtype=np.int64)  # filled in place
    for k, g in enumerate(GROUPS):
        np.subtract(ints[f"pop_{g}"], ints[f"vap_{g}"], out=counts[:, k])
        counts[:, len(GROUPS) + k] = ints.pop(f"vap_{g}")
    return BlockHistogram(
        schema=RI2010_SCHEMA,
        levels=BLOCK_LEVELS,
        geography=geography,
        counts=counts,
        source=SOURCE,
        licence=LICENCE,
    )


def _consistency_problems(table: CsvTable, ints: dict[str, np.ndarray]) -> list[Problem]:
    """``vap_g ≤ pop_g`` and the groups summing to the totals, located by row and column."""
    problems: list[Problem] = []
    for g in GROUPS:
        bad = np.flatnonzero(ints[f"vap_{g}"] > ints[f"pop_{g}"])
        for i in bad[:MAX_PROBLEMS_PER_CHECK]:
            problems.append(
                Problem(
                    table.file,
                    f"voting-age count {ints[f'vap_{g}'][i]} exceeds the total {ints[f'pop_{g}'][i]} "
                    f"of pop_{g} (under-18 = pop − vap would be negative)",
                    int(table.rows[i]),
                    f"vap_{g}",
                )
            )
    for total in ("pop", "vap"):
        parts = sum(ints[f"{total}_{g}"] for g in GROUPS)
        bad = np.flatnonzero(parts != ints[total])
        for i in bad[:MAX_PROBLEMS_PER_CHECK]:
            problems.append(
                Problem(
                    table.file,
                    f"{total} is {ints[total][i]} but its eight groups sum to {parts[i]}",
                    int(table.rows[i]),
                    total,
                )
            )
    return problems
