"""MOE tables of a scenario: one row per PHSafe (table, level) or TopDown (run, geolevel, query).

These are the rows ``phexplore moe`` prints and the planner pages show (PHS §7.1, Table 10; TDA
App. B). Summaries carry total ρ (unbounded and bounded for PHSafe) and ε at δ under each conversion
(docs/science.md §1). Pure functions of the budget objects: the CLI and the app call the same code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from engine.dp.accounting import epsilon_for_delta
from engine.dp.budget import LEVEL_LABELS, PHSafeBudget, TopDownAllocation, budget_use
from engine.dp.budget.invariants import held_exact_notes
from engine.dp.conversions import CONVERSIONS, DEFAULT_DELTA
from engine.dp.distributions import geometric_variance
from engine.dp.moe import (
    moe_bound,
    moe_exact,
    moe_exact_geometric,
    sigma2_for_rho,
    z_for_confidence,
)
from engine.schema.query_cells import allocation_schema, query_cells


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
    runs: Mapping[str, TopDownAllocation],
    confidence: float = 0.90,
    n_states: int | None = None,
) -> list[dict[str, Any]]:
    """Per (run, geolevel, query): cells, ρ of the query, σ and the 90% MOE z·σ (TDA App. B).

    For pure-DP allocations ``rho_query`` holds the query's ε (``budget`` says which) and the MOE is
    the exact two-sided-geometric one (:func:`engine.dp.moe.moe_exact_geometric`). ``status`` says
    whether the query is measured, held exact (an invariant, TDA §5.2: no noise, so its ``sigma``
    and ``moe90`` are the nominal values of a measurement that is never taken) or not used (a
    one-state bypass, SPN §5), for a geography of ``n_states`` states
    (default :func:`engine.dp.budget.default_states`).
    """

    z = z_for_confidence(confidence)
    rows = []
    for run, alloc in runs.items():
        schema = allocation_schema(alloc.all_queries(), alloc.schema)
        use = budget_use(alloc, n_states)
        for level in alloc.geolevels:
            share = use.level_share(alloc, level)
            for query in alloc.queries(level):
                if share == alloc.level_shares[level]:
                    rho_query = alloc.query_budget(level, query)
                    s2 = alloc.sigma2(level, query)
                    geo_z = alloc.geometric_z(level, query) if alloc.mechanism == "puredp" else 0
                else:  # one-state bypass: US carries US + State (SPN §5); State is not used
                    rho_query = float(alloc.rho * share * alloc.query_share(level, query))
                    geo_z = rho_query / 2.0
                    if rho_query <= 0:
                        s2 = math.inf
                    elif alloc.mechanism == "puredp":
                        s2 = geometric_variance(geo_z)
                    else:
                        s2 = 1.0 / rho_query
                sigma = math.sqrt(s2)
                if not math.isfinite(sigma):
                    moe = math.inf
                elif alloc.mechanism == "puredp":
                    moe = float(moe_exact_geometric(geo_z, confidence))
                else:
                    moe = z * sigma
                rows.append(
                    {
                        "run": run,
                        "geolevel": level,
                        "query": query,
                        "cells": query_cells(query, schema),
                        "budget": "epsilon" if alloc.mechanism == "puredp" else "rho",
                        "rho_query": rho_query,
                        "share_level": float(share),
                        "share_query": float(alloc.query_share(level, query)),
                        "sigma": sigma,
                        "moe90": moe,
                        "status": use.status(level, query),
                    }
                )
    return rows


def topdown_summary(
    runs: Mapping[str, TopDownAllocation],
    delta: float = DEFAULT_DELTA,
    n_states: int | None = None,
) -> dict[str, Any]:
    """ρ (or ε for pure DP) per run and in total, with ε per conversion at δ, and beside each the
    budget actually spent on noisy measurements (``rho_spent`` / ``epsilon_spent``: the nominal
    budget less the shares of queries held exact, TDA §5.2) on ``n_states`` states."""
    per_run: dict[str, Any] = {}
    total = spent_total = 0.0
    puredp = all(a.mechanism == "puredp" for a in runs.values())
    for run, alloc in runs.items():
        rho = float(alloc.rho)
        use = budget_use(alloc, n_states)
        spent = float(use.spent)
        total += rho
        spent_total += spent
        entry: dict[str, Any] = {"mechanism": alloc.mechanism}
        if alloc.mechanism == "puredp":
            entry["epsilon"] = rho
            entry["epsilon_spent"] = spent
        else:
            entry["rho"] = rho
            entry["rho_spent"] = spent
            entry["epsilon"] = epsilons(rho, delta)
        entry["held_exact"] = [f"{level} {query}" for level, query in use.held]
        notes = held_exact_notes(alloc, n_states)
        if notes:
            entry["held_exact_notes"] = notes
        entry["states"] = use.n_states
        per_run[run] = entry
    out: dict[str, Any] = {"runs": per_run, "delta": delta}
    if puredp:
        out["epsilon_total"] = total
        out["epsilon_spent"] = spent_total
    else:
        out["rho_total"] = total
        out["rho_spent"] = spent_total
        out["epsilon_total"] = epsilons(total, delta)
    return out
