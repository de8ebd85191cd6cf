"""Running TopDown on a built spine and reporting its spine metrics (SPN §7).

:func:`run_on_spine` hands a :class:`~engine.topdown.spine.build.BuiltSpine` to
:func:`engine.topdown.run.run_topdown` (its tree, per-node budgets and invariants);
:func:`spine_report` re-aggregates the run's block estimates onto the conventional tabulation
spine and onto the entity sets (:mod:`engine.topdown.spine.report`), so that runs on different
spines are comparable (SPN Tables 2 and 3).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from engine.data.histogram import BlockHistogram
from engine.topdown.run import TopDownOptions, TopDownResult, run_query_names, run_topdown
from engine.topdown.spine.build import BuiltSpine
from engine.topdown.spine.entities import EntitySet
from engine.topdown.spine.levels import SpineLevels
from engine.topdown.spine.report import spine_metrics
from phexplore.budget import TopDownAllocation
from phexplore.errors import ValidationError

__all__ = ["run_on_spine", "run_query_names", "spine_options", "spine_report"]


def spine_options(built: BuiltSpine, options: TopDownOptions | None = None) -> TopDownOptions:
    """``options`` (default settings if None) with the spine's invariants (the root's total and
    every state total, a split state's as the sum of its branches, TDA §5.2, §7.4)."""
    base = options or TopDownOptions()
    return replace(
        base,
        invariants={k: tuple(v) for k, v in built.invariants.items()},
        invariant_sums=built.invariant_sums,
    )


def run_on_spine(
    hist: BlockHistogram,
    allocation: TopDownAllocation,
    built: BuiltSpine,
    *,
    seed: int,
    workers: int = 1,
    progress: Callable[[str, float], None] | None = None,
    cancel: Callable[[], bool] | None = None,
    options: TopDownOptions | None = None,
) -> TopDownResult:
    """Run TopDown on ``built``'s tree with its per-node budgets and invariants."""
    if built.tree.n_blocks != hist.n_blocks:
        raise ValidationError("the spine was built for different data (block counts differ)")
    run_options = spine_options(built, options)
    budgets = built.budget(allocation, run_query_names(allocation, run_options))
    result = run_topdown(
        hist,
        allocation,
        seed=seed,
        tree=built.tree,
        workers=workers,
        progress=progress,
        cancel=cancel,
        node_budgets=budgets,
        options=run_options,
    )
    result.diagnostics["spine"] = built.summary()
    return result


def spine_report(
    result: TopDownResult,
    hist: BlockHistogram,
    entity_sets: Sequence[EntitySet],
    built: BuiltSpine | None = None,
) -> dict[str, Any]:
    """``conventional_mae``, ``entity_mae`` and ``osed`` of a run (metrics.json sections).

    The OSEDs are computed on the tree the run measured on (``result.tree``, after any bypass;
    ``built`` is accepted for symmetry with :func:`run_on_spine` and must be that tree's spine).
    """
    conventional = SpineLevels.from_geography(hist.geography, hist.levels)
    if built is not None and built.tree is not result.tree:
        raise ValidationError("the result was not produced on this spine")
    used = result.tree
    estimated = result.block_histogram().sum(axis=1)
    truth = np.asarray(hist.counts).sum(axis=1)
    return spine_metrics(conventional, used, entity_sets, truth, estimated)
