"""Number of cells of each named TopDown query group (TDA Tables 4 and 7; SPEC §4).

Attribute sizes of the redistricting schema: HHGQ 8, VOTINGAGE 2, HISPANIC 2, CENRACE 63,
HHINSTLEVELS 3 (a collapse of HHGQ); of the RI 2010 schema: VOTINGAGE 2, RACEETH 8; housing units:
OCCUPANCY 2. A query name is ``TOTAL``, ``DETAILED`` or attributes joined by ``*``.
"""

from __future__ import annotations

from collections.abc import Iterable
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
SCHEMA_ATTRIBUTES: dict[str, frozenset[str]] = {
    "redistricting2020": frozenset({"HHGQ", "HHINSTLEVELS", "VOTINGAGE", "HISPANIC", "CENRACE"}),
    "ri2010": frozenset({"VOTINGAGE", "RACEETH"}),
}
DEFAULT_SCHEMA = "redistricting2020"


def allocation_schema(queries: Iterable[str], declared: str | None = None) -> str:
    """The schema whose cells a query list counts: ``declared`` when given, else inferred.

    Inference: queries that use only RI 2010 attributes (VOTINGAGE, RACEETH) and at least one
    RACEETH query mean ``ri2010``; anything else the production schema (``redistricting2020``).
    """
    if declared:
        return declared
    used = {part for q in queries if q not in ("TOTAL", "DETAILED") for part in q.split("*")}
    if "RACEETH" in used and used <= SCHEMA_ATTRIBUTES["ri2010"]:
        return "ri2010"
    return DEFAULT_SCHEMA


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


def schema_mismatch(queries: Iterable[str], declared: str | None, data_schema: str) -> str | None:
    """Why an allocation cannot run on data of ``data_schema``, or None when its schema matches.

    The allocation's schema is :func:`allocation_schema` of its queries (or the declared one);
    TopDown measures those queries on the data's cells, so the two must be the same schema.
    """
    wanted = allocation_schema(queries, declared)
    if wanted == data_schema:
        return None
    return (
        f"the allocation's queries count cells of the {wanted} schema, but the data has the "
        f"{data_schema} schema; choose an allocation for {data_schema} data"
    )
