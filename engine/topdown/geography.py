"""The geographic spine of a TopDown run: a rooted tree of geounits over blocks (TDA §5, §6; SPN §3).

:class:`GeoTree` is deliberately general so that other spines (SPN: AIAN-style branches, optimized
block groups, bypassed single-child parents) are just different trees:

* nodes are numbered ``0 … n_nodes-1`` with node 0 the root and every parent numbered before its
  children (so a forward sweep is top-down and a backward sweep bottom-up);
* ``parent[i]`` is the parent's node index (``-1`` for the root); a child may skip a level
  (e.g. a block directly under a tract when its block group was bypassed);
* ``level[i]`` indexes ``levels`` (the level *names*, root first, used to look up the allocation's
  level share and for reporting); ``node_id[i]`` is the geounit identifier (e.g. a GEOID);
* ``block_node[b]`` is the leaf node that tabulation block ``b`` (row ``b`` of the
  :class:`~engine.data.histogram.BlockHistogram`) belongs to. Leaves are normally the blocks
  themselves; a coarser leaf level (e.g. tracts) aggregates its blocks.

The conventional spine (US > State > County > Tract > Block_Group > Block, any subset of those
levels, a synthetic ``US`` root when the data do not carry one) is :meth:`GeoTree.from_histogram`.
Estimation processes *families* (a parent and its children) depth by depth from the root
(:meth:`GeoTree.families_by_depth`); the families of one depth are independent.

The per-node per-query privacy budgets come from :func:`engine.topdown.measure.node_query_budget`,
which a different spine may replace by passing its own array to
:func:`engine.topdown.plan.plan_run`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd
import scipy.sparse as sp

from engine.core.errors import ValidationError
from engine.data.histogram import BlockHistogram

US = "US"


@dataclass(frozen=True, eq=False)
class GeoTree:
    """A rooted tree of geounits; see the module docstring for the invariants."""

    levels: tuple[str, ...]
    level: np.ndarray
    parent: np.ndarray
    node_id: tuple[str, ...]
    block_node: np.ndarray
    meta: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.node_id)
        level = np.asarray(self.level, dtype=np.int64)
        parent = np.asarray(self.parent, dtype=np.int64)
        block_node = np.asarray(self.block_node, dtype=np.int64)
        object.__setattr__(self, "level", level)
        object.__setattr__(self, "parent", parent)
        object.__setattr__(self, "block_node", block_node)
        if n == 0:
            raise ValidationError("a geographic tree needs at least one node (the root)")
        if level.shape != (n,) or parent.shape != (n,):
            raise ValidationError("GeoTree: level, parent and node_id must have one entry per node")
        if parent[0] != -1 or np.any(parent[1:] < 0):
            raise ValidationError("GeoTree: node 0 must be the only root (parent -1)")
        if np.any(parent[1:] >= np.arange(1, n)):
            raise ValidationError("GeoTree: every parent must be numbered before its children")
        if level.min() < 0 or level.max() >= len(self.levels):
            raise ValidationError("GeoTree: a node's level index is outside `levels`")
        if block_node.size and (block_node.min() < 0 or block_node.max() >= n):
            raise ValidationError("GeoTree: a block maps to a node index outside the tree")
        is_leaf = np.ones(n, dtype=bool)
        is_leaf[parent[1:]] = False
        if block_node.size and not np.all(is_leaf[block_node]):
            bad = int(block_node[~is_leaf[block_node]][0])
            raise ValidationError(
                f"GeoTree: blocks must map to leaf nodes; node {self.node_id[bad]!r} has children"
            )

    # -- basic properties --------------------------------------------------------------------
    @property
    def n_nodes(self) -> int:
        return len(self.node_id)

    @property
    def n_blocks(self) -> int:
        return int(self.block_node.size)

    @cached_property
    def depth(self) -> np.ndarray:
        """Number of edges from the root to each node."""
        depth = np.zeros(self.n_nodes, dtype=np.int64)
        for i in range(1, self.n_nodes):  # parents come first
            depth[i] = depth[self.parent[i]] + 1
        return depth

    @cached_property
    def children_ptr(self) -> tuple[np.ndarray, np.ndarray]:
        """CSR children lists: children of node ``i`` are ``idx[ptr[i]:ptr[i+1]]`` (ascending)."""
        kids = np.arange(1, self.n_nodes, dtype=np.int64)
        order = np.argsort(self.parent[1:], kind="stable")
        idx = kids[order]
        counts = np.bincount(self.parent[1:], minlength=self.n_nodes)
        ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return ptr, idx

    def children(self, node: int) -> np.ndarray:
        ptr, idx = self.children_ptr
        return idx[ptr[node] : ptr[node + 1]]

    @property
    def level_names(self) -> np.ndarray:
        """Level name of every node (object array)."""
        return np.asarray(self.levels, dtype=object)[self.level]

    def nodes_at_level(self, level: str) -> np.ndarray:
        """Node indices whose level is ``level``."""
        if level not in self.levels:
            raise ValidationError(
                f"the spine has no level {level!r}; levels: {', '.join(self.levels)}"
            )
        return np.flatnonzero(self.level == self.levels.index(level))

    def families_by_depth(self) -> list[np.ndarray]:
        """Parents with children, grouped by the parent's depth (index = depth), root first."""
        ptr, _ = self.children_ptr
        has_kids = np.diff(ptr) > 0
        depth = self.depth
        return [np.flatnonzero(has_kids & (depth == d)) for d in range(int(depth.max()))]

    def nodes_frame(self) -> pd.DataFrame:
        """One row per node: node, geolevel, geounit, parent, depth."""
        return pd.DataFrame(
            {
                "node": np.arange(self.n_nodes),
                "geolevel": self.level_names,
                "geounit": np.asarray(self.node_id, dtype=object),
                "parent": self.parent,
                "depth": self.depth,
            }
        )

    # -- aggregation -------------------------------------------------------------------------
    def aggregate(self, block_counts: np.ndarray) -> np.ndarray:
        """Counts of every node ``(n_nodes, n_cells)`` from block counts ``(n_blocks, n_cells)``."""
        block_counts = np.asarray(block_counts)
        if block_counts.shape[0] != self.n_blocks:
            raise ValidationError(
                f"expected counts for {self.n_blocks} blocks, got {block_counts.shape[0]}"
            )
        leaf_map = sp.csr_matrix(
            (np.ones(self.n_blocks), (self.block_node, np.arange(self.n_blocks))),
            shape=(self.n_nodes, self.n_blocks),
        )
        out = np.asarray(leaf_map @ block_counts.astype(np.float64)).astype(block_counts.dtype)
        depth = self.depth
        for d in range(int(depth.max()), 0, -1):
            nodes = np.flatnonzero(depth == d)
            np.add.at(out, self.parent[nodes], out[nodes])
        return out

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def from_histogram(cls, hist: BlockHistogram, levels: Sequence[str] | None = None) -> GeoTree:
        """The conventional spine over ``levels`` (default: the histogram's levels).

        ``levels`` is root first and may omit data levels (the tree skips them) or start with
        ``"US"`` when the data carry no US column (a synthetic root over all states). Every other
        level must be a geography column of ``hist``; the root level must hold a single geounit
        (use a ``US`` root for multi-state data). Geounits at each level must nest in exactly one
        geounit of the level above. Nodes are numbered root first, level by level, by identifier.
        """
        levels = tuple(levels) if levels is not None else tuple(hist.levels)
        if not levels:
            raise ValidationError("a spine needs at least one level")
        if len(set(levels)) != len(levels):
            raise ValidationError(f"spine levels repeat: {levels}")
        geo = hist.geography
        columns: list[np.ndarray] = []
        for name in levels:
            if name in geo.columns:
                columns.append(geo[name].astype(str).to_numpy())
            elif name == US and name == levels[0]:
                columns.append(np.full(hist.n_blocks, US, dtype=object))
            else:
                raise ValidationError(
                    f"spine level {name!r} is not a geography column of the data "
                    f"(columns: {', '.join(map(str, hist.levels))})"
                )
        root_units = np.unique(columns[0])
        if root_units.size != 1:
            raise ValidationError(
                f"the spine's root level {levels[0]} has {root_units.size} geounits "
                f"({', '.join(map(str, root_units[:5]))}{'…' if root_units.size > 5 else ''}); "
                "a spine needs a single root — add a 'US' root level"
            )
        node_id: list[str] = [str(root_units[0])]
        node_level: list[int] = [0]
        parent: list[int] = [-1]
        # Index of each block's geounit node at the previous level.
        prev_node = np.zeros(hist.n_blocks, dtype=np.int64)
        for k in range(1, len(levels)):
            units, first, inverse = np.unique(columns[k], return_index=True, return_inverse=True)
            start = len(node_id)
            unit_parent = prev_node[first]
            # Nesting: all blocks of a unit must share the unit's parent.
            bad = prev_node != unit_parent[inverse]
            if np.any(bad):
                b = int(np.flatnonzero(bad)[0])
                raise ValidationError(
                    f"{levels[k]} {columns[k][b]} does not nest in one {levels[k - 1]}: it has blocks "
                    f"in {node_id[prev_node[b]]} and {node_id[unit_parent[inverse[b]]]}"
                )
            node_id.extend(str(u) for u in units)
            node_level.extend([k] * units.size)
            parent.extend(unit_parent.tolist())
            prev_node = start + inverse.astype(np.int64)
        return cls(
            levels=levels,
            level=np.asarray(node_level),
            parent=np.asarray(parent),
            node_id=tuple(node_id),
            block_node=prev_node,
        )
