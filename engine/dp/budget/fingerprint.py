"""Budget fingerprints: which exact budget produced a number (the provenance every run records).

A *budget* is what a committee decides: a PHSafe budget (ρ or ε per table × level, τ, privacy
definition and state filter, PHS §7.1), or the TopDown allocations of every universe together —
persons *and* units, each a total ρ with geolevel shares c and query shares d as exact fractions
(TDA App. B). A fingerprint is the SHA-256 of the budget's canonical JSON — its numbers with keys
sorted and no whitespace. Names, citations, notes and MOE targets are left out: they do not change a
single draw, so a renamed copy has the same fingerprint and any edited number gives another.

One budget has one fingerprint on every page and in every file: a TopDown run measures its persons
allocation, but records the fingerprint of the whole budget it was taken from
(:func:`budget_fingerprint` of the universes together; a lone allocation is the budget of that one
universe). :func:`allocation_fingerprint` is the fingerprint of one allocation alone, which runs
recorded before a budget covered every universe; it is kept to recognise their metrics.json.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from engine.dp.budget.allocation import TopDownAllocation
from engine.dp.budget.phsafe import PHSafeBudget

FINGERPRINT_CHARS = 12
"""Characters of the hex digest shown to users (the full digest is stored)."""

Budget = PHSafeBudget | TopDownAllocation | Mapping[str, TopDownAllocation]


def topdown_budget(budget: TopDownAllocation | Mapping[str, TopDownAllocation]) -> dict[str, Any]:
    """A TopDown budget as ``{universe: allocation}`` (a lone allocation: its own universe)."""
    if isinstance(budget, TopDownAllocation):
        return {budget.universe: budget}
    return {str(u): a for u, a in budget.items()}


def _allocation_payload(alloc: TopDownAllocation) -> dict[str, Any]:
    data = alloc.to_dict()
    for key in ("name", "citation", "notes", "title"):
        data.pop(key, None)
    return {"kind": "topdown", **data}


def canonical_payload(budget: Budget) -> dict[str, Any]:
    """The JSON-ready numbers a fingerprint covers (no names or notes)."""
    if isinstance(budget, PHSafeBudget):
        official = budget.to_official_config()
        return {"kind": "phsafe", **official}
    if isinstance(budget, TopDownAllocation | Mapping):
        runs = topdown_budget(budget)
        return {
            "kind": "topdown-runs",
            "runs": {u: _allocation_payload(a) for u, a in sorted(runs.items())},
        }
    raise TypeError(f"cannot fingerprint a {type(budget).__name__}")


def _sha256(payload: Mapping[str, Any]) -> str:
    text = json.dumps(
        payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def budget_fingerprint(budget: Budget) -> str:
    """SHA-256 (hex) of the canonical JSON of ``budget``'s numbers (a TopDown budget: every
    universe together)."""
    return _sha256(canonical_payload(budget))


def allocation_fingerprint(alloc: TopDownAllocation) -> str:
    """SHA-256 of one TopDown allocation alone: what runs recorded as ``budget_fingerprint``
    before a budget covered every universe (kept to recognise their metrics.json)."""
    return _sha256(_allocation_payload(alloc))


def short_fingerprint(fingerprint: str) -> str:
    """The first :data:`FINGERPRINT_CHARS` hex digits, as shown in labels."""
    return fingerprint[:FINGERPRINT_CHARS]
