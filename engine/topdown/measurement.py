"""The measurement phase of a planned TopDown run (TDA §6.1; docs/science.md §8; docs/topdown.md,
"Sparse histograms and lazy keyed measurements").

:func:`measure_plan` fixes the noisy answers of every (node, query) of a
:class:`~engine.topdown.plan.TopDownPlan`. With keyed ``fast`` noise (the default) nothing is drawn
up front: every noisy value is a pure function of (seed, level, geounit, query, cell)
(:mod:`engine.noise.keyed`), so :class:`KeyedMeasurements` holds the true histograms (sparse), the
per-node budgets, variances and invariants, and draws any subset of answers on demand with the
same numbers — a batch of families draws the answers it needs inside its unit of work
(:mod:`engine.topdown.batch_answers`), and the measurements output is drawn again chunk by chunk
when written (:meth:`~engine.topdown.result.TopDownResult.iter_measurement_frames`). ``exact``
(OpenDP) noise is not keyed: it is drawn once, for every cell, by
:func:`engine.topdown.measure.measure` and refused above :data:`MAX_EXACT_CELLS` answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from engine import noise
from engine.core.errors import ValidationError
from engine.noise.keyed import check_seed, geounit_hashes, unit_keys
from engine.topdown.batch_answers import KeyedAnswers
from engine.topdown.measure import (
    Measurements,
    check_budget,
    measure,
    noise_variances,
    weights_of,
)
from engine.topdown.plan import TopDownPlan
from engine.topdown.queries import QueryGroup
from engine.topdown.sparse_histograms import check_dense_size, dense_rows, densify

MAX_EXACT_CELLS = 100_000_000
"""Most noisy answers (nodes × query cells) ``exact`` noise draws: it draws every answer at once
into dense arrays (about 8 bytes each, several times over while drawing), so above this size —
e.g. the 2,016-cell schema on a state of a few million persons — it is refused with a message."""

DRAW_CELLS = 2_000_000
"""Answers drawn at a time when a whole query is read (:attr:`KeyedMeasurements.noisy`)."""


@dataclass(frozen=True)
class KeyedMeasurements:
    """The measurements of a run with keyed noise, drawn on demand (docs/science.md §8).

    Same attributes as :class:`~engine.topdown.measure.Measurements` (``noisy`` is drawn in full
    when first read — only for runs small enough to hold it), plus ``truth`` (the true histograms,
    CSR ``(n_nodes, n_cells)``), ``held`` (``(n_nodes, n_queries)`` bool: invariant answers),
    ``seed`` and ``geounit_hash`` (H(level, geounit) of every node). :meth:`answers` draws the
    answers of chosen nodes; :meth:`batch_answers` hands a batch's children to its unit of work.
    """

    queries: tuple[QueryGroup, ...]
    truth: sp.csr_matrix
    variance: np.ndarray
    invariant: tuple[np.ndarray | None, ...]
    budget: np.ndarray
    mechanism: str
    nominal_variance: np.ndarray
    held: np.ndarray
    seed: int
    geounit_hash: np.ndarray

    def weight(self) -> np.ndarray:
        """Least-squares weights 1/σ² ``(n_nodes, n_queries)``; 0 for unmeasured or invariant."""
        return weights_of(self.nominal_variance)

    @cached_property
    def scale(self) -> np.ndarray:
        """``(n_nodes, n_queries)`` noise scale of measured answers (σ² for zCDP, z for pure DP;
        the values :func:`~engine.topdown.measure.measure` draws with); 0 elsewhere."""
        measured = (self.budget > 0) & ~self.held
        out = np.zeros(self.budget.shape)
        b = self.budget[measured]
        out[measured] = 1.0 / b if self.mechanism == "zcdp" else b / 2.0
        return out

    def answers(self, j: int, nodes: np.ndarray) -> np.ndarray:
        """Answers to query ``j`` of ``nodes`` ``(len(nodes), size_j)``: noisy where measured,
        exact where invariant, NaN elsewhere — the numbers of a whole draw."""
        nodes = np.asarray(nodes, dtype=np.int64)
        group = self.queries[j]
        true = group.answer(dense_rows(self.truth, nodes)).astype(np.float64)
        out = np.full((nodes.size, group.size), np.nan)
        scale = self.scale[nodes, j]
        rows = np.flatnonzero(scale > 0)
        if rows.size:
            keys = unit_keys(self.seed, group.name, self.geounit_hash[nodes[rows]])[:, None]
            cells = np.arange(group.size, dtype=np.uint64)[None, :]
            s = scale[rows][:, None]
            if self.mechanism == "zcdp":
                draw = noise.keyed_discrete_gaussian(s, keys, cells)
            else:
                draw = noise.keyed_two_sided_geometric(s, keys, cells)
            out[rows] = true[rows] + draw
        held = np.flatnonzero(self.held[nodes, j])
        out[held] = true[held]
        return out

    @cached_property
    def noisy(self) -> tuple[np.ndarray, ...]:
        """Every answer ``(n_nodes, size_q)`` per query (NaN where not measured), drawn now.

        Refused when the dense arrays would be too large; read large runs with :meth:`answers`.
        """
        n_nodes = self.budget.shape[0]
        check_dense_size(n_nodes, sum(g.size for g in self.queries), "the noisy answers")
        out = []
        for j, group in enumerate(self.queries):
            rows = max(1, DRAW_CELLS // group.size)
            parts = [
                self.answers(j, np.arange(a, min(a + rows, n_nodes)))
                for a in range(0, n_nodes, rows)
            ]
            out.append(np.concatenate(parts) if parts else np.zeros((0, group.size)))
        return tuple(out)

    def batch_answers(self, kids: np.ndarray) -> KeyedAnswers:
        """What the unit of work of a batch with children ``kids`` needs to draw their answers."""
        return KeyedAnswers(
            truth=sp.csr_matrix(self.truth[kids]),
            geounit_hash=self.geounit_hash[kids],
            scale=self.scale[kids],
            mechanism=self.mechanism,
            seed=self.seed,
        )


RunMeasurements = Measurements | KeyedMeasurements


def keyed_measurements(
    plan: TopDownPlan, truth: np.ndarray | sp.spmatrix, seed: int
) -> KeyedMeasurements:
    """The plan's measurements with keyed noise, nothing drawn yet (TDA §6.1, docs/science.md §8).

    Budgets, invariants and variances are those :func:`~engine.topdown.measure.measure` sets.
    """

    tree, queries, budget = plan.tree, plan.queries, plan.budget
    mechanism = plan.allocation.mechanism
    check_budget(budget, tree.n_nodes, len(queries), mechanism)
    truth_csr = sp.csr_matrix(truth, dtype=np.int64)
    held = np.asarray(plan.invariant, dtype=bool)
    measured = (budget > 0) & ~held
    variance = np.full(budget.shape, np.nan)
    nominal = np.full(budget.shape, np.nan)
    variance[measured], nominal[measured] = noise_variances(budget[measured], mechanism)
    variance[held] = 0.0
    nominal[held] = 0.0
    invariant: list[np.ndarray | None] = []
    for j, group in enumerate(queries):
        nodes = np.flatnonzero(held[:, j])
        if not nodes.size:
            invariant.append(None)
            continue
        exact = np.full((tree.n_nodes, group.size), np.nan)
        exact[nodes] = group.answer(dense_rows(truth_csr, nodes))
        invariant.append(exact)
    return KeyedMeasurements(
        queries=tuple(queries),
        truth=truth_csr,
        variance=variance,
        invariant=tuple(invariant),
        budget=budget,
        mechanism=mechanism,
        nominal_variance=nominal,
        held=held,
        seed=check_seed(int(seed)),
        geounit_hash=geounit_hashes(tree.level_names, tree.node_id),
    )


def measure_plan(
    plan: TopDownPlan,
    truth: np.ndarray | sp.spmatrix,
    seed: int,
) -> RunMeasurements:
    """The measurement phase (TDA §6.1): noisy answers of every (node, query) of the plan.

    ``fast`` noise is keyed by (seed, level, geounit, query) (docs/science.md §8, :mod:`engine.noise.keyed`)
    and drawn lazily (:class:`KeyedMeasurements`): each batch of families draws its own answers
    in its unit of work, on whatever executor estimates it, with the numbers a whole draw
    gives. ``exact`` noise comes from OpenDP, drawn here for every answer at once (it needs this
    process's OS randomness); it is refused above :data:`MAX_EXACT_CELLS` answers.
    """
    method = plan.options.noise_method
    if method == "fast":
        return keyed_measurements(plan, truth, seed)

    tree = plan.tree
    answers = tree.n_nodes * sum(q.size for q in plan.queries)
    if answers > MAX_EXACT_CELLS:
        raise ValidationError(
            f"exact (OpenDP) noise draws all {answers:,} noisy answers of this run at once "
            f"({tree.n_nodes:,} geounits × {sum(q.size for q in plan.queries):,} query cells), "
            f"more than the {MAX_EXACT_CELLS:,} that fit in memory; use the keyed fast noise "
            "(--noise-method fast), which draws only the answers each family needs"
        )
    dense = densify(sp.csr_matrix(truth), "the true histogram") if sp.issparse(truth) else truth
    return measure(
        np.asarray(dense),
        plan.queries,
        plan.budget,
        plan.invariant,
        plan.allocation.mechanism,
        None,
        method=method,
        seed=int(seed),
        geounit_hash=geounit_hashes(tree.level_names, tree.node_id),
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
