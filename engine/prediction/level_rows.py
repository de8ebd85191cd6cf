"""The rows of one level of a published-count prediction (docs/prediction.md §2; docs/science.md
§7): its least-squares variances split into the part non-negativity changes (the level's own
error: clipped cell by cell, :mod:`engine.prediction.correction`) and the *conserved* part it
inherits through exact constraints — its share of the parent's published error (the children
sum to the parent) and the error of an answer held from an earlier pass (a TOTAL estimated alone
first) — which non-negativity only moves between cells and children; then the corrected RMSE,
σ and mean count of every query (:func:`level_rows`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from engine.dp.budget import TopDownAllocation
from engine.dp.distributions import geometric_variance
from engine.prediction.algebra import CellAlgebra
from engine.prediction.correction import (
    CellMoments,
    LevelCorrection,
    family_index,
    held_query_correction,
    level_corrections,
    level_moments,
)
from engine.prediction.designs import LevelPlan
from engine.prediction.root_clipping import NEAREST_ROUNDING_VARIANCE, RootClipping
from engine.prediction.rounding import ROUNDING_VARIANCE, rounding_pieces
from engine.prediction.rows import QueryPrediction
from engine.prediction.spine import SpineProfile
from engine.prediction.support import FamilyCovariance
from engine.prediction.support_levels import (
    UnitVariances,
    root_rounding,
    support_variances,
    with_root_term,
)
from engine.prediction.validity import ModelUsed
from engine.schema.marginals import TOTAL, default_rounder_chain

DETAILED = "DETAILED"


@dataclass(frozen=True)
class Setup:
    """The schema, the reported queries and the spine restricted to the allocation's levels."""

    attrs: tuple[tuple[str, tuple[str, ...]], ...]
    report: tuple[str, ...]
    algebra: CellAlgebra
    spine: SpineProfile
    use_counts: bool
    notes: tuple[str, ...]


@dataclass
class SupportState:
    """The support model's state for one prediction (empty when the dense model is used)."""

    on: bool = False
    samples: list[np.ndarray] = field(default_factory=list)
    family_covs: list[dict[int, FamilyCovariance]] = field(default_factory=list)
    cache: Any = None
    scale_t: float = 1.0
    level_keys: list[tuple[tuple[object, ...], float]] = field(default_factory=list)
    root_term: RootClipping | None = None
    root_cells: np.ndarray | None = None
    copies_root: frozenset[int] = frozenset({0})
    model: ModelUsed = ModelUsed.LEAST_SQUARES_ONLY


@dataclass
class _LevelInputs:
    """What the correction of one level needs: the sampled units' counts on the level's cells,
    per query the least-squares variance of each unit's answers split into its *own* part (which
    the cells' clipping changes) and its *conserved* part (inherited from the parent's published
    error, or from an answer held from an earlier pass, which non-negativity only moves between
    cells and children), the own cell variances and the clipped-cell moments."""

    per_level: dict[str, np.ndarray]
    per_level_held: dict[str, np.ndarray]
    own: dict[str, np.ndarray] = field(default_factory=dict)
    conserved: dict[str, np.ndarray] = field(default_factory=dict)
    total: dict[str, np.ndarray] = field(default_factory=dict)
    """Per query, each sampled unit's least-squares variance (all parts)."""
    pinned: dict[str, np.ndarray] | None = None
    """Support model: per query, the freed variance of each unit's empty cells reaching each
    answer (:class:`engine.prediction.support_levels.UnitVariances`)."""
    parent_part: dict[str, np.ndarray] = field(default_factory=dict)
    """Per query, the conserved share of the parent's published error (scaled)."""
    held_part: dict[str, np.ndarray] = field(default_factory=dict)
    """Per query, the linear variance from answers held from an earlier pass (unscaled)."""
    ls_mean: dict[str, float] = field(default_factory=dict)
    sample_factor: dict[str, float] = field(default_factory=dict)
    """Per query, the dense model's mean least-squares variance over all of the level's units
    divided by its mean over the sampled ones: the ratio estimator that carries the sample's
    level mean to the whole level (1 when every unit is evaluated)."""
    moments: CellMoments | None = None
    unit_counts: np.ndarray | None = None
    level_cells: np.ndarray | None = None
    cell_var: np.ndarray | None = None
    support_mask: np.ndarray | None = None


def _level_inputs(
    setup: Setup,
    plan: LevelPlan,
    state: SupportState,
    k: int,
    parent_ratio: Mapping[str, float],
) -> _LevelInputs:
    """Step 3a: per query the least-squares variances (dense model: the level's table and the
    path coefficients; support model: per unit and answer) split into own and conserved parts
    (the parent's share scaled by ``parent_ratio``, published / least-squares MSE of the parent
    level per query; the held answers' as is, rescaled by the caller once their own correction
    is known), and, with counts, the sampled units' counts and clipped-cell moments of their
    own error."""
    spine, algebra = setup.spine, setup.algebra
    wanted = list(dict.fromkeys([*setup.report, DETAILED]))
    table = np.array(
        [algebra.mean_cell_variances(plan.covariances[j], wanted) for j in range(k + 1)]
    )
    held_row = algebra.mean_cell_variances(plan.held_covariances[k], wanted)
    inputs = _LevelInputs(
        per_level={q: table[:, i] for i, q in enumerate(wanted)},
        per_level_held={q: held_row[i] for i, q in enumerate(wanted)},
    )
    coefs = spine.coefficients[k]
    for q in wanted:
        inputs.ls_mean[q] = float(np.clip(coefs.mean(axis=0) @ inputs.per_level[q], 0.0, None))
    if not setup.use_counts or not state.samples:
        return inputs
    sample = state.samples[k]
    level_cells = state.root_cells if state.root_cells is not None else np.arange(algebra.n_cells)
    if state.on and k:
        # A cell the family's parent does not populate has no variable in any child
        # (no count, no error: every term of the correction is 0 there): left out.
        parents = np.unique(family_index(spine.fanouts[k])[sample])
        level_cells = np.unique(
            np.concatenate([state.family_covs[k][int(f)].support for f in parents])
        )
    unit_counts = spine.unit_counts(k, sample, level_cells)
    if sample.size < spine.n_units(k):
        for q in wanted:
            whole = float(coefs.mean(axis=0) @ inputs.per_level[q])
            part = float(coefs[sample].mean(axis=0) @ inputs.per_level[q])
            inputs.sample_factor[q] = whole / part if whole > 0 and part > 0 else 1.0
    if state.on:
        parts = _support_parts(setup, state, k, sample, wanted)
        total, held = parts.total, parts.held
        inputs.pinned = parts.pinned
        # The parent's error a child carries: a deficit only the children populating a cell can
        # absorb (the least squares' share on their own cells), an excess spreads over every
        # child (the empty ones' cells are variables too): the family mean, Var(D_p)/n². Half
        # of each (the parent's error is as often above as below).
        share = {q: parts.share[q] for q in wanted}
        parent = {q: 0.5 * (parts.parent[q] + parts.share[q]) for q in wanted}
        for q in wanted:
            inputs.ls_mean[q] = float(total[q].mean())
        # Cells the root does not populate carry no error anywhere: left out. Structural
        # zeros of the unit frame have no variable in the engine: no clipped error.
        cells_total = total[DETAILED][:, level_cells]
        cells_kept = share[DETAILED][:, level_cells] + held[DETAILED][:, level_cells]
        cell_var = np.maximum(cells_total - cells_kept, 1e-12)
        zeros = spine.zero_cells(k, sample, setup.attrs, cells=level_cells)
        if zeros is not None:
            cell_var = np.where(zeros, 1e-12, cell_var)
        inputs.support_mask = unit_counts > 0
    else:
        units = coefs[sample]
        total = {q: np.clip(units @ inputs.per_level[q], 0.0, None) for q in wanted}
        parent = {q: np.clip(units[:, :k] @ inputs.per_level[q][:k], 0.0, None) for q in wanted}
        share = parent
        held = {q: units[:, k] * inputs.per_level_held[q] for q in wanted}
        cell_var = np.maximum(total[DETAILED] - parent[DETAILED] - held[DETAILED], 1e-12)
    inputs.total = total
    for q in wanted:
        inputs.own[q] = np.maximum(total[q] - share[q] - held[q], 0.0)
        inputs.parent_part[q] = parent_ratio.get(q, 1.0) * parent[q]
        inputs.held_part[q] = held[q]
        inputs.conserved[q] = inputs.parent_part[q] + held[q]
    inputs.moments, _ = level_moments(unit_counts, cell_var, spine.fanouts[k], sample, root=k == 0)
    inputs.unit_counts, inputs.level_cells, inputs.cell_var = unit_counts, level_cells, cell_var
    return inputs


def _support_parts(
    setup: Setup, state: SupportState, k: int, sample: np.ndarray, wanted: Sequence[str]
) -> UnitVariances:
    """The support model's per unit × answer variances of level k's sampled units — computed
    for the designs of levels 0..k normalised by their scale t_k (cached per level: an edit of
    a lower level's shares reuses it), then divided by t_k."""
    algebra, spine = setup.algebra, setup.spine
    level_key, t_k = state.level_keys[k]
    scale_t = state.scale_t
    family_of_unit = family_index(spine.fanouts[k])[sample] if k else np.zeros(1, dtype=np.int64)
    normalised: UnitVariances = state.cache.derived_value(
        (level_key, k, tuple(wanted), sample.tobytes()),
        lambda: support_variances(
            state.family_covs[k],
            family_of_unit,
            state.cache,
            {q: algebra.answer_cells(q) for q in wanted},
            algebra.n_cells,
            spine.zero_cells(k, sample, setup.attrs),
        ).scaled(t_k / scale_t),
    )
    return normalised.scaled(1.0 / t_k)


def _ratio(corr: LevelCorrection, ls_var: float) -> float:
    """Published / least-squares MSE of one level's query on its populated answer cells (else
    over all; 1 where not finite): what the share of that level's error its children carry is
    scaled by (the parent's published error already respects non-negativity)."""
    if corr.populated_ratio is not None and math.isfinite(corr.populated_ratio):
        return corr.populated_ratio
    pub = corr.rmse**2
    ok = math.isfinite(ls_var) and math.isfinite(pub) and ls_var > 0
    return pub / ls_var if ok else 1.0


def level_rows(
    allocation: TopDownAllocation,
    setup: Setup,
    plan: LevelPlan,
    state: SupportState,
    k: int,
    z: float,
    leaf_bias: dict[str, np.ndarray],
    root_chain: dict[str, tuple[np.ndarray, np.ndarray]],
    parent_rows: Sequence[QueryPrediction],
    parent_ratio: Mapping[str, float],
) -> tuple[list[QueryPrediction], dict[str, float]]:
    """Step 3: the rows of level k — least-squares variance, corrected RMSE, σ, mean count. A
    level that copies the root (every level above it a single child) publishes the root's
    counts: its rows are the root's."""
    spine, algebra = setup.spine, setup.algebra
    lv = plan.levels[k]
    units = spine.n_units(k)
    if k and k in state.copies_root and parent_rows:
        return [replace(r, geolevel=lv, units=units) for r in parent_rows], dict(parent_ratio)
    exact, unidentified, held_early = plan.exact[lv], plan.unidentified[k], plan.held_early[k]
    held = [q for q in setup.report if q in held_early and q not in exact and q not in unidentified]
    # the held answers' published / linear ratio (a TOTAL estimated alone first), from their
    # own correction: water filling on the answers, exact for a TOTAL-only pass
    held_ratio = 1.0
    inputs = _level_inputs(setup, plan, state, k, parent_ratio)
    held_corr: dict[str, LevelCorrection] = {}
    for q in held if inputs.unit_counts is not None else ():
        held_corr[q] = _held_correction(setup, state, inputs, k, q)
    if held_corr:
        # per held query: its corrected MSE less the parent's share, against its own linear
        # variance (the error of the pass that estimated it)
        published = sum(
            c.rmse**2 - float(np.mean(inputs.parent_part[q])) for q, c in held_corr.items()
        )
        linear = sum(float(np.mean(inputs.own[q] + inputs.held_part[q])) for q in held_corr)
        held_ratio = max(published, 0.0) / linear if linear > 0 else 1.0
    # A held TOTAL's published error: an excess spreads as the least squares splits it, a
    # deficit leaves the cells by water filling on their counts (only populated cells can
    # give): half each (correction.level_corrections, held_total).
    split = 0.5 if TOTAL in held else 1.0
    for q in inputs.conserved:
        inputs.conserved[q] = inputs.parent_part[q] + split * held_ratio * inputs.held_part[q]
    held_total = None
    if TOTAL in held and inputs.held_part:
        total_held = inputs.held_part[TOTAL]
        total_held = total_held[:, 0] if total_held.ndim == 2 else total_held
        held_total = held_ratio * total_held
    sample = state.samples[k] if state.samples else None
    if k == 0 and state.root_term is not None and inputs.moments is not None:
        assert state.root_cells is not None
        root_chain.update(
            root_rounding(
                state.root_term,
                inputs.moments.p[0],
                state.root_cells,
                setup.attrs,
                setup.report,
                exact,
            )
        )
    batch: dict[str, LevelCorrection] = {}
    if inputs.moments is not None and inputs.unit_counts is not None:
        # every query the correction sums over cells, at once (correction.level_corrections)
        summed = [
            q
            for q in setup.report
            if q not in exact and q not in unidentified and q not in held_early
        ]
        batch = level_corrections(
            inputs.moments,
            inputs.unit_counts,
            {q: inputs.own[q] for q in summed},
            inputs.cell_var,  # type: ignore[arg-type]
            setup.attrs,
            support=inputs.support_mask,
            cells=inputs.level_cells,
            conserved={q: inputs.conserved[q] for q in summed},
            linear_total={q: inputs.total[q] for q in summed},
            held_total=held_total,
            pinned_outside=None if inputs.pinned is None else {q: inputs.pinned[q] for q in summed},
            # the engine's controlled rounding along its chain of marginals: nearest rounding
            # at the root, rounding constrained by the parent's integers below it
            rounding=rounding_pieces(
                setup.attrs,
                default_rounder_chain(setup.attrs),
                summed,
                inputs.level_cells,
                exact=exact,
                variance=NEAREST_ROUNDING_VARIANCE if k == 0 else ROUNDING_VARIANCE,
            ),
            # per-unit biases: the leaves' when every leaf is evaluated (off-spine
            # entities), and the root's copies' (the root term's cross product)
            unit_bias=(k == len(plan.levels) - 1 and sample is not None and sample.size == units)
            or k in state.copies_root,
        )
    rows = []
    ratios: dict[str, float] = {}
    for q in setup.report:
        ls_var = inputs.ls_mean[q]
        is_exact = q in exact
        b = plan.budgets[lv].get(q, 0.0)
        sigma: float | None = None
        if b > 0 and not is_exact:
            sigma = math.sqrt(
                geometric_variance(b / 2.0) if allocation.mechanism == "puredp" else 1.0 / b
            )
        if is_exact:
            corr = LevelCorrection(0.0, None, True)
            ls_var = 0.0
        elif q in unidentified:
            corr = LevelCorrection(math.nan, None, False)
            ls_var = math.nan
        elif inputs.moments is None or inputs.unit_counts is None:
            corr = LevelCorrection(math.sqrt(ls_var), None, None)
        elif q in held_early:
            corr = held_corr[q]
        else:
            corr = batch[q]
        ratios[q] = _ratio(corr, ls_var)
        factor = inputs.sample_factor.get(q, 1.0)
        if factor != 1.0 and not is_exact and q not in unidentified:
            ls_var *= factor
            corr = replace(corr, rmse=corr.rmse * math.sqrt(factor))
        term = state.root_term
        if term is not None and k == 0 and q in term.bias and math.isfinite(corr.rmse):
            chain, by_cell = root_chain[q]
            corr = with_root_term(corr, term, q, chain - by_cell)
            # the mass the root lifts into its empty cells is published: its children share
            # it like the rest of the root's error (over all answers: the lifted cells are
            # empty ones)
            ratios[q] = _ratio(replace(corr, populated_ratio=None), ls_var)
        if (
            k == len(plan.levels) - 1
            and corr.unit_bias is not None
            and corr.unit_bias.shape[0] == units
        ):
            leaf_bias[q] = corr.unit_bias
        rows.append(
            QueryPrediction(
                geolevel=lv,
                query=q,
                cells=algebra.answer_cells(q),
                units=units,
                sigma=sigma,
                ls_rmse=math.sqrt(ls_var),
                post_processed_rmse=corr.rmse,
                post_processed_moe=z * corr.rmse,
                mean_count=corr.mean_count,
                model_holds=corr.model_holds,
                invariant=is_exact,
            )
        )
    return rows, ratios


def _held_correction(
    setup: Setup, state: SupportState, inputs: _LevelInputs, k: int, q: str
) -> LevelCorrection:
    """The correction of a query held from an earlier pass: water filling on its own answers
    (its own error), its share of the parent's published error added as is."""
    assert inputs.unit_counts is not None and state.samples
    # the held answer's own error is its held part (it was estimated in that pass)
    return held_query_correction(
        inputs.unit_counts,
        inputs.own[q] + inputs.held_part[q],
        setup.spine.fanouts[k],
        state.samples[k],
        setup.attrs,
        q,
        root=k == 0,
        cells=inputs.level_cells,
        conserved=inputs.parent_part[q],
        linear_total=inputs.total[q],
    )
