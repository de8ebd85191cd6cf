"""Histogram schemas of the shipped TopDown inputs (TDA §5.1; SPEC §4 and §5).

* :data:`RI2010_SCHEMA` — VOTINGAGE (2) × RACEETH (8), the schema of the Rhode Island 2010 block
  counts (``data/samples/ri2010``); :data:`PL94171_SCHEMA` has the same attributes. The eight race–ethnicity groups are those of the Blau index in
  SPEC §5 / TDA §9 Table 13, in that order: Hispanic (any race); non-Hispanic White alone, Black alone,
  American Indian and Alaska Native alone, Asian alone, Native Hawaiian and Other Pacific Islander
  alone, Some Other Race alone, Two or more races.
* :data:`REDISTRICTING_SCHEMA` — the 2,016-cell redistricting person histogram of TDA §5.1:
  HHGQ (8) × VOTINGAGE (2) × HISPANIC (2) × CENRACE (63). HHGQ levels are ``"household"`` followed by
  the seven group-quarters major types under their ``GQTYPE_PL`` codes ``"1"`` … ``"7"``
  (described in :data:`HHGQ_DESCRIPTIONS`); CENRACE levels are the codes ``"01"`` … ``"63"`` of the
  Census Bureau's 63 race combinations (01–06 one race alone, 07–63 two or more races).

Cells are the C-order product of the attribute levels: a geounit's histogram is the flattened
(C-order) array of counts over them (:class:`Schema`; :mod:`engine.data.histogram` holds the blocks).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod


@dataclass(frozen=True)
class Attribute:
    """One schema attribute and its ordered level labels."""

    name: str
    levels: tuple[str, ...]

    @property
    def size(self) -> int:
        return len(self.levels)


@dataclass(frozen=True)
class Schema:
    """An ordered list of attributes; cells are the C-order product of their levels."""

    name: str
    attributes: tuple[Attribute, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.size for a in self.attributes)

    @property
    def size(self) -> int:
        return prod(self.shape)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    def axis(self, name: str) -> int:
        """Index of attribute ``name`` (raises ``KeyError`` naming the known attributes)."""
        try:
            return self.names.index(name)
        except ValueError:
            raise KeyError(
                f"schema {self.name!r} has no attribute {name!r}; known: {', '.join(self.names)}"
            ) from None


VOTINGAGE = Attribute("VOTINGAGE", ("under_18", "18_plus"))
RACEETH = Attribute("RACEETH", ("hisp", "white", "black", "aian", "asian", "nhpi", "other", "two"))

RI2010_SCHEMA = Schema("ri2010", (VOTINGAGE, RACEETH))

PL94171_SCHEMA = Schema("pl94171", (VOTINGAGE, RACEETH))
"""VOTINGAGE × RACEETH derived from P.L. 94-171 tables P2 and P4 (see :mod:`engine.data.pl94171`)."""

HHGQ_DESCRIPTIONS: dict[str, str] = {
    "household": "Household",
    "1": "Correctional facilities for adults",
    "2": "Juvenile facilities",
    "3": "Nursing facilities / skilled-nursing facilities",
    "4": "Other institutional facilities",
    "5": "College / university student housing",
    "6": "Military quarters",
    "7": "Other noninstitutional facilities",
}
"""HHGQ level → description (TDA §5.1, item 2)."""

INSTITUTIONAL_GQ = ("1", "2", "3", "4")
"""GQTYPE_PL codes of institutional group quarters (the rest, 5–7, are non-institutional)."""

HHGQ = Attribute("HHGQ", tuple(HHGQ_DESCRIPTIONS))
HISPANIC = Attribute("HISPANIC", ("not_hispanic", "hispanic"))
CENRACE = Attribute("CENRACE", tuple(f"{code:02d}" for code in range(1, 64)))

REDISTRICTING_SCHEMA = Schema("redistricting2020", (HHGQ, VOTINGAGE, HISPANIC, CENRACE))

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
    """The RACEETH level (SPEC §5 Blau groups) of a HISPANIC level and a CENRACE code."""
    if hispanic == "hispanic":
        return "hisp"
    return CENRACE_ALONE_GROUPS.get(cenrace, "two")
