"""Number of cells of each named TopDown query group (TDA Tables 4, 5, 7 and 8; docs/science.md §4).

The planner counts a query's cells from its name alone, before any data is loaded: a query name
is ``TOTAL``, ``DETAILED`` or attribute (or recode) names joined by ``*``, and its cells are the
product of their sizes. Every size is derived from the one declaration in
:mod:`engine.schema.attributes`: HHGQ 8, VOTINGAGE 2, HISPANIC 2, CENRACE 63 and the recode
HHINSTLEVELS 3 (redistricting schema); VOTINGAGE 2, RACEETH 8 (RI 2010 schema); OCCUPANCY 2
(housing units).
"""

from __future__ import annotations

from collections.abc import Iterable
from math import prod

from engine.schema.attributes import (
    RECODES,
    REDISTRICTING_SCHEMA,
    RI2010_SCHEMA,
    SCHEMAS,
    Schema,
)

ATTRIBUTE_SIZES: dict[str, int] = {
    **{a.name: a.size for schema in SCHEMAS.values() for a in schema.attributes},
    **{recode.name: len(recode.labels) for recode in RECODES.values()},
}
"""Answer cells of each attribute or recode a query name may join, over every declared schema."""
DETAILED_CELLS: dict[str, int] = {name: schema.size for name, schema in SCHEMAS.items()}
"""Cells of each declared schema (its DETAILED query)."""
DEFAULT_SCHEMA = REDISTRICTING_SCHEMA.name
TOTAL, DETAILED = "TOTAL", "DETAILED"
"""The two query names that join no attribute (as :mod:`engine.schema.marginals` spells them; not
imported from there, so that counting cells imports no numpy)."""


def query_parts(schema: Schema) -> frozenset[str]:
    """The names a query on ``schema`` may join: its attributes and the recodes of them."""
    recodes = {r.name for r in RECODES.values() if r.attribute in schema.names}
    return frozenset(schema.names) | recodes


def allocation_schema(queries: Iterable[str], declared: str | None = None) -> str:
    """The schema whose cells a query list counts: ``declared`` when given, else inferred.

    Inference: queries that use only RI 2010 attributes (VOTINGAGE, RACEETH) and at least one
    RACEETH query mean ``ri2010``; anything else the production schema (``redistricting2020``).
    """
    if declared:
        return declared
    used = {part for q in queries if q not in (TOTAL, DETAILED) for part in q.split("*")}
    if "RACEETH" in used and used <= query_parts(RI2010_SCHEMA):
        return RI2010_SCHEMA.name
    return DEFAULT_SCHEMA


def query_cells(query: str, schema: str = DEFAULT_SCHEMA) -> int | None:
    """Cells of a query group; ``None`` when the name is not built from known attributes."""
    if query == TOTAL:
        return 1
    if query == DETAILED:
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
