"""Small inputs shared by the TopDown tests: hand-built histograms, allocations, RI subsets."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from engine.data.histogram import BlockHistogram
from engine.dp.budget import TopDownAllocation
from engine.schema.attributes import Attribute, Schema

TWO_CELL_SCHEMA = Schema("two_cell", (Attribute("A", ("a0", "a1")),))


def tiny_histogram() -> BlockHistogram:
    """1 state, 2 counties, 2 blocks per county, 2 cells."""
    blocks = ["44001000100000", "44001000100001", "44003000100000", "44003000100001"]
    geography = pd.DataFrame(
        {
            "State": ["44"] * 4,
            "County": [b[:5] for b in blocks],
            "Block": blocks,
        }
    )
    counts = np.array([[5, 1], [3, 2], [0, 4], [6, 0]], dtype=np.int64)
    return BlockHistogram(TWO_CELL_SCHEMA, ("State", "County", "Block"), geography, counts)


def tiny_allocation(rho: str = "1", levels: tuple[str, ...] = ("State", "County", "Block")):
    share = Fraction(1, len(levels))
    return TopDownAllocation(
        name="tiny",
        universe="persons",
        rho=Fraction(rho),
        geolevels=levels,
        level_shares={lv: share for lv in levels},
        query_shares={lv: {"TOTAL": Fraction(1, 2), "DETAILED": Fraction(1, 2)} for lv in levels},
    )


def ri_subset(n_tracts_per_county: int = 2, counties: int = 2) -> BlockHistogram:
    """The first tracts of the first counties of the RI 2010 sample (a few hundred blocks)."""
    from engine.data.samples import load_topdown_sample

    hist = load_topdown_sample("ri2010")
    geo = hist.geography
    keep_counties = sorted(geo["County"].unique())[:counties]
    tracts: list[str] = []
    for county in keep_counties:
        tracts.extend(
            sorted(geo.loc[geo["County"] == county, "Tract"].unique())[:n_tracts_per_county]
        )
    keep = geo["Tract"].isin(tracts).to_numpy()
    return BlockHistogram(
        hist.schema,
        hist.levels,
        geo[keep].reset_index(drop=True),
        hist.counts[keep],
        source=hist.source,
    )


def path_share_sums(parent: np.ndarray, share: np.ndarray, leaves: np.ndarray) -> list:
    """Σ γ along the root-to-leaf path of each of ``leaves``: the accounting that SPN Theorem 3
    says bypassing preserves (each path's shares still sum to 1)."""
    parent = np.asarray(parent, dtype=np.int64)
    sums = []
    for leaf in np.asarray(leaves, dtype=np.int64).tolist():
        total = share[leaf] * 0
        node = leaf
        for _ in range(parent.size + 1):
            total = total + share[node]
            node = int(parent[node])
            if node < 0:
                break
        else:
            raise ValueError("the parent array has a cycle")
        sums.append(total)
    return sums


def engine_run(
    hist: BlockHistogram,
    allocation: TopDownAllocation,
    *,
    seed: int,
    tree: Any = None,
    node_budgets: np.ndarray | None = None,
    options: Any = None,
    executor: Any = None,
    workers: int = 1,
    progress: Any = None,
    cancel: Any = None,
) -> Any:
    """The TopDown engine alone on ``hist``, through its stage functions (plan, measurement,
    estimation, result: the stages the run pipeline drives), for tests of the engine's own
    settings (a custom tree or per-node budgets, :class:`TopDownOptions`, an executor).
    Runs with metrics and outputs go through :func:`engine.runs.pipeline.execute`."""
    import time

    from engine.core.executors import make_executor
    from engine.topdown.estimation import estimate
    from engine.topdown.measurement import measure_plan
    from engine.topdown.plan import plan_run
    from engine.topdown.result import result_of
    from engine.topdown.sparse_histograms import aggregate_sparse

    started = time.perf_counter()
    plan = plan_run(hist, allocation, tree=tree, node_budgets=node_budgets, options=options)
    truth = aggregate_sparse(plan.tree, hist.sparse_counts)
    measured = measure_plan(plan, truth, seed)
    measurement_s = time.perf_counter() - started
    runner = executor if executor is not None else make_executor("local", workers)
    try:
        estimation = estimate(
            plan, measured, truth, executor=runner, progress=progress, cancel=cancel
        )
    finally:
        if executor is None:
            runner.close()
    return result_of(
        plan,
        hist,
        truth,
        measured,
        estimation,
        seed=seed,
        runtime_s=time.perf_counter() - started,
        timings={"measurement": measurement_s, **estimation.timings},
        workers=runner.workers,
    )


def spine_run(
    hist: BlockHistogram,
    allocation: TopDownAllocation,
    built: Any,
    *,
    seed: int,
    options: Any = None,
) -> Any:
    """:func:`engine_run` on a built spine: its tree, per-node budgets and invariants
    (:meth:`engine.topdown.spine.plan.SpinePlan.run_kwargs`), with the spine's summary in the
    result's diagnostics."""
    from engine.topdown.plan import run_query_names
    from engine.topdown.spine.plan import spine_options

    run_options = spine_options(built, options)
    budgets = built.budget(allocation, run_query_names(allocation, run_options))
    result = engine_run(
        hist, allocation, seed=seed, tree=built.tree, node_budgets=budgets, options=run_options
    )
    result.diagnostics["spine"] = built.summary()
    return result
