"""Orchestration of a TopDown run: measure, then estimate top-down (TDA §6, §7; SPEC §4).

1. Build the spine (:class:`~engine.topdown.geography.GeoTree`) and aggregate the true block
   histogram to every geounit.
2. Measurement phase (:mod:`engine.topdown.measure`): noisy answers for every geounit and query
   group, per-node per-query budgets from the allocation; invariants bypass noise.
3. Estimation phase, depth by depth from the root: each parent's children form a family solved as
   one problem — multi-pass non-negative weighted least squares (TDA eq. 7.5–7.6,
   :mod:`engine.topdown.least_squares`) then multi-pass controlled rounding (eq. 7.7,
   :mod:`engine.topdown.rounding`). The root is solved alone (eq. 7.1, 7.3). Families of one depth
   are independent: they are batched into chunks of about ``chunk_cells`` variables, the units of
   work an :class:`~engine.executors.Executor` runs (in process or in a spawn pool of ``workers``
   processes; SPEC §8); feasibility is checked before solving
   (:mod:`engine.topdown.feasibility`). Chunking does not depend on ``workers``, so results are
   identical for any number of workers.

The phases are also callable one by one (:func:`plan_run`, :func:`measure_plan`, :func:`estimate`,
:func:`result_of`) — the stages :mod:`engine.runs` drives. ``progress(message, fraction)`` is called
as chunks finish; ``cancel()`` is polled between chunks and
a ``True`` answer stops the run with :class:`RunCancelled`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from engine.data.histogram import BlockHistogram, Schema
from engine.executors import ExecutionCancelled, Executor, InProcessExecutor, make_executor
from engine.topdown.constraints import (
    CountBounds,
    block_bounds,
    child_bounds,
    node_bounds,
    unconstrained_note,
)
from engine.topdown.family import ChildSum, FamilyBatch, QuerySpec
from engine.topdown.feasibility import TopDownInfeasible, check_batch
from engine.topdown.geography import US, GeoTree
from engine.topdown.least_squares import multipass_least_squares
from engine.topdown.measure import (
    DEFAULT_INVARIANTS,
    HeldSum,
    InvariantSum,
    Measurements,
    held_sums,
    invariant_mask,
    measure,
    node_query_budget,
    spent_budget,
)
from engine.topdown.queries import TOTAL, QueryGroup, query_group, rounder_chain
from engine.topdown.rounding import round_batch
from phexplore.budget import TopDownAllocation
from phexplore.errors import PHExploreError, ValidationError

Progress = Callable[[str, float], None]


class RunCancelled(PHExploreError):
    """The user cancelled a TopDown run (raised between chunks; no partial result)."""


@dataclass(frozen=True)
class TopDownOptions:
    """Estimation settings; the defaults follow production (SPEC §4).

    ``ls_passes``: query names of each least-squares pass, used at every level (default, as in
    production, TDA §8.1–8.2: one pass with every query for the root and for the block level, and
    two passes — TOTAL, then every other measured query — for the levels in between).
    ``rounder_chain``: nested marginals of the rounder (default:
    :func:`~engine.topdown.queries.rounder_chain`). ``invariants``: level → exact queries.
    ``invariant_sums``: answers held exact for single nodes or for the sum of sibling nodes of the
    run's tree (TDA §7.4: a split state's two branches), set by the spine builder.
    """

    invariants: Mapping[str, Sequence[str]] = field(
        default_factory=lambda: dict(DEFAULT_INVARIANTS)
    )
    invariant_sums: tuple[InvariantSum, ...] = ()
    ls_passes: tuple[tuple[str, ...], ...] | None = None
    rounder_chain: tuple[str, ...] | None = None
    noise_method: str = "fast"
    chunk_cells: int = 60_000
    structural_zeros: bool = True
    """Hold structural zeros and GQ/occupied-unit lower bounds where the data carry a unit frame
    (:mod:`engine.topdown.constraints`; TDA §5.3, SPEC §6)."""


@dataclass(frozen=True)
class BatchOutcome:
    """What a worker returns for one chunk of families."""

    x: np.ndarray
    least_squares_s: float
    rounding_s: float
    milp_fallbacks: int


def estimate_batch(
    batch: FamilyBatch, passes: Sequence[Sequence[int]], chain: Sequence[QuerySpec]
) -> BatchOutcome:
    """Least squares then rounding for every family of ``batch`` (runs in a worker process)."""
    t0 = time.perf_counter()
    x_tilde, _ = multipass_least_squares(batch, passes)
    t1 = time.perf_counter()
    x_hat, fallbacks = round_batch(batch, x_tilde, chain)
    t2 = time.perf_counter()
    return BatchOutcome(x_hat, t1 - t0, t2 - t1, fallbacks)


@dataclass
class TopDownResult:
    """Everything a run produced. ``estimates`` / ``truth`` are int64 ``(n_nodes, n_cells)``
    indexed like ``tree`` (node metadata: :attr:`nodes`)."""

    tree: GeoTree
    schema: Schema
    allocation_name: str
    mechanism: str
    queries: tuple[QueryGroup, ...]
    estimates: np.ndarray
    truth: np.ndarray
    measured: Measurements
    timings: dict[str, float]
    runtime_s: float
    seed: int
    rho: float
    diagnostics: dict[str, object] = field(default_factory=dict)
    rho_spent: float | None = None
    """ρ (ε for pure DP) of the noisy measurements along the costliest root-to-block path; less
    than ``rho`` when shares go to invariant queries (TDA §5.2)."""

    @property
    def query_names(self) -> tuple[str, ...]:
        return tuple(q.name for q in self.queries)

    @cached_property
    def nodes(self) -> pd.DataFrame:
        """node, geolevel, geounit, parent, depth of every node."""
        return self.tree.nodes_frame()

    @cached_property
    def measurements(self) -> pd.DataFrame:
        """Tidy noisy measurements: geolevel, geounit, query, cell, noisy, variance (0 = invariant)."""
        frames = []
        level = self.tree.level_names
        ids = np.asarray(self.tree.node_id, dtype=object)
        for j, group in enumerate(self.queries):
            values = self.measured.noisy[j]
            nodes = np.flatnonzero(np.isfinite(values[:, 0]))
            if not nodes.size:
                continue
            frames.append(
                pd.DataFrame(
                    {
                        "geolevel": np.repeat(level[nodes], group.size),
                        "geounit": np.repeat(ids[nodes], group.size),
                        "query": group.name,
                        "cell": np.tile(np.asarray(group.labels, dtype=object), nodes.size),
                        "noisy": values[nodes].reshape(-1),
                        "variance": np.repeat(self.measured.variance[nodes, j], group.size),
                    }
                )
            )
        return pd.concat(frames, ignore_index=True)

    def to_tidy(self, queries: Sequence[str] | None = None) -> pd.DataFrame:
        """Columns [geolevel, geounit, query, cell, true, estimate] for every node and query cell.

        ``queries`` default: the run's query groups; any query name valid on the schema works.
        """
        names = self.query_names if queries is None else tuple(queries)
        level = self.tree.level_names
        ids = np.asarray(self.tree.node_id, dtype=object)
        frames = []
        for name in names:
            group = query_group(self.schema, name)
            frames.append(
                pd.DataFrame(
                    {
                        "geolevel": np.repeat(level, group.size),
                        "geounit": np.repeat(ids, group.size),
                        "query": name,
                        "cell": np.tile(np.asarray(group.labels, dtype=object), self.tree.n_nodes),
                        "true": group.answer(self.truth).reshape(-1),
                        "estimate": group.answer(self.estimates).reshape(-1),
                    }
                )
            )
        return pd.concat(frames, ignore_index=True)

    def level_histogram(self, level: str) -> np.ndarray:
        """Estimated histograms ``(n_units, n_cells)`` of ``level``, in :meth:`level_ids` order."""
        return self.estimates[self.tree.nodes_at_level(level)]

    def level_ids(self, level: str) -> tuple[str, ...]:
        return tuple(self.tree.node_id[i] for i in self.tree.nodes_at_level(level))

    def block_histogram(self) -> np.ndarray:
        """Estimated block histograms ``(n_blocks, n_cells)`` in the input's block order.

        Requires a spine whose leaves are the blocks (one block per leaf).
        """
        counts = np.bincount(self.tree.block_node, minlength=self.tree.n_nodes)
        if np.any(counts[self.tree.block_node] != 1):
            raise ValidationError(
                "this run's spine stops above the block level, so it has no block estimates; "
                f"use level_histogram({self.tree.levels[-1]!r})"
            )
        return self.estimates[self.tree.block_node]


# --------------------------------------------------------------------------- spine and budgets
def default_tree(hist: BlockHistogram, allocation: TopDownAllocation) -> GeoTree:
    """The conventional spine for ``allocation`` on ``hist``'s geography.

    Levels are the allocation's levels present in the data. An allocation root absent from the data
    becomes a synthetic root when the data's top level has several geounits (a ``US`` over states),
    and is bypassed (its budget folded into its single child) otherwise.
    """
    present = [lv for lv in allocation.geolevels if lv in hist.geography.columns]
    if not present:
        raise ValidationError(
            f"none of the allocation's levels ({', '.join(allocation.geolevels)}) are geography "
            f"columns of the data ({', '.join(hist.levels)})"
        )
    root = allocation.geolevels[0]
    if root not in present and hist.geography[present[0]].nunique() > 1:
        if root != US:
            raise ValidationError(
                f"the data have several {present[0]} geounits but no {root!r} column to join them"
            )
        present = [US, *present]
    return GeoTree.from_histogram(hist, present)


def run_query_names(allocation: TopDownAllocation, options: TopDownOptions) -> list[str]:
    """Query order of a run's per-node budget arrays: the allocation's queries, then the
    invariant-only ones in the order the invariants name them (one copy, used by the spine runner)."""
    names = list(allocation.all_queries())
    for level_names in options.invariants.values():
        for name in level_names:
            if name not in names:
                names.append(name)
    return names


def _passes(
    names: Sequence[str], options: TopDownOptions, *, single: bool = False
) -> list[list[int]]:
    """Least-squares passes as query indices; ``single`` = one pass of every query (TDA §8.1)."""
    if options.ls_passes is None:
        if single:
            return [list(range(len(names)))]
        first = [TOTAL] if TOTAL in names else []
        spec: Sequence[Sequence[str]] = [first, [n for n in names if n != TOTAL]]
    else:
        spec = options.ls_passes
        unknown = [n for p in spec for n in p if n not in names]
        if unknown:
            raise ValidationError(
                f"least-squares passes name queries this run does not measure: {unknown}"
            )
    return [[names.index(n) for n in p] for p in spec if p]


# --------------------------------------------------------------------------- batching
def _build_batch(
    parents: np.ndarray,
    tree: GeoTree,
    estimates: np.ndarray,
    specs: tuple[QuerySpec, ...],
    measured: Measurements,
    weight: np.ndarray,
    *,
    root: bool = False,
    bounds: tuple[QuerySpec, CountBounds] | None = None,
    sums: Sequence[HeldSum] = (),
) -> FamilyBatch:
    ptr, idx = tree.children_ptr
    if root:
        kids = np.array([0])
        child_ptr = np.array([0, 1])
    else:
        sizes = ptr[parents + 1] - ptr[parents]
        kids = np.concatenate([idx[ptr[p] : ptr[p + 1]] for p in parents])
        child_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    levels = tree.level_names
    child_sums: list[ChildSum] = []
    if sums and not root:
        row_of = {int(k): r for r, k in enumerate(kids)}
        for held in sums:
            if all(int(n) in row_of for n in held.nodes):
                rows = np.array([row_of[int(n)] for n in held.nodes], dtype=np.int64)
                child_sums.append(ChildSum(held.query, rows, held.exact))
    return FamilyBatch(
        queries=specs,
        parent=None if root else estimates[parents].astype(np.float64),
        child_ptr=child_ptr,
        noisy=tuple(np.nan_to_num(m[kids], nan=0.0) for m in measured.noisy),
        weight=weight[kids],
        invariant=tuple(None if t is None else t[kids] for t in measured.invariant),
        family_id=tuple(tree.node_id[p] for p in (parents if not root else [0])),
        child_id=tuple(tree.node_id[k] for k in kids),
        family_level="/".join(sorted(set(levels[parents]))) if not root else str(levels[0]),
        child_level="/".join(sorted(set(levels[kids]))),
        bounds=() if bounds is None else (child_bounds(bounds[0], bounds[1], kids),),
        sums=tuple(child_sums),
    )


def _chunks(parents: np.ndarray, sizes: np.ndarray, n_cells: int, limit: int) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    start, acc = 0, 0
    for i, s in enumerate(sizes):
        acc += int(s) * n_cells
        if acc >= limit:
            out.append(parents[start : i + 1])
            start, acc = i + 1, 0
    if start < parents.size:
        out.append(parents[start:])
    return out


# --------------------------------------------------------------------------- the stages
@dataclass(frozen=True)
class TopDownPlan:
    """What a run measures and solves, fixed before any noise: spine, queries, budgets, passes."""

    tree: GeoTree
    schema: Schema
    allocation: TopDownAllocation
    options: TopDownOptions
    names: tuple[str, ...]
    queries: tuple[QueryGroup, ...]
    specs: tuple[QuerySpec, ...]
    chain: tuple[QuerySpec, ...]
    passes: list[list[int]]
    single_pass: list[list[int]]
    budget: np.ndarray
    invariant: np.ndarray
    held: tuple[QuerySpec, CountBounds] | None
    """Structural-zero and GQ bounds held in least squares and rounding (None: no unit frame)."""


@dataclass(frozen=True)
class Estimation:
    """The estimation phase's output: int64 estimates per node, timings and diagnostics."""

    estimates: np.ndarray
    timings: dict[str, float]
    milp_fallbacks: int


def plan_run(
    hist: BlockHistogram,
    allocation: TopDownAllocation,
    *,
    tree: GeoTree | None = None,
    node_budgets: np.ndarray | None = None,
    options: TopDownOptions | None = None,
) -> TopDownPlan:
    """Check the inputs and fix the spine, queries, per-node budgets and least-squares passes."""
    options = options or TopDownOptions()
    if allocation.universe != "persons":
        raise ValidationError(
            f"allocation {allocation.name!r} is for {allocation.universe}; this engine estimates "
            "person histograms — use the persons allocation"
        )
    if np.any(hist.counts < 0):
        row = int(np.flatnonzero(np.any(hist.counts < 0, axis=1))[0])
        raise ValidationError(
            f"block {row} ({hist.geography.iloc[row, -1]}) has a negative count; "
            "histogram counts must be non-negative"
        )
    tree = tree if tree is not None else default_tree(hist, allocation)
    if tree.n_blocks != hist.n_blocks:
        raise ValidationError(
            f"the spine covers {tree.n_blocks} blocks but the data have {hist.n_blocks}"
        )
    names = run_query_names(allocation, options)
    queries = tuple(query_group(hist.schema, n) for n in names)
    chain_groups = rounder_chain(hist.schema, options.rounder_chain)
    if node_budgets is None:
        budget = node_query_budget(tree, allocation, names)
    else:
        budget = np.asarray(node_budgets, dtype=np.float64)
    frame = block_bounds(hist) if options.structural_zeros else None
    held: tuple[QuerySpec, CountBounds] | None = None
    if frame is not None:
        bound_group = query_group(hist.schema, frame.query)
        held = (
            QuerySpec(bound_group.name, bound_group.cell_index, bound_group.size),
            node_bounds(tree, frame),
        )
    return TopDownPlan(
        tree=tree,
        schema=hist.schema,
        allocation=allocation,
        options=options,
        names=tuple(names),
        queries=queries,
        specs=tuple(QuerySpec(q.name, q.cell_index, q.size) for q in queries),
        chain=tuple(QuerySpec(q.name, q.cell_index, q.size) for q in chain_groups),
        passes=_passes(names, options),
        single_pass=_passes(names, options, single=True),
        budget=budget,
        invariant=invariant_mask(tree, options.invariants, names, options.invariant_sums),
        held=held,
    )


def measure_plan(
    plan: TopDownPlan, truth: np.ndarray, seed: int, *, executor: Executor | None = None
) -> Measurements:
    """The measurement phase (TDA §6.1): noisy answers of every (node, query) of the plan.

    ``fast`` noise is keyed by (seed, level, geounit, query) (SPEC §8,
    :mod:`engine.noise.keyed`); ``exact`` noise comes from OpenDP. With ``executor`` the keyed
    draws run as units of work of about ``options.chunk_cells`` cells each (contiguous node
    ranges; e.g. on Spark executors), which gives the same numbers: a geounit's noise depends only
    on its key. ``exact`` noise always runs here (it needs this process's OS randomness).
    """
    from engine.noise.keyed import geounit_hashes

    tree = plan.tree
    hashes = geounit_hashes(tree.level_names, tree.node_id)
    method = plan.options.noise_method
    mechanism = plan.allocation.mechanism
    if executor is None or method != "fast":
        return measure(
            truth,
            plan.queries,
            plan.budget,
            plan.invariant,
            mechanism,
            None,
            method=method,
            seed=int(seed),
            geounit_hash=hashes,
        )
    rows = max(1, plan.options.chunk_cells // max(truth.shape[1], 1))
    starts = range(0, truth.shape[0], rows)
    units = [
        (
            truth[a : a + rows],
            plan.queries,
            plan.budget[a : a + rows],
            plan.invariant[a : a + rows],
            mechanism,
            int(seed),
            hashes[a : a + rows],
        )
        for a in starts
    ]
    return concat_measurements(executor.map(_measure_unit, units))


def _measure_unit(
    args: tuple[np.ndarray, tuple[QueryGroup, ...], np.ndarray, np.ndarray, str, int, np.ndarray],
) -> Measurements:
    """One unit of measurement work: keyed noise for a contiguous range of nodes."""
    truth, queries, budget, invariant, mechanism, seed, hashes = args
    return measure(
        truth, queries, budget, invariant, mechanism, None, seed=seed, geounit_hash=hashes
    )


def concat_measurements(parts: Sequence[Measurements]) -> Measurements:
    """The measurements of consecutive node ranges as one (rows in the order of ``parts``)."""
    first = parts[0]
    invariant: list[np.ndarray | None] = []
    for j, group in enumerate(first.queries):
        pieces = [p.invariant[j] for p in parts]
        if all(piece is None for piece in pieces):
            invariant.append(None)
            continue
        invariant.append(
            np.concatenate(
                [
                    np.full((p.noisy[j].shape[0], group.size), np.nan) if piece is None else piece
                    for p, piece in zip(parts, pieces, strict=True)
                ]
            )
        )
    return Measurements(
        queries=first.queries,
        noisy=tuple(np.concatenate([p.noisy[j] for p in parts]) for j in range(len(first.queries))),
        variance=np.concatenate([p.variance for p in parts]),
        invariant=tuple(invariant),
        budget=np.concatenate([p.budget for p in parts]),
        mechanism=first.mechanism,
        nominal_variance=np.concatenate([p.nominal_variance for p in parts]),
    )


def _unit(args: tuple[FamilyBatch, Sequence[Sequence[int]], Sequence[QuerySpec]]) -> BatchOutcome:
    """One unit of estimation work (a batch of families) for an executor."""
    return estimate_batch(*args)


def estimate(
    plan: TopDownPlan,
    measured: Measurements,
    truth: np.ndarray,
    *,
    executor: Executor | None = None,
    progress: Progress | None = None,
    cancel: Callable[[], bool] | None = None,
) -> Estimation:
    """The estimation phase (TDA §7), root first then depth by depth.

    The families of one depth are cut into batches of about ``options.chunk_cells`` variables —
    the units of work handed to ``executor`` (default: in this process); the cut does not depend
    on the executor, so neither do the results.
    """
    tree, specs, chain = plan.tree, plan.specs, plan.chain
    passes, single_pass = plan.passes, plan.single_pass
    report = progress or (lambda message, fraction: None)
    is_cancelled = cancel or (lambda: False)
    runner = executor or InProcessExecutor()
    weight = measured.weight()
    held = plan.held
    sums = held_sums(tree, truth, plan.queries, plan.options.invariant_sums)
    timings: dict[str, float] = {}
    n_cells = plan.schema.size
    estimates = np.full((tree.n_nodes, n_cells), -1, dtype=np.int64)
    ls_total = rounding_total = 0.0
    fallbacks = 0

    # Root problem (TDA eq. 7.1, 7.3).
    t_level = time.perf_counter()
    root_batch = _build_batch(
        np.array([0]), tree, estimates, specs, measured, weight, root=True, bounds=held
    )
    problems = check_batch(root_batch)
    if problems:
        raise TopDownInfeasible("; ".join(problems))
    outcome = estimate_batch(root_batch, single_pass, chain)
    estimates[0] = outcome.x[0]
    ls_total += outcome.least_squares_s
    rounding_total += outcome.rounding_s
    fallbacks += outcome.milp_fallbacks
    timings[str(tree.level_names[0])] = time.perf_counter() - t_level

    ptr, idx = tree.children_ptr
    n_sizes = np.diff(ptr)
    total_children = max(tree.n_nodes - 1, 1)
    done_children = 0
    for parents in tree.families_by_depth():
        if is_cancelled():
            raise RunCancelled("TopDown run cancelled")
        t_level = time.perf_counter()
        kids_all = np.concatenate([idx[ptr[p] : ptr[p + 1]] for p in parents])
        level_name = "/".join(sorted(set(tree.level_names[kids_all])))
        parent_est = estimates[parents]
        trivial = (n_sizes[parents] == 1) | (parent_est.sum(axis=1) == 0)
        easy = parents[trivial]
        if easy.size:
            batch = _build_batch(
                easy, tree, estimates, specs, measured, weight, bounds=held, sums=sums
            )
            problems = check_batch(batch)
            if problems:
                raise TopDownInfeasible("; ".join(problems))
            estimates[idx[np.concatenate([np.arange(ptr[p], ptr[p + 1]) for p in easy])]] = (
                batch.parent[batch.child_family].astype(np.int64) if batch.n_children else 0
            )
            done_children += batch.n_children
        hard = parents[~trivial]
        # Production used one pass with every query where the children are blocks (TDA §8.1);
        # decided per family, since bypassed spines put leaves at different depths.
        leaf_family = np.array(
            [bool(np.all(n_sizes[idx[ptr[p] : ptr[p + 1]]] == 0)) for p in hard], dtype=bool
        )
        chunks: list[np.ndarray] = []
        chunk_passes: list[list[list[int]]] = []
        for group, group_passes in (
            (hard[leaf_family], single_pass),
            (hard[~leaf_family], passes),
        ):
            group_chunks = _chunks(group, n_sizes[group], n_cells, plan.options.chunk_cells)
            chunks += group_chunks
            chunk_passes += [group_passes] * len(group_chunks)
        batches = [
            _build_batch(c, tree, estimates, specs, measured, weight, bounds=held, sums=sums)
            for c in chunks
        ]
        for batch in batches:
            problems = check_batch(batch)
            if problems:
                raise TopDownInfeasible("; ".join(problems))
        base_done = done_children
        ends = np.cumsum([b.n_children for b in batches]) if batches else np.array([], int)

        def done(
            k: int,
            _result: BatchOutcome,
            base: int = base_done,
            ends: np.ndarray = ends,
            label: str = f"Estimating {level_name}",
        ) -> None:
            report(label, 0.02 + 0.98 * (base + int(ends[k])) / total_children)

        units = [(b, p, chain) for b, p in zip(batches, chunk_passes, strict=True)]
        try:
            results = runner.map(_unit, units, cancel=is_cancelled, done=done)
        except ExecutionCancelled:
            raise RunCancelled("TopDown run cancelled") from None
        done_children += int(ends[-1]) if batches else 0
        for chunk, res in zip(chunks, results, strict=True):
            kids = idx[np.concatenate([np.arange(ptr[p], ptr[p + 1]) for p in chunk])]
            estimates[kids] = res.x
            ls_total += res.least_squares_s
            rounding_total += res.rounding_s
            fallbacks += res.milp_fallbacks
        timings[level_name] = timings.get(level_name, 0.0) + time.perf_counter() - t_level
    timings["least_squares_cpu"] = ls_total
    timings["rounding_cpu"] = rounding_total
    return Estimation(estimates=estimates, timings=timings, milp_fallbacks=fallbacks)


def result_of(
    plan: TopDownPlan,
    hist: BlockHistogram,
    truth: np.ndarray,
    measured: Measurements,
    estimation: Estimation,
    *,
    seed: int,
    runtime_s: float,
    timings: Mapping[str, float],
    workers: int,
) -> TopDownResult:
    """The :class:`TopDownResult` of a run's stages (with the structural-zero report)."""
    structural = _structural_report(hist, plan.tree, estimation.estimates, plan.held)
    if not plan.options.structural_zeros:
        structural["note"] = (
            "Structural zeros and GQ bounds were switched off for this run. "
            + str(structural.get("note", ""))
        )
    return TopDownResult(
        tree=plan.tree,
        schema=plan.schema,
        allocation_name=plan.allocation.name,
        mechanism=plan.allocation.mechanism,
        queries=plan.queries,
        estimates=estimation.estimates,
        truth=truth,
        measured=measured,
        timings=dict(timings),
        runtime_s=runtime_s,
        seed=int(seed),
        rho=float(plan.allocation.rho),
        diagnostics={
            "milp_fallbacks": estimation.milp_fallbacks,
            "workers": workers,
            "structural": structural,
        },
        rho_spent=spent_budget(plan.tree, plan.budget, plan.invariant),
    )


# --------------------------------------------------------------------------- the run
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
    truth = plan.tree.aggregate(hist.counts.astype(np.int64))
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


def _structural_report(
    hist: BlockHistogram,
    tree: GeoTree,
    estimates: np.ndarray,
    held: tuple[QuerySpec, CountBounds] | None,
) -> dict[str, object]:
    """What the run did about structural zeros and GQ bounds (issue 13 item 10; SPEC §6).

    With a unit frame: how many geounits were bounded and how many estimates break a bound (0 when
    the constraints held). Without: persons placed in blocks with no true persons.
    """
    if held is None:
        counts = np.bincount(tree.block_node, minlength=tree.n_nodes)
        if np.any(counts[tree.block_node] != 1):
            return {"structural_zeros_held": False, "note": "no unit data; spine above blocks"}
        return unconstrained_note(hist.counts, estimates[tree.block_node]).as_dict()
    spec, bounds = held
    answers = QuerySpec(spec.name, spec.cell_index, spec.size).answer(estimates)
    violations = int(np.sum((answers < bounds.lower - 1e-9) | (answers > bounds.upper + 1e-9)))
    zero_blocks = np.all(bounds.upper[tree.block_node] == 0, axis=1)
    return {
        "structural_zeros_held": True,
        "source": bounds.source,
        "bounded_query": spec.name,
        "structural_zero_blocks": int(zero_blocks.sum()),
        "blocks": int(tree.n_blocks),
        "persons_in_structural_zero_blocks": int(
            estimates[tree.block_node[zero_blocks]].sum() if zero_blocks.any() else 0
        ),
        "gq_lower_bounds": int(np.sum(bounds.lower[tree.block_node][:, 1:] > 0))
        if spec.name == "HHGQ"
        else 0,
        "bound_violations": violations,
        "note": (
            f"Structural zeros and GQ lower bounds held ({bounds.source}): "
            f"{int(zero_blocks.sum()):,} of {tree.n_blocks:,} blocks have no housing unit or "
            f"group quarters and were held at 0; {violations} bound violations."
        ),
    }
