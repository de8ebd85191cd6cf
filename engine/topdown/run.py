"""Orchestration of a TopDown run: measure, then estimate top-down (TDA §6, §7; SPEC §4).

1. Build the spine (:class:`~engine.topdown.geography.GeoTree`) and aggregate the true block
   histogram to every geounit.
2. Measurement phase (:mod:`engine.topdown.measure`): noisy answers for every geounit and query
   group, per-node per-query budgets from the allocation; invariants bypass noise.
3. Estimation phase, depth by depth from the root: each parent's children form a family solved as
   one problem — multi-pass non-negative weighted least squares (TDA eq. 7.5–7.6,
   :mod:`engine.topdown.qp.least_squares`) then multi-pass controlled rounding (eq. 7.7,
   :mod:`engine.topdown.rounding`). The root is solved alone (eq. 7.1, 7.3). Families of one depth
   are independent: they are batched into chunks of about ``chunk_cells`` variables, the units of
   work an :class:`~engine.core.executors.Executor` runs (in process or in a spawn pool of ``workers``
   processes; SPEC §8); feasibility is checked before solving
   (:mod:`engine.topdown.feasibility`). Chunking does not depend on ``workers``, so results are
   identical for any number of workers.

The phases are also callable one by one — :func:`~engine.topdown.plan.plan_run`
(:mod:`engine.topdown.plan`), :func:`~engine.topdown.measurement.measure_plan`
(:mod:`engine.topdown.measurement`), :func:`~engine.topdown.estimation.estimate`
(:mod:`engine.topdown.estimation`) and :func:`~engine.topdown.result.result_of`
(:mod:`engine.topdown.result`) — the stages :mod:`engine.runs` drives; settings live in
:mod:`engine.topdown.options`. This module is the one-call entry :func:`run_topdown` and
re-exports those modules' public names, so ``from engine.topdown.run import X`` keeps working.
``progress(message, fraction)`` is called as chunks finish; ``cancel()`` is polled between chunks
and a ``True`` answer stops the run with :class:`RunCancelled`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from engine.core.errors import ValidationError
from engine.core.executors import Executor, make_executor
from engine.data.histogram import BlockHistogram
from engine.dp.budget import TopDownAllocation
from engine.topdown.estimation import (
    BatchOutcome,
    Estimation,
    _build_batch,
    _chunks,
    estimate,
    estimate_batch,
)
from engine.topdown.geography import GeoTree
from engine.topdown.measurement import concat_measurements, measure_plan
from engine.topdown.options import Progress, RunCancelled, TopDownOptions
from engine.topdown.plan import TopDownPlan, default_tree, plan_run, run_query_names
from engine.topdown.result import TopDownResult, result_of
from engine.topdown.sparse_histograms import aggregate_sparse

__all__ = [
    "BatchOutcome",
    "Estimation",
    "Progress",
    "RunCancelled",
    "TopDownOptions",
    "TopDownPlan",
    "TopDownResult",
    "_build_batch",
    "_chunks",
    "concat_measurements",
    "default_tree",
    "estimate",
    "estimate_batch",
    "measure_plan",
    "plan_run",
    "result_of",
    "run_query_names",
    "run_topdown",
]


def run_topdown(
    hist: BlockHistogram,
    allocation: TopDownAllocation,
    *,
    seed: int,
    tree: GeoTree | None = None,
    workers: int = 1,
    progress: Progress | None = None,
    cancel: Callable[[], bool] | None = None,
    node_budgets: np.ndarray | None = None,
    options: TopDownOptions | None = None,
    executor: Executor | None = None,
) -> TopDownResult:
    """Run TopDown on ``hist`` with ``allocation`` (see the module docstring).

    ``tree`` replaces the conventional spine; ``node_budgets`` (``(n_nodes, n_queries)`` in the
    order of ``allocation.all_queries()`` followed by any invariant-only queries) replaces
    :func:`~engine.topdown.measure.node_query_budget`. ``executor`` runs the batches of families
    (default: a spawn process pool of ``workers`` processes when ``workers > 1``, else in process).
    """
    if not isinstance(seed, int | np.integer):
        raise ValidationError(f"seed must be an integer; got {seed!r}")
    if workers < 1:
        raise ValidationError(f"workers must be at least 1; got {workers}")
    started = time.perf_counter()
    report = progress or (lambda message, fraction: None)
    plan = plan_run(hist, allocation, tree=tree, node_budgets=node_budgets, options=options)
    report("Aggregating the true histogram", 0.0)
    t0 = time.perf_counter()
    truth = aggregate_sparse(plan.tree, hist.sparse_counts)
    measured = measure_plan(plan, truth, int(seed))
    timings: dict[str, float] = {"measurement": time.perf_counter() - t0}
    report("Measured noisy query answers", 0.02)
    own = executor is None
    runner = executor if executor is not None else make_executor("local", workers)
    try:
        estimation = estimate(
            plan, measured, truth, executor=runner, progress=report, cancel=cancel
        )
    finally:
        if own:
            runner.close()
    timings.update(estimation.timings)
    runtime = time.perf_counter() - started
    report("Done", 1.0)
    return result_of(
        plan,
        hist,
        truth,
        measured,
        estimation,
        seed=int(seed),
        runtime_s=runtime,
        timings=timings,
        workers=runner.workers,
    )
