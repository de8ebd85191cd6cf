"""Predicted accuracy of TopDown's published counts, per geolevel × query, before any run (SPEC §7).

:func:`predict_topdown` maps an allocation onto a spine profile the way the engine does (levels of
the allocation present in the profile; an allocation root the data lack folded into its single
child, SPN Algorithm 3; invariants held exactly at their level and every level above, TDA §5.2),
computes the exact least-squares error covariance of every level
(:mod:`engine.prediction.least_squares`) and, when the profile carries counts, the
non-negativity and rounding correction (:mod:`engine.prediction.correction`).

Per (geolevel, query) it reports the noisy-measurement σ (SPEC §2; ``None`` where the query is not
measured there), the least-squares RMSE, and the predicted RMSE and 90% MOE of the *published*
count (``post_processed_rmse``, ``post_processed_moe`` = z·RMSE, z = 1.645 at 90%).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from engine.core.blas_threads import one_blas_thread
from engine.core.errors import ValidationError
from engine.dp.budget import TopDownAllocation
from engine.dp.distributions import discrete_gaussian_variance, geometric_variance
from engine.dp.moe import z_for_confidence
from engine.prediction.algebra import CellAlgebra, Operator, cell_algebra
from engine.prediction.correction import (
    ROUNDING_VARIANCE,
    LevelCorrection,
    family_index,
    held_query_correction,
    level_corrections,
    level_moments,
    sample_families,
)
from engine.prediction.least_squares import LevelDesign, engine_passes, level_covariance
from engine.prediction.root_clipping import RootClipping, chain_rounding, root_clipping
from engine.prediction.spine import SpineProfile
from engine.prediction.support import FamilyCovariance, SupportAlgebra, design_key
from engine.schema.marginals import (
    SCHEMA_ATTRIBUTES,
    TOTAL,
    cell_index,
    default_rounder_chain,
    parse_marginal,
)

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

SUPPORT_MAX_VARIABLES = 4000
"""Above this many variables in one family (children's non-zero cells; ~2 s of dense algebra, 128 MB
per matrix) the support model is not used and the prediction says so (the dense model instead)."""

SMALL_UNIT_CELLS = 24
"""Units of at most this many populated cells have their answer variances summed over their
covariance entries all at once (:func:`_support_variances`); larger ones one by one."""

SUPPORT_MAX_FAMILIES = 48
"""Families per level on which the support model is evaluated (every k-th; dense linear algebra
per family, the correction on their units): docs/prediction.md gives the sampling spread."""

DEFAULT_INVARIANTS: Mapping[str, tuple[str, ...]] = {"US": (TOTAL,), "State": (TOTAL,)}
"""Exact queries by level (TDA §5.2: US and state total population), as in the engine."""


@dataclass(frozen=True)
class QueryPrediction:
    """Predicted accuracy of one query at one geolevel (all errors in persons per answer cell)."""

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


def infer_attributes(
    allocation: TopDownAllocation, extra_queries: Sequence[str] = ()
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The shipped schema whose attributes cover every query of the allocation."""
    names = [*allocation.all_queries(), *extra_queries]
    for attributes in SCHEMA_ATTRIBUTES.values():
        try:
            for q in names:
                parse_marginal(q, attributes)
        except ValidationError:
            continue
        return attributes
    raise ValidationError(
        f"allocation {allocation.name!r}: its queries ({', '.join(names)}) fit none of the shipped "
        f"schemas ({', '.join(SCHEMA_ATTRIBUTES)}); give the data (--data) to predict on its schema"
    )


def _fits(attributes: Sequence[tuple[str, Sequence[str]]], queries: Sequence[str]) -> bool:
    try:
        for q in queries:
            parse_marginal(q, attributes)
    except ValidationError:
        return False
    return True


def level_budgets(
    allocation: TopDownAllocation, levels: Sequence[str]
) -> dict[str, dict[str, float]]:
    """Per spine level, ρ_q (ε_q for pure DP) of each measured query; an allocation root missing
    from the spine whose child is the spine's root is folded into it (SPN Algorithm 3), as the
    engine's ``node_query_budget`` does."""
    alloc_levels = tuple(allocation.geolevels)
    missing = [lv for lv in levels if lv not in alloc_levels]
    if missing:
        raise ValidationError(
            f"allocation {allocation.name!r} has no share for level(s) {', '.join(missing)}; "
            f"its levels are {', '.join(alloc_levels)}"
        )
    sources: dict[str, list[str]] = {lv: [lv] for lv in levels}
    for lv in alloc_levels:
        if lv in levels:
            continue
        if lv == alloc_levels[0] and len(alloc_levels) > 1 and alloc_levels[1] == levels[0]:
            sources[levels[0]].insert(0, lv)
            continue
        raise ValidationError(
            f"allocation {allocation.name!r} has level {lv!r}, which the spine lacks (spine "
            f"levels: {', '.join(levels)}); only a root level with a single child can be bypassed — "
            "predict on data that has that level (--data)"
        )
    out: dict[str, dict[str, float]] = {}
    for lv in levels:
        # The merged root takes both level shares, measured with the bypassed (first) level's
        # query proportions (SPN §5), exactly as engine/topdown/measure.node_query_budget does.
        owner = sources[lv][0]
        share = sum((allocation.level_shares[s] for s in sources[lv]), Fraction(0))
        out[lv] = {
            q: float(allocation.rho * share * allocation.query_share(owner, q))
            for q in allocation.queries(owner)
        }
    return out


def held_exactly(
    levels: Sequence[str], invariants: Mapping[str, Sequence[str]]
) -> dict[str, tuple[str, ...]]:
    """Invariant queries of each level: those named for it and for any level below it."""
    out: dict[str, tuple[str, ...]] = {}
    for k, lv in enumerate(levels):
        names: dict[str, None] = {}
        for below in levels[k:]:
            for q in invariants.get(below, ()):
                names.setdefault(q, None)
        out[lv] = tuple(names)
    return out


def _design(
    allocation: TopDownAllocation,
    budgets: Mapping[str, float],
    exact: Sequence[str],
    single: bool,
    ls_passes: Sequence[Sequence[str]] | None,
) -> LevelDesign:
    weight: dict[str, float] = {}
    variance: dict[str, float] = {}
    for q, b in budgets.items():
        if q in exact or b <= 0:
            continue
        if allocation.mechanism == "puredp":
            z = b / 2.0
            weight[q] = z * z / 2.0
            variance[q] = geometric_variance(z)
        else:
            weight[q] = b
            variance[q] = discrete_gaussian_variance(1.0 / b)
    measured = list(weight)
    return LevelDesign(
        weight=weight,
        noise_variance=variance,
        invariants=tuple(exact),
        passes=engine_passes(measured, single=single, custom=ls_passes),
    )


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
    report = list(queries) if queries is not None else [TOTAL, *allocation.all_queries()]
    report = list(dict.fromkeys(report))
    notes: list[str] = []
    use_counts = correct and profile.counts is not None
    if attributes is None:
        if profile.attributes and _fits(profile.attributes, [*allocation.all_queries(), *report]):
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
    all_queries = tuple(dict.fromkeys([TOTAL, *allocation.all_queries(), *report, "DETAILED"]))
    for q in all_queries:
        parse_marginal(q, attrs)
    keep = [lv for lv in profile.levels if lv in allocation.geolevels]
    if not keep or keep[0] != profile.levels[0]:
        keep = [profile.levels[0], *[lv for lv in keep if lv != profile.levels[0]]]
    spine = profile.restrict(keep)
    levels = spine.levels
    budgets = level_budgets(allocation, levels)
    exact = held_exactly(levels, invariants)
    algebra = cell_algebra(attrs, tuple(all_queries))
    covariances: list[Operator] = []
    designs: list[LevelDesign] = []
    held_early: list[set[str]] = []
    unidentified: list[set[str]] = []
    for k, lv in enumerate(levels):
        single = k == 0 or k == len(levels) - 1
        design = _design(allocation, budgets[lv], exact[lv], single, ls_passes)
        if not design.passes and k == 0:
            raise ValidationError(
                f"the root level {lv} has no measured query: give it a positive share, or its "
                "estimate has nothing to start from"
            )
        designs.append(design)
        covariances.append(level_covariance(algebra, design))
        held_early.append({q for p in design.passes[:-1] for q in p})
        # A query the level's measurements and invariants do not determine follows the solver's
        # split of the parent (no unbiased error model): no prediction there or below.
        known = [*design.invariants, *(q for p in design.passes for q in p)]
        above = unidentified[-1] if unidentified else set()
        unidentified.append(above | (set(report) - algebra.determined(known, report)))
    coefs = spine.coefficients
    z = z_for_confidence(confidence)
    counts = spine.counts if use_counts else None
    rows: list[QueryPrediction] = []
    leaf_bias: dict[str, np.ndarray] = {}
    detailed = "DETAILED"
    samples: list[np.ndarray] = []
    family_covs: list[dict[int, FamilyCovariance]] = []
    cache = None
    kept = np.arange(algebra.n_cells)
    root_term: RootClipping | None = None
    # per query: the root's rounding under the engine's controlled rounding, and what the
    # cell-by-cell rule gave its populated cells (replaced at the root; 0 at its copies)
    root_rounding: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    # levels that copy the root: it and every level below it while each has a single child
    copies_root = {0}
    for k in range(1, len(levels)):
        if spine.fanouts[k].size != 1 or int(spine.fanouts[k][0]) != 1:
            break
        copies_root.add(k)
    on_support = counts is not None and (
        support if support is not None else algebra.n_cells > SUPPORT_MIN_CELLS
    )
    if on_support and counts is not None:
        largest = spine.largest_family
        if largest > SUPPORT_MAX_VARIABLES:
            notes.append(
                f"a family of the spine populates {largest:,} cells (more than "
                f"{SUPPORT_MAX_VARIABLES:,}), too many for the dense algebra of the support model: "
                "the dense model is used, which over-states the error where cells are empty"
            )
            on_support = False
    if on_support and detailed in unidentified[-1]:
        notes.append(
            "a level does not determine the detailed cells, so the least squares is not "
            "modelled on the cells the parents populate (the dense model is used)"
        )
        on_support = False
    if counts is not None:
        samples = [
            sample_families(spine.fanouts[k], max_units, max_families if on_support and k else None)
            for k in range(len(levels))
        ]
    if on_support and counts is not None:
        families = [np.zeros(1, dtype=np.int64)] + [
            np.unique(family_index(spine.fanouts[k])[samples[k]]) for k in range(1, len(levels))
        ]
        cache = spine.support_cache(attrs, tuple(dict.fromkeys([*all_queries, *report])))
        _, scale_t, family_covs = cache.family_covariances(counts, spine.fanouts, designs, families)
        level_keys = cache.level_keys(designs, families)
        kept = np.flatnonzero(counts[0][0] > 0)
        if root_empty_cells:
            root_term = _root_term(spine, attrs, designs[0], cache, algebra, tuple(report))
            if root_term.empty_cells:
                copies = ", ".join(levels[k] for k in sorted(copies_root) if k)
                notes.append(
                    f"{levels[0]}{f' (and {copies}, its copy)' if copies else ''}: the least "
                    f"squares of the root is expected to lift ~{root_term.lifted_mass:,.0f} persons into its "
                    f"{root_term.empty_cells:,} empty cells, taken from the populated ones; "
                    "included (validated at 0.88–1.24× of the measured error, except marginals "
                    "of two answer cells at large ρ, over-predicted up to 2.1×: "
                    "docs/prediction.md)"
                )
    for k, lv in enumerate(levels):
        mean_coef = coefs[k].mean(axis=0)
        units = int(coefs[k].shape[0])
        wanted = list(dict.fromkeys([*report, detailed]))
        table = np.array(
            [algebra.mean_cell_variances(covariances[j], wanted) for j in range(k + 1)]
        )
        per_level = {q: table[:, i] for i, q in enumerate(wanted)}
        moments = None
        support_vars: dict[str, np.ndarray] = {}
        divisor = 1.0  # the support variances are support_vars / divisor
        support_mask = None
        if counts is not None:
            sample = samples[k]
            level_cells = kept
            if cache is not None and k:
                # A cell the family's parent does not populate has no variable in any child
                # (no count, no error: every term of the correction is 0 there): left out.
                parents = np.unique(family_index(spine.fanouts[k])[sample])
                level_cells = np.unique(
                    np.concatenate([family_covs[k][int(f)].support for f in parents])
                )
            unit_counts = counts[k][np.ix_(sample, level_cells)]
            if cache is not None:
                # computed for the designs of levels 0..k normalised by their scale t_k (cached
                # per level: an edit of a lower level's shares reuses it), then divided by t_k
                level_key, t_k = level_keys[k]
                normalised = cache.derived_value(
                    (level_key, k, tuple(wanted), sample.tobytes()),
                    lambda k=k, sample=sample, wanted=wanted, t_k=t_k: {
                        q: v * (t_k / scale_t) if t_k != scale_t else v
                        for q, v in _support_variances(
                            family_covs[k],
                            family_index(spine.fanouts[k])[sample]
                            if k
                            else np.zeros(1, dtype=np.int64),
                            cache,
                            {q: algebra.answer_cells(q) for q in wanted},
                            algebra.n_cells,
                        ).items()
                    },
                )
                support_vars, divisor = normalised, t_k
                # Cells the root does not populate carry no error anywhere: left out. Structural
                # zeros of the unit frame have no variable in the engine: no clipped error.
                cell_var = support_vars[detailed][:, level_cells] / t_k
                zeros = spine.zero_cells(k, sample, attrs, cells=level_cells)
                if zeros is not None:
                    cell_var = np.where(zeros, 1e-12, cell_var)
                support_mask = unit_counts > 0
            else:
                cell_var = np.clip(coefs[k][sample] @ per_level[detailed], 0.0, None)
            moments, _ = level_moments(unit_counts, cell_var, spine.fanouts[k], sample, root=k == 0)
            if k == 0 and root_term is not None:
                root_rounding = _root_rounding(
                    root_term, moments.p[0], kept, attrs, report, exact[levels[0]]
                )
        batch: dict[str, LevelCorrection] = {}
        if moments is not None and counts is not None:
            # every query the correction sums over cells, at once (correction.level_corrections)
            summed = [
                q
                for q in report
                if q not in exact[lv] and q not in unidentified[k] and q not in held_early[k]
            ]
            batch = level_corrections(
                moments,
                unit_counts,
                {
                    q: _unit_variance(support_vars.get(q), coefs[k][sample] @ per_level[q])
                    for q in summed
                },
                cell_var,
                attrs,
                support=support_mask,
                cells=level_cells,
                linear_divisor=divisor,
                # per-unit biases: the leaves' when every leaf is evaluated (off-spine
                # entities), and the root's copies' (the root term's cross product)
                unit_bias=(k == len(levels) - 1 and sample.size == units) or k in copies_root,
            )
        for q in report:
            ls_var = float(np.clip(mean_coef @ per_level[q], 0.0, None))
            if q in support_vars:
                ls_var = float(support_vars[q].mean()) / divisor
            unit_var = support_vars.get(q)
            if unit_var is not None:
                unit_var = unit_var / divisor
            is_exact = q in exact[lv]
            b = budgets[lv].get(q, 0.0)
            sigma: float | None = None
            if b > 0 and not is_exact:
                sigma = math.sqrt(
                    geometric_variance(b / 2.0) if allocation.mechanism == "puredp" else 1.0 / b
                )
            if is_exact:
                corr = LevelCorrection(0.0, None, True)
                ls_var = 0.0
            elif q in unidentified[k]:
                corr = LevelCorrection(math.nan, None, False)
                ls_var = math.nan
            elif moments is None or counts is None:
                corr = LevelCorrection(math.sqrt(ls_var), None, None)
            elif q in held_early[k]:
                corr = held_query_correction(
                    unit_counts,
                    _unit_variance(unit_var, coefs[k][sample] @ per_level[q]),
                    spine.fanouts[k],
                    sample,
                    attrs,
                    q,
                    root=k == 0,
                    cells=level_cells,
                )
            else:
                corr = batch[q]
            if (
                root_term is not None
                and k in copies_root
                and q in root_term.bias
                and math.isfinite(corr.rmse)
            ):
                chain, by_cell = root_rounding[q]
                corr = _with_root_term(corr, root_term, q, chain - (by_cell if k == 0 else 0.0))
            if (
                k == len(levels) - 1
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
    return Prediction(
        allocation=allocation.name,
        profile=spine.name,
        levels=levels,
        rows=tuple(rows),
        confidence=confidence,
        level_covariances=tuple(covariances),
        algebra=algebra,
        notes=tuple(notes),
        spine=spine,
        leaf_bias=leaf_bias,
        folded=tuple(lv for lv in allocation.geolevels if lv not in levels),
        evaluated={
            lv: (
                int(samples[k].size),
                int(np.unique(family_index(spine.fanouts[k])[samples[k]]).size),
            )
            for k, lv in enumerate(levels)
            if samples
        },
    )


def _root_term(
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
    counts = spine.counts[0][0] if spine.counts is not None else np.zeros(algebra.n_cells)
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


def _root_rounding(
    term: RootClipping,
    p_populated: np.ndarray,
    kept: np.ndarray,
    attrs: tuple[tuple[str, tuple[str, ...]], ...],
    queries: Sequence[str],
    exact: Sequence[str],
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per query, per answer: the root's rounding variance under the engine's controlled
    rounding (:func:`engine.prediction.root_clipping.chain_rounding`; populated cells
    non-integral with their clipping probability, empty variables with their lift's) and the
    cell-by-cell rounding the correction gave the populated cells (ROUNDING_VARIANCE Σ p_i);
    queries coarsening the root's invariants ``exact`` are integers: no rounding."""
    n_cells = int(np.prod([len(lv) for _, lv in attrs]))
    p_cells = np.zeros(n_cells)
    p_cells[kept] = p_populated
    p_cells[term.empty] = term.lifted
    chain = chain_rounding(attrs, default_rounder_chain(attrs), p_cells, queries, exact)
    out = {}
    for q in queries:
        parse = parse_marginal(q, attrs)
        idx = cell_index(parse, attrs)
        by_cell = ROUNDING_VARIANCE * np.bincount(
            idx[kept], weights=p_populated, minlength=chain[q].size
        )
        out[q] = (chain[q], by_cell)
    return out


def _with_root_term(
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


def _unit_variance(support_var: np.ndarray | None, dense: np.ndarray) -> np.ndarray:
    """Per unit (× answer cell) least-squares variance: on the family's support when computed,
    else the dense model's per-unit mean."""
    if support_var is not None:
        return support_var
    return np.clip(dense, 0.0, None)


def _support_variances(
    family_covs: Mapping[int, FamilyCovariance],
    family_of_unit: np.ndarray,
    cache: Any,
    sizes: Mapping[str, int],
    n_cells: int,
) -> dict[str, np.ndarray]:
    """Per query, ``(units, answer cells)`` least-squares variances of the units (whole families
    in order, ``family_of_unit``) with their empty cells held at 0; ``"DETAILED"`` holds
    ``(units, n_cells)`` cell variances: on the unit's own support that model's, on the rest of
    the family's support the free-cell variance (all of the parent's cells free), elsewhere
    1e-12 (no variable: no error).

    All units at once: the variance of answer a of unit c is the sum of C_ij over the pairs of
    its support cells i, j that both count in a — every unit's covariance entries are listed
    once (row-major, as stored) with their unit and cells, and each query sums those whose two
    cells share an answer (one bincount per query)."""
    fams = list(dict.fromkeys(int(f) for f in family_of_unit))
    kids = [(fc, kid) for fc in (family_covs[f] for f in fams) for kid in range(len(fc.child_covs))]
    n_units = len(kids)
    supports = [fc.child_supports[i] for fc, i in kids]
    covs = [fc.child_covs[i] for fc, i in kids]
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
    values = np.concatenate([c.ravel() for c, m in zip(covs, paired, strict=True) if m] or [[]])
    result: dict[str, np.ndarray] = {}
    answers = {q: int(v) for q, v in sizes.items() if q != "DETAILED"}
    for q, size in answers.items():
        idx = cache.answer_index[q]
        a_i, a_j = idx[cells_of_var[first]], idx[cells_of_var[second]]
        same = a_i == a_j
        bins = pair_unit[same] * size + a_i[same]
        total = np.bincount(bins, weights=values[same], minlength=n_units * size)
        result[q] = np.maximum(total.reshape(n_units, size), 0.0)
    for u in np.flatnonzero((paired == 0) & (lengths > 0)):
        algebra: SupportAlgebra = cache.algebra(supports[u])
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
    diag = np.concatenate([np.diag(c) for c in covs]) if n_units else np.zeros(0, dtype=np.float64)
    cells[np.repeat(np.arange(n_units), lengths), cells_of_var] = np.maximum(diag, 1e-12)
    result["DETAILED"] = cells
    return result
