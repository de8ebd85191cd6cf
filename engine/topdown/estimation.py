"""The estimation phase of a TopDown run, root first then depth by depth (TDA §7; docs/science.md
§4, §8).

The root is solved alone (TDA eq. 7.1, 7.3). Below it each parent's children form a family solved
as one problem — multi-pass non-negative weighted least squares (TDA eq. 7.5–7.6,
:mod:`engine.topdown.qp.route`) then multi-pass controlled rounding (eq. 7.7,
:mod:`engine.topdown.rounding`), one pass of every query where the children are blocks (TDA
§8.1). Families of one depth are independent: they are batched into chunks of about
``chunk_cells`` variables, the units of work an :class:`~engine.core.executors.Executor` runs;
feasibility is checked before solving (:mod:`engine.topdown.feasibility`). A level's units are
built one at a time as the executor takes them (:class:`LevelUnits`: docs/spark.md, "Driver
memory"). Chunking does not
depend on the executor, so results are identical for any number of workers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp

from engine.core.errors import RunCancelled
from engine.core.executors import Executor, InProcessExecutor
from engine.topdown.batch_answers import BatchAnswers, with_answers
from engine.topdown.constraints import CountBounds, child_bounds
from engine.topdown.family import ChildSum, FamilyBatch, QuerySpec
from engine.topdown.feasibility import TopDownInfeasible, check_batch
from engine.topdown.geography import GeoTree
from engine.topdown.measure import HeldSum, held_sums
from engine.topdown.measurement import RunMeasurements
from engine.topdown.options import Progress, unit_variables
from engine.topdown.plan import TopDownPlan
from engine.topdown.qp.route import multipass_least_squares
from engine.topdown.rounding import round_batch
from engine.topdown.sparse_histograms import SparseRows


@dataclass(frozen=True)
class BatchOutcome:
    """What a worker returns for one chunk of families."""

    x: np.ndarray | sp.csr_matrix
    """The integer estimates of the chunk's children (CSR when returned by a unit of work)."""
    least_squares_s: float
    rounding_s: float
    milp_fallbacks: int
    routes: dict[str, int] = field(default_factory=dict)
    """Family passes solved by each least-squares route (:mod:`engine.topdown.qp.route`)."""


def estimate_batch(
    batch: FamilyBatch,
    passes: Sequence[Sequence[int]],
    chain: Sequence[QuerySpec],
    solver: str = "auto",
) -> BatchOutcome:
    """Least squares then rounding for every family of ``batch`` (runs in a worker process);
    ``solver``: the least-squares route (``auto``: the routing table)."""
    routes: dict[str, int] = {}
    # CPU seconds of this process (metrics.json timings.least_squares_cpu / rounding_cpu): on a
    # shared machine wall-clock says more about the load than about the solvers
    t0 = time.process_time()
    x_tilde, _ = multipass_least_squares(
        batch, passes, solver=solver, routes=routes, objectives=False
    )
    t1 = time.process_time()
    x_hat, fallbacks = round_batch(batch, x_tilde, chain)
    t2 = time.process_time()
    return BatchOutcome(x_hat, t1 - t0, t2 - t1, fallbacks, routes)


def _batch_frame(
    parents: np.ndarray,
    tree: GeoTree,
    estimates: np.ndarray | SparseRows,
    specs: tuple[QuerySpec, ...],
    measured: RunMeasurements,
    weight: np.ndarray,
    *,
    root: bool = False,
    bounds: tuple[QuerySpec, CountBounds] | None = None,
    sums: Sequence[HeldSum] = (),
) -> tuple[FamilyBatch, BatchAnswers]:
    """A batch of families without its noisy answers, and where to get them: the unit of work
    fills them in (:func:`~engine.topdown.batch_answers.with_answers`), drawing keyed noise for
    the answers the batch needs only (docs/topdown.md, "Sparse histograms and lazy keyed
    measurements")."""
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
    if root:
        parent = None
    elif isinstance(estimates, SparseRows):
        parent = estimates.dense(parents).astype(np.float64)
    else:
        parent = np.asarray(estimates)[parents].astype(np.float64)
    batch = FamilyBatch(
        queries=specs,
        parent=parent,
        child_ptr=child_ptr,
        noisy=(),
        weight=weight[kids],
        invariant=tuple(None if t is None else t[kids] for t in measured.invariant),
        family_id=tuple(tree.node_id[p] for p in (parents if not root else [0])),
        child_id=tuple(tree.node_id[k] for k in kids),
        family_level="/".join(sorted(set(levels[parents]))) if not root else str(levels[0]),
        child_level="/".join(sorted(set(levels[kids]))),
        bounds=() if bounds is None else (child_bounds(bounds[0], bounds[1], kids),),
        sums=tuple(child_sums),
    )
    return batch, measured.batch_answers(kids)


def _build_batch(
    parents: np.ndarray,
    tree: GeoTree,
    estimates: np.ndarray | SparseRows,
    specs: tuple[QuerySpec, ...],
    measured: RunMeasurements,
    weight: np.ndarray,
    *,
    root: bool = False,
    bounds: tuple[QuerySpec, CountBounds] | None = None,
    sums: Sequence[HeldSum] = (),
) -> FamilyBatch:
    """The :class:`FamilyBatch` of the families of ``parents`` with its noisy answers filled in."""
    batch, answers = _batch_frame(
        parents, tree, estimates, specs, measured, weight, root=root, bounds=bounds, sums=sums
    )
    return with_answers(batch, answers)


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


Unit = tuple[FamilyBatch, BatchAnswers, Sequence[Sequence[int]], Sequence[QuerySpec], str]
"""One unit of estimation work: a batch of families, where its noisy answers come from, the
least-squares passes, the rounding chain and the least-squares route (``solver``)."""


class LevelUnits(Sequence[Unit]):
    """A level's units of work, each built (and checked for feasibility) only when an executor
    asks for it, so the driver never holds a whole level's units (docs/spark.md, "Driver memory").

    ``units[k]`` is chunk ``k``'s :class:`FamilyBatch` (without its noisy answers), built by
    ``frame(chunks[k])``; :func:`~engine.topdown.feasibility.check_batch` runs on it and raises
    :class:`TopDownInfeasible` as before. Building again gives equal units (the parents'
    estimates read are not changed while a level runs), so executors may index any way.
    """

    def __init__(
        self,
        chunks: Sequence[np.ndarray],
        passes: Sequence[Sequence[Sequence[int]]],
        frame: Callable[[np.ndarray], tuple[FamilyBatch, BatchAnswers]],
        chain: Sequence[QuerySpec],
        solver: str = "auto",
    ) -> None:
        if len(chunks) != len(passes):
            raise ValueError(f"{len(chunks)} chunks but {len(passes)} pass lists")
        self._chunks, self._passes, self._frame, self._chain = chunks, passes, frame, chain
        self._solver = solver

    def __len__(self) -> int:
        return len(self._chunks)

    def __getitem__(self, k: int) -> Unit:  # type: ignore[override]
        if not isinstance(k, int | np.integer):
            raise TypeError(f"level units are indexed by one int, not {type(k).__name__}")
        k = int(k)
        if k < 0:
            k += len(self)
        if not 0 <= k < len(self):
            raise IndexError(f"unit {k} of {len(self)}")
        batch, answers = self._frame(self._chunks[k])
        problems = check_batch(batch)
        if problems:
            raise TopDownInfeasible("; ".join(problems))
        return batch, answers, self._passes[k], self._chain, self._solver


@dataclass(frozen=True)
class Estimation:
    """The estimation phase's output: int64 estimates per node, timings and diagnostics."""

    estimates: sp.csr_matrix
    """int64 CSR ``(n_nodes, n_cells)``: the estimated histograms of every geounit."""
    timings: dict[str, float]
    milp_fallbacks: int
    routes: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per child level, the family passes each least-squares route solved."""


def _unit(args: Unit) -> BatchOutcome:
    """One unit of estimation work (a batch of families) for an executor: its noisy answers are
    filled in (keyed noise drawn) here, in the worker, then the batch is solved; the integer
    estimates come back as CSR."""
    batch, answers, passes, chain, solver = args
    outcome = estimate_batch(with_answers(batch, answers), passes, chain, solver)
    # Sent back sparse: a level's results are all held until the level ends.
    return replace(outcome, x=sp.csr_matrix(outcome.x, dtype=np.int64))


def estimate(
    plan: TopDownPlan,
    measured: RunMeasurements,
    truth: np.ndarray | sp.spmatrix,
    *,
    executor: Executor | None = None,
    progress: Progress | None = None,
    cancel: Callable[[], bool] | None = None,
) -> Estimation:
    """The estimation phase (TDA §7), root first then depth by depth.

    The families of one depth are cut into batches of about
    :func:`~engine.topdown.options.unit_variables` variables (children × cells) — the units of
    work handed to ``executor`` (default: in this process); the cut does not depend
    on the executor, so neither do the results. Each unit draws (keyed noise) or takes the noisy
    answers its families need; the estimates are kept sparse (:class:`SparseRows`).
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
    unit_size = unit_variables(plan.options, n_cells)
    estimates = SparseRows(tree.n_nodes, n_cells)
    ls_total = rounding_total = 0.0
    fallbacks = 0
    solver = plan.options.solver
    routes: dict[str, dict[str, int]] = {}

    def count(level: str, outcome: BatchOutcome) -> None:
        into = routes.setdefault(level, {})
        for name, n in outcome.routes.items():
            into[name] = into.get(name, 0) + n

    # Root problem (TDA eq. 7.1, 7.3).
    t_level = time.perf_counter()
    root_batch = _build_batch(
        np.array([0]), tree, estimates, specs, measured, weight, root=True, bounds=held
    )
    problems = check_batch(root_batch)
    if problems:
        raise TopDownInfeasible("; ".join(problems))
    outcome = estimate_batch(root_batch, single_pass, chain, solver)
    count(str(tree.level_names[0]), outcome)
    estimates.set(np.array([0]), outcome.x[:1])
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
        parent_rows = estimates.sparse(parents)
        parent_total = np.asarray(parent_rows.sum(axis=1)).reshape(-1)
        trivial = (n_sizes[parents] == 1) | (parent_total == 0)
        easy = parents[trivial]
        for part in _chunks(easy, n_sizes[easy], n_cells, unit_size):
            # One child takes its parent's histogram; an empty parent's children are all 0.
            batch, _ = _batch_frame(
                part, tree, estimates, specs, measured, weight, bounds=held, sums=sums
            )
            problems = check_batch(batch)
            if problems:
                raise TopDownInfeasible("; ".join(problems))
            kids = idx[np.concatenate([np.arange(ptr[p], ptr[p + 1]) for p in part])]
            estimates.set(kids, estimates.sparse(part)[batch.child_family])
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
            group_chunks = _chunks(group, n_sizes[group], n_cells, unit_size)
            chunks += group_chunks
            chunk_passes += [group_passes] * len(group_chunks)
        base_done = done_children
        ends = np.cumsum([int(n_sizes[c].sum()) for c in chunks]) if chunks else np.array([], int)

        def done(
            k: int,
            _result: BatchOutcome,
            base: int = base_done,
            ends: np.ndarray = ends,
            label: str = f"Estimating {level_name}",
        ) -> None:
            report(label, 0.02 + 0.98 * (base + int(ends[k])) / total_children)

        # Built one at a time as the executor takes them: the driver holds a slice of
        # units, not the level's; the parents' estimates they read do not change until map ends.
        units = LevelUnits(
            chunks,
            chunk_passes,
            lambda c: _batch_frame(
                c, tree, estimates, specs, measured, weight, bounds=held, sums=sums
            ),
            chain,
            solver,
        )
        results = runner.map(_unit, units, cancel=is_cancelled, done=done)
        del units
        done_children += int(ends[-1]) if len(ends) else 0
        for chunk, res in zip(chunks, results, strict=True):
            kids = idx[np.concatenate([np.arange(ptr[p], ptr[p + 1]) for p in chunk])]
            estimates.set(kids, res.x)
            ls_total += res.least_squares_s
            rounding_total += res.rounding_s
            fallbacks += res.milp_fallbacks
            count(level_name, res)
        timings[level_name] = timings.get(level_name, 0.0) + time.perf_counter() - t_level
    timings["least_squares_cpu"] = ls_total
    timings["rounding_cpu"] = rounding_total
    return Estimation(
        estimates=estimates.matrix(), timings=timings, milp_fallbacks=fallbacks, routes=routes
    )
