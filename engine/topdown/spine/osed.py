"""Off-spine entity distance (OSED): SPN §4.1, Algorithm 1, equations (2)–(5).

The OSED of an entity k is the minimum number of spine geounits that must be added to or
subtracted from one another to compose k; an entity identical to a geounit has OSED 1 (SPN
footnote 9). Algorithm 1 computes it bottom-up for k and its complement k′:

    at a block u:          c[k, L, u] = C_k(u),          c[k′, L, u] = 1 − C_k(u)
    at a geounit (l−1, u): x = Σ_children c[k, l, v],    y = Σ_children c[k′, l, v]
                           c[k, l−1, u] = min(x, y + 1), c[k′, l−1, u] = min(y, x + 1)

and OSED(k) = c[k, 1, 1] at the root. The reduce ``h`` turns the vector of OSEDs into an
objective: ``"mean"``, ``"max"`` or ``"sorted"`` (the descending vector compared
lexicographically by Algorithm 2).

Entities are given as a boolean block-membership matrix (blocks × entities), so overlapping
entities and unions are allowed.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from engine.core.errors import ValidationError
from engine.topdown.geography import GeoTree
from engine.topdown.spine.bypass import node_depths
from engine.topdown.spine.levels import SpineLevels

Reduce = Literal["mean", "max", "sorted"]

ENTITY_CHUNK = 64
"""Entities processed together (bounds memory at U[L] × ENTITY_CHUNK counts per level)."""


def osed_recursion_step(
    aggregate_in: np.ndarray, aggregate_out: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Equations (4)–(5): from the children's sums x (inside k) and y (complement) to the parent's.

    ``aggregate_in`` and ``aggregate_out`` are Σ_children c[k, l, v] and Σ_children c[k′, l, v].
    """
    return (
        np.minimum(aggregate_in, aggregate_out + 1),
        np.minimum(aggregate_out, aggregate_in + 1),
    )


def osed_by_level(
    spine: SpineLevels, membership: np.ndarray, *, down_to: int | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The intermediate OSEDs c[k, l, ·] and c[k′, l, ·] of every level (Algorithm 1).

    ``membership`` is a (n_blocks, K) boolean matrix. Returns, for each level index
    ``l`` from the block level up to the root, a pair of (U[l], K) integer arrays
    (inside, complement), indexed by level: ``result[l]``. ``down_to`` stops the recursion
    early (levels above it are not computed and left as empty arrays).
    """
    member = _as_membership(spine, membership)
    n_levels = spine.n_levels
    out: list[tuple[np.ndarray, np.ndarray]] = [
        (np.empty((0, member.shape[1]), np.int64),) * 2 for _ in range(n_levels)
    ]
    inside = member.astype(np.int64)
    outside = 1 - inside
    out[-1] = (inside, outside)
    stop = 0 if down_to is None else down_to
    for level in range(n_levels - 1, stop, -1):
        aggregate = spine.aggregation_matrix(level)
        inside, outside = osed_recursion_step(
            np.asarray(aggregate @ inside), np.asarray(aggregate @ outside)
        )
        out[level - 1] = (inside, outside)
    return out


def entity_osed(spine: SpineLevels, membership: np.ndarray) -> np.ndarray:
    """OSED c[k, 1, 1] of each entity (column of ``membership``) on ``spine``."""
    member = _as_membership(spine, membership)
    result = np.empty(member.shape[1], dtype=np.int64)
    for start in range(0, member.shape[1], ENTITY_CHUNK):
        stop = min(start + ENTITY_CHUNK, member.shape[1])
        levels = osed_by_level(spine, member[:, start:stop])
        result[start:stop] = levels[0][0][0]
    return result


def mean_osed(used: SpineLevels | GeoTree, membership: np.ndarray) -> float:
    """Mean OSED of the entities (columns of ``membership``) on the spine a run measured on:
    nested levels (:func:`entity_osed`) or the run's tree after bypassing (:func:`tree_osed`).

    A property of the spine and the entities (SPN §7, Tables 2–3 report it beside the MAE), not
    a comparison with the truth."""
    if isinstance(used, GeoTree):
        return float(tree_osed(used.parent, used.block_node, membership).mean())
    return float(entity_osed(used, membership).mean())


def tree_osed(parent: np.ndarray, block_node: np.ndarray, membership: np.ndarray) -> np.ndarray:
    """Algorithm 1 on a general rooted tree (children may skip levels, e.g. after bypassing).

    ``parent[n]`` is node n's parent (``-1`` for the root) and ``block_node[b]`` the leaf of block
    b; every leaf must hold exactly one block. Returns the OSED of each column of ``membership``.
    """
    parent = np.asarray(parent, dtype=np.int64)
    block_node = np.asarray(block_node, dtype=np.int64)
    member = np.asarray(membership)
    if member.ndim == 1:
        member = member[:, None]
    if member.shape[0] != block_node.size:
        raise ValidationError(
            f"entity membership must have one row per block ({block_node.size}); "
            f"got shape {member.shape}"
        )
    n_nodes = parent.size
    is_leaf = np.ones(n_nodes, dtype=bool)
    is_leaf[parent[parent >= 0]] = False
    if np.bincount(block_node, minlength=n_nodes)[is_leaf].tolist() != [1] * int(is_leaf.sum()):
        raise ValidationError("OSED on a tree needs exactly one block per leaf")
    depth = node_depths(parent)
    k = member.shape[1]
    sum_in = np.zeros((n_nodes, k), dtype=np.int64)
    sum_out = np.zeros((n_nodes, k), dtype=np.int64)
    c_in = np.zeros((n_nodes, k), dtype=np.int64)
    c_out = np.zeros((n_nodes, k), dtype=np.int64)
    c_in[block_node] = member.astype(np.int64)
    c_out[block_node] = 1 - c_in[block_node]
    for d in range(int(depth.max()), -1, -1):
        nodes = np.flatnonzero(depth == d)
        inner = nodes[~is_leaf[nodes]]
        c_in[inner], c_out[inner] = osed_recursion_step(sum_in[inner], sum_out[inner])
        if d > 0:
            np.add.at(sum_in, parent[nodes], c_in[nodes])
            np.add.at(sum_out, parent[nodes], c_out[nodes])
    return c_in[int(np.flatnonzero(parent == -1)[0])]


def reduce_osed(values: np.ndarray, how: Reduce) -> float | tuple[int, ...]:
    """The reduce ``h`` of Algorithm 1: arithmetic mean, max, or the descending vector."""
    values = np.asarray(values)
    if values.size == 0:
        raise ValidationError("cannot reduce the OSEDs of an empty set of entities")
    if how == "mean":
        return float(values.mean())
    if how == "max":
        return float(values.max())
    if how == "sorted":
        return tuple(int(v) for v in np.sort(values)[::-1])
    raise ValidationError(f"unknown OSED reduce {how!r}; use 'mean', 'max' or 'sorted'")


def lexicographic_le(candidate: tuple[int, ...], current: tuple[int, ...]) -> bool:
    """``candidate ≤_lexicographic current`` as defined for Algorithm 2 (ties are ⊤)."""
    if len(candidate) != len(current):
        raise ValidationError("lexicographic comparison needs vectors of equal length")
    for a, b in zip(candidate, current, strict=True):
        if a != b:
            return a < b
    return True


def _as_membership(spine: SpineLevels, membership: np.ndarray) -> np.ndarray:
    member = np.asarray(membership)
    if member.ndim == 1:
        member = member[:, None]
    if member.ndim != 2 or member.shape[0] != spine.n_blocks:
        raise ValidationError(
            f"entity membership must have one row per block ({spine.n_blocks}); "
            f"got shape {member.shape}"
        )
    if member.dtype != bool:
        if not np.isin(member, (0, 1)).all():
            raise ValidationError("entity membership must be boolean (0/1)")
        member = member.astype(bool)
    return member
