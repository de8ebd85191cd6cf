"""MOE tables of a scenario: one row per PHSafe (table, level) or TopDown (run, geolevel, query).

These are the rows ``phexplore moe`` prints and the planner pages show (PHS §7.1, Table 10; TDA
App. B). Summaries carry total ρ (unbounded and bounded for PHSafe) and ε at δ under each conversion
(SPEC §1). Pure functions of the budget objects: the CLI and the app call the same code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from phexplore.accounting import CONVERSIONS, epsilon_for_delta
from phexplore.budget import LEVEL_LABELS, PHSafeBudget, TopDownAllocation
from phexplore.distributions import geometric_variance
from phexplore.moe import (
    moe_bound,
    moe_exact,
    moe_exact_geometric,
    sigma2_for_rho,
    z_for_confidence,
)

DEFAULT_DELTA = 1e-10


def epsilons(rho: float, delta: float = DEFAULT_DELTA) -> dict[str, float]:
    """ε at δ for every conversion (∞ for infinite ρ, 0 for ρ = 0)."""
    if rho == 0:
        return dict.fromkeys(CONVERSIONS, 0.0)
    if math.isinf(rho):
        return dict.fromkeys(CONVERSIONS, math.inf)
    return {c: float(epsilon_for_delta(rho, delta, c)) for c in CONVERSIONS}


def phsafe_rows(budget: PHSafeBudget, confidence: float | None = None) -> list[dict[str, Any]]:
    """Per (table, enabled level): τ, Δ, ρ unbounded/bounded, σ, MOE target, MOE bound and exact."""
    conf = budget.confidence if confidence is None else confidence
    rows = []
    for table in budget.tables():
        delta = budget.sensitivity(table)
        for level in budget.levels(table):
            geo, it = LEVEL_LABELS[level]
            rho = budget.rho(table, level)
            if budget.privacy_defn == "puredp":
                z = rho / delta if math.isfinite(rho) else math.inf
                var = geometric_variance(z) if math.isfinite(z) else 0.0
                sigma = math.sqrt(var)
                bound = int(math.floor(z_for_confidence(conf) * sigma))
                exact = moe_exact_geometric(z, conf) if math.isfinite(z) else 0
            elif math.isinf(rho):
                sigma, bound, exact = 0.0, 0, 0
            else:
                s2 = sigma2_for_rho(rho, delta)
                sigma = math.sqrt(s2)
                bound = moe_bound(sigma, conf)
                exact = moe_exact(s2, conf)
            rows.append(
                {
                    "table": table,
                    "geo_level": geo,
                    "iteration_level": it,
                    "level_key": level,
                    "tau": budget.tau.get(table),
                    "sensitivity": delta,
                    "rho_unbounded": rho,
                    "rho_bounded": 2.0 * rho,
                    "sigma": sigma,
                    "moe_target": budget.moe_targets.get(table, {}).get(level),
                    "moe_bound": bound,
                    "moe_exact": exact,
                }
            )
    return rows


def phsafe_summary(budget: PHSafeBudget, delta: float = DEFAULT_DELTA) -> dict[str, Any]:
    """Totals: unbounded and bounded ρ, and ε at δ for each conversion (bounded ρ is what DSEP saw)."""
    unb = budget.total_unbounded()
    bnd = budget.total_bounded()
    out: dict[str, Any] = {
        "name": budget.name,
        "privacy_defn": budget.privacy_defn,
        "confidence": budget.confidence,
        "rho_total_unbounded": unb,
        "rho_total_bounded": bnd,
        "delta": delta,
    }
    if budget.privacy_defn == "puredp":
        out["epsilon_total_unbounded"] = unb
        out["epsilon_total_bounded"] = bnd
    else:
        out["epsilon_unbounded"] = epsilons(unb, delta)
        out["epsilon_bounded"] = epsilons(bnd, delta)
    return out


def topdown_rows(
    runs: Mapping[str, TopDownAllocation], confidence: float = 0.90
) -> list[dict[str, Any]]:
    """Per (run, geolevel, query): cells, ρ of the query, σ and the 90% MOE z·σ (TDA App. B).

    For pure-DP allocations ``rho_query`` holds the query's ε (``budget`` says which) and the MOE is
    the exact two-sided-geometric one (:func:`phexplore.moe.moe_exact_geometric`).
    """
    from phexplore.query_cells import allocation_schema, query_cells

    z = z_for_confidence(confidence)
    rows = []
    for run, alloc in runs.items():
        schema = allocation_schema(alloc.all_queries(), alloc.schema)
        for level in alloc.geolevels:
            for query in alloc.queries(level):
                s2 = alloc.sigma2(level, query)
                sigma = math.sqrt(s2)
                if alloc.mechanism == "puredp":
                    moe = float(moe_exact_geometric(alloc.geometric_z(level, query), confidence))
                else:
                    moe = z * sigma
                rows.append(
                    {
                        "run": run,
                        "geolevel": level,
                        "query": query,
                        "cells": query_cells(query, schema),
                        "budget": "epsilon" if alloc.mechanism == "puredp" else "rho",
                        "rho_query": alloc.query_budget(level, query),
                        "share_level": float(alloc.level_shares[level]),
                        "share_query": float(alloc.query_share(level, query)),
                        "sigma": sigma,
                        "moe90": moe,
                    }
                )
    return rows


def topdown_summary(
    runs: Mapping[str, TopDownAllocation], delta: float = DEFAULT_DELTA
) -> dict[str, Any]:
    """ρ (or ε for pure DP) per run and in total, with ε per conversion at δ."""
    per_run: dict[str, Any] = {}
    total = 0.0
    puredp = all(a.mechanism == "puredp" for a in runs.values())
    for run, alloc in runs.items():
        rho = float(alloc.rho)
        total += rho
        entry: dict[str, Any] = {"mechanism": alloc.mechanism}
        if alloc.mechanism == "puredp":
            entry["epsilon"] = rho
        else:
            entry["rho"] = rho
            entry["epsilon"] = epsilons(rho, delta)
        per_run[run] = entry
    out: dict[str, Any] = {"runs": per_run, "delta": delta}
    if puredp:
        out["epsilon_total"] = total
    else:
        out["rho_total"] = total
        out["epsilon_total"] = epsilons(total, delta)
    return out
