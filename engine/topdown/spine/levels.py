"""A geographic spine as nested block-membership arrays (SPN §3, Table 1).

SPN §3 represents a spine by the matrices ``A[l]`` whose rows are the geounits of geolevel ``l``
and whose columns are the blocks. :class:`SpineLevels` stores the same information compactly: for
every geolevel (root first, block last) an integer array mapping each block to the index of the
geounit of that level containing it, plus the geounits' identifiers. ``A[l][u, b] == 1`` exactly
when ``codes[l][b] == u``. Levels must nest: every geounit of level ``l`` lies inside exactly one
geounit of level ``l - 1``. The last level holds one geounit per block.

The spine algorithms (OSED, the AIAN split, optimized block groups, tract groups) work on this
form; :mod:`engine.topdown.spine.build` turns it into the TopDown engine's tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import sparse

from engine.core.errors import ValidationError

ROOT_LEVEL = "US"
"""Name of the single-geounit root level the spine builder adds above the histogram's levels."""


@dataclass(frozen=True)
class SpineLevels:
    """Nested geolevels over ``n_blocks`` blocks (root first, block last).

    ``codes[l][b]`` is the index in ``0 .. len(labels[l]) - 1`` of the geounit of level
    ``names[l]`` that contains block ``b``; ``labels[l][u]`` is that geounit's identifier.
    """

    names: tuple[str, ...]
    codes: tuple[np.ndarray, ...]
    labels: tuple[tuple[str, ...], ...]

    def __post_init__(self) -> None:
        if len(self.names) < 2:
            raise ValidationError("a spine needs at least a root level and a block level")
        if len(set(self.names)) != len(self.names):
            raise ValidationError(f"spine level names must be distinct; got {list(self.names)}")
        if not (len(self.codes) == len(self.labels) == len(self.names)):
            raise ValidationError("names, codes and labels must have one entry per level")
        n_blocks = self.codes[-1].shape[0]
        for name, code, label in zip(self.names, self.codes, self.labels, strict=True):
            if code.shape != (n_blocks,):
                raise ValidationError(
                    f"level {name!r}: codes have shape {code.shape}, expected ({n_blocks},)"
                )
            if n_blocks and (code.min() < 0 or code.max() >= len(label)):
                raise ValidationError(f"level {name!r}: codes outside 0..{len(label) - 1}")
            if np.unique(code).size != len(label):
                raise ValidationError(f"level {name!r}: some geounits contain no block")
        if len(self.labels[0]) != 1:
            raise ValidationError(
                f"the root level {self.names[0]!r} must hold one geounit; "
                f"it holds {len(self.labels[0])}"
            )
        if len(self.labels[-1]) != n_blocks:
            raise ValidationError(
                f"the last level {self.names[-1]!r} must hold one geounit per block "
                f"({n_blocks}); it holds {len(self.labels[-1])}"
            )
        for level in range(1, len(self.names)):
            pairs = np.unique(np.stack([self.codes[level], self.codes[level - 1]]), axis=1)
            if pairs.shape[1] != len(self.labels[level]):
                raise ValidationError(
                    f"level {self.names[level]!r} does not nest in {self.names[level - 1]!r}: "
                    "some of its geounits straddle two parent geounits"
                )

    @classmethod
    def from_block_labels(
        cls, names: Sequence[str], block_labels: Sequence[Sequence[str] | np.ndarray]
    ) -> SpineLevels:
        """Build from one identifier per block and level (geounits are numbered in sorted order)."""
        codes: list[np.ndarray] = []
        labels: list[tuple[str, ...]] = []
        for values in block_labels:
            code, uniques = pd.factorize(pd.Series(np.asarray(values, dtype=object)), sort=True)
            codes.append(np.asarray(code, dtype=np.int64))
            labels.append(tuple(str(u) for u in uniques))
        return cls(tuple(names), tuple(codes), tuple(labels))

    @classmethod
    def from_geography(cls, geography: pd.DataFrame, levels: Sequence[str]) -> SpineLevels:
        """The conventional spine of a block table: a ``US`` root above ``levels`` (SPN §1).

        ``geography`` has one row per block and one column per entry of ``levels`` holding the
        full geounit identifier (e.g. a BlockHistogram's ``geography``); the last level must
        identify blocks uniquely.
        """
        missing = [lv for lv in levels if lv not in geography.columns]
        if missing:
            raise ValidationError(
                f"geography lacks level column(s) {missing}; it has {list(geography.columns)}"
            )
        if ROOT_LEVEL in levels:
            raise ValidationError(f"{ROOT_LEVEL!r} is added as the root; do not list it")
        n_blocks = len(geography)
        root = np.full(n_blocks, ROOT_LEVEL, dtype=object)
        columns = [root] + [geography[lv].astype(str).to_numpy() for lv in levels]
        return cls.from_block_labels((ROOT_LEVEL, *levels), columns)

    @property
    def n_blocks(self) -> int:
        return int(self.codes[-1].shape[0])

    @property
    def n_levels(self) -> int:
        return len(self.names)

    def n_units(self, level: int) -> int:
        """Number of geounits U[l] in level ``level``."""
        return len(self.labels[level])

    def index(self, name: str) -> int:
        """Position of the level called ``name`` (raises ValidationError naming the levels)."""
        try:
            return self.names.index(name)
        except ValueError:
            raise ValidationError(
                f"the spine has no level {name!r}; its levels are {list(self.names)}"
            ) from None

    def parent_codes(self, level: int) -> np.ndarray:
        """For each geounit of ``level`` (≥ 1), the index of its parent in ``level - 1``."""
        if level < 1:
            raise ValidationError("the root level has no parent level")
        parent = np.empty(self.n_units(level), dtype=np.int64)
        parent[self.codes[level]] = self.codes[level - 1]
        return parent

    def aggregation_matrix(self, level: int) -> sparse.csr_matrix:
        """The 0/1 matrix (U[level-1] × U[level]) summing children of ``level`` into parents."""
        parent = self.parent_codes(level)
        n_children = self.n_units(level)
        data = np.ones(n_children, dtype=np.int64)
        return sparse.csr_matrix(
            (data, (parent, np.arange(n_children))),
            shape=(self.n_units(level - 1), n_children),
        )

    def block_counts(self, level: int) -> np.ndarray:
        """Number of blocks b[l, u] in each geounit of ``level``."""
        return np.bincount(self.codes[level], minlength=self.n_units(level))

    def with_level(
        self, name: str, codes: np.ndarray, labels: Sequence[str], *, at: int
    ) -> SpineLevels:
        """A copy with level ``name`` inserted at position ``at`` (validated to nest)."""
        names = (*self.names[:at], name, *self.names[at:])
        all_codes = (*self.codes[:at], np.asarray(codes, dtype=np.int64), *self.codes[at:])
        all_labels = (*self.labels[:at], tuple(labels), *self.labels[at:])
        return SpineLevels(names, all_codes, all_labels)

    def replace_level(self, name: str, codes: np.ndarray, labels: Sequence[str]) -> SpineLevels:
        """A copy with the level called ``name`` redefined (validated to nest)."""
        at = self.index(name)
        all_codes = list(self.codes)
        all_labels = list(self.labels)
        all_codes[at] = np.asarray(codes, dtype=np.int64)
        all_labels[at] = tuple(labels)
        return SpineLevels(self.names, tuple(all_codes), tuple(all_labels))


def codes_from_keys(*keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Number the distinct tuples of the per-block ``keys`` (lexicographic order).

    Returns ``(codes, first_block)`` where ``codes[b]`` is the index of block ``b``'s tuple and
    ``first_block[u]`` the first block carrying tuple ``u``.
    """
    stacked = np.stack([np.asarray(k, dtype=np.int64) for k in keys], axis=1)
    _, first_block, codes = np.unique(stacked, axis=0, return_index=True, return_inverse=True)
    return codes.reshape(-1).astype(np.int64), first_block.astype(np.int64)
