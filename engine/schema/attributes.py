"""The one declaration of the histogram schemas (TDA §5.1; docs/science.md §4 and §5).

Every other view of a schema — the ``(attribute, levels)`` pairs the marginal parser and the
analytic prediction take (:mod:`engine.schema.marginals`), the cell counts of the planner
(:mod:`engine.schema.query_cells`), the RI fold (:mod:`engine.schema.ri_fold`) — is derived from
the objects declared here; nothing else lists attributes or levels.

* :data:`REDISTRICTING_SCHEMA` — the 2,016-cell redistricting person histogram of TDA §5.1:
  HHGQ (8) × VOTINGAGE (2) × HISPANIC (2) × CENRACE (63). HHGQ levels are ``"household"`` followed by
  the seven group-quarters major types under their ``GQTYPE_PL`` codes ``"1"`` … ``"7"``
  (described in :data:`HHGQ_DESCRIPTIONS`); CENRACE levels are the codes ``"01"`` … ``"63"`` of the
  Census Bureau's 63 race combinations (01–06 one race alone, 07–63 two or more races).
* :data:`RI2010_SCHEMA` — VOTINGAGE (2) × RACEETH (8), the schema of the Rhode Island 2010 block
  counts (``data/samples/ri2010``); :data:`PL94171_SCHEMA` has the same attributes. The eight
  race–ethnicity groups are those of the Blau index (docs/science.md §5; TDA §9, Table 13), in that
  order: Hispanic (any race); non-Hispanic White alone, Black alone, American Indian and Alaska
  Native alone, Asian alone, Native Hawaiian and Other Pacific Islander alone, Some Other Race
  alone, Two or more races. :mod:`engine.schema.ri_fold` states how they fold HISPANIC × CENRACE.
* :data:`HOUSING_UNITS_SCHEMA` — the housing-unit histogram of TDA §5.1: OCCUPANCY (2).
* :data:`HHINSTLEVELS_RECODE` — the one recode of the shipped queries: HHGQ collapsed into household
  / institutional / non-institutional group quarters (docs/science.md §4; TDA §6.4).

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

    @property
    def attribute_levels(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The ``(attribute, level labels)`` pairs, in cell order: the schema as the marginal
        parser (:func:`engine.schema.marginals.parse_marginal`) and the prediction take it."""
        return tuple((a.name, a.levels) for a in self.attributes)

    def axis(self, name: str) -> int:
        """Index of attribute ``name`` (raises ``KeyError`` naming the known attributes)."""
        try:
            return self.names.index(name)
        except ValueError:
            raise KeyError(
                f"schema {self.name!r} has no attribute {name!r}; known: {', '.join(self.names)}"
            ) from None


@dataclass(frozen=True)
class Recode:
    """A query part that keeps ``attribute`` collapsed into coarser groups (TDA §6.4).

    ``groups`` lists each group's label with the attribute levels it merges; the groups are
    mutually exclusive, in answer order.
    """

    name: str
    attribute: str
    groups: tuple[tuple[str, tuple[str, ...]], ...]

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(label for label, _ in self.groups)

    def group_of(self, level: str) -> int | None:
        """Index of the group that merges ``level``; None when no group does."""
        for k, (_, members) in enumerate(self.groups):
            if level in members:
                return k
        return None


VOTINGAGE = Attribute("VOTINGAGE", ("under_18", "18_plus"))
RACEETH = Attribute("RACEETH", ("hisp", "white", "black", "aian", "asian", "nhpi", "other", "two"))

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

HHGQ = Attribute("HHGQ", tuple(HHGQ_DESCRIPTIONS))
HISPANIC = Attribute("HISPANIC", ("not_hispanic", "hispanic"))
CENRACE = Attribute("CENRACE", tuple(f"{code:02d}" for code in range(1, 64)))
OCCUPANCY = Attribute("OCCUPANCY", ("occupied", "vacant"))
"""Occupancy status of a housing unit (TDA §5.1, the housing-unit detailed query)."""

HHINSTLEVELS_RECODE = Recode(
    "HHINSTLEVELS",
    "HHGQ",
    (
        ("household", ("household",)),
        ("institutional", ("1", "2", "3", "4")),
        ("noninstitutional", ("5", "6", "7")),
    ),
)
"""HHGQ → household / institutional GQ (types 1–4) / non-institutional GQ (types 5–7): TDA names the
query without its levels; these are the production code's (docs/science.md §4)."""

RI2010_SCHEMA = Schema("ri2010", (VOTINGAGE, RACEETH))
PL94171_SCHEMA = Schema("pl94171", (VOTINGAGE, RACEETH))
"""VOTINGAGE × RACEETH derived from P.L. 94-171 tables P2 and P4 (see
:mod:`engine.data.pl94171`)."""
REDISTRICTING_SCHEMA = Schema("redistricting2020", (HHGQ, VOTINGAGE, HISPANIC, CENRACE))
HOUSING_UNITS_SCHEMA = Schema("units2020", (OCCUPANCY,))

PERSONS_SCHEMAS: tuple[Schema, ...] = (RI2010_SCHEMA, PL94171_SCHEMA, REDISTRICTING_SCHEMA)
"""The person histograms the engine ships, in the order schema inference tries them."""
SCHEMAS: dict[str, Schema] = {s.name: s for s in (*PERSONS_SCHEMAS, HOUSING_UNITS_SCHEMA)}
"""Every declared schema by name."""
RECODES: dict[str, Recode] = {HHINSTLEVELS_RECODE.name: HHINSTLEVELS_RECODE}
"""The recodes a query name may use, by name."""
