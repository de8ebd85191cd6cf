"""TopDown allocations: total ρ split over geolevels and, within each level, over query groups.

TDA App. B, Thm 2 and docs/science.md §1: with total ρ, level proportion c and query proportion d, a
query is answered with σ² = 1/(ρ·c·d); the levels' c sum to 1 along every root-to-block path and
each level's d sum to 1. Shares are exact :class:`fractions.Fraction` so that presets transcribed
from TDA Tables 3–8 can be checked to sum to exactly 1 (docs/science.md §4 lists three transcription
typos a validator must catch). Pure-DP allocations (the 2018 E2E test, PF) use ε in place of ρ and
two-sided geometric noise with z = ε·c·d/2 (bounded neighbours: L1 sensitivity 2).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from engine.core.errors import ValidationError
from engine.core.strict_json import check_keys
from engine.dp.budget.fractions_io import format_fraction, parse_fraction, parse_share, sum_text
from engine.dp.distributions import MAX_SIGMA2, geometric_variance

MECHANISMS = ("zcdp", "puredp")


ALLOCATION_KEYS: tuple[str, ...] = (
    "name",
    "universe",
    "mechanism",
    "rho",
    "rho_reported",
    "epsilon",
    "geolevels",
    "level_shares",
    "query_shares",
    "citation",
    "title",
    "notes",
    "kind",
    "schema",
)
"""Keys an allocation JSON object may hold (docs/topdown.md); any other key is refused."""


@dataclass(frozen=True)
class TopDownAllocation:
    """A validated TopDown budget allocation for one universe (persons or units)."""

    name: str
    universe: str
    rho: Fraction
    geolevels: tuple[str, ...]
    level_shares: Mapping[str, Fraction]
    query_shares: Mapping[str, Mapping[str, Fraction]]
    mechanism: str = "zcdp"
    citation: str = ""
    notes: dict[str, Any] = field(default_factory=dict, compare=False)
    schema: str | None = None
    """The person schema the queries are built on (``redistricting2020``: 2,016 cells; ``ri2010``:
    VOTINGAGE × RACEETH, 16 cells); ``None`` when not declared (then inferred from the query names
    by :func:`engine.schema.query_cells.allocation_schema`)."""

    def __post_init__(self) -> None:
        validate_topdown(self)

    # ------------------------------------------------------------------ queries and noise
    def queries(self, level: str) -> tuple[str, ...]:
        """Queries measured at ``level`` (positive share), in declaration order."""
        self._check_level(level)
        return tuple(q for q, s in self.query_shares.get(level, {}).items() if s > 0)

    def all_queries(self) -> tuple[str, ...]:
        """Every query measured at some level, in first-seen order."""
        seen: dict[str, None] = {}
        for level in self.geolevels:
            for q in self.queries(level):
                seen.setdefault(q, None)
        return tuple(seen)

    def query_share(self, level: str, query: str) -> Fraction:
        """Exact d for (level, query); 0 if the query is not measured there."""
        self._check_level(level)
        return self.query_shares.get(level, {}).get(query, Fraction(0))

    def query_budget(self, level: str, query: str) -> float:
        """ρ·c·d (zCDP) or ε·c·d (pure DP) of one query group at one level."""
        d = self.query_share(level, query)
        if d <= 0:
            raise ValidationError(
                f"query {query!r} is not measured at level {level!r} in {self.name}"
            )
        return float(self.rho * self.level_shares[level] * d)

    def sigma2(self, level: str, query: str) -> float:
        """Noise variance of the query: 1/(ρcd) for zCDP, the geometric variance for pure DP."""
        if self.mechanism == "puredp":
            value = geometric_variance(self.geometric_z(level, query))
        else:
            value = 1.0 / self.query_budget(level, query)
        if value > MAX_SIGMA2:
            raise ValidationError(
                f"{self.name}: {query} at {level} would get noise of standard deviation "
                f"σ = {value**0.5:.3g} persons (over 10^12): its budget is so small that every "
                "count would be pure noise; raise the total budget or this share"
            )
        return value

    def geometric_z(self, level: str, query: str) -> float:
        """Two-sided geometric scale z = ε·c·d / 2 (pure DP; docs/science.md §4, PF 'TopDown
        options')."""
        if self.mechanism != "puredp":
            raise ValidationError(f"{self.name} is a zCDP allocation; it has no geometric scale")
        return self.query_budget(level, query) / 2.0

    def with_rho(self, rho: float | Fraction | str) -> TopDownAllocation:
        """The same shares at another total ρ (or ε)."""
        return replace(self, rho=parse_fraction(rho, where=f"{self.name}: total budget"))

    def _check_level(self, level: str) -> None:
        if level not in self.level_shares:
            raise ValidationError(
                f"{self.name} has no geolevel {level!r}; its levels are {', '.join(self.geolevels)}"
            )

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (schema in docs/analytic.md: shares as 'a/b' strings)."""
        return {
            "name": self.name,
            "universe": self.universe,
            "mechanism": self.mechanism,
            "rho": format_fraction(self.rho),
            "geolevels": list(self.geolevels),
            "level_shares": {lv: format_fraction(self.level_shares[lv]) for lv in self.geolevels},
            "query_shares": {
                lv: {q: format_fraction(s) for q, s in self.query_shares.get(lv, {}).items()}
                for lv in self.geolevels
            },
            "citation": self.citation,
            **({"schema": self.schema} if self.schema else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, name: str | None = None) -> TopDownAllocation:
        """Build and validate an allocation from its JSON dict."""
        if not isinstance(data, Mapping):
            raise ValidationError(f"{name or 'allocation'}: an allocation must be a JSON object")
        label = name or str(data.get("name", "allocation"))
        # A misspelt key (e.g. "mechanisms") must never fall back to a default silently.
        check_keys(data, ALLOCATION_KEYS, where=label)
        for key in ("geolevels", "level_shares", "query_shares"):
            if key not in data:
                raise ValidationError(f"{label}: missing required key {key!r}")
        if "rho" not in data and "epsilon" not in data:
            raise ValidationError(
                f"{label}: missing the total budget 'rho' (or 'epsilon' for pure DP)"
            )
        if not isinstance(data["geolevels"], list | tuple) or not data["geolevels"]:
            raise ValidationError(f"{label}: 'geolevels' must be a non-empty list of level names")
        geolevels = tuple(str(g) for g in data["geolevels"])
        levels_raw = data["level_shares"]
        queries_raw = data["query_shares"]
        if not isinstance(levels_raw, Mapping) or not isinstance(queries_raw, Mapping):
            raise ValidationError(f"{label}: level_shares and query_shares must be JSON objects")
        level_shares = {
            str(lv): parse_share(v, where=f"{label}: level share of {lv}")
            for lv, v in levels_raw.items()
        }
        query_shares: dict[str, dict[str, Fraction]] = {}
        for lv, qs in queries_raw.items():
            if not isinstance(qs, Mapping):
                raise ValidationError(f"{label}: query_shares[{lv!r}] must be an object")
            query_shares[str(lv)] = {
                str(q): parse_share(v, where=f"{label}: share of query {q} at {lv}")
                for q, v in qs.items()
            }
        budget = data.get("rho", data.get("epsilon"))
        return cls(
            name=label,
            universe=str(data.get("universe", "persons")),
            rho=parse_fraction(budget, where=f"{label}: total budget"),
            geolevels=geolevels,
            level_shares=level_shares,
            query_shares=query_shares,
            mechanism=str(data.get("mechanism", "zcdp")),
            citation=str(data.get("citation", "")),
            schema=_schema_name(data.get("schema"), label),
        )


def _schema_name(value: Any, label: str) -> str | None:
    """The ``schema`` key of an allocation JSON: a non-empty name or absent."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(
            f"{label}: 'schema' must name the person schema, e.g. \"redistricting2020\" or "
            f'"ri2010"; got {value!r}'
        )
    return value.strip()


def validate_topdown(alloc: TopDownAllocation) -> None:
    """Raise a ValidationError naming the offending row and the actual sum, or return None."""
    name = alloc.name
    if alloc.mechanism not in MECHANISMS:
        raise ValidationError(
            f"{name}: mechanism must be one of {MECHANISMS}; got {alloc.mechanism!r}"
        )
    if not isinstance(alloc.rho, Fraction) or alloc.rho <= 0 or not math.isfinite(float(alloc.rho)):
        what = "ε" if alloc.mechanism == "puredp" else "ρ"
        raise ValidationError(f"{name}: total {what} must be a positive number; got {alloc.rho!r}")
    if not alloc.geolevels:
        raise ValidationError(f"{name}: at least one geolevel is required")
    if len(set(alloc.geolevels)) != len(alloc.geolevels):
        raise ValidationError(f"{name}: geolevels repeat: {list(alloc.geolevels)}")
    unknown = [lv for lv in alloc.level_shares if lv not in alloc.geolevels]
    missing = [lv for lv in alloc.geolevels if lv not in alloc.level_shares]
    if unknown or missing:
        raise ValidationError(
            f"{name}: level shares must name exactly the geolevels {list(alloc.geolevels)}; "
            f"missing {missing}, unknown {unknown}"
        )
    for lv in alloc.geolevels:
        share = alloc.level_shares[lv]
        if share < 0:
            raise ValidationError(
                f"{name}: level {lv} has a negative share {format_fraction(share)}"
            )
    total = sum(alloc.level_shares.values(), Fraction(0))
    if total != 1:
        raise ValidationError(
            f"{name}: geolevel shares must sum to exactly 1 along the spine; they sum to "
            f"{sum_text(total)}"
        )
    extra = [lv for lv in alloc.query_shares if lv not in alloc.geolevels]
    if extra:
        raise ValidationError(f"{name}: query shares given for unknown geolevel(s) {extra}")
    for lv in alloc.geolevels:
        qs = alloc.query_shares.get(lv, {})
        for q, s in qs.items():
            if s < 0:
                raise ValidationError(
                    f"{name}: query {q} at level {lv} has a negative share {format_fraction(s)}"
                )
        if alloc.level_shares[lv] == 0:
            continue
        qtotal = sum(qs.values(), Fraction(0))
        if qtotal != 1:
            raise ValidationError(
                f"{name}: query shares at level {lv} must sum to exactly 1; they sum to "
                f"{sum_text(qtotal)}"
            )


@dataclass(frozen=True)
class ShareProblem:
    """Where a draft allocation's shares are wrong: which table, level column and query row."""

    table: str
    """``"levels"`` (the geolevel shares c) or ``"queries"`` (the query shares d)."""
    level: str | None
    """Geolevel of the offending share (None: the geolevel-share column as a whole)."""
    query: str | None
    """Query of the offending share (None: a level share, or a level's query shares as a whole)."""
    message: str


def locate_share_problems(data: Mapping[str, Any]) -> list[ShareProblem]:
    """Every offending share of a draft allocation dict, located for the planner to mark it.

    Checks what :func:`validate_topdown` checks on shares (docs/science.md §4: level shares sum to
    exactly 1 along the spine, each measured level's query shares sum to exactly 1, no negative or
    unreadable share), but collects all problems with their (level, query) instead of stopping at
    the first.
    """
    problems: list[ShareProblem] = []
    levels: dict[str, Fraction] = {}
    for lv, raw in (data.get("level_shares") or {}).items():
        try:
            levels[str(lv)] = parse_share(raw, where=f"level share of {lv}")
        except ValidationError as exc:
            problems.append(ShareProblem("levels", str(lv), None, str(exc)))
            continue
        if levels[str(lv)] < 0:
            problems.append(
                ShareProblem("levels", str(lv), None, f"level share of {lv} is negative")
            )
    if len(levels) == len(data.get("level_shares") or {}):
        total = sum(levels.values(), Fraction(0))
        if total != 1:
            problems.append(
                ShareProblem(
                    "levels",
                    None,
                    None,
                    f"geolevel shares must sum to exactly 1; they sum to {sum_text(total)}",
                )
            )
    for lv, qs in (data.get("query_shares") or {}).items():
        parsed: dict[str, Fraction] = {}
        bad = False
        for q, raw in (qs or {}).items():
            try:
                parsed[q] = parse_share(raw, where=f"share of query {q} at {lv}")
            except ValidationError as exc:
                problems.append(ShareProblem("queries", str(lv), str(q), str(exc)))
                bad = True
                continue
            if parsed[q] < 0:
                problems.append(
                    ShareProblem(
                        "queries", str(lv), str(q), f"share of query {q} at {lv} is negative"
                    )
                )
        if bad or levels.get(str(lv), Fraction(1)) == 0:
            continue
        qtotal = sum(parsed.values(), Fraction(0))
        if qtotal != 1:
            problems.append(
                ShareProblem(
                    "queries",
                    str(lv),
                    None,
                    f"query shares at level {lv} must sum to exactly 1; they sum to "
                    f"{sum_text(qtotal)}",
                )
            )
    return problems
