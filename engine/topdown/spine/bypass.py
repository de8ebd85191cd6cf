"""Bypassing redundant geounits: SPN §5, Algorithm 3 (Move_Spine_to_Pareto_Frontier), Theorem 3.

The spine is a rooted tree given by a parent array (``-1`` for the root) with a privacy-loss
budget proportion γ per geounit (initially the level proportion β_l). Internal geounits are
visited bottom-up (deepest first, as Algorithm 3 runs from the block-group level to the root);
a geounit u with c current children is *bypassed* when

* c = 1 (the zCDP rule, Observation 1: a lone child's noisy answers never affect the output), or
* the mechanism is pure DP and min_children γ ≥ (c − 1) γ_u / 2 (Theorem 2).

Bypassing u moves γ_u to each of its children, re-attaches them to u's parent and removes u
(SPN §5: "redefining the PLB of each of the child geounits as the sum of the child's PLB and the
PLB of the parent"). The sum of γ along every root-to-block path is unchanged, which is what
keeps the run ρ-zCDP (ε-DP) with the same ρ (ε) (Theorem 3). A root with one child is bypassed by
making that child the root; a root with several children is kept (the tree stays rooted).

Query proportions. In the DAS code (SPN §5) bypassing u creates, for each child, a geounit *in
u's geolevel* holding the child's blocks with proportion γ_u + γ_child, and sets the child's own
proportion to zero: "this operation actually moves the geolevel PLB proportion to a higher
geolevel". The merged geounit is therefore measured with the query strategy and query
proportions α of u's level, not of the child's. :attr:`BypassResult.query_owner` records, for
every kept geounit, the node whose level's α it takes (itself if nothing was merged into it; the
topmost bypassed ancestor of a chain otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.core.errors import ValidationError


@dataclass(frozen=True)
class BypassResult:
    """The spine after Algorithm 3, in the input's node numbering.

    ``kept[u]`` is False for bypassed geounits; ``parent`` and ``share`` are meaningful for kept
    geounits only (bypassed ones have parent ``-2`` and share 0). ``query_owner[u]`` is the node
    whose geolevel's query proportions kept geounit u is measured with (SPN §5: a merged geounit
    sits in the bypassed parent's geolevel): u itself, or the topmost geounit bypassed into it.
    """

    kept: np.ndarray
    parent: np.ndarray
    share: np.ndarray
    query_owner: np.ndarray

    @property
    def n_bypassed(self) -> int:
        return int((~self.kept).sum())


def node_depths(parent: np.ndarray) -> np.ndarray:
    """Depth of every node of a tree given by its parent array (root depth 0)."""
    parent = np.asarray(parent, dtype=np.int64)
    n = parent.size
    roots = np.flatnonzero(parent == -1)
    if roots.size != 1:
        raise ValidationError(f"a spine has exactly one root; this tree has {roots.size}")
    if ((parent < -1) | (parent >= n)).any():
        raise ValidationError("parent indices must be -1 (root) or a node index")
    depth = np.full(n, -1, dtype=np.int64)
    depth[roots[0]] = 0
    for _ in range(n):
        unknown = depth < 0
        if not unknown.any():
            return depth
        ready = unknown & (depth[np.where(parent >= 0, parent, 0)] >= 0) & (parent >= 0)
        if not ready.any():
            break
        depth[ready] = depth[parent[ready]] + 1
    raise ValidationError("the parent array has a cycle or nodes unreachable from the root")


def bypass_geounits(
    parent: np.ndarray, share: np.ndarray, *, pure_dp: bool = False
) -> BypassResult:
    """Algorithm 3 on a tree (``parent``) with per-geounit budget proportions ``share`` (γ).

    ``share`` may hold floats or :class:`fractions.Fraction` objects (exact accounting).
    """
    parent = np.asarray(parent, dtype=np.int64).copy()
    n = parent.size
    shares = np.array(share, dtype=object if _is_object(share) else float, copy=True)
    if shares.shape != (n,):
        raise ValidationError(f"need one share per node ({n}); got shape {shares.shape}")
    if any(s < 0 for s in shares.tolist()):
        raise ValidationError("budget shares must be non-negative")
    depth = node_depths(parent)
    children: list[list[int]] = [[] for _ in range(n)]
    for node, up in enumerate(parent.tolist()):
        if up >= 0:
            children[up].append(node)
    kept = np.ones(n, dtype=bool)
    owner = np.arange(n, dtype=np.int64)
    for node in sorted(range(n), key=lambda u: (-int(depth[u]), u)):
        kids = children[node]
        c = len(kids)
        if c == 0:
            continue
        up = int(parent[node])
        if c == 1:
            bypass = True
        elif pure_dp and up >= 0:
            bypass = min(shares[k] for k in kids) >= (c - 1) * shares[node] / 2
        else:
            bypass = False
        if not bypass:
            continue
        for k in kids:
            shares[k] = shares[k] + shares[node]
            parent[k] = up
            owner[k] = owner[node]  # the merged geounit sits in the parent's geolevel (SPN §5)
        if up >= 0:
            siblings = children[up]
            siblings.remove(node)
            siblings.extend(kids)
        children[node] = []
        shares[node] = shares[node] * 0
        parent[node] = -2
        kept[node] = False
    return BypassResult(kept=kept, parent=parent, share=shares, query_owner=owner)


def _is_object(share: object) -> bool:
    values = share.tolist() if isinstance(share, np.ndarray) else list(share)  # type: ignore[arg-type]
    return any(not isinstance(v, int | float | np.floating | np.integer) for v in values)
