"""Optimized block groups and greedy tract groups (SPN §4, §6; Algorithm 2).

*Optimized block groups* (SPN §4, §6): within each tract, blocks are grouped by their identical
membership in the target off-spine entities (and GQ status, when known), so every optimized
block group lies inside one intersection of the entities; a class of m blocks in a tract of n
blocks is cut into ⌈m / cap⌉ consecutive (GEOID-order) groups of nearly equal size with
cap = ⌊√n + fanout_cutoff⌋, which keeps the fanouts of the tract and of its block groups low.

*Tract groups* (Algorithm 2, behind a flag): a ``Tract_Group`` level is inserted between county
and tract, starting with one tract per group; sibling groups u, v of a county of n tracts are
combined when |children(u) ∪ children(v)| ≤ √n + fanout_cutoff and the descending vector of the
target entities' OSEDs does not get lexicographically worse (ties are accepted, as in the
paper), until a pass combines nothing.

The default ``fanout_cutoff`` of 12 is the default of the Census Bureau's DAS production code.
"""

from __future__ import annotations

import math

import numpy as np

from engine.core.errors import ValidationError
from engine.topdown.spine.levels import SpineLevels, codes_from_keys
from engine.topdown.spine.options import DEFAULT_FANOUT_CUTOFF
from engine.topdown.spine.osed import (
    _as_membership,
    lexicographic_le,
    osed_by_level,
    osed_recursion_step,
)

TRACT_GROUP_LEVEL = "Tract_Group"
OPTIMIZED_BLOCK_GROUP_SUFFIX = "-OBG"
TRACT_GROUP_SUFFIX = "-TG"


def fanout_cap(n_children: int, fanout_cutoff: float) -> int:
    """The largest group size allowed: ⌊√n + fanout_cutoff⌋ (at least 1)."""
    if fanout_cutoff < 0:
        raise ValidationError(f"fanout_cutoff must be ≥ 0; got {fanout_cutoff}")
    return max(1, int(math.sqrt(n_children) + fanout_cutoff))


def membership_signature(*keys: np.ndarray) -> np.ndarray:
    """One integer per block numbering its combination of ``keys`` (entity codes, GQ status…)."""
    if not keys:
        raise ValidationError("a signature needs at least one key")
    return codes_from_keys(*keys)[0]


def optimized_block_groups(
    spine: SpineLevels,
    signature: np.ndarray,
    *,
    parent_level: str = "Tract",
    level: str = "Block_Group",
    fanout_cutoff: float = DEFAULT_FANOUT_CUTOFF,
) -> SpineLevels:
    """Replace ``level`` by optimized block groups inside each geounit of ``parent_level``.

    ``signature`` numbers each block's combination of target-entity memberships; blocks of one
    group share their parent and their signature. ``level`` must sit directly between
    ``parent_level`` and the block level.
    """
    parent_at = spine.index(parent_level)
    at = spine.index(level)
    if at != parent_at + 1 or at != spine.n_levels - 2:
        raise ValidationError(
            f"optimized block groups replace the level between {parent_level!r} and the blocks; "
            f"the spine's levels are {list(spine.names)}"
        )
    signature = np.asarray(signature, dtype=np.int64)
    if signature.shape != (spine.n_blocks,):
        raise ValidationError(
            f"the block signature must have one entry per block ({spine.n_blocks}); "
            f"got shape {signature.shape}"
        )
    parent = spine.codes[parent_at]
    block_rank = spine.codes[-1]  # blocks numbered in sorted-identifier order
    order = np.lexsort((block_rank, signature, parent))
    _, class_codes = np.unique(np.stack([parent, signature], axis=1), axis=0, return_inverse=True)
    class_codes = class_codes.reshape(-1)
    class_size = np.bincount(class_codes)
    parent_size = spine.block_counts(parent_at)
    caps = np.array([fanout_cap(int(n), fanout_cutoff) for n in parent_size], dtype=np.int64)
    # position of each block within its class, in (signature, block id) order
    sorted_class = class_codes[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_class)) + 1]
    run_start = np.repeat(starts, np.diff(np.r_[starts, sorted_class.size]))
    position = np.empty(spine.n_blocks, dtype=np.int64)
    position[order] = np.arange(spine.n_blocks) - run_start
    m = class_size[class_codes]
    n_groups = -(-m // caps[parent])
    chunk = position * n_groups // m
    codes, first_block = codes_from_keys(parent, signature, chunk)
    labels = _numbered_labels(
        spine.labels[parent_at], parent[first_block], OPTIMIZED_BLOCK_GROUP_SUFFIX
    )
    return spine.replace_level(level, codes, labels)


def tract_groups(
    spine: SpineLevels,
    membership: np.ndarray,
    *,
    county_level: str = "County",
    tract_level: str = "Tract",
    fanout_cutoff: float = DEFAULT_FANOUT_CUTOFF,
) -> SpineLevels:
    """Algorithm 2's tract-group stage: insert and greedily combine a ``Tract_Group`` level.

    ``membership`` (blocks × entities) defines the target entities whose descending OSED vector
    must not get worse. Each accepted combination satisfies Algorithm 2's test (new ≤_lex
    current); PHExplore first sweeps accepting strict improvements only and then sweeps accepting
    ties too, so that combinations that help the entities are not pre-empted by neutral ones
    that fill the fanout cap. Returns the spine with the new level between county and tract.
    """
    county_at = spine.index(county_level)
    tract_at = spine.index(tract_level)
    if tract_at != county_at + 1:
        raise ValidationError(
            f"tract groups go between adjacent levels {county_level!r} and {tract_level!r}; "
            f"the spine's levels are {list(spine.names)}"
        )
    member = _as_membership(spine, membership)
    if member.shape[1] == 0:
        raise ValidationError("tract groups need at least one target entity")
    per_level = osed_by_level(spine, member, down_to=tract_at)
    tract_in, tract_out = per_level[tract_at]
    tract_county = spine.parent_codes(tract_at)
    above = _UpperLevels(spine, county_at)
    counties = [
        _CountyGroups(np.flatnonzero(tract_county == c), tract_in, tract_out)
        for c in range(spine.n_units(county_at))
    ]
    county_in = np.stack([c.county_value()[0] for c in counties])
    county_out = np.stack([c.county_value()[1] for c in counties])
    current = above.sorted_osed(county_in, county_out)
    for accept_ties in (False, True):
        altered = True
        while altered:
            altered = False
            for c, county in enumerate(counties):
                cap = int(math.sqrt(county.n_tracts) + fanout_cutoff)
                i = 0
                while i < len(county.groups):
                    j = i + 1
                    while j < len(county.groups):
                        if len(county.groups[i]) + len(county.groups[j]) > cap:
                            j += 1
                            continue
                        trial_in, trial_out = county_in.copy(), county_out.copy()
                        trial_in[c], trial_out[c] = county.value_if_combined(i, j)
                        test = above.sorted_osed(trial_in, trial_out)
                        better = test != current and lexicographic_le(test, current)
                        if better or (accept_ties and test == current):
                            county.combine(i, j)
                            county_in, county_out, current = trial_in, trial_out, test
                            altered = True
                        else:
                            j += 1
                    i += 1
    group_of_tract = np.empty(spine.n_units(tract_at), dtype=np.int64)
    group_county: list[int] = []
    for c, county in enumerate(counties):
        for g in sorted(county.groups, key=min):
            group_of_tract[g] = len(group_county)
            group_county.append(c)
    codes = group_of_tract[spine.codes[tract_at]]
    labels = _numbered_labels(
        spine.labels[county_at], np.asarray(group_county, dtype=np.int64), TRACT_GROUP_SUFFIX
    )
    return spine.with_level(TRACT_GROUP_LEVEL, codes, labels, at=tract_at)


class _CountyGroups:
    """The tract groups of one county with cached Σ c over each group's tracts (eq. 4–5)."""

    def __init__(self, tracts: np.ndarray, tract_in: np.ndarray, tract_out: np.ndarray) -> None:
        self.n_tracts = int(tracts.size)
        self.groups: list[list[int]] = [[int(t)] for t in tracts]
        self.sum_in = [tract_in[t].copy() for t in tracts]
        self.sum_out = [tract_out[t].copy() for t in tracts]
        group_in, group_out = osed_recursion_step(np.stack(self.sum_in), np.stack(self.sum_out))
        self.group_in = list(group_in)
        self.group_out = list(group_out)
        self.total_in = group_in.sum(axis=0)
        self.total_out = group_out.sum(axis=0)

    def county_value(self) -> tuple[np.ndarray, np.ndarray]:
        """c[k, county] and c[k′, county] from the current groups."""
        return osed_recursion_step(self.total_in, self.total_out)

    def _combined(self, i: int, j: int) -> tuple[np.ndarray, ...]:
        sum_in = self.sum_in[i] + self.sum_in[j]
        sum_out = self.sum_out[i] + self.sum_out[j]
        group_in, group_out = osed_recursion_step(sum_in, sum_out)
        total_in = self.total_in - self.group_in[i] - self.group_in[j] + group_in
        total_out = self.total_out - self.group_out[i] - self.group_out[j] + group_out
        return sum_in, sum_out, group_in, group_out, total_in, total_out

    def value_if_combined(self, i: int, j: int) -> tuple[np.ndarray, np.ndarray]:
        """The county's (c[k], c[k′]) if groups ``i`` and ``j`` were combined."""
        *_, total_in, total_out = self._combined(i, j)
        return osed_recursion_step(total_in, total_out)

    def combine(self, i: int, j: int) -> None:
        """Combine_Siblings(i, j): group ``j`` joins group ``i``."""
        sum_in, sum_out, group_in, group_out, total_in, total_out = self._combined(i, j)
        self.groups[i] = self.groups[i] + self.groups[j]
        self.sum_in[i], self.sum_out[i] = sum_in, sum_out
        self.group_in[i], self.group_out[i] = group_in, group_out
        self.total_in, self.total_out = total_in, total_out
        for seq in (self.groups, self.sum_in, self.sum_out, self.group_in, self.group_out):
            del seq[j]


class _UpperLevels:
    """The recursion from the county level to the root (fixed while tract groups change)."""

    def __init__(self, spine: SpineLevels, county_at: int) -> None:
        self._matrices = [spine.aggregation_matrix(level) for level in range(county_at, 0, -1)]

    def sorted_osed(self, county_in: np.ndarray, county_out: np.ndarray) -> tuple[int, ...]:
        inside, outside = county_in, county_out
        for matrix in self._matrices:
            inside, outside = osed_recursion_step(
                np.asarray(matrix @ inside), np.asarray(matrix @ outside)
            )
        return tuple(int(v) for v in np.sort(inside[0])[::-1])


def _numbered_labels(parent_labels: tuple[str, ...], parents: np.ndarray, suffix: str) -> list[str]:
    """``<parent id><suffix><k>`` with k counting the children of each parent from 1."""
    counters: dict[int, int] = {}
    labels = []
    for p in parents.tolist():
        counters[p] = counters.get(p, 0) + 1
        labels.append(f"{parent_labels[p]}{suffix}{counters[p]}")
    return labels
