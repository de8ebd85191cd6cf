"""Planning a TopDown run: everything fixed before any noise (TDA §6, §8.1; docs/science.md §4).

:func:`plan_run` checks the inputs and fixes the spine (:func:`default_tree`, the allocation's
levels on the data's geography), the query groups (:func:`run_query_names`), the per-node
per-query budgets (:func:`~engine.topdown.measure.node_query_budget`, TDA §6.1), the invariants
(TDA §5.2), the structural-zero and GQ bounds (TDA §5.3, docs/science.md §6) and the least-squares
passes (TDA §8.1–8.2) as a :class:`TopDownPlan`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.core.errors import ValidationError
from engine.data.histogram import BlockHistogram
from engine.dp.budget import TopDownAllocation
from engine.schema.attributes import Schema
from engine.topdown.constraints import CountBounds, block_bounds, node_bounds
from engine.topdown.family import QuerySpec
from engine.topdown.geography import US, GeoTree
from engine.topdown.measure import invariant_mask, node_query_budget
from engine.topdown.options import TopDownOptions
from engine.topdown.queries import TOTAL, QueryGroup, query_group, rounder_chain


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
    invariant-only ones in the order the invariants name them (one copy, used by every spine)."""
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
    row = hist.first_negative_block()
    if row is not None:
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
