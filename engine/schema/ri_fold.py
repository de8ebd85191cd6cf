"""RI 2010's folded race–ethnicity schema against production's (TDA §5.1, Tables 6–7).

The shipped RI samples (``ri2010``, ``pl94171_ri2018``) carry VOTINGAGE × RACEETH: eight
race–ethnicity groups. Production measured HISPANIC × CENRACE, 2 × 63 = 126 cells, and
``ri2010-production-like`` folds those shares (with CENRACE's and HISPANIC's) into the one 8-cell
RACEETH query. A RACEETH group that production spread over many cells — Hispanic (63 cells) and
non-Hispanic Two or more races (57 cells) — is measured on RI as one cell with the σ of one
production cell, so RACEETH accuracy on RI overstates production's for those groups; the five
one-race-alone groups and non-Hispanic White are one cell in both.

Folding DETAILED does the same to VOTINGAGE and HISPANIC: RI's DETAILED has 16 cells, so a
VOTINGAGE cell is the sum of 8 of its cells where production's 2,016-cell DETAILED sums 1,008, and
the shares of production's VOTINGAGE × CENRACE, VOTINGAGE × HISPANIC and VOTINGAGE × HISPANIC ×
CENRACE all land on those 16 cells. Combining all of a tract's noisy measurements, a VOTINGAGE cell
has σ ≈ 8 on RI against ≈ 23 in production at ρ = 2.56 (:mod:`engine.runs.schema_note` computes
it per level).
The fold is :func:`raceeth_of` on the attributes declared in :mod:`engine.schema.attributes`;
:data:`CELLS_PER_GROUP` and :data:`FOLDED_SCHEMAS` are derived from it and from that declaration.
"""

from __future__ import annotations

from collections import Counter

from engine.schema.attributes import CENRACE, HISPANIC, PERSONS_SCHEMAS, RACEETH

CENRACE_ALONE_GROUPS: dict[str, str] = {
    "01": "white",
    "02": "black",
    "03": "aian",
    "04": "asian",
    "05": "nhpi",
    "06": "other",
}
"""CENRACE codes of the six single-race groups → RACEETH level; codes 07–63 are ``"two"``."""


def raceeth_of(hispanic: str, cenrace: str) -> str:
    """The RACEETH level (the Blau groups of docs/science.md §5) of a HISPANIC level and a CENRACE
    code: Hispanic of any race is ``"hisp"``, else the one-race-alone group or ``"two"``."""
    if hispanic == "hispanic":
        return "hisp"
    return CENRACE_ALONE_GROUPS.get(cenrace, "two")


FOLDED_SCHEMAS: tuple[str, ...] = tuple(s.name for s in PERSONS_SCHEMAS if RACEETH in s.attributes)
"""Schemas whose RACEETH folds production's HISPANIC × CENRACE (``ri2010``, ``pl94171``)."""
PRODUCTION_QUERY = f"{HISPANIC.name}*{CENRACE.name}"
"""The production query that RACEETH folds."""
_FOLDED = Counter(raceeth_of(h, c) for h in HISPANIC.levels for c in CENRACE.levels)
CELLS_PER_GROUP: dict[str, int] = {group: _FOLDED[group] for group in RACEETH.levels}
"""HISPANIC × CENRACE cells behind each RACEETH group: Hispanic 63, the six alone groups 1 each
(non-Hispanic), Two or more races 57 (the multi-race CENRACE codes 07–63, non-Hispanic)."""

NOTE = (
    "RI's schema folds production's HISPANIC × CENRACE (126 cells) into 8 RACEETH groups: "
    "production measured the Hispanic group as 63 cells and non-Hispanic Two or more races as 57, "
    "each with its own noise, where RI measures each group as one cell. RACEETH accuracy on RI "
    "therefore overstates production's for multi-race (and Hispanic) groups; the one-race-alone "
    "groups are comparable. Folding DETAILED (2,016 cells → 16) also makes VOTINGAGE and HISPANIC "
    "far more precise than production: a VOTINGAGE cell is 8 RI cells against 1,008 production "
    "cells (σ per level below, from all of a geounit's noisy measurements), so VOTINGAGE and "
    "Hispanic accuracy on RI overstates production's too."
)


def is_folded(schema: str | None) -> bool:
    """True for the RI schemas whose RACEETH folds HISPANIC × CENRACE."""
    return schema in FOLDED_SCHEMAS
