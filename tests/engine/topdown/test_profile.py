"""The engine's spine as the prediction's profile (engine.topdown.profile, docs/science.md §7)."""

from __future__ import annotations

import numpy as np

from engine.data.samples import load_topdown_sample
from engine.dp.presets import load_topdown_preset
from engine.topdown.profile import entity_membership, spine_profile


def test_profile_of_ri_matches_the_tree_and_counts() -> None:
    hist = load_topdown_sample("ri2010")
    alloc = load_topdown_preset("ri2010-production-like")["persons"]
    profile = spine_profile(hist, alloc)
    assert profile.levels == ("State", "County", "Tract", "Block_Group", "Block")
    assert [profile.n_units(k) for k in range(5)] == [1, 5, 244, 815, 25181]
    assert profile.counts is not None
    # Children sum to their parent, cell by cell, at every level.
    for k in range(1, 5):
        starts = np.concatenate([[0], np.cumsum(profile.fanouts[k])[:-1]])
        sums = np.add.reduceat(profile.counts[k], starts, axis=0)
        np.testing.assert_array_equal(sums, profile.counts[k - 1])
    assert int(profile.counts[-1].sum()) == hist.total


def test_entity_membership_follows_the_blocks() -> None:
    hist = load_topdown_sample("ri2010")
    alloc = load_topdown_preset("ri2010-production-like")["persons"]
    codes = np.full(hist.n_blocks, -1)
    codes[:10] = 0
    codes[10:15] = 1
    member = entity_membership(hist, alloc, codes)
    assert member.shape == (hist.n_blocks, 2)
    assert member.sum(axis=0).tolist() == [10.0, 5.0]
    profile = spine_profile(hist, alloc)
    leaf_counts = profile.counts[-1].sum(axis=1)
    assert member[:, 0] @ leaf_counts == hist.counts[:10].sum()
