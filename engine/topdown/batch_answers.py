"""The noisy answers a batch of families needs, filled in where the batch is solved (TDA eq. 7.5;
docs/science.md §8; docs/topdown.md, "Sparse histograms and lazy keyed measurements").

In a family's weighted least squares (TDA eq. 7.5) a child's cell that is empty in the parent, or a
structural zero (TDA §5.3), is 0 in every feasible point. An answer ``A_q x_c`` that sums only such
cells is therefore the constant 0, and its term ``w (0 − m̃)²`` is a constant of the objective: the
minimiser does not depend on ``m̃``. So a batch needs the noisy answers that involve a free cell,
and on the 2,016-cell schema that is a small fraction of them (a block family only needs the cells
its block group can populate).

:func:`needed_answers` says which answers those are; :func:`with_answers` fills a
:class:`~engine.topdown.family.FamilyBatch`'s ``noisy`` from one of two sources:

* :class:`KeyedAnswers` — the children's true histograms (sparse) and keys; the keyed noise
  (:mod:`engine.noise.keyed`: every value a pure function of (seed, level, geounit, query, cell)) is
  drawn in the unit of work, for the needed answers only — the same numbers a whole draw gives;
* :class:`DrawnAnswers` — rows of measurements drawn beforehand (``exact`` OpenDP noise).

Either way an answer that involves no free cell holds 0 (its value ``A_q x_c``), measured answers
hold the noisy value, invariant answers their exact value, and unmeasured ones 0. Both sources give
the same batch for the same noisy values, so the lazy and the whole-draw paths give the same
estimates.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from engine import noise
from engine.noise.keyed import unit_keys
from engine.topdown.family import FamilyBatch, QuerySpec


def free_cells(batch: FamilyBatch) -> np.ndarray:
    """``(K, n_cells)`` bool: the cells a child can populate (non-zero in the parent and not a
    structural zero; every cell at the root)."""
    if batch.parent is None:
        free = np.ones((batch.n_children, batch.n_cells), dtype=bool)
    else:
        free = np.asarray(batch.parent)[batch.child_family] > 0
    zero = batch.structural_zero_cells()
    if zero is not None:
        free &= ~zero
    return free


def true_answers(spec: QuerySpec, truth: sp.csr_matrix) -> np.ndarray:
    """``(K, size)`` float: the exact answers ``A_q x`` of integer histograms ``truth`` (CSR),
    summed in integers (every cell's column relabelled by its answer cell; duplicates add up)."""
    if spec.is_identity:
        return truth.toarray().astype(np.float64)
    relabelled = sp.csr_matrix(
        (truth.data, spec.cell_index[truth.indices], truth.indptr),
        shape=(truth.shape[0], spec.size),
    )
    return relabelled.toarray().astype(np.float64)


def needed_answers(batch: FamilyBatch) -> tuple[np.ndarray, ...]:
    """Per query, ``(K, size_q)`` bool: the answers that involve at least one free cell."""
    free = free_cells(batch)
    counts = sp.csr_matrix(free, dtype=np.int64)  # the free cells, counted per answer cell below
    return tuple(
        free if spec.is_identity else true_answers(spec, counts) > 0 for spec in batch.queries
    )


@dataclass(frozen=True)
class DrawnAnswers:
    """Answers drawn beforehand: ``noisy[q]`` ``(K, size_q)``, NaN where not measured (rows of
    :class:`~engine.topdown.measure.Measurements`)."""

    noisy: tuple[np.ndarray, ...]

    def values(self, batch: FamilyBatch, q: int, need: np.ndarray) -> np.ndarray:
        return np.where(need, np.nan_to_num(self.noisy[q], nan=0.0), 0.0)


@dataclass(frozen=True)
class KeyedAnswers:
    """What a unit of work needs to draw its children's noisy answers itself (docs/science.md §8).

    ``truth`` the children's true histograms ``(K, n_cells)`` (CSR), ``geounit_hash`` their
    H(level, geounit), ``scale`` ``(K, n_queries)`` the noise scale of every measured answer (σ² of
    the discrete Gaussian for zCDP, z of the two-sided geometric for pure DP; 0 where an answer is
    not measured with noise), ``mechanism`` and ``seed`` as in the run.
    """

    truth: sp.csr_matrix
    geounit_hash: np.ndarray
    scale: np.ndarray
    mechanism: str
    seed: int

    def values(self, batch: FamilyBatch, q: int, need: np.ndarray) -> np.ndarray:
        spec = batch.queries[q]
        out = np.zeros(need.shape)
        held = batch.invariant[q]
        if held is not None:
            rows = np.isfinite(held[:, 0])
            out[rows] = np.where(need[rows], held[rows], 0.0)
        measured = self.scale[:, q] > 0
        r, a = np.nonzero(need & measured[:, None])
        if r.size == 0:
            return out
        true = true_answers(spec, self.truth)
        keys = unit_keys(self.seed, spec.name, self.geounit_hash)
        cells = a.astype(np.uint64)
        if self.mechanism == "zcdp":
            draw = noise.keyed_discrete_gaussian(self.scale[r, q], keys[r], cells)
        else:
            draw = noise.keyed_two_sided_geometric(self.scale[r, q], keys[r], cells)
        out[r, a] = true[r, a] + draw
        return out


BatchAnswers = DrawnAnswers | KeyedAnswers


def with_answers(batch: FamilyBatch, answers: BatchAnswers) -> FamilyBatch:
    """``batch`` with ``noisy`` filled from ``answers`` (the needed answers; 0 elsewhere)."""
    need = needed_answers(batch)
    return replace(batch, noisy=tuple(answers.values(batch, q, n) for q, n in enumerate(need)))
