"""Marginal query groups on a histogram schema (docs/science.md §4; SPN §2.3; TDA §5.1, §7).

A query group is a marginal of the histogram: the attributes it keeps (optionally collapsed into
coarser groups, e.g. HHINSTLEVELS collapses HHGQ into household / institutional / non-institutional)
and a sum over the attributes it drops. As a matrix it is the Kronecker product, over the schema's
attributes, of an identity (kept), a collapse matrix (recoded) or a row of ones (dropped) — SPN §2.3.
We never build that matrix: answers are computed by reshaping the C-order histogram to the schema's
shape and summing (:meth:`QueryGroup.answer`), and the solvers use the equivalent *partition index*
``cell → answer cell`` (:attr:`QueryGroup.cell_index`). Every query group is a partition of the cells
(each cell counted in exactly one answer cell, every answer cell non-empty); this is checked when a
group is built.

Names: ``TOTAL`` (no attribute kept), ``DETAILED`` (all kept), ``HHINSTLEVELS``, or attribute names
joined by ``*`` (``VOTINGAGE*HISPANIC*CENRACE``). Presets list the query names of the shipped schemas
(:data:`SCHEMA_QUERIES`) and the rounder's nested chain of marginals (:data:`ROUNDER_CHAINS`, TDA §7.3).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from engine.core.errors import ValidationError
from engine.schema.attributes import Schema
from engine.schema.marginals import (
    DETAILED,
    HHINSTLEVELS,
    ROUNDER_CHAINS,
    TOTAL,
    MarginalParse,
    parse_marginal,
)
from engine.schema.marginals import cell_index as marginal_cell_index

__all__ = [
    "DETAILED",
    "HHINSTLEVELS",
    "ROUNDER_CHAINS",
    "SCHEMA_QUERIES",
    "TOTAL",
    "QueryGroup",
    "query_group",
    "query_groups",
    "rounder_chain",
]

SCHEMA_QUERIES: dict[str, tuple[str, ...]] = {
    "ri2010": ("TOTAL", "VOTINGAGE", "RACEETH", "DETAILED"),
    "redistricting2020": (
        "TOTAL",
        "CENRACE",
        "HISPANIC",
        "VOTINGAGE",
        "HHINSTLEVELS",
        "HHGQ",
        "HISPANIC*CENRACE",
        "VOTINGAGE*CENRACE",
        "VOTINGAGE*HISPANIC",
        "VOTINGAGE*HISPANIC*CENRACE",
        "DETAILED",
    ),
}
"""Query names of the shipped schemas (TDA Tables 3–8 for the 2,016-cell schema)."""


@dataclass(frozen=True)
class QueryGroup:
    """One marginal query group on ``schema``.

    ``kept`` names the kept attributes (in schema order). ``recodes`` maps a kept attribute to the
    answer group of each of its levels (``levels → group index``) with the group labels; attributes
    without a recode are kept level by level.
    """

    name: str
    schema: Schema
    kept: tuple[str, ...]
    recodes: tuple[tuple[str, tuple[int, ...], tuple[str, ...]], ...] = ()

    def __post_init__(self) -> None:
        for attr in self.kept:
            self.schema.axis(attr)  # KeyError with the known names if unknown
        _assert_partition(self)

    # -- structure ---------------------------------------------------------------------------
    def _recode(self, attr: str) -> tuple[tuple[int, ...], tuple[str, ...]] | None:
        for name, groups, labels in self.recodes:
            if name == attr:
                return groups, labels
        return None

    @cached_property
    def shape(self) -> tuple[int, ...]:
        """Shape of the answer (one axis per kept attribute, recoded sizes)."""
        out = []
        for attr in self.kept:
            rec = self._recode(attr)
            out.append(len(rec[1]) if rec else self.schema.attributes[self.schema.axis(attr)].size)
        return tuple(out)

    @property
    def size(self) -> int:
        """Number of answer cells."""
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def is_detailed(self) -> bool:
        """True when the group is the identity (every cell its own answer)."""
        return self.size == self.schema.size

    @cached_property
    def cell_index(self) -> np.ndarray:
        """``(schema.size,)`` int64: the answer cell that each histogram cell is counted in."""
        parse = MarginalParse(self.name, self.kept, self.recodes)
        return marginal_cell_index(parse, self.schema.attribute_levels)

    @cached_property
    def labels(self) -> tuple[str, ...]:
        """Label of each answer cell: the kept levels joined by ``|`` (``"total"`` for TOTAL)."""
        if not self.kept:
            return ("total",)
        per_axis = []
        for attr in self.kept:
            rec = self._recode(attr)
            per_axis.append(
                rec[1] if rec else self.schema.attributes[self.schema.axis(attr)].levels
            )
        grids = np.indices(self.shape).reshape(len(self.shape), -1)
        return tuple(
            "|".join(per_axis[k][grids[k, j]] for k in range(len(self.shape)))
            for j in range(grids.shape[1])
        )

    # -- answers -----------------------------------------------------------------------------
    def answer(self, counts: np.ndarray) -> np.ndarray:
        """Answer the group on histograms ``counts`` of shape ``(..., schema.size)``.

        Reshape to the schema's shape, sum the dropped axes, collapse recoded axes (Kronecker
        structure, SPN §2.3). Returns shape ``(..., size)`` with the input's dtype.
        """
        counts = np.asarray(counts)
        lead = counts.shape[:-1]
        nd = len(lead)
        cube = counts.reshape(lead + self.schema.shape)
        kept_axes = [self.schema.axis(a) for a in self.kept]
        dropped = tuple(nd + ax for ax in range(len(self.schema.shape)) if ax not in kept_axes)
        cube = cube.sum(axis=dropped) if dropped else cube
        for position, attr in enumerate(self.kept):
            rec = self._recode(attr)
            if rec is None:
                continue
            groups = np.asarray(rec[0], dtype=np.int64)
            collapse = np.zeros((len(groups), len(rec[1])), dtype=counts.dtype)
            collapse[np.arange(len(groups)), groups] = 1
            cube = np.moveaxis(
                np.tensordot(cube, collapse, axes=([nd + position], [0])), -1, nd + position
            )
        return cube.reshape(lead + (self.size,))

    def refines(self, coarser: QueryGroup) -> bool:
        """True when every answer cell of this group lies inside one answer cell of ``coarser``."""
        fine, coarse = self.cell_index, coarser.cell_index
        representative = np.full(self.size, -1, dtype=np.int64)
        representative[fine] = coarse  # any one cell's coarse cell per fine answer cell
        return bool(np.all(representative[fine] == coarse))


def _assert_partition(group: QueryGroup) -> None:
    """Check that ``group`` partitions the cells: each cell in one answer cell, none empty."""
    index = group.cell_index
    if index.shape != (group.schema.size,) or index.min() < 0 or index.max() >= group.size:
        raise ValidationError(
            f"query group {group.name!r} does not map every cell to one answer cell"
        )
    if np.any(np.bincount(index, minlength=group.size) == 0):
        raise ValidationError(
            f"query group {group.name!r} has an answer cell that contains no cell"
        )
    n = group.schema.size
    if n <= 4096:
        # The answer of every cell's unit histogram, 256 cells at a time (the whole identity of
        # the 2,016-cell schema, with its answers, was a 65 MB transient of every run).
        for start in range(0, n, 256):
            rows = np.arange(start, min(start + 256, n))
            unit = np.zeros((rows.size, n), dtype=np.int64)
            unit[np.arange(rows.size), rows] = 1
            by_index = np.zeros((rows.size, group.size), dtype=np.int64)
            by_index[np.arange(rows.size), index[rows]] = 1
            if not np.array_equal(group.answer(unit), by_index):
                raise ValidationError(f"query group {group.name!r} is not a partition of the cells")


def query_group(schema: Schema, name: str) -> QueryGroup:
    """The query group called ``name`` on ``schema`` (TOTAL, DETAILED, HHINSTLEVELS or ``A*B``).

    The name is parsed by :func:`engine.schema.marginals.parse_marginal` (shared with the analytic
    prediction of :mod:`engine.prediction`)."""
    parse = parse_marginal(name, schema.attribute_levels, schema.name)
    return QueryGroup(name, schema, parse.kept, parse.recodes)


def query_groups(schema: Schema, names: Sequence[str] | None = None) -> tuple[QueryGroup, ...]:
    """Query groups for ``names`` (default: the schema's preset list, else TOTAL + DETAILED)."""
    if names is None:
        names = SCHEMA_QUERIES.get(schema.name, (TOTAL, DETAILED))
    return tuple(query_group(schema, n) for n in names)


def rounder_chain(schema: Schema, names: Sequence[str] | None = None) -> tuple[QueryGroup, ...]:
    """The rounder's nested chain of marginals (TDA §7.3): each group refines the previous one.

    Default: the schema's preset, else the prefixes of the attribute order
    (TOTAL → A → A*B → … → DETAILED), which is always nested.
    """
    if names is None:
        names = ROUNDER_CHAINS.get(schema.name)
    if names is None:
        prefixes = ["*".join(schema.names[: k + 1]) for k in range(len(schema.names) - 1)]
        names = (TOTAL, *prefixes, DETAILED)
    chain = tuple(query_group(schema, n) for n in names)
    if not chain or not chain[-1].is_detailed:
        raise ValidationError("the rounder chain must end with DETAILED")
    for coarse, fine in zip(chain, chain[1:], strict=False):
        if not fine.refines(coarse):
            raise ValidationError(
                f"rounder chain is not nested: {fine.name} does not refine {coarse.name} "
                "(a nested chain keeps the rounding LP totally unimodular, TDA §7.3)"
            )
    return chain
