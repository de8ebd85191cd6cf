"""The committee's table: predicted error of the *published* TopDown counts of two budgets by geolevel,
for the queries a committee reads first, with ρ, ε and the differences (docs/app.md, "The
committee's table").

"What happens to county, tract and block accuracy if we cut the budget by 30%?" is answered by the
predicted RMSE (or 90% MOE) of the published counts — after least squares, non-negativity and
rounding (docs/science.md §7; :func:`engine.prediction.predict_topdown` on the shipped count profile
:func:`engine.prediction.shipped_profile_for`) — not by the noisy measurements' MOE, which the
post-processing improves on. Two budgets A (the reference, e.g. the baseline) and B (the one
compared) give one row per geolevel × query and one per privacy total; Δ = B − A and Δ% = Δ / A.

Queries: TOTAL, VOTINGAGE, HISPANIC and the race query of the schema (CENRACE on the 2,016-cell
production schema, RACEETH on the RI 2010 sample's), each where the persons allocation measures it
(TOTAL always). Whatever validity flag a prediction row carries (``post_processed_holds``: the mean
count per cell is at least 1, the model's validated range; any further ``post_processed_*`` flag)
travels with the row, as does "held exact" for invariants (TDA §5.2).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from engine.core.errors import ValidationError
from engine.dp.budget import TopDownAllocation
from engine.dp.budget.invariants import HELD_EXACT
from engine.prediction import PLANNER_MAX_FAMILIES, PLANNER_MAX_UNITS, shipped_profile_for
from engine.prediction.tables import add_post_processed, predictions_for_runs
from phexplore.planning.deltas import difference, relative
from phexplore.planning.moe_tables import topdown_rows, topdown_summary

COMMITTEE_QUERIES: tuple[str, ...] = ("TOTAL", "VOTINGAGE", "HISPANIC", "race")
"""The queries a committee reads first; "race" is the schema's race query (:data:`RACE_QUERIES`)."""
RACE_QUERIES: tuple[str, ...] = ("CENRACE", "RACEETH")
MEASURES: dict[str, str] = {"rmse": "post_processed_rmse", "moe90": "post_processed_moe"}
MEASURE_LABELS: dict[str, str] = {
    "rmse": "RMSE of the published count (predicted, persons)",
    "moe90": "90% MOE of the published count (predicted, persons)",
}
VALUE_KEYS = ("post_processed_rmse", "post_processed_moe")
CONVERSION_SHORT: dict[str, str] = {
    "bun_steinke": "Bun–Steinke",
    "cks": "CKS",
    "gaussian": "Gaussian profile",
}
OUT_OF_RANGE = "outside the validated range"
"""A published-count prediction outside the range where it was validated against runs (the row's
``post_processed_reason`` says why; docs/prediction.md §4)."""


def persons_run(runs: Mapping[str, TopDownAllocation]) -> tuple[str, TopDownAllocation]:
    """The run TopDown post-processes (the persons universe); refused when there is none."""
    for name, alloc in runs.items():
        if alloc.universe == "persons":
            return name, alloc
    raise ValidationError(
        "the published-count error needs a persons run (TopDown post-processes person histograms "
        f"only); these allocations have {', '.join(runs) or 'no run'}"
    )


def committee_queries(alloc: TopDownAllocation) -> list[str]:
    """The committee's queries that ``alloc`` measures, in :data:`COMMITTEE_QUERIES` order."""
    measured = set(alloc.all_queries())
    out = []
    for query in COMMITTEE_QUERIES:
        if query == "race":
            out.extend(q for q in RACE_QUERIES if q in measured)
        elif query == "TOTAL" or query in measured:
            out.append(query)
    return out


def table_queries(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The queries of committee rows in the committee's order (TOTAL, VOTINGAGE, HISPANIC, race)."""
    present = {r["query"] for r in rows if r.get("section") != "privacy" and r.get("query")}
    order = [q for q in COMMITTEE_QUERIES if q != "race"] + list(RACE_QUERIES)
    return [q for q in order if q in present] + sorted(present - set(order))


def published_rows(
    runs: Mapping[str, TopDownAllocation],
    *,
    confidence: float = 0.90,
    n_states: int | None = None,
    max_units: int | None = PLANNER_MAX_UNITS,
    max_families: int | None = PLANNER_MAX_FAMILIES,
) -> tuple[list[dict[str, Any]], list[str]]:
    """The MOE rows of ``runs`` plus the predicted error of the published counts, and the
    prediction's notes (the shipped count profile of the allocation's schema).

    By default the prediction samples whole families per level as the planner does
    (``PLANNER_MAX_UNITS`` geounits, ``PLANNER_MAX_FAMILIES`` families for the support model;
    docs/prediction.md), so the committee's table, the heatmap, ``phexplore compare``, the report and
    the Start page give the same numbers. ``max_units=None`` evaluates every geounit (slower and
    larger on the national profile: docs/prediction.md, "The committee's table")."""
    predictions = predictions_for_runs(
        runs,
        shipped_profile_for(runs),
        confidence=confidence,
        max_units=max_units,
        max_families=max_families,
    )
    notes = sorted({n for p in predictions.values() for n in p.notes})
    return add_post_processed(topdown_rows(runs, confidence, n_states), predictions), notes


def _note(row: Mapping[str, Any] | None) -> str:
    """What a reader must know about a published-count number: held exact, or outside the
    model's validated range, or any further flag the prediction row carries."""
    if row is None:
        return "not measured"
    if row.get("status") == HELD_EXACT:
        return HELD_EXACT
    notes = []
    if row.get("post_processed_holds") is False:
        notes.append(OUT_OF_RANGE)
    for key, value in row.items():
        if not key.startswith("post_processed_") or key in VALUE_KEYS:
            continue
        if key == "post_processed_holds" or value is None or value is True:
            continue
        notes.append(f"{key.removeprefix('post_processed_').replace('_', ' ')}: {value}")
    return "; ".join(notes)


def _privacy_rows(
    a: Mapping[str, TopDownAllocation],
    b: Mapping[str, TopDownAllocation],
    delta: float,
    conversion: str,
) -> list[dict[str, Any]]:
    sa, sb = topdown_summary(a, delta), topdown_summary(b, delta)
    rows = []
    for run in list(a) + [r for r in b if r not in a]:
        ea, eb = sa["runs"].get(run, {}), sb["runs"].get(run, {})
        mechanisms = [e["mechanism"] for e in (ea, eb) if e]
        for mechanism in dict.fromkeys(mechanisms):
            # A ρ is never compared with an ε: a run of another mechanism gets its own row.
            pure = mechanism == "puredp"
            what = "ε (pure DP)" if pure else "ρ"
            key = "epsilon" if pure else "rho"
            va = ea.get(key) if ea.get("mechanism") == mechanism else None
            vb = eb.get(key) if eb.get("mechanism") == mechanism else None
            rows.append(_row("privacy", f"{what} of the {run} run", None, None, va, vb))
    if "rho_total" in sa and "rho_total" in sb:
        rows.append(_row("privacy", "ρ, all runs", None, None, sa["rho_total"], sb["rho_total"]))
        label = f"ε, all runs (δ = {delta:g}, {CONVERSION_SHORT.get(conversion, conversion)})"
        rows.append(
            _row(
                "privacy",
                label,
                None,
                None,
                sa["epsilon_total"][conversion],
                sb["epsilon_total"][conversion],
            )
        )
    elif not isinstance(sa.get("epsilon_total"), Mapping) and not isinstance(
        sb.get("epsilon_total"), Mapping
    ):
        rows.append(
            _row(
                "privacy",
                "ε (pure DP), all runs",
                None,
                None,
                sa["epsilon_total"],
                sb["epsilon_total"],
            )
        )
    return rows


def _row(
    section: str,
    quantity: str,
    geolevel: str | None,
    query: str | None,
    a: Any,
    b: Any,
    a_note: str = "",
    b_note: str = "",
) -> dict[str, Any]:
    fa = None if a is None else float(a)
    fb = None if b is None else float(b)
    return {
        "section": section,
        "quantity": quantity,
        "geolevel": geolevel,
        "query": query,
        "a": fa if fa is None or math.isfinite(fa) else None,
        "b": fb if fb is None or math.isfinite(fb) else None,
        "difference": difference(fb, fa),
        "relative": relative(fb, fa),
        "a_note": a_note,
        "b_note": b_note,
    }


def committee_rows(
    a_runs: Mapping[str, TopDownAllocation],
    a_rows: Sequence[Mapping[str, Any]],
    b_runs: Mapping[str, TopDownAllocation],
    b_rows: Sequence[Mapping[str, Any]],
    *,
    delta: float,
    conversion: str = "cks",
    measure: str = "rmse",
) -> list[dict[str, Any]]:
    """The committee's table of A and B in long form: privacy rows, then one row per geolevel
    (spine order of A's persons allocation, then B's extra levels) × committee query.

    ``a_rows``/``b_rows`` are :func:`published_rows` of the two budgets (the app passes its cached
    ones). Columns: section, quantity, geolevel, query, a, b, difference (B − A), relative
    ((B − A) / A), a_note, b_note (held exact, outside the validated range, …).
    """
    if measure not in MEASURES:
        raise ValidationError(f"measure must be one of {', '.join(MEASURES)}; got {measure!r}")
    key = MEASURES[measure]
    a_run, a_alloc = persons_run(a_runs)
    b_run, b_alloc = persons_run(b_runs)
    levels = list(a_alloc.geolevels) + [
        lv for lv in b_alloc.geolevels if lv not in a_alloc.geolevels
    ]
    queries = committee_queries(a_alloc)
    queries += [q for q in committee_queries(b_alloc) if q not in queries]
    index_a = {(r["geolevel"], r["query"]): r for r in a_rows if r.get("run") == a_run}
    index_b = {(r["geolevel"], r["query"]): r for r in b_rows if r.get("run") == b_run}
    rows = _privacy_rows(a_runs, b_runs, delta, conversion)
    for level in levels:
        for query in queries:
            ra, rb = index_a.get((level, query)), index_b.get((level, query))
            if ra is None and rb is None:
                continue
            rows.append(
                _row(
                    "published error",
                    MEASURE_LABELS[measure],
                    level,
                    query,
                    _value(ra, key),
                    _value(rb, key),
                    _note(ra),
                    _note(rb),
                )
            )
    return rows


def _value(row: Mapping[str, Any] | None, key: str) -> float | None:
    if row is None:
        return None
    if row.get("status") == HELD_EXACT:
        return 0.0
    value = row.get(key)
    return None if value is None else float(value)
