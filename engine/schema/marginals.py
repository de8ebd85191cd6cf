"""Marginal query groups as Kronecker factors, shared by the engine and the analytic core (SPN §2.3).

A TopDown query group is a marginal of the histogram: over each schema attribute its matrix is an
identity (attribute kept), a row of ones (dropped) or a collapse of levels into coarser groups
(recoded, e.g. HHINSTLEVELS groups HHGQ into household / institutional / non-institutional), and the
query matrix is the Kronecker product of these factors (SPN §2.3; TDA §5.1). This module parses a
query name into those per-attribute factors; :mod:`engine.topdown.queries` builds its partition
index from the same parse, and :mod:`engine.prediction` builds Gram matrices from it without
ever forming the Kronecker product.

Names: ``TOTAL`` (no attribute kept), ``DETAILED`` (all kept), ``HHINSTLEVELS``, or attribute names
joined by ``*`` (``VOTINGAGE*HISPANIC*CENRACE``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.core.errors import ValidationError

TOTAL = "TOTAL"
DETAILED = "DETAILED"
HHINSTLEVELS = "HHINSTLEVELS"

HHINST_GROUPS: dict[str, int] = {
    "household": 0,
    "1": 1,
    "2": 1,
    "3": 1,
    "4": 1,
    "5": 2,
    "6": 2,
    "7": 2,
}
"""HHGQ level → HHINSTLEVELS group (TDA §5.1: household / institutional GQ / non-institutional GQ)."""
HHINST_LABELS = ("household", "institutional", "noninstitutional")

SCHEMA_ATTRIBUTES: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "ri2010": (
        ("VOTINGAGE", ("under_18", "18_plus")),
        ("RACEETH", ("hisp", "white", "black", "aian", "asian", "nhpi", "other", "two")),
    ),
    "redistricting2020": (
        ("HHGQ", ("household", "1", "2", "3", "4", "5", "6", "7")),
        ("VOTINGAGE", ("under_18", "18_plus")),
        ("HISPANIC", ("not_hispanic", "hispanic")),
        ("CENRACE", tuple(f"{code:02d}" for code in range(1, 64))),
    ),
}
"""Attributes (name, level labels) of the shipped schemas, in cell order (TDA §5.1; SPEC §4).
The engine's :mod:`engine.schema.attributes` declares the same attributes; a test checks they agree."""


@dataclass(frozen=True)
class MarginalParse:
    """A query name resolved on a schema: kept attributes (schema order) and their recodes.

    ``recodes`` maps a kept attribute to the answer group of each of its levels and the group
    labels; kept attributes without a recode are kept level by level.
    """

    name: str
    kept: tuple[str, ...]
    recodes: tuple[tuple[str, tuple[int, ...], tuple[str, ...]], ...] = ()

    def recode(self, attribute: str) -> tuple[tuple[int, ...], tuple[str, ...]] | None:
        for name, groups, labels in self.recodes:
            if name == attribute:
                return groups, labels
        return None


ROUNDER_CHAINS: dict[str, tuple[str, ...]] = {
    "ri2010": ("TOTAL", "VOTINGAGE", "DETAILED"),
    "redistricting2020": (
        "TOTAL",
        "HHGQ",
        "HHGQ*HISPANIC",
        "HHGQ*HISPANIC*CENRACE",
        "DETAILED",
    ),
}
"""Nested chains of marginals minimised by the multi-pass rounder (TDA §7.3, eq. 7.7; SPEC §4);
the engine's rounder (:func:`engine.topdown.queries.rounder_chain`) and the prediction's rounding
model (:mod:`engine.prediction.root_clipping`) read them from here."""


def default_rounder_chain(attributes: Sequence[tuple[str, Sequence[str]]]) -> tuple[str, ...]:
    """The rounder's chain for a schema given by its attributes: the shipped schema's
    (:data:`ROUNDER_CHAINS`), else the prefixes of the attribute order (TOTAL → A → A*B → … →
    DETAILED), as the engine's default."""
    attrs = tuple((str(a), tuple(str(x) for x in lv)) for a, lv in attributes)
    for name, known in SCHEMA_ATTRIBUTES.items():
        if known == attrs and name in ROUNDER_CHAINS:
            return ROUNDER_CHAINS[name]
    names = [a for a, _ in attrs]
    prefixes = ["*".join(names[: k + 1]) for k in range(len(names) - 1)]
    return (TOTAL, *prefixes, DETAILED)


def parse_marginal(
    name: str,
    attributes: Sequence[tuple[str, Sequence[str]]],
    schema_name: str = "schema",
) -> MarginalParse:
    """Resolve query ``name`` on a schema given as ``(attribute, level labels)`` pairs."""
    names = [a for a, _ in attributes]
    if name == TOTAL:
        return MarginalParse(name, ())
    if name == DETAILED:
        return MarginalParse(name, tuple(names))
    recodes: list[tuple[str, tuple[int, ...], tuple[str, ...]]] = []
    kept: list[str] = []
    for part in name.split("*"):
        attr = part
        if part == HHINSTLEVELS:
            attr = "HHGQ"
            if attr not in names:
                raise ValidationError(
                    f"query {name!r} needs attribute HHGQ, which schema {schema_name!r} lacks"
                )
            levels = list(attributes[names.index(attr)][1])
            unknown = [lv for lv in levels if lv not in HHINST_GROUPS]
            if unknown:
                raise ValidationError(
                    f"HHINSTLEVELS cannot group HHGQ level(s) {unknown} of schema {schema_name!r}"
                )
            recodes.append((attr, tuple(HHINST_GROUPS[lv] for lv in levels), HHINST_LABELS))
        elif part not in names:
            raise ValidationError(
                f"query {name!r}: schema {schema_name!r} has no attribute {part!r}; "
                f"known attributes: {', '.join(names)} (or TOTAL, DETAILED, HHINSTLEVELS)"
            )
        if attr in kept:
            raise ValidationError(f"query {name!r} names attribute {attr!r} twice")
        kept.append(attr)
    ordered = tuple(sorted(kept, key=names.index))
    return MarginalParse(name, ordered, tuple(recodes))


def attribute_factor(parse: MarginalParse, attribute: str, size: int) -> np.ndarray:
    """The query's factor over one attribute: ``(answer levels, size)`` 0/1 matrix (SPN §2.3).

    Identity when kept, a row of ones when dropped, the collapse matrix when recoded.
    """
    if attribute not in parse.kept:
        return np.ones((1, size))
    rec = parse.recode(attribute)
    if rec is None:
        return np.eye(size)
    groups = np.asarray(rec[0], dtype=np.int64)
    out = np.zeros((len(rec[1]), size))
    out[groups, np.arange(size)] = 1.0
    return out


def answer_cells(parse: MarginalParse, attributes: Sequence[tuple[str, Sequence[str]]]) -> int:
    """Number of answer cells of the query."""
    n = 1
    for attr, levels in attributes:
        n *= attribute_factor(parse, attr, len(levels)).shape[0]
    return n


def cell_index(parse: MarginalParse, attributes: Sequence[tuple[str, Sequence[str]]]) -> np.ndarray:
    """``(n_cells,)`` int64: the answer cell that each (C-order) histogram cell is counted in."""
    shape = tuple(len(levels) for _, levels in attributes)
    names = [a for a, _ in attributes]
    if not parse.kept:
        return np.zeros(int(np.prod(shape)), dtype=np.int64)
    grids = np.indices(shape).reshape(len(shape), -1)
    coords = []
    sizes = []
    for attr in parse.kept:
        level = grids[names.index(attr)]
        rec = parse.recode(attr)
        if rec is None:
            coords.append(level)
            sizes.append(shape[names.index(attr)])
        else:
            coords.append(np.asarray(rec[0], dtype=np.int64)[level])
            sizes.append(len(rec[1]))
    return np.ravel_multi_index(tuple(coords), tuple(sizes)).astype(np.int64)
