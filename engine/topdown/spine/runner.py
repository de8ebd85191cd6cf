"""Running TopDown on a built spine (SPN §5, §7).

:func:`run_on_spine` hands a :class:`~engine.topdown.spine.build.BuiltSpine` to
:func:`engine.topdown.run.run_topdown` (its tree, per-node budgets and invariants). The run's
spine-independent MAE (SPN Tables 2 and 3) is a metric of the run pipeline
(:func:`engine.runs.spine.spine_report`, :mod:`engine.metrics.spine`), not of the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from engine.core.errors import ValidationError
from engine.data.histogram import BlockHistogram
from engine.dp.budget import TopDownAllocation
from engine.topdown.run import TopDownOptions, TopDownResult, run_query_names, run_topdown
from engine.topdown.spine.build import BuiltSpine

__all__ = ["run_on_spine", "run_query_names", "spine_options"]


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
