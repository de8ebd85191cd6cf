"""The spine sections of a TopDown run's metrics stage (SPN §7, Tables 2 and 3).

Whatever spine a run measured on, its block estimates are compared with the truth on common
ground (:mod:`engine.metrics.spine`): the total-population MAE of every level of the conventional
tabulation spine (``conventional_mae``) and over the entities of every off-spine entity set
(``entity_mae``). Beside them, the engine's spine diagnostics: each entity set's mean OSED on the
spine actually used (``osed``, :func:`engine.topdown.spine.osed.mean_osed`) and the spine's summary
(``spine``). This module only joins the two: the metrics know no engine, the engine computes no
metric.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from engine.core.errors import ValidationError
from engine.data.histogram import BlockHistogram
from engine.metrics.spine import spine_mae
from engine.metrics.universe import BlockUniverse
from engine.topdown.result import TopDownResult
from engine.topdown.spine.build import BuiltSpine
from engine.topdown.spine.entities import EntitySet
from engine.topdown.spine.levels import SpineLevels
from engine.topdown.spine.osed import mean_osed
from engine.topdown.spine.plan import SpinePlan


def spine_report(
    result: TopDownResult,
    hist: BlockHistogram,
    entity_sets: Sequence[EntitySet],
    built: BuiltSpine | None = None,
    universe: BlockUniverse | None = None,
) -> dict[str, Any]:
    """``conventional_mae``, ``entity_mae`` and ``osed`` of a run (metrics.json sections).

    The OSEDs are computed on the tree the run measured on (``result.tree``, after any bypass;
    ``built``, when given, must be that tree's spine). The block row of ``conventional_mae``
    averages over the blocks of ``universe`` (default every block; a geounit above the block, or
    an entity, sums all its blocks — the others have error 0).
    """
    if built is not None and built.tree is not result.tree:
        raise ValidationError("the result was not produced on this spine")
    conventional = SpineLevels.from_geography(hist.geography, hist.levels)
    used = result.tree
    if conventional.n_blocks != used.n_blocks:
        raise ValidationError("the conventional and the run's spine cover different blocks")
    estimated = result.block_histogram().sum(axis=1)
    truth = hist.block_totals
    levels = {
        conventional.names[level]: (conventional.codes[level], conventional.n_units(level))
        for level in range(1, conventional.n_levels)
    }
    if universe is not None and universe.inside is not None and universe.level in levels:
        inside = universe.inside
        codes = np.full(inside.size, -1, dtype=np.int64)
        codes[inside] = np.arange(int(inside.sum()))
        levels[universe.level] = (codes, int(inside.sum()))
    groupings = {s.name: (s.codes, s.n_entities) for s in entity_sets}
    sections = spine_mae(levels, groupings, truth, estimated)
    sections["osed"] = {s.name: mean_osed(used, s.membership()) for s in entity_sets}
    return sections


def spine_sections(
    plan: SpinePlan,
    result: TopDownResult,
    hist: BlockHistogram,
    universe: BlockUniverse | None = None,
) -> dict[str, Any]:
    """The metrics.json sections ``conventional_mae``, ``entity_mae``, ``osed`` and ``spine``."""
    sections = spine_report(result, hist, plan.entity_sets, plan.built, universe)
    sections["spine"] = plan.summary()
    return sections
