"""Spines for a TopDown run: conventional, AIAN-style and optimized (SPN §1, §4–§6).

:func:`build_spine` turns a block histogram into the TopDown engine's
:class:`~engine.topdown.geography.GeoTree` plus the per-node privacy-loss budget proportions γ
(SPN §3, Table 1) from which :meth:`BuiltSpine.budget` derives the per-node per-query budgets
ρ·γ_node·α_{level,q} (SPN Theorem 3; the query proportions α of a geounit's own level are never
changed by spine optimization):

* ``"conventional"``: US > State > County > Tract > Block_Group > Block (the tabulation spine);
* ``"aian"``: the same with every geounit at the state level and below split into the parts
  inside and outside the union of the special areas (SPN §1, Figure 1);
* ``"optimized"``: the AIAN spine (when special areas are given) whose block groups are replaced
  by optimized block groups built from the target entities and GQ status (SPN §4, §6), optionally
  with Algorithm 2's tract groups, then bypassed (Algorithm 3).

Budget proportions. Each level takes its allocation share β. The allocation of a one-state file
is rooted at ``State`` (the US level folded into it); the spine still gets a ``US`` root (a
geounit identical to the state) which takes ``root_fraction`` of the top level's share (and its
query proportions), the state keeping the rest, so that bypassing the single-child root restores
the allocation exactly and an AIAN-split state has a parent whose total is the invariant.
Optimized block groups take the Block_Group share; tract groups take ``tract_group_fraction`` of
the Tract share. Every root-to-block path sums to 1 before and after bypassing (Theorem 3).

Bypass: SPN runs the conventional and AIAN spines without spine optimization (no bypass) and
the optimized spine with it; ``bypass=None`` follows that, except that a root with a single child
is always bypassed (it is the same geounit as its child; SPN Algorithm 3, Observation 1).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from engine.core.errors import ValidationError
from engine.data.histogram import BlockHistogram
from engine.dp.budget import TopDownAllocation
from engine.topdown.geography import GeoTree
from engine.topdown.measure import InvariantSum
from engine.topdown.spine.aian import split_by_special_areas
from engine.topdown.spine.bypass import bypass_geounits
from engine.topdown.spine.entities import EntitySet
from engine.topdown.spine.levels import ROOT_LEVEL, SpineLevels
from engine.topdown.spine.optimized import (
    TRACT_GROUP_LEVEL,
    membership_signature,
    optimized_block_groups,
    tract_groups,
)
from engine.topdown.spine.options import DEFAULT_FANOUT_CUTOFF, SPINE_KINDS

OPTIMIZED_BLOCK_GROUP_LEVEL = "Optimized_Block_Group"
PRODUCTION_ROOT_FRACTION = Fraction(104, 104 + 1440)
"""US : (US + State) level shares of the 2020 production persons allocation (TDA Table 6)."""

BORROWED_LEVEL: Mapping[str, str] = {
    OPTIMIZED_BLOCK_GROUP_LEVEL: "Block_Group",
    TRACT_GROUP_LEVEL: "Tract",
}
"""Spine level → allocation level whose share and query proportions it uses."""


@dataclass(frozen=True)
class BuiltSpine:
    """A spine ready for :func:`engine.topdown.plan.plan_run` (its tree, per-node budgets, invariants).

    ``levels`` is the spine before bypassing (OSEDs are computed on it; bypassing a single-child
    parent does not change any OSED); ``tree`` the spine the run measures on; ``share[n]`` the
    budget proportion γ of tree node n; ``source_level[name]`` the allocation level whose query
    proportions the tree level ``name`` uses; ``query_level[n]`` the allocation level whose
    query proportions node n is measured with — its level's source, or for a geounit that a
    single-child parent was bypassed into, the parent's (SPN §5: the merged geounit sits in the
    parent's geolevel); ``invariants`` the exact answers to hold by level (the root's total);
    ``invariant_sums`` every state total, on the tree nodes that make up the state (one node, or
    a split state's two branches whose sum only is held, TDA §7.4).
    """

    kind: str
    levels: SpineLevels
    tree: GeoTree
    share: tuple[Fraction, ...]
    source_level: Mapping[str, str]
    invariants: Mapping[str, tuple[str, ...]]
    n_bypassed: int
    query_level: tuple[str, ...]
    invariant_sums: tuple[InvariantSum, ...] = ()
    details: dict[str, object] = field(default_factory=dict)

    def budget(self, allocation: TopDownAllocation, query_names: Sequence[str]) -> np.ndarray:
        """``(n_nodes, n_queries)`` budgets ρ·γ_n·α_{level,q} (ε for pure DP); 0 = unmeasured.

        α is that of the node's :attr:`query_level` (its own level's allocation level, or the
        bypassed parent's for a merged geounit, SPN §5).
        """
        sources = sorted(set(self.query_level))
        per_source = np.zeros((len(sources), len(query_names)))
        for i, source in enumerate(sources):
            measured = allocation.queries(source)
            for j, q in enumerate(query_names):
                if q in measured:
                    per_source[i, j] = float(allocation.rho * allocation.query_share(source, q))
        index = np.array([sources.index(s) for s in self.query_level], dtype=np.int64)
        shares = np.array([float(s) for s in self.share])
        return per_source[index] * shares[:, None]

    def summary(self) -> dict[str, object]:
        """Counts per tree level, bypassed geounits and the chosen options (for reports)."""
        counts = np.bincount(self.tree.level, minlength=len(self.tree.levels))
        return {
            "kind": self.kind,
            "geounits": {name: int(c) for name, c in zip(self.tree.levels, counts, strict=True)},
            "bypassed": self.n_bypassed,
            **self.details,
        }


def build_spine(
    hist: BlockHistogram,
    kind: str,
    allocation: TopDownAllocation,
    *,
    special_areas: np.ndarray | EntitySet | None = None,
    entities: Sequence[EntitySet] = (),
    fanout_cutoff: float = DEFAULT_FANOUT_CUTOFF,
    tract_groups_enabled: bool = False,
    bypass: bool | None = None,
    root_fraction: Fraction = PRODUCTION_ROOT_FRACTION,
    tract_group_fraction: Fraction = Fraction(1, 2),
) -> BuiltSpine:
    """The spine ``kind`` over ``hist`` with budget proportions from ``allocation``.

    ``special_areas`` (a block mask or an entity set, whose union is used) is required for
    ``"aian"`` and optional for ``"optimized"``; ``entities`` are the target entity sets of the
    optimized block groups and tract groups.
    """
    if kind not in SPINE_KINDS:
        raise ValidationError(f"unknown spine {kind!r}; choose one of {', '.join(SPINE_KINDS)}")
    data_levels = _data_levels(hist, allocation)
    conventional = SpineLevels.from_geography(hist.geography, data_levels)
    area = _area_mask(special_areas, hist.n_blocks)
    if kind == "aian" and area is None:
        raise ValidationError("the AIAN-style spine needs special areas (a block → area mapping)")
    if kind == "conventional" and (area is not None or tract_groups_enabled):
        raise ValidationError(
            "the conventional spine takes no special areas or tract groups; use 'aian' or 'optimized'"
        )
    if kind == "aian" and tract_groups_enabled:
        raise ValidationError("tract groups are part of the optimized spine (SPN Algorithm 2)")
    levels = conventional
    split_level = data_levels[0]
    if area is not None:
        levels = split_by_special_areas(levels, area, split_level=split_level)
    details: dict[str, object] = {}
    if kind == "optimized":
        if not entities and area is None:
            raise ValidationError(
                "the optimized spine needs target entities (e.g. --entities providence-wards) "
                "or special areas to build its block groups around"
            )
        keys = [s.codes for s in entities]
        if area is not None:
            keys.append(area.astype(np.int64))
        gq = gq_signature(hist)
        if gq is not None:
            keys.append(gq)
        if "Block_Group" not in levels.names or "Tract" not in levels.names:
            raise ValidationError("optimized block groups need Tract and Block_Group levels")
        levels = optimized_block_groups(
            levels, membership_signature(*keys), fanout_cutoff=fanout_cutoff
        )
        levels = _rename_level(levels, "Block_Group", OPTIMIZED_BLOCK_GROUP_LEVEL)
        details["fanout_cutoff"] = fanout_cutoff
        if tract_groups_enabled:
            targets = [s.membership() for s in entities]
            if area is not None:
                targets.append(area[:, None])
            levels = tract_groups(
                levels, np.concatenate(targets, axis=1), fanout_cutoff=fanout_cutoff
            )
            details["tract_groups"] = True
    do_bypass = (kind == "optimized") if bypass is None else bypass
    shares, source_level = _level_shares(
        levels.names,
        allocation,
        root_fraction=root_fraction,
        tract_group_fraction=tract_group_fraction,
    )
    tree, node_share, n_bypassed, owner_level, represent = _tree_with_bypass(
        levels, shares, pure_dp=allocation.mechanism == "puredp", full=do_bypass
    )
    # The root's total is invariant, and so is every state total (TDA §5.2): a whole state's
    # own total, a split state's as the sum of its two branches (TDA §7.4), on whichever tree
    # nodes stand for the state after bypassing.
    root_level = tree.levels[int(tree.level[0])]
    invariants = {root_level: ("TOTAL",)}
    invariant_sums = _state_total_sums(conventional, levels, split_level, represent)
    details["bypass"] = do_bypass
    return BuiltSpine(
        kind=kind,
        levels=levels,
        tree=tree,
        share=node_share,
        source_level=source_level,
        invariants=invariants,
        n_bypassed=n_bypassed,
        query_level=tuple(source_level[name] for name in owner_level),
        invariant_sums=invariant_sums,
        details=details,
    )


def gq_signature(hist: BlockHistogram) -> np.ndarray | None:
    """Per block, a code of which GQ types are present (SPN §6's GQ OSEs), or None if unknown.

    Uses ``extra["gq_population"]`` (blocks × GQ types) or an ``HHGQ`` schema attribute whose
    first level is the household population.
    """
    gq = hist.extra.get("gq_population")
    if gq is None and "HHGQ" in hist.schema.names:
        axis = hist.schema.axis("HHGQ")
        counts = hist.counts.reshape((hist.n_blocks, *hist.schema.shape))
        other = tuple(a + 1 for a in range(len(hist.schema.shape)) if a != axis)
        gq = counts.sum(axis=other)[:, 1:]
    if gq is None:
        return None
    present = np.asarray(gq) > 0
    return membership_signature(*present.T.astype(np.int64))


def _data_levels(hist: BlockHistogram, allocation: TopDownAllocation) -> tuple[str, ...]:
    wanted = [lv for lv in allocation.geolevels if lv != ROOT_LEVEL]
    missing = [lv for lv in wanted if lv not in hist.levels]
    if missing:
        raise ValidationError(
            f"allocation {allocation.name!r} has level(s) {', '.join(missing)} that the data lack "
            f"(data levels: {', '.join(hist.levels)})"
        )
    if not wanted or wanted[-1] != hist.levels[-1]:
        raise ValidationError(
            f"a spine must end at the data's block level {hist.levels[-1]!r}; "
            f"allocation {allocation.name!r} ends at {allocation.geolevels[-1]!r}"
        )
    return tuple(wanted)


def _area_mask(special_areas: np.ndarray | EntitySet | None, n_blocks: int) -> np.ndarray | None:
    if special_areas is None:
        return None
    mask = (
        special_areas.union() if isinstance(special_areas, EntitySet) else np.asarray(special_areas)
    )
    if mask.shape != (n_blocks,):
        raise ValidationError(
            f"special areas must give one entry per block ({n_blocks}); got shape {mask.shape}"
        )
    return mask.astype(bool)


def _rename_level(levels: SpineLevels, old: str, new: str) -> SpineLevels:
    names = tuple(new if n == old else n for n in levels.names)
    return SpineLevels(names, levels.codes, levels.labels)


def _level_shares(
    names: Sequence[str],
    allocation: TopDownAllocation,
    *,
    root_fraction: Fraction,
    tract_group_fraction: Fraction,
) -> tuple[dict[str, Fraction], dict[str, str]]:
    """γ of each spine level and the allocation level whose query proportions it uses."""
    if not (0 < root_fraction < 1) or not (0 < tract_group_fraction < 1):
        raise ValidationError("root_fraction and tract_group_fraction must lie strictly in (0, 1)")
    alloc = allocation.level_shares
    shares: dict[str, Fraction] = {}
    source: dict[str, str] = {}
    for name in names:
        base = BORROWED_LEVEL.get(name, name)
        if base in alloc:
            shares[name] = Fraction(alloc[base])
            source[name] = base
    if ROOT_LEVEL not in alloc:
        top = allocation.geolevels[0]
        shares[ROOT_LEVEL] = shares[top] * root_fraction
        shares[top] = shares[top] - shares[ROOT_LEVEL]
        source[ROOT_LEVEL] = top
    if TRACT_GROUP_LEVEL in names:
        shares[TRACT_GROUP_LEVEL] = Fraction(alloc["Tract"]) * tract_group_fraction
        shares["Tract"] = Fraction(alloc["Tract"]) - shares[TRACT_GROUP_LEVEL]
    unknown = [n for n in names if n not in shares]
    if unknown:
        raise ValidationError(
            f"allocation {allocation.name!r} has no share for spine level(s) {', '.join(unknown)}"
        )
    if sum(shares[n] for n in names) != 1:
        raise ValidationError(
            f"the level shares of allocation {allocation.name!r} on this spine do not sum to 1"
        )
    return shares, source


def _state_total_sums(
    conventional: SpineLevels,
    levels: SpineLevels,
    split_level: str,
    represent: Callable[[int, int], list[int]],
) -> tuple[InvariantSum, ...]:
    """One TOTAL :class:`InvariantSum` per geounit of ``split_level`` (the state) of the
    conventional spine, over the tree nodes that stand for its (possibly split) parts."""
    lv = levels.index(split_level)
    _, first_block = np.unique(levels.codes[lv], return_index=True)
    state_of_part = conventional.codes[conventional.index(split_level)][first_block]
    out = []
    for state in range(len(conventional.labels[conventional.index(split_level)])):
        nodes = sorted(
            n for part in np.flatnonzero(state_of_part == state) for n in represent(lv, int(part))
        )
        out.append(InvariantSum("TOTAL", tuple(nodes)))
    return tuple(out)


def _tree_with_bypass(
    levels: SpineLevels, shares: Mapping[str, Fraction], *, pure_dp: bool, full: bool
) -> tuple[GeoTree, tuple[Fraction, ...], int, tuple[str, ...], Callable[[int, int], list[int]]]:
    """The GeoTree of ``levels`` after Algorithm 3 (or only the single-child-root bypass), the
    share of each tree node, the number bypassed, per tree node the spine level whose query
    proportions it takes (SPN §5), and ``represent(level, unit)``: the tree nodes that stand for
    geounit ``unit`` of spine level ``level`` (itself, or if bypassed, the nodes its children
    became)."""
    offsets = np.cumsum([0] + [levels.n_units(lv) for lv in range(levels.n_levels)])
    parent = np.full(offsets[-1], -1, dtype=np.int64)
    level_of = np.repeat(np.arange(levels.n_levels), np.diff(offsets))
    for lv in range(1, levels.n_levels):
        parent[offsets[lv] : offsets[lv + 1]] = offsets[lv - 1] + levels.parent_codes(lv)
    node_id = [label for labels in levels.labels for label in labels]
    share = np.array([shares[levels.names[lv]] for lv in level_of], dtype=object)
    if full:
        result = bypass_geounits(parent, share, pure_dp=pure_dp)
        kept, new_parent, new_share = result.kept, result.parent, result.share
        owner = result.query_owner
    else:
        kept = np.ones(parent.size, dtype=bool)
        new_parent, new_share = parent.copy(), share.copy()
        owner = np.arange(parent.size, dtype=np.int64)
        root = 0
        while np.count_nonzero(new_parent == root) == 1:  # a root with one child is bypassed
            child = int(np.flatnonzero(new_parent == root)[0])
            new_share[child] = new_share[child] + new_share[root]
            new_parent[child] = -1
            new_parent[root] = -2
            kept[root] = False
            owner[child] = owner[root]
            root = child
    keep = np.flatnonzero(kept)
    depth = np.zeros(parent.size, dtype=np.int64)
    for node in keep:  # parents precede children in the level-by-level numbering
        depth[node] = 0 if new_parent[node] < 0 else depth[new_parent[node]] + 1
    order = keep[np.lexsort((keep, depth[keep]))]
    new_index = np.full(parent.size, -1, dtype=np.int64)
    new_index[order] = np.arange(order.size)
    tree_parent = np.where(new_parent[order] >= 0, new_index[np.maximum(new_parent[order], 0)], -1)
    used_levels = np.unique(level_of[order])
    level_index = np.full(levels.n_levels, -1, dtype=np.int64)
    level_index[used_levels] = np.arange(used_levels.size)
    tree = GeoTree(
        levels=tuple(levels.names[lv] for lv in used_levels),
        level=level_index[level_of[order]],
        parent=tree_parent,
        node_id=tuple(node_id[n] for n in order),
        block_node=new_index[offsets[-2] + levels.codes[-1]],
    )
    owner_level = tuple(levels.names[level_of[owner[n]]] for n in order)
    children: list[list[int]] = [[] for _ in range(parent.size)]
    for node, up in enumerate(parent.tolist()):
        if up >= 0:
            children[up].append(node)

    def represent(level: int, unit: int) -> list[int]:
        stack, found = [int(offsets[level] + unit)], []
        while stack:
            node = stack.pop()
            if kept[node]:
                found.append(int(new_index[node]))
            else:
                stack.extend(children[node])
        return found

    shares_out = tuple(new_share[n] for n in order)
    return tree, shares_out, int((~kept).sum()), owner_level, represent
