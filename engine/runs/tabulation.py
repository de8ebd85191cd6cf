"""TDA's accuracy figures of a TopDown run on the tabulation geographies (TDA §9, Tables 9–12).

The metrics stage's ``tda_mae``, ``tda_mae_geography`` and ``tda_size_classes`` sections: this
module finds which tabulation levels the run's spine holds as they are (the conventional spine:
all of them) and sums the estimated blocks into the others (tabulation block groups on an optimized
spine, tracts split by an AIAN-style branch), then hands plain arrays to
:mod:`engine.metrics.tabulation`. The block level's figures cover the error universe
(:mod:`engine.metrics.universe`), like the other block-level figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from engine.data.histogram import BlockHistogram
from engine.metrics.counted import CountedResiduals
from engine.metrics.tabulation import size_class_section, tabulation_residual_sets, tda_mae_section
from engine.metrics.universe import BlockUniverse
from engine.topdown.export import answer_matrix
from engine.topdown.queries import query_group
from engine.topdown.result import TopDownResult

ROOT_LEVEL = "US"


def spine_equals_tabulation(result: TopDownResult, hist: BlockHistogram) -> list[str]:
    """The spine levels whose geounits are exactly the tabulation geounits of the same name, and
    a single-geounit root (``US``: the sum of every block whatever the spine)."""
    tree = result.tree
    same = []
    for level in tree.levels:
        ids = {tree.node_id[i] for i in tree.nodes_at_level(level)}
        root = level == ROOT_LEVEL and len(ids) == 1
        if root or (level in hist.levels and ids == set(hist.geography[level].astype(str))):
            same.append(str(level))
    return same


def tda_sections(
    result: TopDownResult,
    hist: BlockHistogram,
    spine_residuals: Mapping[tuple[str, str], CountedResiduals],
    universe: BlockUniverse,
    queries: Sequence[str] | None = None,
) -> dict[str, Any]:
    """``tda_mae`` (and ``tda_mae_geography`` when a level is built from blocks) and
    ``tda_size_classes`` of a run; a run whose spine stops above the blocks (``--levels``) gets
    ``tda_mae`` on its own levels only."""
    names = [str(q) for q in (result.query_names if queries is None else queries)]
    tree = result.tree
    leaves = np.bincount(tree.block_node, minlength=tree.n_nodes)[tree.block_node]
    if np.any(leaves != 1):
        section, _ = tda_mae_section(
            spine_residuals, {}, tabulation_levels=[], spine_equals_tabulation=list(tree.levels)
        )
        return {"tda_mae": section}
    same = spine_equals_tabulation(result, hist)
    missing = [str(lv) for lv in hist.levels if str(lv) not in same]
    tabulation: dict[tuple[str, str], CountedResiduals] = {}
    estimated_blocks = result.block_histogram_sparse()
    if missing:
        difference = estimated_blocks - hist.sparse_counts
        levels = {}
        for level in missing:
            codes, units = pd.factorize(hist.geography[level].astype(str), sort=True)
            levels[level] = (np.asarray(codes, dtype=np.int64), len(units))
        answers = {q: answer_matrix(query_group(result.schema, q)) for q in names}
        tabulation = tabulation_residual_sets(difference, levels, answers)
    section, geography = tda_mae_section(
        {k: v for k, v in spine_residuals.items() if k[1] in names},
        tabulation,
        tabulation_levels=[str(lv) for lv in hist.levels],
        spine_equals_tabulation=same,
    )
    out: dict[str, Any] = {"tda_mae": section}
    if geography:
        out["tda_mae_geography"] = geography
    out["tda_size_classes"] = size_class_section(_size_totals(hist, estimated_blocks, universe))
    return out


def _size_totals(
    hist: BlockHistogram, estimated_blocks: Any, universe: BlockUniverse
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(true, estimated) total population of every county and of every block of the universe."""
    true = np.asarray(hist.block_totals, dtype=np.float64).reshape(-1)
    estimate = np.asarray(estimated_blocks.sum(axis=1), dtype=np.float64).reshape(-1)
    totals: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    if "County" in hist.levels:
        codes, units = pd.factorize(hist.geography["County"].astype(str), sort=True)
        totals["County"] = (
            np.bincount(codes, weights=true, minlength=len(units)),
            np.bincount(codes, weights=estimate, minlength=len(units)),
        )
    if universe.level == "Block":
        inside = np.ones(true.size, bool) if universe.inside is None else universe.inside
        totals["Block"] = (true[inside], estimate[inside])
    return totals
