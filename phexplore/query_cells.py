"""Number of cells of each named TopDown query group (TDA Tables 4 and 7; SPEC §4).

Attribute sizes of the redistricting schema: HHGQ 8, VOTINGAGE 2, HISPANIC 2, CENRACE 63,
HHINSTLEVELS 3 (a collapse of HHGQ); of the RI 2010 schema: VOTINGAGE 2, RACEETH 8; housing units:
OCCUPANCY 2. A query name is ``TOTAL``, ``DETAILED`` or attributes joined by ``*``.
"""

from __future__ import annotations

from math import prod

ATTRIBUTE_SIZES: dict[str, int] = {
    "HHGQ": 8,
    "HHINSTLEVELS": 3,
    "VOTINGAGE": 2,
    "HISPANIC": 2,
    "CENRACE": 63,
    "RACEETH": 8,
    "OCCUPANCY": 2,
}
DETAILED_CELLS: dict[str, int] = {"redistricting2020": 2016, "ri2010": 16}


def query_cells(query: str, schema: str = "redistricting2020") -> int | None:
    """Cells of a query group; ``None`` when the name is not built from known attributes."""
    if query == "TOTAL":
        return 1
    if query == "DETAILED":
        return DETAILED_CELLS.get(schema)
    parts = query.split("*")
    if all(p in ATTRIBUTE_SIZES for p in parts):
        return prod(ATTRIBUTE_SIZES[p] for p in parts)
    return None
