"""A controlled-rounding pass as a min-cost flow (TDA §7.3: the pass's matrix is a network matrix).

A pass of :mod:`engine.topdown.rounding` on a batch without invariants or sums of siblings below
the parent is a network problem. Each fractional cell j of child c is an arc y_cj ∈ {0, 1} from
the node of its parent cell (f, j) — whose supply is the parent's residual P_fj − Σ_c ⌊x̃_cj⌋ —
to the node of the child's answer cell on the finest marginal the pass involves. Marginals of a
nested chain are a tree per child, so:

* pass k on a marginal Q^(k) (not DETAILED): answer node (c, a) → the node of its answer on the
  frozen marginal Q^(k−1) (whose demand is the frozen answer of y), or the sink for the first pass,
  through unit segment arcs of cost |L+i+1−a| − |L+i−a| (the L1 term interpolated at the integers,
  convex, so the cheapest segments fill first);
* the DETAILED pass: y arcs cost 1 − 2f and go straight to the frozen finest marginal's nodes;
* a structural bound on a marginal of the chain (TDA §5.3) is the capacity [lower, upper] of the
  arc from its answer node to the pass's answer node when it is at least as fine as the pass's
  marginal, and already holds (frozen) when it is coarser.

Arc lower bounds are moved into the node supplies, costs are scaled to integers (2³⁰ per person:
the optimum found is within 2⁻³⁰ × the units of flow of the LP's), and OR-Tools' network simplex
(``SimpleMinCostFlow``) returns an integral optimum. :func:`network_of` says whether a batch
fits; :func:`solve_pass` returns y, or ``None`` when the flow is infeasible (the caller then
solves the LP).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from ortools.graph.python import min_cost_flow

from engine.topdown.family import FamilyBatch, QuerySpec

COST_SCALE = float(2**30)
"""Integer costs per unit of flow: cost × 2³⁰, rounded."""


@dataclass(frozen=True)
class Network:
    """What a batch's passes need: each chain marginal's map to the next coarser one, and the
    structural bounds as (chain position, lower, upper) on that marginal."""

    coarser: tuple[np.ndarray | None, ...]
    """``coarser[l][a]``: the answer of marginal l − 1 that answer a of marginal l lies in."""
    bounds: tuple[tuple[int, np.ndarray, np.ndarray], ...]


def _coarser_map(fine: QuerySpec, coarse: QuerySpec) -> np.ndarray | None:
    out = np.full(fine.size, -1, dtype=np.int64)
    out[fine.cell_index] = coarse.cell_index
    return out if np.array_equal(out[fine.cell_index], coarse.cell_index) else None


def network_of(batch: FamilyBatch, chain: Sequence[QuerySpec]) -> Network | None:
    """The batch's :class:`Network`, or ``None`` when its passes are not a network here: no parent
    (the root), invariants or sums of siblings below the parent, a chain that is not nested, or a
    bound on a marginal outside the chain."""
    if batch.parent is None or batch.sums or not chain or not chain[-1].is_detailed:
        return None
    if any(t is not None and np.isfinite(t).any() for t in batch.invariant):
        return None
    coarser: list[np.ndarray | None] = [None]
    for coarse, fine in zip(chain[:-1], chain[1:], strict=True):
        mapping = _coarser_map(fine, coarse)
        if mapping is None:
            return None
        coarser.append(mapping)
    bounds = []
    for bound in batch.bounds:
        if not bound.active:
            continue
        where = [
            i
            for i, spec in enumerate(chain)
            if spec.size == bound.spec.size
            and np.array_equal(spec.cell_index, bound.spec.cell_index)
        ]
        if not where:
            return None
        if where[0] == len(chain) - 1:
            return None  # a bound on DETAILED itself: the LP holds it
        bounds.append((where[0], bound.lower, bound.upper))
    return Network(tuple(coarser), tuple(bounds))


class _Graph:
    """Arcs and supplies under construction (nodes numbered as they are added)."""

    def __init__(self) -> None:
        self.n_nodes = 0
        self.tail: list[np.ndarray] = []
        self.head: list[np.ndarray] = []
        self.capacity: list[np.ndarray] = []
        self.cost: list[np.ndarray] = []
        self.supply: list[tuple[np.ndarray, np.ndarray]] = []

    def nodes(self, count: int) -> int:
        first = self.n_nodes
        self.n_nodes += count
        return first

    def arcs(self, tail, head, capacity, cost) -> None:
        size = np.broadcast(tail, head).size
        self.tail.append(np.broadcast_to(tail, size).astype(np.int64))
        self.head.append(np.broadcast_to(head, size).astype(np.int64))
        self.capacity.append(np.broadcast_to(capacity, size).astype(np.int64))
        self.cost.append(np.broadcast_to(cost, size).astype(np.int64))

    def supplies(self, node, amount) -> None:
        self.supply.append((np.asarray(node, dtype=np.int64), np.asarray(amount, dtype=np.int64)))

    def solve(self, n_y: int) -> np.ndarray | None:
        flow = min_cost_flow.SimpleMinCostFlow()
        flow.add_arcs_with_capacity_and_unit_cost(
            np.concatenate(self.tail),
            np.concatenate(self.head),
            np.concatenate(self.capacity),
            np.concatenate(self.cost),
        )
        supply = np.zeros(self.n_nodes, dtype=np.int64)
        for node, amount in self.supply:
            np.add.at(supply, node, amount)
        flow.set_nodes_supplies(np.arange(self.n_nodes), supply)
        if flow.solve() != flow.OPTIMAL:
            return None
        return np.asarray(flow.flows(np.arange(n_y)), dtype=np.float64)


def _int(values: np.ndarray) -> np.ndarray:
    return np.rint(values).astype(np.int64)


def solve_pass(
    net: Network,
    batch: FamilyBatch,
    chain: Sequence[QuerySpec],
    k: int,
    child: np.ndarray,
    cell: np.ndarray,
    residual: np.ndarray,
    answers: Callable[[QuerySpec, bool], np.ndarray],
    frac: np.ndarray,
    frozen: np.ndarray | None,
) -> np.ndarray | None:
    """y (one per free cell ``(child, cell)``) of pass ``k`` (chain position), or ``None`` if the
    flow is infeasible. ``residual``: P − Σ_c ⌊x̃_c⌋ per (family, cell) flat; ``answers(spec,
    tilde)``: a marginal's answers ``(K, size)`` of ⌊x̃⌋ (or of x̃); ``frac``: x̃ − ⌊x̃⌋ of the free
    cells; ``frozen``: the answers of y on marginal k − 1, per (child, answer) flat (``None`` for
    the first pass)."""
    n_cells = batch.n_cells
    spec = chain[k]
    graph = _Graph()
    # Parent cells with a free cell: supply = the parent's residual there.
    keys = batch.child_family[child] * n_cells + cell
    parent_keys, parent_of = np.unique(keys, return_inverse=True)
    held = np.zeros(residual.size, dtype=bool)
    held[parent_keys] = True
    if np.any(np.abs(residual[~held]) > 1e-9):
        return None  # a parent cell without a free cell is not met: the LP reports it
    first_parent = graph.nodes(parent_keys.size)
    graph.supplies(first_parent + np.arange(parent_keys.size), _int(residual[parent_keys]))
    # Where the pass's flow ends: the frozen marginal's nodes (demand = frozen answers) or a sink.
    detailed = spec.is_detailed
    if k == 0:
        sink = graph.nodes(1)
        graph.supplies(sink, -int(round(float(residual[parent_keys].sum()))))
    else:
        prev = chain[k - 1]
        prev_keys, prev_of = np.unique(
            child * prev.size + prev.cell_index[cell], return_inverse=True
        )
        first_prev = graph.nodes(prev_keys.size)
        graph.supplies(first_prev + np.arange(prev_keys.size), -_int(frozen[prev_keys]))
    if detailed:
        head = sink if k == 0 else first_prev + prev_of
        cost = _int((1.0 - 2.0 * frac) * COST_SCALE)
        graph.arcs(first_parent + parent_of, head, 1, cost)  # the y arcs, first
        return graph.solve(child.size)
    # The pass's answer nodes (c, a) and, for bounds at least as fine, bound nodes before them.
    ans_keys, ans_of = np.unique(child * spec.size + spec.cell_index[cell], return_inverse=True)
    fine = [(pos, lo, up) for pos, lo, up in net.bounds if pos >= k]
    if len(fine) > 1:
        return None
    if fine:
        pos, lower, upper = fine[0]
        bspec = chain[pos]
        b_keys, b_of = np.unique(child * bspec.size + bspec.cell_index[cell], return_inverse=True)
        first_b = graph.nodes(b_keys.size)
        first_ans = graph.nodes(ans_keys.size)
        graph.arcs(first_parent + parent_of, first_b + b_of, 1, 0)  # the y arcs, first
        # Bound arcs (c, b) → (c, a(b)): L' ≤ flow ≤ U' with L', U' relative to the base.
        at_base = answers(bspec, False).reshape(-1)[b_keys]
        count = np.bincount(b_of, minlength=b_keys.size)
        lo = np.nan_to_num(lower.reshape(-1)[b_keys] - at_base, nan=0.0, neginf=0.0)
        up = np.nan_to_num(upper.reshape(-1)[b_keys] - at_base, nan=np.inf, posinf=np.inf)
        lo = np.maximum(np.ceil(lo - 1e-9), 0).astype(np.int64)
        up = np.minimum(np.floor(up + 1e-9), count).astype(np.int64)
        if np.any(lo > up):
            return None
        b_child, b_answer = np.divmod(b_keys, bspec.size)
        target_answer = b_answer
        for level in range(pos, k, -1):
            target_answer = net.coarser[level][target_answer]
        target = np.searchsorted(ans_keys, b_child * spec.size + target_answer)
        graph.arcs(first_b + np.arange(b_keys.size), first_ans + target, up - lo, 0)
        graph.supplies(first_b + np.arange(b_keys.size), -lo)
        graph.supplies(first_ans + target, lo)
    else:
        first_ans = graph.nodes(ans_keys.size)
        graph.arcs(first_parent + parent_of, first_ans + ans_of, 1, 0)  # the y arcs, first
    # Segment arcs: one per free cell behind each answer, cost |L+i+1−a| − |L+i−a|.
    count = np.bincount(ans_of, minlength=ans_keys.size)
    owner = np.repeat(np.arange(ans_keys.size), count)
    step = np.arange(owner.size) - np.repeat(np.cumsum(count) - count, count)
    low = answers(spec, False).reshape(-1)[ans_keys][owner] + step
    target = answers(spec, True).reshape(-1)[ans_keys][owner]
    seg_cost = np.abs(low + 1 - target) - np.abs(low - target)
    if k == 0:
        head = np.full(owner.size, sink)
    else:
        a_child, a_answer = np.divmod(ans_keys, spec.size)
        up_keys = a_child * prev.size + net.coarser[k][a_answer]
        head = first_prev + np.searchsorted(prev_keys, up_keys)[owner]
    graph.arcs(first_ans + owner, head, 1, _int(seg_cost * COST_SCALE))
    return graph.solve(child.size)
