"""What changed between two budgets of the same kind, in rows a report can print and one sentence.

TopDown allocations (TDA §4): per run, the total ρ (or ε), each geolevel's share c and each query
share d that differs; a change that only scales the total ρ (every share equal) is said so, with
the percentage. PHSafe budgets (PHS §7.1): each (table, level) cell whose ρ differs or that is
switched on or off, and each τ that differs. Exact comparisons: shares are exact fractions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.dp.budget import LEVEL_KEYS, PHSafeBudget, TopDownAllocation
from engine.dp.budget.fractions_io import format_fraction
from engine.dp.moe import PHSAFE_TABLES
from phexplore.planning.deltas import relative
from phexplore.planning.scaling import format_percent
from phexplore.planning.scenarios import Scenario


def _change(what: str, where: str, a: Any, b: Any) -> dict[str, Any]:
    rel = relative(b, a) if not isinstance(a, str) and not isinstance(b, str) else None
    return {
        "what": what,
        "where": where,
        "a": a,
        "b": b,
        "relative": rel,
    }


def topdown_changes(
    a: Mapping[str, TopDownAllocation], b: Mapping[str, TopDownAllocation]
) -> list[dict[str, Any]]:
    """Rows (what, where, a, b, relative) of every number that differs between two sets of runs."""
    rows: list[dict[str, Any]] = []
    for run in list(a) + [r for r in b if r not in a]:
        ra, rb = a.get(run), b.get(run)
        if ra is None or rb is None:
            rows.append(
                _change(
                    "run",
                    run,
                    "absent" if ra is None else "present",
                    "absent" if rb is None else "present",
                )
            )
            continue
        what = "total ε (pure DP)" if ra.mechanism == "puredp" else "total ρ"
        if ra.rho != rb.rho:
            rows.append(_change(what, f"{run} run", float(ra.rho), float(rb.rho)))
        levels = list(ra.geolevels) + [lv for lv in rb.geolevels if lv not in ra.geolevels]
        for level in levels:
            ca, cb = ra.level_shares.get(level), rb.level_shares.get(level)
            if ca != cb:
                rows.append(
                    _change(
                        "level share c",
                        f"{run} · {level}",
                        None if ca is None else format_fraction(ca),
                        None if cb is None else format_fraction(cb),
                    )
                )
            qa, qb = ra.query_shares.get(level, {}), rb.query_shares.get(level, {})
            for query in list(qa) + [q for q in qb if q not in qa]:
                da, db = qa.get(query), qb.get(query)
                if da != db:
                    rows.append(
                        _change(
                            "query share d",
                            f"{run} · {level} · {query}",
                            None if da is None else format_fraction(da),
                            None if db is None else format_fraction(db),
                        )
                    )
    return rows


def phsafe_changes(a: PHSafeBudget, b: PHSafeBudget) -> list[dict[str, Any]]:
    """Rows of every cell ρ and τ that differ between two PHSafe budgets (0 = not measured)."""
    rows: list[dict[str, Any]] = []
    for table in PHSAFE_TABLES:
        ta, tb = a.tau.get(table), b.tau.get(table)
        if ta != tb:
            rows.append(_change("τ", table, ta, tb))
        for level in LEVEL_KEYS:
            ra, rb = a.rho(table, level), b.rho(table, level)
            if ra != rb:
                rows.append(_change("ρ (unbounded)", f"{table} · {level}", ra, rb))
    return rows


def scenario_changes(a: Scenario, b: Scenario) -> list[dict[str, Any]]:
    """:func:`topdown_changes` or :func:`phsafe_changes` of two scenarios (plus δ and the quoted
    conversion when they differ); scenarios of different kinds have no row-by-row comparison."""
    rows: list[dict[str, Any]] = []
    if a.kind == b.kind == "topdown":
        assert a.topdown is not None and b.topdown is not None
        rows = topdown_changes(a.topdown, b.topdown)
    elif a.kind == b.kind == "phsafe":
        assert a.phsafe is not None and b.phsafe is not None
        rows = phsafe_changes(a.phsafe, b.phsafe)
    if a.delta != b.delta:
        rows.append(_change("δ at which ε is quoted", "report", a.delta, b.delta))
    if a.conversion != b.conversion:
        rows.append(_change("quoted conversion", "report", a.conversion, b.conversion))
    return rows


def change_sentence(a: Scenario, b: Scenario, rows: list[dict[str, Any]] | None = None) -> str:
    """One sentence saying what changed from ``a`` to ``b`` (for the report and the app)."""
    if a.kind != b.kind:
        return (
            f"“{a.name}” is a {a.kind} scenario and “{b.name}” a {b.kind} one: only their "
            "privacy-loss totals compare."
        )
    rows = scenario_changes(a, b) if rows is None else rows
    if not rows:
        return f"“{b.name}” has exactly the budget of “{a.name}”."
    totals = [r for r in rows if r["what"] in ("total ρ", "total ε (pure DP)")]
    others = [r for r in rows if r not in totals]
    if totals and not others:
        parts = [
            f"{r['where']}: {r['what']} {r['a']:.6g} → {r['b']:.6g} ({format_percent(100 * r['relative'])})"
            for r in totals
            if r["relative"] is not None
        ]
        return (
            f"“{b.name}” scales the total budget of “{a.name}” and keeps every share: "
            + "; ".join(parts)
            + "."
        )
    kinds = sorted({r["what"] for r in rows})
    return f"“{b.name}” differs from “{a.name}” in {len(rows)} number(s): " + ", ".join(kinds) + "."
