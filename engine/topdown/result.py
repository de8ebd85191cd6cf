"""What a TopDown run produced, assembled from its stages (TDA §6–7; docs/science.md §4, §6).

:class:`TopDownResult` holds the int64 estimates and truth of every geounit, the noisy
measurements (TDA §6.1), timings and diagnostics, and the ρ spent along the costliest
root-to-block path (TDA §5.2). :func:`result_of` builds it from a plan, its measurements and its
estimation, with the report of what the run did about structural zeros and GQ bounds (TDA §5.3,
docs/science.md §6).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd
import scipy.sparse as sp

from engine.core.errors import ValidationError
from engine.data.histogram import BlockHistogram
from engine.schema.attributes import Schema
from engine.topdown import export
from engine.topdown.constraints import CountBounds, unconstrained_note
from engine.topdown.estimation import Estimation
from engine.topdown.family import QuerySpec
from engine.topdown.geography import GeoTree
from engine.topdown.measure import spent_budget
from engine.topdown.measurement import RunMeasurements
from engine.topdown.plan import TopDownPlan
from engine.topdown.queries import QueryGroup
from engine.topdown.sparse_histograms import check_dense_size, densify


@dataclass
class TopDownResult:
    """Everything a run produced, indexed like ``tree`` (node metadata: :attr:`nodes`).

    ``estimates_sparse`` / ``truth_sparse`` are int64 CSR ``(n_nodes, n_cells)`` (non-zero cells
    only: docs/topdown.md, "Sparse histograms and lazy keyed measurements"); :attr:`estimates` /
    :attr:`truth` are the same as dense arrays, built on first use for runs small enough
    (:data:`~engine.topdown.sparse_histograms.MAX_DENSE_CELLS`). Large outputs are read in chunks:
    :meth:`iter_estimate_frames`, :meth:`iter_measurement_frames`.
    """

    tree: GeoTree
    schema: Schema
    allocation_name: str
    mechanism: str
    queries: tuple[QueryGroup, ...]
    estimates_sparse: sp.csr_matrix
    truth_sparse: sp.csr_matrix
    measured: RunMeasurements
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
    def estimates(self) -> np.ndarray:
        """int64 ``(n_nodes, n_cells)`` estimates (dense; refused for very large runs)."""
        return densify(self.estimates_sparse, "the estimated histogram")

    @cached_property
    def truth(self) -> np.ndarray:
        """int64 ``(n_nodes, n_cells)`` true histograms (dense; refused for very large runs)."""
        return densify(self.truth_sparse, "the true histogram")

    @cached_property
    def nodes(self) -> pd.DataFrame:
        """node, geolevel, geounit, parent, depth of every node."""
        return self.tree.nodes_frame()

    def iter_measurement_frames(self, rows: int | None = None) -> Iterator[pd.DataFrame]:
        """The tidy noisy measurements in frames of at most ``rows`` rows (default
        :data:`engine.topdown.export.DEFAULT_CHUNK_ROWS`): geolevel, geounit, query, cell, noisy,
        variance (0 = invariant, no noise); query by query, geounits in node order.

        Keyed noise is drawn again for each frame (the numbers the estimation used,
        docs/science.md §8), so the whole table never has to be in memory
        (:func:`engine.topdown.export.iter_measurement_frames`).
        """

        yield from export.iter_measurement_frames(
            self, chunk_rows=export.DEFAULT_CHUNK_ROWS if rows is None else rows
        )

    @cached_property
    def measurements(self) -> pd.DataFrame:
        """Tidy noisy measurements: geolevel, geounit, query, cell, noisy, variance (0 = invariant)."""
        return pd.concat(list(self.iter_measurement_frames()), ignore_index=True)

    def iter_estimate_frames(
        self, queries: Sequence[str] | None = None, rows: int | None = None, *, sparse: bool = False
    ) -> Iterator[pd.DataFrame]:
        """:meth:`to_tidy` in frames of at most ``rows`` rows (query by query, nodes in order):
        geolevel, geounit, query, cell, true, estimate; with ``sparse`` only the rows where either
        count is non-zero (:func:`engine.topdown.export.iter_estimate_frames`)."""

        yield from export.iter_estimate_frames(
            self,
            queries,
            chunk_rows=export.DEFAULT_CHUNK_ROWS if rows is None else rows,
            sparse=sparse,
        )

    def to_tidy(self, queries: Sequence[str] | None = None) -> pd.DataFrame:
        """Columns [geolevel, geounit, query, cell, true, estimate] for every node and query cell.

        ``queries`` default: the run's query groups; any query name valid on the schema works.
        """
        return pd.concat(list(self.iter_estimate_frames(queries)), ignore_index=True)

    def level_histogram(self, level: str) -> np.ndarray:
        """Estimated histograms ``(n_units, n_cells)`` of ``level``, in :meth:`level_ids` order."""
        nodes = self.tree.nodes_at_level(level)
        check_dense_size(len(nodes), self.schema.size, f"the {level} histograms")
        return self.estimates_sparse[nodes].toarray()

    def level_ids(self, level: str) -> tuple[str, ...]:
        return tuple(self.tree.node_id[i] for i in self.tree.nodes_at_level(level))

    def block_histogram_sparse(self) -> sp.csr_matrix:
        """Estimated block histograms, CSR ``(n_blocks, n_cells)`` in the input's block order.

        Requires a spine whose leaves are the blocks (one block per leaf).
        """
        counts = np.bincount(self.tree.block_node, minlength=self.tree.n_nodes)
        if np.any(counts[self.tree.block_node] != 1):
            raise ValidationError(
                "this run's spine stops above the block level, so it has no block estimates; "
                f"use level_histogram({self.tree.levels[-1]!r})"
            )
        return sp.csr_matrix(self.estimates_sparse[self.tree.block_node])

    def block_histogram(self) -> np.ndarray:
        """Estimated block histograms ``(n_blocks, n_cells)`` in the input's block order (dense;
        :meth:`block_histogram_sparse` for large runs).

        Requires a spine whose leaves are the blocks (one block per leaf).
        """
        blocks = self.block_histogram_sparse()
        return densify(blocks, "the block histograms")


def result_of(
    plan: TopDownPlan,
    hist: BlockHistogram,
    truth: np.ndarray | sp.spmatrix,
    measured: RunMeasurements,
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
        estimates_sparse=sp.csr_matrix(estimation.estimates, dtype=np.int64),
        truth_sparse=sp.csr_matrix(truth, dtype=np.int64),
        measured=measured,
        timings=dict(timings),
        runtime_s=runtime_s,
        seed=int(seed),
        rho=float(plan.allocation.rho),
        diagnostics={
            "milp_fallbacks": estimation.milp_fallbacks,
            "routes": estimation.routes,
            "solver": plan.options.solver,
            "workers": workers,
            "structural": structural,
        },
        rho_spent=spent_budget(plan.tree, plan.budget, plan.invariant),
    )


def _structural_report(
    hist: BlockHistogram,
    tree: GeoTree,
    estimates: sp.spmatrix,
    held: tuple[QuerySpec, CountBounds] | None,
) -> dict[str, object]:
    """What the run did about structural zeros and GQ bounds (docs/science.md §6).

    With a unit frame: how many geounits were bounded and how many estimates break a bound (0 when
    the constraints held). Without: persons placed in blocks with no true persons.
    """
    estimates = sp.csr_matrix(estimates)
    if held is None:
        counts = np.bincount(tree.block_node, minlength=tree.n_nodes)
        if np.any(counts[tree.block_node] != 1):
            return {"structural_zeros_held": False, "note": "no unit data; spine above blocks"}
        block_totals = np.asarray(estimates[tree.block_node].sum(axis=1))  # (n_blocks, 1)
        return unconstrained_note(hist.block_totals[:, None], block_totals).as_dict()
    spec, bounds = held
    answers = np.asarray((estimates @ spec.matrix().T).toarray())  # (n_nodes, spec.size)
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
