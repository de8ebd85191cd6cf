"""A level's support-model variances and the root's lifted empty cells, as the prediction
uses them (docs/prediction.md §2b; docs/science.md §7).

:func:`support_variances` turns the per-child covariances of the least squares on each family's
populated cells (:mod:`engine.prediction.support`) into per unit × answer-cell variances of every
query at once; :func:`root_term`, :func:`root_rounding` and :func:`with_root_term` add the mass
the root's non-negative least squares lifts into its empty cells and the root's controlled
rounding (:mod:`engine.prediction.root_clipping`) to the root's rows and those of its only-child
copies.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.prediction.algebra import CellAlgebra
from engine.prediction.correction import LevelCorrection
from engine.prediction.least_squares import LevelDesign
from engine.prediction.root_clipping import RootClipping, chain_rounding, root_clipping
from engine.prediction.spine import SpineProfile
from engine.prediction.support import FamilyCovariance, SupportAlgebra, design_key
from engine.schema.marginals import default_rounder_chain

SMALL_UNIT_CELLS = 24
"""Units of at most this many populated cells have their answer variances summed over their
covariance entries all at once (:func:`support_variances`); larger ones one by one."""


def root_term(
    spine: SpineProfile,
    attrs: tuple[tuple[str, tuple[str, ...]], ...],
    design: LevelDesign,
    cache: Any,
    algebra: CellAlgebra,
    report: tuple[str, ...],
) -> RootClipping:
    """:func:`engine.prediction.root_clipping.root_clipping` of the root's design, computed
    for the design normalised to scale 1 (cached with the profile) and rescaled."""
    key, normalised, t = design_key(design)
    counts = spine.root_counts() if spine.counts is not None else np.zeros(algebra.n_cells)
    zeros = spine.zero_cells(0, np.zeros(1, dtype=np.int64), attrs)

    def compute() -> RootClipping:
        return root_clipping(
            normalised,
            cache.answer_index,
            counts,
            None if zeros is None else zeros[0],
            {q: algebra.answer_cells(q) for q in report},
        )

    term: RootClipping = cache.derived_value(("root_clipping", key, report), compute)
    return term.scaled(t)


def root_rounding(
    term: RootClipping,
    p_populated: np.ndarray,
    kept: np.ndarray,
    attrs: tuple[tuple[str, tuple[str, ...]], ...],
    queries: Sequence[str],
    exact: Sequence[str],
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per query, per answer: the root's rounding variance under the engine's controlled
    rounding (:func:`engine.prediction.root_clipping.chain_rounding`) with its populated cells
    non-integral with their clipping probability and its empty variables with their lift's, and
    the same without the lifted cells (what the correction gave the populated cells); queries
    coarsening the root's invariants ``exact`` are integers: no rounding."""
    n_cells = int(np.prod([len(lv) for _, lv in attrs]))
    chain = default_rounder_chain(attrs)
    p_cells = np.zeros(n_cells)
    p_cells[kept] = p_populated
    populated = chain_rounding(attrs, chain, p_cells, queries, exact)
    p_cells[term.empty] = term.lifted
    lifted = chain_rounding(attrs, chain, p_cells, queries, exact)
    return {q: (lifted[q], populated[q]) for q in queries}


def with_root_term(
    corr: LevelCorrection, term: RootClipping, query: str, rounding: np.ndarray
) -> LevelCorrection:
    """``corr`` with the root's lifted empty cells added (bias, variance) and ``rounding`` (per
    answer: the rounding variance to add)."""
    mse = corr.rmse**2 + term.added_mse(query, corr.unit_bias, rounding)
    bias = term.bias[query]
    return LevelCorrection(
        rmse=math.sqrt(max(mse, 0.0)),
        mean_count=corr.mean_count,
        model_holds=corr.model_holds,
        bias=corr.bias + float(np.mean(bias)),
        unit_bias=None if corr.unit_bias is None else corr.unit_bias + bias,
    )


def unit_variance(support_var: np.ndarray | None, dense: np.ndarray) -> np.ndarray:
    """Per unit (× answer cell) least-squares variance: on the family's support when computed,
    else the dense model's per-unit mean."""
    if support_var is not None:
        return support_var
    return np.clip(dense, 0.0, None)


@dataclass(frozen=True)
class UnitVariances:
    """Per query, ``(units, answer cells)`` least-squares variances of a level's sampled units
    (``total``) and two conserved parts of them: the family mean of the parent's error,
    Var(D_p,a)/n² per child (``parent``: the children's errors sum to the parent's, so their
    mean is D_p,a/n whatever non-negativity does), and the error of answers held from an
    earlier pass (``held``, :meth:`engine.prediction.support_family.PreparedFamily.finish_parts`).
    ``"DETAILED"`` holds ``(units, n_cells)`` cell variances."""

    total: dict[str, np.ndarray]
    parent: dict[str, np.ndarray]
    held: dict[str, np.ndarray]
    share: dict[str, np.ndarray]
    """The part carrying the parent's error, as the least squares on populated cells shares it
    (on each child's own cells)."""
    pinned: dict[str, np.ndarray]
    """Per query, the freed variance of each unit's empty cells that reaches each answer once
    the populated cells re-adjust (Σ_i T_ai² v_i, :mod:`engine.prediction.support_freed`)."""

    def scaled(self, factor: float) -> UnitVariances:
        """Every variance times ``factor`` (the same object when it is 1)."""
        if factor == 1.0:
            return self
        return UnitVariances(
            *(
                {q: v * factor for q, v in part.items()}
                for part in (self.total, self.parent, self.held, self.share, self.pinned)
            )
        )


def support_variances(
    family_covs: Mapping[int, FamilyCovariance],
    family_of_unit: np.ndarray,
    cache: Any,
    sizes: Mapping[str, int],
    n_cells: int,
    zeros: np.ndarray | None = None,
) -> UnitVariances:
    """Per query, ``(units, answer cells)`` least-squares variances of the units (whole families
    in order, ``family_of_unit``) with their empty cells held at 0, and their inherited and held
    parts (:class:`UnitVariances`); ``"DETAILED"`` holds ``(units, n_cells)`` cell variances:
    on the unit's own support that model's, on the rest of the family's support the free-cell
    variance (all of the parent's cells free; no conserved part), elsewhere 1e-12 (no variable:
    no error).

    All units at once: the variance of answer a of unit c is the sum of C_ij over the pairs of
    its support cells i, j that both count in a — every unit's covariance entries are listed
    once (row-major, as stored) with their unit and cells, and each query sums those whose two
    cells share an answer (one bincount per query)."""
    fams = list(dict.fromkeys(int(f) for f in family_of_unit))
    kids = [(fc, kid) for fc in (family_covs[f] for f in fams) for kid in range(len(fc.child_covs))]
    n_units = len(kids)
    supports = [fc.child_supports[i] for fc, i in kids]
    parts = [
        [fc.child_covs[i] for fc, i in kids],
        [fc.child_held[i] for fc, i in kids],
        [fc.child_share[i] for fc, i in kids],
    ]
    lengths = np.array([x.size for x in supports], dtype=np.int64)
    cells_of_var = (
        np.concatenate(supports).astype(np.int64) if n_units else np.zeros(0, dtype=np.int64)
    )
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    # every covariance entry (unit, i, j) of the small units, row-major per unit; a unit of
    # more cells than SMALL_UNIT_CELLS takes its own algebra's masked product instead
    paired = np.where(lengths <= SMALL_UNIT_CELLS, lengths, 0)
    pair_unit = np.repeat(np.arange(n_units), paired * paired)
    local = np.arange(int((paired * paired).sum())) - np.repeat(
        np.concatenate([[0], np.cumsum(paired * paired)[:-1]]), paired * paired
    )
    size_of_pair = paired[pair_unit]
    first = offsets[:-1][pair_unit] + local // np.maximum(size_of_pair, 1)
    second = offsets[:-1][pair_unit] + local % np.maximum(size_of_pair, 1)
    values = [
        np.concatenate([c.ravel() for c, m in zip(covs, paired, strict=True) if m] or [[]])
        for covs in parts
    ]
    results: list[dict[str, np.ndarray]] = [{}, {}, {}]
    answers = {q: int(v) for q, v in sizes.items() if q != "DETAILED"}
    for q, size in answers.items():
        idx = cache.answer_index[q]
        a_i, a_j = idx[cells_of_var[first]], idx[cells_of_var[second]]
        same = a_i == a_j
        bins = pair_unit[same] * size + a_i[same]
        for result, vals in zip(results, values, strict=True):
            total = np.bincount(bins, weights=vals[same], minlength=n_units * size)
            result[q] = np.maximum(total.reshape(n_units, size), 0.0)
    for u in np.flatnonzero((paired == 0) & (lengths > 0)):
        algebra: SupportAlgebra = cache.algebra(supports[u])
        for result, covs in zip(results, parts, strict=True):
            for q, v in algebra.stacked_answer_variances(covs[u], answers).items():
                result[q][u] = np.maximum(v, 0.0)
    cells = np.full((n_units, n_cells), 1e-12)
    at = 0
    for f in fams:
        fc = family_covs[f]
        n = len(fc.child_covs)
        if n:
            cells[np.ix_(np.arange(at, at + n), fc.support)] = np.maximum(
                np.array(fc.child_free).reshape(n, fc.support.size), 1e-12
            )
        at += n
    rows = np.repeat(np.arange(n_units), lengths)
    diag = [
        np.concatenate([np.diag(c) for c in covs]) if n_units else np.zeros(0) for covs in parts
    ]
    cells[rows, cells_of_var] = np.maximum(diag[0], 1e-12)
    results[0]["DETAILED"] = cells
    for result, d in zip(results[1:], diag[1:], strict=True):
        part_cells = np.zeros((n_units, n_cells))
        part_cells[rows, cells_of_var] = np.maximum(d, 0.0)
        result["DETAILED"] = part_cells
    means = _family_means(family_covs, fams, cache, answers, n_cells, zeros)
    pinned = {
        q: np.array([fc.child_pins[i][q] for fc, i in kids]).reshape(n_units, size)
        if kids and kids[0][0].child_pins
        else np.zeros((n_units, size))
        for q, size in ((q, int(v)) for q, v in sizes.items())
    }
    return UnitVariances(results[0], means, results[1], results[2], pinned)


def _family_means(
    family_covs: Mapping[int, FamilyCovariance],
    fams: Sequence[int],
    cache: Any,
    answers: Mapping[str, int],
    n_cells: int,
    zeros: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Per query, ``(units, answer cells)``: Var(D_p,a)/m_a² for each child of a family that can
    hold answer a (m_a of them: not every cell of a is a structural zero of the child; all n
    without ``zeros``), 0 for the others — the parent's answer variances from its covariance on
    its cells P; ``"DETAILED"``: the same per cell. ``zeros``: ``(units, n_cells)`` structural
    zeros of the units, in order."""
    blocks: dict[str, list[np.ndarray]] = {q: [] for q in [*answers, "DETAILED"]}
    at = 0
    for f in fams:
        fc = family_covs[f]
        n = len(fc.child_covs)
        if fc.parent_cov is None or n == 0:
            for q, size in answers.items():
                blocks[q].append(np.zeros((n, size)))
            blocks["DETAILED"].append(np.zeros((n, n_cells)))
            at += n
            continue
        # who can hold each cell of P: children without a structural zero there
        can = np.ones((n, fc.support.size), dtype=bool)
        if zeros is not None:
            can = ~zeros[at : at + n][:, fc.support]
        algebra: SupportAlgebra = cache.algebra(fc.support)
        for q, v in algebra.stacked_answer_variances(fc.parent_cov, answers).items():
            index = algebra.index(q)
            holds = np.zeros((n, answers[q]), dtype=bool)
            rows, cols = np.nonzero(can)
            holds[rows, index[cols]] = True
            m = np.maximum(holds.sum(axis=0), 1)
            blocks[q].append(np.where(holds, np.maximum(v, 0.0) / (m * m), 0.0))
        m_cell = np.maximum(can.sum(axis=0), 1)
        cells = np.zeros((n, n_cells))
        cells[:, fc.support] = np.where(
            can, np.maximum(np.diag(fc.parent_cov), 0.0) / (m_cell * m_cell), 0.0
        )
        blocks["DETAILED"].append(cells)
        at += n
    return {q: np.concatenate(b) if b else np.zeros((0, 0)) for q, b in blocks.items()}
