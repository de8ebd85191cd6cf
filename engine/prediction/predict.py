"""Predicted accuracy of TopDown's published counts, per geolevel × query, before any run
(docs/science.md §7; docs/prediction.md).

:func:`predict_topdown` maps an allocation onto a spine profile the way the engine does
(:mod:`engine.prediction.designs`), computes the exact least-squares error covariance of every level
(:mod:`engine.prediction.least_squares`; on large schemas with a count profile, on the cells each
family populates, :mod:`engine.prediction.support`) and, when the profile carries counts, the
non-negativity and rounding correction (:mod:`engine.prediction.correction`), then says per row
whether it lies in the range where the prediction was validated against runs
(:mod:`engine.prediction.validity`).

Per (geolevel, query) it reports the noisy-measurement σ (docs/science.md §2; ``None`` where the
query is not measured there), the least-squares RMSE, the predicted RMSE and 90% MOE of the
*published* count (``post_processed_rmse``, ``post_processed_moe`` = z·RMSE, z = 1.645 at 90%),
and ``model_holds`` with the reason (``validity``) when it is outside the validated range.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from engine.core.blas_threads import one_blas_thread
from engine.core.errors import ValidationError
from engine.dp.budget import TopDownAllocation
from engine.dp.distributions import geometric_variance
from engine.dp.moe import z_for_confidence
from engine.prediction.algebra import CellAlgebra, Operator, cell_algebra
from engine.prediction.correction import (
    ROUNDING_VARIANCE,
    CellMoments,
    LevelCorrection,
    family_index,
    held_query_correction,
    level_corrections,
    level_moments,
    rounding_pieces,
    sample_families,
)
from engine.prediction.designs import LevelPlan, fits, infer_attributes, plan_levels
from engine.prediction.designs import held_exactly as held_exactly
from engine.prediction.designs import level_budgets as level_budgets
from engine.prediction.root_clipping import NEAREST_ROUNDING_VARIANCE, RootClipping
from engine.prediction.spine import SpineProfile
from engine.prediction.support import FamilyCovariance, FamilyTooLarge
from engine.prediction.support_levels import (
    UnitVariances,
    root_rounding,
    root_term,
    support_variances,
    with_root_term,
)
from engine.prediction.validity import ModelUsed, assess_rows
from engine.schema.marginals import TOTAL, default_rounder_chain, parse_marginal

PLANNER_MAX_UNITS = 2000
"""Geounits per level on which the planner evaluates the non-negativity correction (whole families,
every k-th; the CLI uses all): keeps an edit's recompute interactive (benchmarks/prediction.py)."""

SUPPORT_MIN_CELLS = 64
"""With a count profile, schemas of more cells than this get the least squares modelled on the
cells each parent populates (:mod:`engine.prediction.support`): there most cells of a family are
empty (the 2,016-cell production schema). Smaller schemas (the folded RI schema, 16 cells, where
parents populate nearly every cell) keep the dense model validated in docs/prediction.md."""

RUN_TABLE_MAX_UNITS = 2000
"""Geounits per level on which the app's predicted-vs-measured table of a run evaluates the
correction (whole families, every k-th, as in the planner): without it a run of 1,000,000
persons on the 2,016-cell schema evaluated every block (+6.9 GB, 141 s; docs/topdown.md). The
table and metrics.json state the geounits evaluated per level."""

PLANNER_MAX_FAMILIES = 4
"""Families per level for the support model in the planner (with :data:`PLANNER_MAX_UNITS`): its
first evaluation for new shares costs dense algebra per family; a new total ρ is then a rescale."""

SUPPORT_MAX_FAMILIES = 48
"""Families per level on which the support model is evaluated (every k-th; dense linear algebra
per family, the correction on their units): docs/prediction.md gives the sampling spread."""

DEFAULT_INVARIANTS: Mapping[str, tuple[str, ...]] = {"US": (TOTAL,), "State": (TOTAL,)}
"""Exact queries by level (TDA §5.2: US and state total population), as in the engine."""

DETAILED = "DETAILED"


@dataclass(frozen=True)
class QueryPrediction:
    """Predicted accuracy of one query at one geolevel (all errors in persons per answer cell).

    ``model_holds``: whether the row lies in the range where the prediction was validated against
    repeated runs (:mod:`engine.prediction.validity`); ``validity`` says why not (``None`` when
    it holds)."""

    geolevel: str
    query: str
    cells: int
    units: int
    sigma: float | None
    ls_rmse: float
    post_processed_rmse: float
    post_processed_moe: float
    mean_count: float | None
    model_holds: bool | None
    invariant: bool = False
    validity: str | None = None

    def as_row(self) -> dict[str, Any]:
        return {
            "geolevel": self.geolevel,
            "query": self.query,
            "cells": self.cells,
            "units": self.units,
            "sigma": self.sigma,
            "ls_rmse": self.ls_rmse,
            "post_processed_rmse": self.post_processed_rmse,
            "post_processed_moe": self.post_processed_moe,
            "mean_count": self.mean_count,
            "model_holds": self.model_holds,
            "validity": self.validity,
            "invariant": self.invariant,
        }


@dataclass(frozen=True, eq=False)
class Prediction:
    """Predictions of one allocation on one spine, with what an off-spine query needs."""

    allocation: str
    profile: str
    levels: tuple[str, ...]
    rows: tuple[QueryPrediction, ...]
    confidence: float
    level_covariances: tuple[Operator, ...] = field(repr=False, default=())
    algebra: CellAlgebra | None = field(repr=False, default=None)
    notes: tuple[str, ...] = ()
    spine: SpineProfile | None = field(repr=False, default=None)
    leaf_bias: dict[str, np.ndarray] = field(repr=False, default_factory=dict)
    """Per query, the leaves' predicted mean error per answer cell (all leaves, profile order;
    only when the correction ran on every leaf) — what off-spine entities sum."""
    folded: tuple[str, ...] = ()
    """Allocation levels folded into the spine's root (their published counts are the root's)."""
    evaluated: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per level, (geounits, families) on which the non-negativity correction (and the support
    model) was evaluated — whole families, every k-th (:func:`sample_families`); a level absent
    here had no correction. Compare with the level's ``units`` and its number of parents."""
    model: str = ""
    """The least-squares model the rows rest on (:class:`engine.prediction.validity.ModelUsed`)."""

    def for_level(self, geolevel: str, query: str) -> QueryPrediction | None:
        """The prediction of an allocation level (a folded root level maps to the spine root)."""
        level = self.levels[0] if geolevel in self.folded else geolevel
        try:
            return self.row(level, query)
        except KeyError:
            return None

    def row(self, geolevel: str, query: str) -> QueryPrediction:
        for r in self.rows:
            if r.geolevel == geolevel and r.query == query:
                return r
        raise KeyError((geolevel, query))

    def as_rows(self) -> list[dict[str, Any]]:
        return [r.as_row() for r in self.rows]


@dataclass(frozen=True)
class _Setup:
    """The schema, the reported queries and the spine restricted to the allocation's levels."""

    attrs: tuple[tuple[str, tuple[str, ...]], ...]
    report: tuple[str, ...]
    algebra: CellAlgebra
    spine: SpineProfile
    use_counts: bool
    notes: tuple[str, ...]


@dataclass
class _Support:
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


@one_blas_thread
def predict_topdown(
    allocation: TopDownAllocation,
    profile: SpineProfile,
    *,
    attributes: Sequence[tuple[str, Sequence[str]]] | None = None,
    queries: Sequence[str] | None = None,
    invariants: Mapping[str, Sequence[str]] = DEFAULT_INVARIANTS,
    ls_passes: Sequence[Sequence[str]] | None = None,
    confidence: float = 0.90,
    correct: bool = True,
    max_units: int | None = None,
    max_families: int | None = SUPPORT_MAX_FAMILIES,
    support: bool | None = None,
    root_empty_cells: bool = True,
) -> Prediction:
    """Predicted RMSE and MOE of the published counts of every geolevel × query (module doc).

    A query that a level's measured queries and invariants do not determine (say DETAILED when a
    level measures only TOTAL) gets NaN there and below, with ``model_holds`` False: its published
    answers follow how the solver splits the parent, which no unbiased error model describes.

    ``attributes``: the schema (default: the profile's, else the shipped schema that fits the
    allocation's queries). ``queries``: which to report (default: every query of the allocation,
    plus TOTAL). ``correct``: apply the non-negativity and rounding correction when the profile
    has counts (else the published RMSE is the least-squares one). ``max_units``: evaluate the
    correction on whole families of at most about this many geounits per level (every k-th
    family; ``None``: all) — the planner uses it to stay interactive. ``support``: model the
    least squares on the cells each parent populates (:mod:`engine.prediction.support`;
    default: with a count profile on schemas of more than :data:`SUPPORT_MIN_CELLS` cells), on
    at most ``max_families`` families per level (every k-th; ``None``: all).
    ``root_empty_cells``: with the support model, add the mass the root's non-negative least
    squares lifts into its empty cells (:mod:`engine.prediction.root_clipping`) to the root's
    rows and those of its only-child copies (``False``: the model before that term, a baseline).
    """
    _check_arguments(allocation, max_units, max_families)
    setup = _setup(allocation, profile, attributes, queries, correct)
    plan = plan_levels(
        allocation, setup.spine.levels, setup.algebra, setup.report, invariants, ls_passes
    )
    notes = list(setup.notes)
    state = _support_state(setup, plan, support, max_units, max_families, root_empty_cells, notes)
    z = z_for_confidence(confidence)
    rows: list[QueryPrediction] = []
    leaf_bias: dict[str, np.ndarray] = {}
    root_chain: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    level_rows: list[QueryPrediction] = []
    ratios: dict[str, float] = {}
    for k in range(len(plan.levels)):
        level_rows, ratios = _level_rows(
            allocation, setup, plan, state, k, z, leaf_bias, root_chain, level_rows, ratios
        )
        rows += level_rows
    levels = plan.levels
    rows = assess_rows(
        rows,
        allocation,
        levels,
        state.model,
        setup.spine,
        expected=ModelUsed.SUPPORT
        if setup.algebra.n_cells > SUPPORT_MIN_CELLS
        else ModelUsed.DENSE,
        exact=plan.exact,
    )
    return Prediction(
        allocation=allocation.name,
        profile=setup.spine.name,
        levels=levels,
        rows=tuple(rows),
        confidence=confidence,
        level_covariances=plan.covariances,
        algebra=setup.algebra,
        notes=tuple(notes),
        spine=setup.spine,
        leaf_bias=leaf_bias,
        folded=tuple(lv for lv in allocation.geolevels if lv not in levels),
        evaluated={
            lv: (
                int(state.samples[k].size),
                int(np.unique(family_index(setup.spine.fanouts[k])[state.samples[k]]).size),
            )
            for k, lv in enumerate(levels)
            if state.samples
        },
        model=state.model.value,
    )


def _check_arguments(
    allocation: TopDownAllocation, max_units: int | None, max_families: int | None
) -> None:
    for name, value in (("max_units", max_units), ("max_families", max_families)):
        if value is not None and (isinstance(value, bool) or int(value) < 1):
            raise ValidationError(
                f"{name} must be a whole number ≥ 1 (or None: all); got {value!r}"
            )
    if allocation.universe != "persons":
        raise ValidationError(
            f"allocation {allocation.name!r} is for {allocation.universe}; the prediction covers "
            "person histograms (the persons run)"
        )


def _setup(
    allocation: TopDownAllocation,
    profile: SpineProfile,
    attributes: Sequence[tuple[str, Sequence[str]]] | None,
    queries: Sequence[str] | None,
    correct: bool,
) -> _Setup:
    """Step 1: the schema (the profile's when it fits the queries), the reported queries, the
    block algebra and the profile restricted to the allocation's levels (its root kept)."""
    report = list(queries) if queries is not None else [TOTAL, *allocation.all_queries()]
    report = list(dict.fromkeys(report))
    notes: list[str] = []
    use_counts = correct and profile.counts is not None
    if attributes is None:
        if profile.attributes and fits(profile.attributes, [*allocation.all_queries(), *report]):
            attributes = profile.attributes
        else:
            attributes = infer_attributes(allocation, report)
            if use_counts:
                notes.append(
                    f"the count profile {profile.name!r} is on another schema than the "
                    "allocation's queries, so no non-negativity correction: the published-count "
                    "RMSE shown is the least-squares one (typically an upper bound where counts "
                    "are small); give data on the allocation's schema for the correction"
                )
            use_counts = False
    attrs = tuple((str(a), tuple(str(x) for x in lv)) for a, lv in attributes)
    all_queries = tuple(dict.fromkeys([TOTAL, *allocation.all_queries(), *report, DETAILED]))
    for q in all_queries:
        parse_marginal(q, attrs)
    keep = [lv for lv in profile.levels if lv in allocation.geolevels]
    if not keep or keep[0] != profile.levels[0]:
        keep = [profile.levels[0], *[lv for lv in keep if lv != profile.levels[0]]]
    return _Setup(
        attrs=attrs,
        report=tuple(report),
        algebra=cell_algebra(attrs, all_queries),
        spine=profile.restrict(keep),
        use_counts=use_counts,
        notes=tuple(notes),
    )


def _support_state(
    setup: _Setup,
    plan: LevelPlan,
    support: bool | None,
    max_units: int | None,
    max_families: int | None,
    root_empty_cells: bool,
    notes: list[str],
) -> _Support:
    """Step 2: which least-squares model the correction rests on, the sampled families of every
    level and, for the support model, every sampled family's covariances (root first) and the
    root's lifted empty cells. A family the support model cannot compute exactly (a pass other
    than the last that is not TOTAL alone, on a family of more than
    :data:`engine.prediction.support.GENERAL_PATH_MAX_VARIABLES` variables) makes the prediction
    use the dense model, said in the notes and on every row (:mod:`engine.prediction.validity`)."""
    spine, algebra = setup.spine, setup.algebra
    state = _Support()
    if not setup.use_counts:
        return state
    levels = plan.levels
    state.model = ModelUsed.DENSE
    # levels that copy the root: it and every level below it while each has a single child
    copies = {0}
    for k in range(1, len(levels)):
        if spine.fanouts[k].size != 1 or int(spine.fanouts[k][0]) != 1:
            break
        copies.add(k)
    state.copies_root = frozenset(copies)
    large = algebra.n_cells > SUPPORT_MIN_CELLS
    on = support if support is not None else large
    if on and DETAILED in plan.unidentified[-1]:
        notes.append(
            "a level does not determine the detailed cells, so the least squares is not "
            "modelled on the cells the parents populate (the dense model is used)"
        )
        state.model = ModelUsed.DENSE_UNDETERMINED
        on = False
    elif on:
        state.model = ModelUsed.SUPPORT
    elif large:
        state.model = ModelUsed.DENSE_REQUESTED
    sampled = [
        sample_families(spine.fanouts[k], max_units, max_families if on and k else None)
        for k in range(len(levels))
    ]
    if on:
        try:
            _support_covariances(setup, plan, state, sampled, root_empty_cells, notes)
        except FamilyTooLarge as exc:
            notes.append(
                f"{exc}: too large for the exact support model, so the dense model is used "
                "(it over-states the error where cells are empty; every row says so)"
            )
            state = replace(
                state,
                on=False,
                family_covs=[],
                cache=None,
                root_term=None,
                model=ModelUsed.DENSE_TOO_LARGE,
            )
            sampled = [sample_families(spine.fanouts[k], max_units) for k in range(len(levels))]
    state.samples = sampled
    return state


def _support_covariances(
    setup: _Setup,
    plan: LevelPlan,
    state: _Support,
    sampled: list[np.ndarray],
    root_empty_cells: bool,
    notes: list[str],
) -> None:
    """The support model's family covariances (cached with the profile) and the root term."""
    spine, levels = setup.spine, plan.levels
    families = [np.zeros(1, dtype=np.int64)] + [
        np.unique(family_index(spine.fanouts[k])[sampled[k]]) for k in range(1, len(levels))
    ]
    all_queries = tuple(setup.algebra.queries)
    cache = spine.support_cache(setup.attrs, tuple(dict.fromkeys([*all_queries, *setup.report])))
    _, scale_t, family_covs = cache.family_covariances(spine, plan.designs, families)
    state.on = True
    state.cache = cache
    state.scale_t = scale_t
    state.family_covs = family_covs
    state.level_keys = cache.level_keys(plan.designs, families)
    state.root_cells = np.flatnonzero(spine.root_counts() > 0)
    if not root_empty_cells:
        return
    term = root_term(spine, setup.attrs, plan.designs[0], cache, setup.algebra, setup.report)
    state.root_term = term
    if term.empty_cells:
        copies = ", ".join(levels[k] for k in sorted(state.copies_root) if k)
        notes.append(
            f"{levels[0]}{f' (and {copies}, its copy)' if copies else ''}: the least "
            f"squares of the root is expected to lift ~{term.lifted_mass:,.0f} persons into its "
            f"{term.empty_cells:,} empty cells, taken from the populated ones; "
            "included (validated at 0.88–1.24× of the measured error, except marginals "
            "of two answer cells at large ρ, over-predicted up to 2.1×: "
            "docs/prediction.md)"
        )


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
    setup: _Setup,
    plan: LevelPlan,
    state: _Support,
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
    setup: _Setup, state: _Support, k: int, sample: np.ndarray, wanted: Sequence[str]
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


def _level_rows(
    allocation: TopDownAllocation,
    setup: _Setup,
    plan: LevelPlan,
    state: _Support,
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
    for q in held:
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
    setup: _Setup, state: _Support, inputs: _LevelInputs, k: int, q: str
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
