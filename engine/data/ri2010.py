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
import pyarrow as pa

from engine.data.columns import Integers, Totals, compact, joined
from engine.data.csv_reader import CsvReader
from engine.data.geography import BLOCK_LEVELS, block_id_numbers, geography_from_block_ids
from engine.data.histogram import BlockHistogram
from engine.data.problems import Problems, raise_if
from engine.data.sources import DEFAULT_MAX_BYTES, DataSource
from engine.schema.attributes import RACEETH, RI2010_SCHEMA

GROUPS: tuple[str, ...] = RACEETH.levels
COLUMNS: tuple[str, ...] = (
    "GEOID",
    "pop",
    *(f"pop_{g}" for g in GROUPS),
    "vap",
    *(f"vap_{g}" for g in GROUPS),
)
CELL_COLUMNS: tuple[str, ...] = tuple(f"pop_{g}" for g in GROUPS) + tuple(
    f"vap_{g}" for g in GROUPS
)
"""The column each cell's count comes from (under 18: pop − vap of the group; 18 and over: vap)."""

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

    Read batch by batch: each batch's counts are checked and turned into its rows of the
    histogram at once, so only the histogram's counts and the block ids are kept. Raises
    :class:`~engine.core.errors.DataValidationError` listing every located problem.
    """
    reader = CsvReader(source, COLUMNS, max_bytes=max_bytes, name=name)
    problems = reader.problems
    kinds = {column: Integers(what="count") for column in COLUMNS[1:]}
    counts: list[np.ndarray] = []
    ids: list[pa.Array] = []
    rows: list[np.ndarray] = []
    totals = Totals()
    for batch in reader.batches(kinds):
        values, valid = batch.values, batch.valid
        ok = np.ones(batch.n_rows, dtype=bool)
        for mask in valid.values():
            if mask is not None:
                ok &= mask
        _consistency_problems(problems, reader.label, values, batch.rows, ok)
        part = np.empty((batch.n_rows, 2 * len(GROUPS)), dtype=np.int64)  # filled in place
        for k, g in enumerate(GROUPS):
            np.subtract(values[f"pop_{g}"], values[f"vap_{g}"], out=part[:, k])
            part[:, len(GROUPS) + k] = values[f"vap_{g}"]
        totals.add({c: values[c] for c in CELL_COLUMNS}, batch.rows)
        counts.append(compact(part))
        ids.append(batch.text["GEOID"])
        rows.append(compact(batch.rows))
    all_rows = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    block_ids = pa.chunked_array(ids, pa.string())
    block_id_numbers(problems, reader.label, reader.layout.found["GEOID"], block_ids, all_rows)
    problems.extend(totals.problems(reader.label))
    raise_if(problems, summary=f"{reader.label}: not a usable block-count file")
    del rows, all_rows
    geography = geography_from_block_ids(block_ids)
    del block_ids, ids  # the text of the block ids is no longer needed
    return BlockHistogram(
        schema=RI2010_SCHEMA,
        levels=BLOCK_LEVELS,
        geography=geography,
        counts=joined(counts, 2 * len(GROUPS)),
        source=SOURCE,
        licence=LICENCE,
    )


def _consistency_problems(
    problems: Problems, file: str, values: dict[str, np.ndarray], rows: np.ndarray, ok: np.ndarray
) -> None:
    """``vap_g ≤ pop_g`` and the groups summing to the totals, located by row and column (on
    the rows whose counts are all whole numbers)."""
    for g in GROUPS:
        vap, pop = values[f"vap_{g}"], values[f"pop_{g}"]
        bad = np.flatnonzero(ok & (vap > pop))
        problems.add(
            (f"vap_{g}", "exceeds"),
            file,
            f"vap_{g}",
            rows[bad],
            lambda take, bad=bad, vap=vap, pop=pop, g=g: [
                f"voting-age count {vap[i]} exceeds the total {pop[i]} of pop_{g} (under-18 = "
                "pop − vap would be negative)"
                for i in bad[take]
            ],
            "whose voting-age count exceeds the total",
        )
    for total in ("pop", "vap"):
        parts = sum(values[f"{total}_{g}"] for g in GROUPS)
        bad = np.flatnonzero(ok & (parts != values[total]))
        problems.add(
            (total, "sum"),
            file,
            total,
            rows[bad],
            lambda take, bad=bad, parts=parts, total=total: [
                f"{total} is {values[total][i]} but its eight groups sum to {parts[i]}"
                for i in bad[take]
            ],
            "whose groups do not sum to the total",
        )
