"""Target-driven planning: the least privacy loss that meets accuracy targets (TDA §2.1, §6.3; PHS §7).

PHSafe (PHS §7.1, docs/science.md §2): a 90% MOE target T for a table with sensitivity Δ needs
ρ = z²Δ²/(2T²) (closed form). Under a total cap R, the allocation minimising the worst ratio of
achieved to target MOE scales every target-meeting ρ* by k = R/Σρ* (all ratios equal 1/√k); the
weighted objective Σ wᵢ·ratioᵢ with ratioᵢ ∝ ρᵢ^{-1/2} is minimised by ρᵢ ∝ (wᵢ·aᵢ)^{2/3}
(Lagrange conditions), aᵢ = zΔᵢ/(√2·Tᵢ).

TopDown (TDA App. B, Thm 2): a target σ_q for the noisy query q needs ρ_q = 1/σ_q²; the minimal
total is ρ = Σ ρ_q, level shares c = Σ_{q∈level} ρ_q / ρ and query shares d = ρ_q / Σ_{level} ρ_q.
Shares can be rounded to a common denominator (production used 4097ths, 4099ths, …) by the largest-
remainder method so they still sum to exactly 1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any

from engine.core.errors import ValidationError
from engine.core.numbers import as_float
from engine.core.strict_json import as_mapping
from engine.dp.budget import LEVEL_LABELS, PHSafeBudget, TopDownAllocation, budget_use
from engine.dp.conversions import DEFAULT_DELTA
from engine.dp.moe import moe_bound, moe_exact, rho_for_moe, sigma2_for_rho, z_for_confidence
from engine.prediction import predict_topdown
from engine.prediction.predict import SUPPORT_MAX_FAMILIES
from phexplore.planning.moe_tables import epsilons, phsafe_rows, topdown_rows
from phexplore.planning.objectives import OBJECTIVES

# ---------------------------------------------------------------------------- PHSafe


def plan_phsafe(
    targets: PHSafeBudget,
    *,
    rho_cap: float | None = None,
    objective: str = "max-ratio",
    weights: Mapping[tuple[str, str], float] | None = None,
    delta: float = DEFAULT_DELTA,
) -> dict[str, Any]:
    """Minimal ρ per (table, level) from MOE targets, or the best allocation under a total cap.

    ``targets`` supplies τ and ``moe_targets`` (e.g. the ``phsafe-2020`` preset). Returns
    ``{"rows": [...], "summary": {...}, "budget": PHSafeBudget}``; rows carry ``binding`` (this
    target determines the worst ratio) and ``ratio`` (achieved bound MOE / target).
    """
    if objective not in OBJECTIVES:
        raise ValidationError(
            f"objective must be one of {', '.join(OBJECTIVES)}; got {objective!r}"
        )
    conf = targets.confidence
    cells: list[tuple[str, str, float, int]] = []
    for table, row in targets.moe_targets.items():
        delta_t = targets.sensitivity(table)
        for level, moe in row.items():
            cells.append((table, level, float(moe), delta_t))
    if not cells:
        raise ValidationError(f"{targets.name}: no MOE targets to plan from (moe_targets is empty)")
    needed = {(t, lv): rho_for_moe(m, d, conf) for t, lv, m, d in cells}
    total_needed = math.fsum(needed.values())
    if rho_cap is None:
        rho = dict(needed)
    else:
        if not (rho_cap > 0 and math.isfinite(rho_cap)):
            raise ValidationError(f"--rho-cap must be a positive number; got {rho_cap!r}")
        if objective == "max-ratio":
            k = rho_cap / total_needed
            rho = {key: r * k for key, r in needed.items()}
        else:
            z = z_for_confidence(conf)
            w = {
                (t, lv): float((weights or {}).get((t, lv), 1.0)) * z * d / (math.sqrt(2.0) * m)
                for t, lv, m, d in cells
            }
            raw = {key: v ** (2.0 / 3.0) for key, v in w.items()}
            norm = math.fsum(raw.values())
            rho = {key: rho_cap * v / norm for key, v in raw.items()}
    budgets: dict[str, dict[str, float]] = {}
    for (t, lv), r in rho.items():
        budgets.setdefault(t, {})[lv] = r
    budget = replace(targets, budgets=budgets, name=f"{targets.name} (planned)")
    rows = []
    ratios = {}
    for t, lv, m, d in cells:
        r = rho[(t, lv)]
        s2 = sigma2_for_rho(r, d)
        bound = moe_bound(math.sqrt(s2), conf)
        ratios[(t, lv)] = z_for_confidence(conf) * math.sqrt(s2) / m
        geo, it = LEVEL_LABELS[lv]
        rows.append(
            {
                "table": t,
                "geo_level": geo,
                "iteration_level": it,
                "tau": targets.tau.get(t),
                "sensitivity": d,
                "moe_target": m,
                "rho_unbounded": r,
                "rho_unbounded_rounded": round(r, 6),
                "rho_bounded": 2.0 * r,
                "moe_bound": bound,
                "moe_exact": moe_exact(s2, conf),
                "ratio": ratios[(t, lv)],
            }
        )
    worst = max(ratios.values())
    for row, (t, lv, _, _) in zip(rows, cells, strict=True):
        row["binding"] = bool(rho_cap is None or math.isclose(ratios[(t, lv)], worst, rel_tol=1e-9))
    total = math.fsum(rho.values())
    summary = {
        "objective": "meet every target" if rho_cap is None else objective,
        "rho_cap": rho_cap,
        "rho_total_unbounded": total,
        "rho_total_unbounded_rounded": math.fsum(round(r, 6) for r in rho.values()),
        "rho_total_bounded": 2.0 * total,
        "rho_needed_for_all_targets": total_needed,
        "worst_ratio": worst,
        "targets_met": worst <= 1.0 + 1e-12,
        "delta": delta,
        "epsilon_unbounded": epsilons(total, delta),
        "epsilon_bounded": epsilons(2.0 * total, delta),
    }
    return {"rows": rows, "summary": summary, "budget": budget}


# ---------------------------------------------------------------------------- TopDown


def round_shares(shares: Mapping[str, float], denominator: int) -> dict[str, Fraction]:
    """Round positive shares to multiples of 1/denominator summing to exactly 1 (largest remainder).

    Every positive share keeps at least 1/denominator so no query silently loses its measurement.
    """
    if denominator < len(shares) or denominator < 1:
        raise ValidationError(
            f"denominator {denominator} is too small for {len(shares)} positive shares"
        )
    total = math.fsum(shares.values())
    if total <= 0:
        raise ValidationError("cannot round shares that sum to 0")
    exact = {k: v / total * denominator for k, v in shares.items()}
    base = {k: max(1, math.floor(v)) for k, v in exact.items()}
    diff = denominator - sum(base.values())
    order = sorted(exact, key=lambda k: exact[k] - math.floor(exact[k]), reverse=diff > 0)
    i = 0
    while diff != 0:
        k = order[i % len(order)]
        if diff > 0:
            base[k] += 1
            diff -= 1
        elif base[k] > 1:
            base[k] -= 1
            diff += 1
        i += 1
    return {k: Fraction(n, denominator) for k, n in base.items()}


def plan_topdown(
    sigma_targets: Mapping[str, Mapping[str, Mapping[str, float]]],
    *,
    geolevels: Mapping[str, Sequence[str]] | None = None,
    denominator: int | None = None,
    name: str = "planned",
    delta: float = DEFAULT_DELTA,
) -> dict[str, Any]:
    """Minimal ρ and shares for target σ per (run, geolevel, query): ρ_q = 1/σ_q² (TDA App. B).

    Returns ``{"rows", "summary", "allocations": {run: TopDownAllocation}}``. With ``denominator``
    the shares are rational with that denominator (exact sum 1) and the rows show the σ achieved.
    """
    allocations: dict[str, TopDownAllocation] = {}
    for run, raw_levels in sigma_targets.items():
        levels = as_mapping(raw_levels, where=f"targets of run {run!r}")
        order = list(geolevels[run]) if geolevels and run in geolevels else list(levels)
        unknown = [lv for lv in levels if lv not in order]
        if unknown:
            raise ValidationError(f"run {run!r}: targets for levels {unknown} not in its geolevels")
        per_query: dict[str, dict[str, float]] = {}
        for level in order:
            row = as_mapping(levels.get(level, {}), where=f"targets of {run}/{level}")
            for query, sigma in row.items():
                s = as_float(sigma, where=f"target σ for {run}/{level}/{query}")
                if not (s > 0 and math.isfinite(s)):
                    raise ValidationError(
                        f"target σ for {run}/{level}/{query} must be > 0; got {sigma!r}"
                    )
                per_query.setdefault(level, {})[query] = 1.0 / (s * s)
        level_rho = {lv: math.fsum(per_query.get(lv, {}).values()) for lv in order}
        total = math.fsum(level_rho.values())
        if total <= 0:
            raise ValidationError(f"run {run!r} has no targets")
        if denominator:
            lshares = round_shares({lv: r for lv, r in level_rho.items() if r > 0}, denominator)
            qshares = {lv: round_shares(per_query[lv], denominator) for lv in lshares}
        else:
            lshares = {
                lv: Fraction(r / total).limit_denominator(10**9)
                for lv, r in level_rho.items()
                if r > 0
            }
            fix = 1 - sum(lshares.values(), Fraction(0))
            first = next(iter(lshares))
            lshares[first] += fix
            qshares = {}
            for lv in lshares:
                qs = {
                    q: Fraction(r / level_rho[lv]).limit_denominator(10**9)
                    for q, r in per_query[lv].items()
                }
                qs[next(iter(qs))] += 1 - sum(qs.values(), Fraction(0))
                qshares[lv] = qs
        for lv in order:
            lshares.setdefault(lv, Fraction(0))
        allocations[run] = TopDownAllocation(
            name=f"{name} ({run})",
            universe=run,
            rho=Fraction(total).limit_denominator(10**9),
            geolevels=tuple(order),
            level_shares=lshares,
            query_shares=qshares,
        )
    rows = topdown_rows(allocations)
    for row in rows:
        row["sigma_target"] = float(sigma_targets[row["run"]][row["geolevel"]][row["query"]])
    total_rho = sum(float(a.rho) for a in allocations.values())
    # TDA §5.2: a σ target on a query held exact (State TOTAL) costs nominal ρ only
    spent = {k: float(budget_use(a).spent) for k, a in allocations.items()}
    summary = {
        "rho_total": total_rho,
        "rho_spent": sum(spent.values()),
        "runs": {k: {"rho": float(a.rho), "rho_spent": spent[k]} for k, a in allocations.items()},
        "denominator": denominator,
        "shares_sum_to_one": all(
            sum(a.level_shares.values(), Fraction(0)) == 1 for a in allocations.values()
        ),
        "delta": delta,
        "epsilon_total": epsilons(total_rho, delta),
    }
    return {"rows": rows, "summary": summary, "allocations": allocations}


def sigma_targets_of(
    runs: Mapping[str, TopDownAllocation],
) -> dict[str, dict[str, dict[str, float]]]:
    """The per-query σ an existing allocation implies (to feed :func:`plan_topdown`)."""
    return {
        run: {
            lv: {q: math.sqrt(a.sigma2(lv, q)) for q in a.queries(lv)}
            for lv in a.geolevels
            if a.queries(lv)
        }
        for run, a in runs.items()
    }


# ---------------------------------------------------------------------------- trade-off curves


def tradeoff_scale_phsafe(
    budget: PHSafeBudget, scales: Sequence[float], delta: float = DEFAULT_DELTA
) -> list[dict[str, Any]]:
    """MOE of every (table, level) and total ρ/ε as all budgets are scaled by each factor."""
    out = []
    for s in scales:
        if not (s > 0):
            raise ValidationError(f"scale factors must be positive; got {s}")
        scaled = replace(
            budget,
            budgets={t: {k: v * s for k, v in r.items()} for t, r in budget.budgets.items()},
            moe_targets={},
        )
        eps = epsilons(scaled.total_bounded(), delta)
        for row in phsafe_rows(scaled):
            out.append(
                {
                    "scale": s,
                    "rho_total_bounded": scaled.total_bounded(),
                    **{f"epsilon_{k}": v for k, v in eps.items()},
                    "table": row["table"],
                    "level": f"{row['geo_level']} {row['iteration_level']}",
                    "moe_exact": row["moe_exact"],
                }
            )
    return out


def tradeoff_scale_topdown(
    alloc: TopDownAllocation, rhos: Sequence[float], delta: float = DEFAULT_DELTA
) -> list[dict[str, Any]]:
    """90% MOE of every (geolevel, query) and ε as the total ρ of one run varies."""
    out = []
    for r in rhos:
        scaled = alloc.with_rho(r)
        eps = epsilons(float(scaled.rho), delta)
        for row in topdown_rows({alloc.universe: scaled}):
            out.append(
                {
                    "rho": float(scaled.rho),
                    **{f"epsilon_{k}": v for k, v in eps.items()},
                    "geolevel": row["geolevel"],
                    "query": row["query"],
                    "moe90": row["moe90"],
                }
            )
    return out


# ---------------------------------------------------------------- published-count targets
# (docs/science.md §7)
PUBLISHED_MEASURES = ("rmse", "moe90")


def plan_topdown_published(
    alloc: TopDownAllocation,
    targets: Mapping[str, Mapping[str, float]],
    profile: Any,
    *,
    measure: str = "rmse",
    confidence: float = 0.90,
    max_units: int | None = 2000,  # the planner's PLANNER_MAX_UNITS
    max_families: int = 4,  # the planner's PLANNER_MAX_FAMILIES (support model)
    rho_max: float = 1e4,
    delta: float = DEFAULT_DELTA,
) -> dict[str, Any]:
    """The least total ρ, keeping ``alloc``'s shares, at which every targeted published count
    (geolevel → query → RMSE, or 90% MOE with ``measure="moe90"``) is predicted to meet its target
    (:func:`engine.prediction.predict_topdown`, docs/science.md §7).

    The least-squares error scales exactly as 1/√ρ; the non-negativity and rounding correction
    does not (rounding leaves a floor of about √(1/6) person per non-zero cell), so ρ is found by
    bisection on log ρ over (0, ``rho_max``]. ``profile`` is a
    :class:`engine.prediction.SpineProfile` (the shipped RI 2010 one, or the data's). Returns
    ``{"rows", "summary", "allocation"}``; a target the prediction cannot reach below ``rho_max``
    (under the rounding floor, say) is a :class:`ValidationError` naming it.
    """

    if measure not in PUBLISHED_MEASURES:
        raise ValidationError(f"measure must be one of {PUBLISHED_MEASURES}; got {measure!r}")
    wanted: list[tuple[str, str, float]] = []
    for level, row in as_mapping(targets, where="published-count targets").items():
        if level not in alloc.geolevels:
            raise ValidationError(
                f"published-count target for unknown geolevel {level!r}; "
                f"the allocation's levels are {', '.join(alloc.geolevels)}"
            )
        for query, value in as_mapping(row, where=f"targets of {level}").items():
            t = as_float(value, where=f"target {measure} for {level}/{query}")
            if not (t > 0 and math.isfinite(t)):
                raise ValidationError(f"target {measure} for {level}/{query} must be > 0; got {t}")
            wanted.append((str(level), str(query), t))
    if not wanted:
        raise ValidationError("give at least one published-count target, e.g. Block:TOTAL=10")
    queries = list(dict.fromkeys(["TOTAL", *alloc.all_queries(), *(q for _, q, _ in wanted)]))
    key = "post_processed_rmse" if measure == "rmse" else "post_processed_moe"

    def worst(rho: float, units: int | None = max_units) -> tuple[float, Any]:
        pred = predict_topdown(
            alloc.with_rho(rho),
            profile,
            queries=queries,
            confidence=confidence,
            max_units=units,
            max_families=max_families if units is not None else SUPPORT_MAX_FAMILIES,
        )
        ratios = []
        for level, query, target in wanted:
            hit = pred.for_level(level, query)
            if hit is None:
                raise ValidationError(f"no prediction for {level}/{query} on this spine")
            value = getattr(hit, key)
            if math.isnan(value):
                raise ValidationError(
                    f"{level}/{query} is not determined by the queries measured at {level} "
                    "(its published answers follow how the parent is split): give a query that "
                    "determines it a share there"
                )
            ratios.append(value / target)
        return max(ratios), pred

    hi = float(rho_max)
    ratio_hi, _ = worst(hi)
    if ratio_hi > 1.0:
        raise ValidationError(
            f"the targets cannot be met with ρ ≤ {rho_max:g} and these shares (worst predicted "
            f"{measure} / target = {ratio_hi:.3g} at ρ = {rho_max:g}); rounding alone leaves about "
            "0.4 persons per non-zero cell — raise the target or move shares"
        )
    lo = hi
    while lo > 1e-8:
        lo /= 10.0
        if worst(lo)[0] > 1.0:
            break
    else:
        lo = 1e-8
    for _ in range(40):  # bisection on log ρ
        mid = math.sqrt(lo * hi)
        if worst(mid)[0] > 1.0:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1.0 + 1e-3:
            break
    planned = alloc.with_rho(Fraction(hi).limit_denominator(10**6))
    ratio, pred = worst(float(planned.rho), None)
    for _ in range(4):  # the bisection used a sample of families: confirm on all of them
        if ratio <= 1.0:
            break
        hi = min(float(planned.rho) * ratio**2 * 1.001, rho_max)
        planned = alloc.with_rho(Fraction(hi).limit_denominator(10**6))
        ratio, pred = worst(float(planned.rho), None)
    rows = []
    for level, query, target in wanted:
        hit = pred.for_level(level, query)
        assert hit is not None
        rows.append(
            {
                "geolevel": level,
                "query": query,
                "target": target,
                "measure": measure,
                "predicted_rmse": hit.post_processed_rmse,
                "predicted_moe90": hit.post_processed_moe,
                "sigma": hit.sigma,
                "model_holds": hit.model_holds,
            }
        )
    summary = {
        "rho": float(planned.rho),
        "worst_ratio": ratio,
        "shares_from": alloc.name,
        "profile": getattr(profile, "name", ""),
        "notes": list(pred.notes),
        "delta": delta,
        "epsilon": epsilons(float(planned.rho), delta),
    }
    return {"rows": rows, "summary": summary, "allocation": planned}


def parse_published_targets(specs: Sequence[str]) -> dict[str, dict[str, float]]:
    """``["Block:TOTAL=10", "Tract:VOTINGAGE=12"]`` → ``{"Block": {"TOTAL": 10.0}, ...}``."""
    out: dict[str, dict[str, float]] = {}
    for spec in specs:
        target, sep, value = spec.rpartition("=")
        level, colon, query = target.partition(":")
        if not sep or not colon or not level.strip() or not query.strip():
            raise ValidationError(
                f"published-count target {spec!r} must look like LEVEL:QUERY=VALUE, "
                "e.g. Block:TOTAL=10"
            )
        out.setdefault(level.strip(), {})[query.strip()] = as_float(
            value, where=f"published-count target {spec!r}"
        )
    return out
