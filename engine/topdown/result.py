"""What a TopDown run produced, assembled from its stages (TDA §6–7; SPEC §4, §6).

:class:`TopDownResult` holds the int64 estimates and truth of every geounit, the noisy
measurements (TDA §6.1), timings and diagnostics, and the ρ spent along the costliest
root-to-block path (TDA §5.2). :func:`result_of` builds it from a plan, its measurements and its
estimation, with the report of what the run did about structural zeros and GQ bounds (TDA §5.3,
SPEC §6).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from engine.data.histogram import BlockHistogram, Schema
from engine.topdown.constraints import CountBounds, unconstrained_note
from engine.topdown.estimation import Estimation
from engine.topdown.family import QuerySpec
from engine.topdown.geography import GeoTree
from engine.topdown.measure import Measurements, spent_budget
from engine.topdown.plan import TopDownPlan
from engine.topdown.queries import QueryGroup, query_group
from phexplore.errors import ValidationError


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
