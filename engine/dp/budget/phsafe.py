"""PHSafe budgets: ρ (or ε) per table × population-group level, with τ per table (PHS §2.3, §7;
docs/science.md §3).

Population-group levels are {Nation, State} × {Unattributed, A-G, H-I}, keyed as in the official
``config.json`` (``usa_*``, ``usa_A-G``, ``usa_H,I``, ``state_*``, ``state_A-G``, ``state_H,I``). A
budget of 0 (or an absent key) skips that level. PH2 and PH6 exist only at the Unattributed levels.
Accounting (PHS Thm 1–4): the unbounded ρ is the sum over tables and levels; bounded = 2× unbounded.
MOE targets, when given, determine ρ through ρ = z²Δ²/(2·MOE²) (PHS §7.1, docs/science.md §2).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from engine.core.errors import ValidationError
from engine.core.numbers import as_float, as_int
from engine.core.strict_json import as_mapping, check_keys
from engine.dp.accounting import bounded_from_unbounded
from engine.dp.moe import PHSAFE_DENOMINATOR_TABLES, PHSAFE_TABLES, phsafe_sensitivity, rho_for_moe

LEVEL_KEYS: tuple[str, ...] = ("usa_*", "usa_A-G", "usa_H,I", "state_*", "state_A-G", "state_H,I")
LEVEL_LABELS: dict[str, tuple[str, str]] = {
    "usa_*": ("Nation", "Unattributed"),
    "usa_A-G": ("Nation", "A-G"),
    "usa_H,I": ("Nation", "H-I"),
    "state_*": ("State", "Unattributed"),
    "state_A-G": ("State", "A-G"),
    "state_H,I": ("State", "H-I"),
}
UNATTRIBUTED_ONLY: frozenset[str] = frozenset({"PH2", "PH6"})
PRIVACY_DEFNS = ("zcdp", "puredp")


def level_key(geo_level: str, iteration_level: str) -> str:
    """Official key for a (geo level, iteration level) pair, e.g. ("State", "A-G") → "state_A-G"."""
    for key, (geo, it) in LEVEL_LABELS.items():
        if (
            geo.lower() == geo_level.strip().lower()
            and it.lower() == iteration_level.strip().lower()
        ):
            return key
    raise ValidationError(
        f"unknown population-group level ({geo_level!r}, {iteration_level!r}); geo levels are Nation "
        "and State, iteration levels Unattributed, A-G and H-I"
    )


def allowed_levels(table: str) -> tuple[str, ...]:
    """Population-group levels at which ``table`` may be measured."""
    if table in UNATTRIBUTED_ONLY:
        return ("usa_*", "state_*")
    return LEVEL_KEYS


def resolve_level_spec(spec: str) -> tuple[str, ...]:
    """Level keys matching a user spec: an official key, "Nation"/"State", or "State:A-G"."""
    s = spec.strip()
    if s in LEVEL_KEYS:
        return (s,)
    if s.lower() in ("nation", "usa"):
        return tuple(k for k in LEVEL_KEYS if k.startswith("usa"))
    if s.lower() == "state":
        return tuple(k for k in LEVEL_KEYS if k.startswith("state"))
    for sep in (":", "/", " "):
        if sep in s:
            geo, it = s.split(sep, 1)
            return (level_key(geo, it),)
    raise ValidationError(
        f"unknown level {spec!r}; use an official key ({', '.join(LEVEL_KEYS)}), 'Nation', 'State' "
        "or 'State:A-G'"
    )


PHSAFE_KEYS: tuple[str, ...] = (
    "privacy_budget",
    "tau",
    "state_filter",
    "reader",
    "privacy_defn",
    "name",
    "kind",
    "title",
    "citation",
    "notes",
    "moe_targets",
    "confidence",
    "rho_from",
    "schema",
)
"""Keys a PHSafe budget/config JSON object may hold (official config.json plus PHExplore's own)."""


@dataclass(frozen=True)
class PHSafeBudget:
    """Validated PHSafe parameters: ρ (zcdp) or ε (puredp) per table and level, τ per table."""

    name: str
    budgets: Mapping[str, Mapping[str, float]]
    tau: Mapping[str, int]
    privacy_defn: str = "zcdp"
    state_filter: tuple[str, ...] | None = None
    moe_targets: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    confidence: float = 0.90
    citation: str = ""

    def __post_init__(self) -> None:
        validate_phsafe(self)

    # ------------------------------------------------------------------ queries
    def tables(self) -> tuple[str, ...]:
        """Tables with at least one enabled level, in production order."""
        return tuple(t for t in PHSAFE_TABLES if self.levels(t))

    def levels(self, table: str) -> tuple[str, ...]:
        """Enabled levels (positive budget) of ``table`` in official order."""
        row = self.budgets.get(table, {})
        return tuple(k for k in LEVEL_KEYS if row.get(k, 0.0) > 0)

    def rho(self, table: str, level: str) -> float:
        """Budget of (table, level); 0 when the level is skipped."""
        return float(self.budgets.get(table, {}).get(level, 0.0))

    def sensitivity(self, table: str) -> int:
        """Δ = 2τ+2 (Algorithm 1) or 2 (Algorithm 2)."""
        return phsafe_sensitivity(table, self.tau.get(table))

    def total_unbounded(self) -> float:
        """Σ over tables and levels (PHS Thm 1–2); ∞ if any budget is infinite."""
        return math.fsum(self.rho(t, lv) for t in PHSAFE_TABLES for lv in self.levels(t))

    def total_bounded(self) -> float:
        """Bounded-neighbour total: exactly twice the unbounded total (PHS Thm 3–4)."""
        return bounded_from_unbounded(self.total_unbounded())

    # ------------------------------------------------------------------ edits (return new budgets)
    def with_rho(self, table: str, level: str, rho: float) -> PHSafeBudget:
        """Set one cell's budget (drops its MOE target, which no longer determines it)."""
        budgets = {t: dict(r) for t, r in self.budgets.items()}
        budgets.setdefault(table, {})[level] = float(rho)
        targets = {t: dict(r) for t, r in self.moe_targets.items()}
        targets.get(table, {}).pop(level, None)
        return replace(self, budgets=budgets, moe_targets=targets)

    def with_moe_target(self, table: str, level: str, moe: float) -> PHSafeBudget:
        """Set one cell's MOE target and the ρ it implies (ρ = z²Δ²/(2·MOE²))."""
        rho = rho_for_moe(moe, self.sensitivity(table), self.confidence)
        new = self.with_rho(table, level, rho)
        targets = {t: dict(r) for t, r in new.moe_targets.items()}
        targets.setdefault(table, {})[level] = float(moe)
        return replace(new, moe_targets=targets)

    def with_tau(self, table: str, tau: int) -> PHSafeBudget:
        """Change τ; levels with an MOE target keep the target and get the ρ it now implies."""
        if table in PHSAFE_DENOMINATOR_TABLES:
            raise ValidationError(f"{table} counts households and has no truncation threshold τ")
        new = replace(self, tau={**self.tau, table: int(tau)})
        for level, moe in self.moe_targets.get(table, {}).items():
            new = new.with_moe_target(table, level, moe)
        return new

    def without_levels(self, levels: Iterable[str]) -> PHSafeBudget:
        """Skip the given level keys in every table (ρ = 0)."""
        drop = set(levels)
        budgets = {
            t: {k: v for k, v in r.items() if k not in drop} for t, r in self.budgets.items()
        }
        targets = {
            t: {k: v for k, v in r.items() if k not in drop} for t, r in self.moe_targets.items()
        }
        return replace(self, budgets=budgets, moe_targets=targets)

    # ------------------------------------------------------------------ official config.json
    def to_official_config(self) -> dict[str, Any]:
        """The official PHSafe ``config.json`` layout (see data/README: privacy_budget, tau, ...)."""
        return {
            "privacy_budget": {
                t: {k: self.rho(t, k) for k in allowed_levels(t) if self.rho(t, k) > 0}
                for t in PHSAFE_TABLES
                if t in self.budgets
            },
            "tau": {t: int(v) for t, v in self.tau.items() if t not in PHSAFE_DENOMINATOR_TABLES},
            "state_filter": list(self.state_filter) if self.state_filter is not None else [],
            "reader": "csv",
            "privacy_defn": self.privacy_defn,
        }

    @classmethod
    def from_official_config(
        cls, data: Mapping[str, Any], *, name: str = "config.json"
    ) -> PHSafeBudget:
        """Parse the official ``config.json`` layout (budgets may be ``Infinity``)."""
        data = as_mapping(data, where=name)
        if "privacy_budget" not in data:
            raise ValidationError(f"{name}: missing 'privacy_budget' (table → level → budget)")
        pb = data["privacy_budget"]
        if not isinstance(pb, Mapping):
            raise ValidationError(f"{name}: 'privacy_budget' must map tables to level budgets")
        budgets: dict[str, dict[str, float]] = {}
        for table, row in pb.items():
            if not isinstance(row, Mapping):
                raise ValidationError(f"{name}: privacy_budget[{table!r}] must be an object")
            budgets[str(table)] = {}
            for key, value in row.items():
                budgets[str(table)][str(key)] = as_float(
                    value, where=f"{name}: privacy_budget[{table!r}][{key!r}]", allow_inf=True
                )
        tau = parse_tau(data.get("tau", {}), where=name)
        sf = data.get("state_filter")
        if sf is not None and not isinstance(sf, list | tuple):
            raise ValidationError(f"{name}: 'state_filter' must be a list of state FIPS codes")
        state_filter = tuple(str(s) for s in sf) if sf else None
        return cls(
            name=name,
            budgets=budgets,
            tau=tau,
            privacy_defn=str(data.get("privacy_defn", "zcdp")),
            state_filter=state_filter,
        )

    # ------------------------------------------------------------------ PHExplore JSON
    def to_dict(self) -> dict[str, Any]:
        """PHExplore's own JSON: the official fields plus name, MOE targets and confidence."""
        out = self.to_official_config()
        out.update(
            {
                "name": self.name,
                "kind": "phsafe",
                "moe_targets": {t: dict(r) for t, r in self.moe_targets.items() if r},
                "confidence": self.confidence,
                "citation": self.citation,
            }
        )
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, name: str | None = None) -> PHSafeBudget:
        """Inverse of :meth:`to_dict` (also accepts a plain official config)."""
        label = name or "config.json"
        data = as_mapping(data, where=label)
        # A misspelt key (e.g. "privacy_def") must never fall back to a default silently.
        check_keys(data, PHSAFE_KEYS, where=label)
        base = cls.from_official_config(data, name=name or str(data.get("name", label)))
        targets = parse_moe_targets(data.get("moe_targets") or {}, where=label)
        return replace(
            base,
            moe_targets=targets,
            confidence=as_float(data.get("confidence", 0.90), where=f"{label}: confidence"),
            citation=str(data.get("citation", "")),
        )


def parse_moe_targets(raw: Any, *, where: str) -> dict[str, dict[str, float]]:
    """``{table: {level: MOE}}`` with every MOE a positive number."""
    targets: dict[str, dict[str, float]] = {}
    for table, row in as_mapping(raw, where=f"{where}: moe_targets").items():
        targets[str(table)] = {}
        for key, value in as_mapping(row, where=f"{where}: moe_targets[{table!r}]").items():
            moe = as_float(value, where=f"{where}: moe_targets[{table!r}][{key!r}]")
            if moe <= 0:
                raise ValidationError(f"{where}: moe_targets[{table!r}][{key!r}] must be > 0")
            targets[str(table)][str(key)] = moe
    return targets


def parse_tau(raw: Any, *, where: str) -> dict[str, int]:
    """``{table: τ}`` with whole-number thresholds."""
    return {
        str(t): as_int(v, where=f"{where}: tau[{t!r}]")
        for t, v in as_mapping(raw, where=f"{where}: tau").items()
    }


def validate_phsafe(b: PHSafeBudget) -> None:
    """Raise a ValidationError naming the table/level at fault, or return None."""
    if b.privacy_defn not in PRIVACY_DEFNS:
        raise ValidationError(
            f"{b.name}: privacy_defn must be 'zcdp' or 'puredp'; got {b.privacy_defn!r}"
        )
    if not (0.0 < b.confidence < 1.0):
        raise ValidationError(f"{b.name}: confidence must be between 0 and 1; got {b.confidence}")
    for table, row in b.budgets.items():
        if table not in PHSAFE_TABLES:
            raise ValidationError(
                f"{b.name}: unknown table {table!r}; PHSafe measures {', '.join(PHSAFE_TABLES)}"
            )
        for key, value in row.items():
            if key not in LEVEL_KEYS:
                raise ValidationError(
                    f"{b.name}: {table} has unknown level {key!r}; levels are {', '.join(LEVEL_KEYS)}"
                )
            if key not in allowed_levels(table) and value > 0:
                raise ValidationError(
                    f"{b.name}: {table} is only tabulated at the Unattributed levels (usa_*, state_*); "
                    f"remove {key!r}"
                )
            if math.isnan(value) or value < 0:
                raise ValidationError(
                    f"{b.name}: budget of {table} at {key} must be ≥ 0 (0 skips the level); got {value}"
                )
        if any(v > 0 for v in row.values()) and table not in PHSAFE_DENOMINATOR_TABLES:
            tau = b.tau.get(table)
            if tau is None:
                raise ValidationError(f"{b.name}: {table} is measured but has no τ in 'tau'")
            if tau < 1:
                raise ValidationError(f"{b.name}: τ of {table} must be ≥ 1; got {tau}")
    for table in b.tau:
        if table not in PHSAFE_TABLES or table in PHSAFE_DENOMINATOR_TABLES:
            raise ValidationError(
                f"{b.name}: τ given for {table!r}, which is not a truncated (Algorithm 1) table"
            )
    if b.state_filter is not None:
        for s in b.state_filter:
            if not (len(s) == 2 and s.isdigit()):
                raise ValidationError(
                    f"{b.name}: state_filter entry {s!r} is not a 2-digit state FIPS"
                )
