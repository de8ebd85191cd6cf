"""Marginal query groups as Kronecker factors, shared by the engine and the analytic core (SPN §2.3).

A TopDown query group is a marginal of the histogram: over each schema attribute its matrix is an
identity (attribute kept), a row of ones (dropped) or a collapse of levels into coarser groups
(recoded, e.g. HHINSTLEVELS groups HHGQ into household / institutional / non-institutional)
(docs/science.md §4), and the query matrix is the Kronecker product of these factors (SPN §2.3;
TDA §5.1, §6.4). This module parses a query name into those per-attribute factors;
:mod:`engine.topdown.queries` builds its partition index from the same parse, and
:mod:`engine.prediction` builds Gram matrices from it without ever forming the Kronecker product.

Names: ``TOTAL`` (no attribute kept), ``DETAILED`` (all kept), a recode (``HHINSTLEVELS``), or
attribute names joined by ``*`` (``VOTINGAGE*HISPANIC*CENRACE``). The attributes, levels and
recodes are those declared in :mod:`engine.schema.attributes`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.core.errors import ValidationError
from engine.schema.attributes import (
    HHINSTLEVELS_RECODE,
    PERSONS_SCHEMAS,
    RECODES,
    REDISTRICTING_SCHEMA,
    RI2010_SCHEMA,
)

TOTAL = "TOTAL"
DETAILED = "DETAILED"
HHINSTLEVELS = HHINSTLEVELS_RECODE.name

AttributeLevels = tuple[tuple[str, tuple[str, ...]], ...]
"""A schema as ``(attribute, level labels)`` pairs in cell order
(:attr:`Schema.attribute_levels`)."""


def _distinct_attribute_lists() -> dict[str, AttributeLevels]:
    out: dict[str, AttributeLevels] = {}
    for schema in PERSONS_SCHEMAS:
        if schema.attribute_levels not in out.values():
            out[schema.name] = schema.attribute_levels
    return out


SCHEMA_ATTRIBUTES: dict[str, AttributeLevels] = _distinct_attribute_lists()
"""The shipped person schemas as ``(attribute, levels)`` pairs, one per distinct attribute list
(``ri2010``, then ``redistricting2020``; ``pl94171`` has ri2010's attributes), in the order schema
inference tries them — derived from :data:`engine.schema.attributes.PERSONS_SCHEMAS`."""


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
    RI2010_SCHEMA.name: ("TOTAL", "VOTINGAGE", "DETAILED"),
    REDISTRICTING_SCHEMA.name: (
        "TOTAL",
        "HHGQ",
        "HHGQ*HISPANIC",
        "HHGQ*HISPANIC*CENRACE",
        "DETAILED",
    ),
}
"""Nested chains of marginals minimised by the multi-pass rounder, per shipped schema (TDA §7.3,
eq. 7.7; docs/science.md §4, "Total unimodularity"); the engine's rounder
(:func:`engine.topdown.queries.rounder_chain`) and the prediction's rounding model
(:mod:`engine.prediction.root_clipping`) read them from here."""


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
        recode = RECODES.get(part)
        if recode is not None:
            attr = recode.attribute
            if attr not in names:
                raise ValidationError(
                    f"query {name!r} needs attribute {attr}, which schema {schema_name!r} lacks"
                )
            levels = list(attributes[names.index(attr)][1])
            groups = [recode.group_of(lv) for lv in levels]
            unknown = [lv for lv, g in zip(levels, groups, strict=True) if g is None]
            if unknown:
                raise ValidationError(
                    f"{part} cannot group {attr} level(s) {unknown} of schema {schema_name!r}"
                )
            recodes.append((attr, tuple(g for g in groups if g is not None), recode.labels))
        elif part not in names:
            raise ValidationError(
                f"query {name!r}: schema {schema_name!r} has no attribute {part!r}; "
                f"known attributes: {', '.join(names)} "
                f"(or {', '.join((TOTAL, DETAILED, *RECODES))})"
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
