"""Budget fingerprints: which exact allocation produced a number (the provenance every run records).

A fingerprint is the SHA-256 of the allocation's canonical JSON — the numbers that decide the noise
(PHSafe: ρ or ε per table × level, τ, privacy definition and state filter, PHS §7.1; TopDown: total
ρ, geolevel shares c and query shares d as exact fractions, TDA App. B) with keys sorted and no
whitespace. Names, citations, notes and MOE targets are left out: they do not change a single draw,
so a renamed copy has the same fingerprint and any edited number gives another.
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


def canonical_payload(budget: Budget) -> dict[str, Any]:
    """The JSON-ready numbers a fingerprint covers (no names or notes)."""
    if isinstance(budget, PHSafeBudget):
        official = budget.to_official_config()
        return {"kind": "phsafe", **official}
    if isinstance(budget, TopDownAllocation):
        data = budget.to_dict()
        for key in ("name", "citation", "notes", "title"):
            data.pop(key, None)
        return {"kind": "topdown", **data}
    if isinstance(budget, Mapping):
        return {
            "kind": "topdown-runs",
            "runs": {str(u): canonical_payload(a) for u, a in sorted(budget.items())},
        }
    raise TypeError(f"cannot fingerprint a {type(budget).__name__}")


def budget_fingerprint(budget: Budget) -> str:
    """SHA-256 (hex) of the canonical JSON of ``budget``'s numbers."""
    text = json.dumps(
        canonical_payload(budget),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=True,
        default=str,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def short_fingerprint(fingerprint: str) -> str:
    """The first :data:`FINGERPRINT_CHARS` hex digits, as shown in labels."""
    return fingerprint[:FINGERPRINT_CHARS]
