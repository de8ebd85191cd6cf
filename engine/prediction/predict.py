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

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from engine.core.blas_threads import one_blas_thread
from engine.core.errors import ValidationError
from engine.dp.budget import TopDownAllocation
from engine.dp.moe import z_for_confidence
from engine.prediction.algebra import cell_algebra
from engine.prediction.correction import family_index, sample_families
from engine.prediction.designs import LevelPlan, fits, infer_attributes, plan_levels
from engine.prediction.designs import held_exactly as held_exactly
from engine.prediction.designs import level_budgets as level_budgets
from engine.prediction.level_rows import Setup, SupportState, level_rows
from engine.prediction.rows import Prediction, QueryPrediction
from engine.prediction.spine import SpineProfile
from engine.prediction.support import FamilyTooLarge
from engine.prediction.support_levels import root_term
from engine.prediction.validity import ModelUsed, assess_rows
from engine.schema.marginals import TOTAL, parse_marginal

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
    current: list[QueryPrediction] = []
    ratios: dict[str, float] = {}
    for k in range(len(plan.levels)):
        current, ratios = level_rows(
            allocation, setup, plan, state, k, z, leaf_bias, root_chain, current, ratios
        )
        rows += current
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
        invariants=invariants,
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
) -> Setup:
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
    return Setup(
        attrs=attrs,
        report=tuple(report),
        algebra=cell_algebra(attrs, all_queries),
        spine=profile.restrict(keep),
        use_counts=use_counts,
        notes=tuple(notes),
    )


def _support_state(
    setup: Setup,
    plan: LevelPlan,
    support: bool | None,
    max_units: int | None,
    max_families: int | None,
    root_empty_cells: bool,
    notes: list[str],
) -> SupportState:
    """Step 2: which least-squares model the correction rests on, the sampled families of every
    level and, for the support model, every sampled family's covariances (root first) and the
    root's lifted empty cells. A family the support model cannot compute exactly (a pass other
    than the last that is not TOTAL alone, on a family of more than
    :data:`engine.prediction.support.GENERAL_PATH_MAX_VARIABLES` variables) makes the prediction
    use the dense model, said in the notes and on every row (:mod:`engine.prediction.validity`)."""
    spine, algebra = setup.spine, setup.algebra
    state = SupportState()
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
    setup: Setup,
    plan: LevelPlan,
    state: SupportState,
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
            "included (docs/prediction.md §2b; whether each root row was validated is "
            "said per row)"
        )
