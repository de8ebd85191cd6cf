"""Block-level histograms: the input of the TopDown engine (TDA §5.1, SPEC §4).

A :class:`Schema` is a list of (attribute, levels); the histogram of a geounit is the flattened
(C-order) array of counts over the Cartesian product of the attributes' levels, so a marginal query
group is a reshape and a sum over the dropped attributes (Kronecker structure, SPN §2.3).

A :class:`BlockHistogram` holds one row of counts per tabulation block plus the block's geography:
one column per geolevel (root first, block last) holding the full geounit identifier at that level,
e.g. ``State="44"``, ``County="44007"``, ``Tract="44007000100"``, ``Block_Group="440070001001"``,
``Block="440070001001000"``. The spine builder adds the ``US`` root.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from math import prod
from typing import Any

import numpy as np
import pandas as pd

from phexplore.errors import ValidationError


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


@dataclass
class BlockHistogram:
    """True block-level counts over ``schema`` with the blocks' geography.

    ``counts`` has shape ``(n_blocks, schema.size)`` and dtype int64; ``geography`` has one row per
    block (same order) and one string column per entry of ``levels``. ``units`` optionally holds
    housing-unit counts per block (occupied, vacant) and ``gq`` group-quarters facility counts.
    """

    schema: Schema
    levels: tuple[str, ...]
    geography: pd.DataFrame
    counts: np.ndarray
    source: str = ""
    licence: str = ""
    units: np.ndarray | None = None
    extra: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.counts.ndim != 2 or self.counts.shape[1] != self.schema.size:
            raise ValueError(
                f"counts must have shape (n_blocks, {self.schema.size}); got {self.counts.shape}"
            )
        if len(self.geography) != self.counts.shape[0]:
            raise ValueError(
                f"geography has {len(self.geography)} rows but counts has {self.counts.shape[0]}"
            )
        missing = [lv for lv in self.levels if lv not in self.geography.columns]
        if missing:
            raise ValueError(f"geography lacks level column(s) {missing}")

    @property
    def n_blocks(self) -> int:
        return int(self.counts.shape[0])

    @property
    def total(self) -> int:
        return int(self.counts.sum())


def subset_histogram(hist: BlockHistogram, level: str, units: Sequence[str]) -> BlockHistogram:
    """The blocks of ``hist`` inside the geounits ``units`` of ``level`` (for quick experiments)."""
    if level not in hist.levels:
        raise ValidationError(f"unknown geolevel {level!r}; the data has {list(hist.levels)}")
    wanted = {str(u) for u in units}
    ids = hist.geography[level].astype(str)
    unknown = sorted(wanted - set(ids))
    if unknown:
        raise ValidationError(f"{level} {unknown[:5]} not in the data; e.g. {sorted(set(ids))[:5]}")
    keep = ids.isin(wanted).to_numpy()
    return keep_blocks(hist, keep)


def keep_blocks(hist: BlockHistogram, keep: np.ndarray) -> BlockHistogram:
    """The blocks ``keep`` (bool mask) of ``hist``, with every per-block array of ``extra`` (unit
    frame: housing units, GQ facilities, …) subset alike."""
    extra = {
        k: (v[keep] if isinstance(v, np.ndarray) and v.shape[:1] == (hist.n_blocks,) else v)
        for k, v in hist.extra.items()
    }
    return BlockHistogram(
        schema=hist.schema,
        levels=hist.levels,
        geography=hist.geography[keep].reset_index(drop=True),
        counts=hist.counts[keep],
        source=hist.source,
        licence=hist.licence,
        units=None if hist.units is None else hist.units[keep],
        extra=extra,
    )


def tree_levels(tree: Any, hist: BlockHistogram) -> tuple[str, ...]:
    """The spine's levels that are geography columns of the data (SRS tabulates those)."""
    return tuple(lv for lv in tree.levels if lv in hist.levels)
