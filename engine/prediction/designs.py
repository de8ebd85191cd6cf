"""Each level's least-squares design as the engine builds it (docs/science.md §4, §7; TDA §7.2,
§5.2; SPN §5).

:func:`plan_levels` maps an allocation onto the levels of a spine profile the way the engine does:
per level the ρ_q of each measured query (:func:`level_budgets`; an allocation root the data lack
is folded into its single child with that root's query proportions, as
``engine/topdown/measure.node_query_budget`` does), the invariant queries held exactly at the
level and every level above it (:func:`held_exactly`, TDA §5.2), and the engine's pass order
(:func:`engine.prediction.least_squares.engine_passes`: one pass with every query at the root and
where the children are blocks; elsewhere TOTAL alone when the level measures it, then every other
query, the earlier answers held — ``engine/topdown/plan._passes`` and
``engine/topdown/qp/route.multipass_least_squares``, which skips a pass whose queries the
level does not measure). It also says which queries a level's measurements and invariants do not
determine (no unbiased error model there or below).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from engine.core.errors import ValidationError
from engine.dp.budget import TopDownAllocation
from engine.dp.distributions import discrete_gaussian_variance, geometric_variance
from engine.prediction.algebra import CellAlgebra, Operator
from engine.prediction.least_squares import LevelDesign, engine_passes, level_covariance_parts
from engine.schema.marginals import SCHEMA_ATTRIBUTES, parse_marginal


@dataclass(frozen=True)
class LevelPlan:
    """Per level (root first): ρ_q of each measured query, the exact queries, the design, its
    dense-model covariance K_level and the part of it from the passes before the last (held
    answers), the queries held from an earlier pass and those the level (with every level
    above) does not determine."""

    levels: tuple[str, ...]
    budgets: dict[str, dict[str, float]]
    exact: dict[str, tuple[str, ...]]
    designs: tuple[LevelDesign, ...]
    covariances: tuple[Operator, ...]
    held_covariances: tuple[Operator, ...]
    held_early: tuple[frozenset[str], ...]
    unidentified: tuple[frozenset[str], ...]


def infer_attributes(
    allocation: TopDownAllocation, extra_queries: Sequence[str] = ()
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The shipped schema whose attributes cover every query of the allocation."""
    names = [*allocation.all_queries(), *extra_queries]
    for attributes in SCHEMA_ATTRIBUTES.values():
        if fits(attributes, names):
            return attributes
    raise ValidationError(
        f"allocation {allocation.name!r}: its queries ({', '.join(names)}) fit none of the shipped "
        f"schemas ({', '.join(SCHEMA_ATTRIBUTES)}); give the data (--data) to predict on its schema"
    )


def fits(attributes: Sequence[tuple[str, Sequence[str]]], queries: Sequence[str]) -> bool:
    """Whether every query parses on the schema ``attributes``."""
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


def level_design(
    allocation: TopDownAllocation,
    budgets: Mapping[str, float],
    exact: Sequence[str],
    single: bool,
    ls_passes: Sequence[Sequence[str]] | None,
) -> LevelDesign:
    """The least-squares design of one level: inverse-variance weights (TDA §7.1), the exact
    noise variances (discrete Gaussian, or two-sided geometric for pure DP), the invariants and
    the engine's passes over the queries the level measures."""
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


def plan_levels(
    allocation: TopDownAllocation,
    levels: Sequence[str],
    algebra: CellAlgebra,
    report: Sequence[str],
    invariants: Mapping[str, Sequence[str]],
    ls_passes: Sequence[Sequence[str]] | None,
) -> LevelPlan:
    """The :class:`LevelPlan` of ``allocation`` on the spine ``levels`` (module docstring)."""
    budgets = level_budgets(allocation, levels)
    exact = held_exactly(levels, invariants)
    designs: list[LevelDesign] = []
    covariances: list[Operator] = []
    held_covariances: list[Operator] = []
    held_early: list[frozenset[str]] = []
    unidentified: list[frozenset[str]] = []
    for k, lv in enumerate(levels):
        single = k == 0 or k == len(levels) - 1
        design = level_design(allocation, budgets[lv], exact[lv], single, ls_passes)
        if not design.passes and k == 0:
            raise ValidationError(
                f"the root level {lv} has no measured query: give it a positive share, or its "
                "estimate has nothing to start from"
            )
        designs.append(design)
        total, earlier = level_covariance_parts(algebra, design)
        covariances.append(total)
        held_covariances.append(earlier)
        held_early.append(frozenset(q for p in design.passes[:-1] for q in p))
        # A query the level's measurements and invariants do not determine follows the solver's
        # split of the parent (no unbiased error model): no prediction there or below.
        known = [*design.invariants, *(q for p in design.passes for q in p)]
        above = unidentified[-1] if unidentified else frozenset()
        unidentified.append(above | (frozenset(report) - algebra.determined(known, report)))
    return LevelPlan(
        levels=tuple(levels),
        budgets=budgets,
        exact=exact,
        designs=tuple(designs),
        covariances=tuple(covariances),
        held_covariances=tuple(held_covariances),
        held_early=tuple(held_early),
        unidentified=tuple(unidentified),
    )
