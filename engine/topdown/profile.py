"""A TopDown spine as the analytic prediction sees it: levels, fan-outs, counts (docs/science.md
§7).

:func:`spine_profile` turns the engine's conventional spine of a histogram
(:func:`engine.topdown.plan.default_tree`) into a :class:`engine.prediction.SpineProfile`: per
level the number of children of every geounit above, and each geounit's true counts (the count
profile of the non-negativity correction). The core never imports the engine; callers (CLI, app
API, benchmarks) build the profile here and hand it to :func:`engine.prediction.predict_topdown`.
"""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

import numpy as np

from engine.core.errors import ValidationError
from engine.data.histogram import BlockHistogram
from engine.data.inputs import load_topdown_input
from engine.data.population import generate_population
from engine.data.samples import load_topdown_sample
from engine.dp.budget import TopDownAllocation
from engine.prediction.spine import SpineProfile
from engine.topdown.constraints import block_bounds, node_bounds
from engine.topdown.geography import GeoTree
from engine.topdown.plan import default_tree
from engine.topdown.sparse_histograms import aggregate_sparse


def tree_profile(
    tree: GeoTree, hist: BlockHistogram, name: str, *, with_counts: bool = True
) -> tuple[SpineProfile, list[np.ndarray]]:
    """The profile of ``tree`` and, per level, the tree's node index of each profile unit."""
    depth = tree.depth
    if not np.array_equal(depth, tree.level):
        raise ValidationError(
            "the analytic prediction needs a spine whose levels are its depths (the conventional "
            "spine); this spine skips levels (bypass or optimized block groups)"
        )
    ptr, idx = tree.children_ptr
    order = [np.array([0], dtype=np.int64)]
    fanouts = [np.ones(1, dtype=np.int64)]
    for _ in range(1, len(tree.levels)):
        parents = order[-1]
        fanouts.append((ptr[parents + 1] - ptr[parents]).astype(np.int64))
        order.append(
            np.concatenate([idx[ptr[p] : ptr[p + 1]] for p in parents]).astype(np.int64)
            if parents.size
            else np.zeros(0, dtype=np.int64)
        )
    counts = None
    if with_counts:
        # Summed from the sparse blocks (no dense block histogram); dense per level, as the
        # profile's count arrays are.
        truth = aggregate_sparse(tree, hist.sparse_counts)
        counts = tuple(truth[o].toarray() for o in order)
    attributes = hist.schema.attribute_levels
    zero_query, zero_answers = "", None
    frame = block_bounds(hist) if with_counts else None
    if frame is not None:  # the unit frame's structural zeros, held by the engine (plan.py)
        upper = node_bounds(tree, frame).upper
        zero_query = frame.query
        zero_answers = tuple(upper[o] == 0 for o in order)
    profile = SpineProfile(
        name,
        tuple(tree.levels),
        tuple(fanouts),
        attributes,
        counts,
        hist.source,
        hist.licence,
        zero_query,
        zero_answers,
    )
    return profile, order


def spine_profile(
    hist: BlockHistogram, allocation: TopDownAllocation, name: str = "data"
) -> SpineProfile:
    """The conventional spine of ``hist`` for ``allocation`` as a profile with counts."""
    return tree_profile(default_tree(hist, allocation), hist, name)[0]


def write_ri2010_profile(path: str) -> None:
    """Regenerate the shipped profile ``engine/prediction/profiles/ri2010_spine.json.gz`` from
    the shipped Rhode Island 2010 blocks (``python -m engine.topdown.profile PATH``)."""

    hist = load_topdown_sample("ri2010")
    tree = GeoTree.from_histogram(hist, list(hist.levels))
    profile, _ = tree_profile(tree, hist, "ri2010")
    data = profile.to_json()
    data["source"] = (
        "Rhode Island 2010 census blocks (data/samples/ri2010: ALARM Project, Kenny & McCartan, "
        "from the 2010 P.L. 94-171 file): spine fan-outs and block counts over VOTINGAGE x RACEETH"
    )
    data["licence"] = "CC BY-SA 4.0 (derived from data/samples/ri2010; see profiles/NOTICE.md)"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump(data, fh, separators=(",", ":"))


def write_generated_profile(path: str, persons: int = 100_000, seed: int = 12) -> None:
    """Regenerate ``engine/prediction/profiles/generated_ri_100k_spine.json.gz``: the spine
    and block counts, on the 2,016-cell production schema, of a generated Rhode Island population
    (:func:`engine.data.population.generate_population`; ``python -m engine.topdown.profile
    --generated PATH``)."""

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "population"
        generate_population(persons, seed=seed, out_dir=folder, states=["RI"])
        hist = load_topdown_input(str(folder))
    tree = GeoTree.from_histogram(hist, list(hist.levels))
    profile, _ = tree_profile(tree, hist, f"generated-ri-{persons // 1000}k")
    data = profile.to_json()
    data["source"] = (
        f"generated Rhode Island population of {persons:,} persons (phexplore generate "
        f"population --persons {persons} --states RI --seed {seed}; households calibrated on the "
        "NIST ACS 2019 excerpts, block sizes on the RI 2010 blocks): spine fan-outs and block "
        "counts over the 2,016-cell redistricting schema"
    )
    data["licence"] = (
        "CC BY-SA 4.0 (block sizes derived from data/samples/ri2010; see profiles/NOTICE.md)"
    )
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump(data, fh, separators=(",", ":"))


if __name__ == "__main__":
    import sys

    if sys.argv[1] == "--generated":
        write_generated_profile(sys.argv[2])
    else:
        write_ri2010_profile(sys.argv[1])


def entity_membership(
    hist: BlockHistogram, allocation: TopDownAllocation, codes: np.ndarray
) -> np.ndarray:
    """``(n_leaves, n_entities)`` 0/1 membership over the leaves of the conventional spine's
    profile (profile order) from per-block entity codes (-1: no entity), as
    :func:`engine.prediction.entities.predict_entities` needs."""
    tree = default_tree(hist, allocation)
    _, order = tree_profile(tree, hist, "data", with_counts=False)
    return leaf_membership(tree, order[-1], codes)


def leaf_membership(tree: GeoTree, order_leaves: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """``(n_leaves, n_entities)`` 0/1 membership over the profile's leaves (``order_leaves``: the
    tree node of each profile leaf, from :func:`tree_profile`) from per-block entity codes."""
    codes = np.asarray(codes, dtype=np.int64)
    position = np.full(tree.n_nodes, -1, dtype=np.int64)
    position[order_leaves] = np.arange(order_leaves.size)
    leaf = position[tree.block_node]
    if np.any(leaf < 0):
        raise ValidationError("the spine's leaves are not the blocks; entities need block leaves")
    member = np.zeros((order_leaves.size, int(codes.max(initial=-1)) + 1))
    inside = codes >= 0
    np.add.at(member, (leaf[inside], codes[inside]), 1.0)
    return np.minimum(member, 1.0)
