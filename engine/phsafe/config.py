"""PHSafe run configuration: the official ``config.json`` (budgets, truncation thresholds, states).

The layout is that of PHSafe 3.0.0 (U.S. Census Bureau ``DAS_2020_SDHC_Production_Code``; summarised
in ``/work/shared/data/README.md``, "config.json"): ``privacy_budget`` maps each of the nine measured
tables (PHS §3.2) to a budget per population-group level (PHS §2.3) keyed ``usa_*``, ``usa_A-G``,
``usa_H,I``, ``state_*``, ``state_A-G``, ``state_H,I``; a budget of 0 skips that level and
``Infinity`` means no noise. ``tau`` holds the truncation threshold τ of the six Algorithm-1 tables
(PHS Algorithm 1, 3; required for every table that is measured); ``state_filter`` lists the state
FIPS codes to process (``["72"]`` is the separate Puerto Rico run without a Nation level, PHS §6.6;
an empty list means the 50 states and DC); ``privacy_defn`` is ``zcdp`` (budgets
are ρ, discrete Gaussian noise) or ``puredp`` (budgets are ε, two-sided geometric noise).

Presets reproduce PHS Table 10 (the production US parameters) and the Puerto Rico counterpart.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.core.errors import ValidationError
from engine.core.files import read_input_bytes
from engine.core.strict_json import check_keys, loads_strict_json
from engine.dp.moe import PHSAFE_TABLES
from engine.dp.presets import list_presets, load_phsafe_preset

MEASURED_TABLES: tuple[str, ...] = PHSAFE_TABLES
"""The nine measured runs (PHS §3.2)."""

TRUNCATED_TABLES: tuple[str, ...] = ("PH1_num", "PH2", "PH3", "PH4", "PH6", "PH7")
"""Tables answered by Algorithm 1 (truncate-and-join, sensitivity 2τ+2)."""

LEVEL_KEYS: tuple[str, ...] = ("usa_*", "usa_A-G", "usa_H,I", "state_*", "state_A-G", "state_H,I")
"""Official population-group level keys: {Nation, State} × {Unattributed, A-G, H-I}."""

UNATTRIBUTED_ONLY_TABLES: tuple[str, ...] = ("PH2", "PH6")
"""Tables released only at the two Unattributed levels (PHS §2.4)."""

PUERTO_RICO = "72"
VALID_STATE_CODES: frozenset[str] = frozenset(
    {f"{i:02d}" for i in range(1, 57) if i not in {3, 7, 14, 43, 52}} | {PUERTO_RICO}
)
"""FIPS codes of the 50 states, DC and Puerto Rico (the official state_filter check)."""

PRIVACY_DEFNS: tuple[str, ...] = ("zcdp", "puredp")
CONFIG_KEYS: tuple[str, ...] = ("privacy_budget", "tau", "state_filter", "reader", "privacy_defn")
"""Every key an official PHSafe config.json may hold; any other key is refused (did you mean …?)."""

US_STATES: tuple[str, ...] = tuple(sorted(VALID_STATE_CODES - {PUERTO_RICO}))
"""The 50 states and DC; an empty ``state_filter`` means these (a PHExplore convention — the
official configuration requires an explicit list)."""


def levels_of(table: str) -> tuple[str, ...]:
    """The level keys a table may be released at."""
    if table in UNATTRIBUTED_ONLY_TABLES:
        return ("usa_*", "state_*")
    return LEVEL_KEYS


@dataclass(frozen=True)
class PHSafeConfig:
    """A validated PHSafe configuration (see the module docstring for the fields)."""

    privacy_budget: dict[str, dict[str, float]]
    tau: dict[str, int]
    state_filter: list[str]
    privacy_defn: str = "zcdp"
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.state_filter, list | tuple) and len(self.state_filter) == 0:
            object.__setattr__(self, "state_filter", list(US_STATES))
        _validate(self)

    @property
    def is_puerto_rico(self) -> bool:
        """True for the separate Puerto Rico run (no Nation level, PHS §6.6)."""
        return self.state_filter == [PUERTO_RICO]

    def budget(self, table: str, level: str) -> float:
        """The budget (ρ or ε) of ``table`` at ``level``; 0 when the level is skipped."""
        return float(self.privacy_budget.get(table, {}).get(level, 0.0))

    def enabled_levels(self, table: str) -> tuple[str, ...]:
        """The levels of ``table`` with a non-zero budget, in :data:`LEVEL_KEYS` order."""
        return tuple(level for level in levels_of(table) if self.budget(table, level) != 0)

    def total_budget(self) -> float:
        """Σ budgets over tables and levels: unbounded ρ (zcdp) or ε (puredp) of the run (PHS Thm 1-2)."""
        return float(sum(self.budget(t, lvl) for t in MEASURED_TABLES for lvl in levels_of(t)))

    def with_tau(self, tau: Mapping[str, int]) -> PHSafeConfig:
        """A copy with some truncation thresholds replaced."""
        merged = dict(self.tau)
        merged.update({k: int(v) for k, v in tau.items()})
        return PHSafeConfig(
            privacy_budget={t: dict(b) for t, b in self.privacy_budget.items()},
            tau=merged,
            state_filter=list(self.state_filter),
            privacy_defn=self.privacy_defn,
            extra=dict(self.extra),
        )

    def to_dict(self) -> dict[str, Any]:
        """The official config.json layout (every table and level key listed)."""
        out: dict[str, Any] = {
            "privacy_budget": {
                t: {lvl: self.budget(t, lvl) for lvl in levels_of(t)} for t in MEASURED_TABLES
            },
            "tau": {t: int(self.tau[t]) for t in TRUNCATED_TABLES if t in self.tau},
            "state_filter": list(self.state_filter),
            "reader": self.extra.get("reader", "csv"),
            "privacy_defn": self.privacy_defn,
        }
        return out

    def to_json(self) -> str:
        """config.json text; infinite budgets are written as ``Infinity`` like the official files."""
        return json.dumps(self.to_dict(), indent=4, allow_nan=True)

    @classmethod
    def from_json(cls, source: str | os.PathLike[str] | Mapping[str, Any]) -> PHSafeConfig:
        """Parse an official config.json (path, JSON text or already-parsed mapping)."""
        if isinstance(source, Mapping):
            raw: Any = dict(source)
            label = "config"
        else:
            text_or_path = str(source)
            if text_or_path.lstrip().startswith("{"):
                text, label = text_or_path.encode("utf-8"), "config"
            else:
                path = Path(text_or_path)
                if not path.exists():
                    raise ValidationError(f"PHSafe config: no such file {path}")
                text, label = read_input_bytes(path, label=str(path)), path.name
            raw = loads_strict_json(text, label=label, allow_infinity=True)
        if not isinstance(raw, Mapping):
            raise ValidationError(f"{label}: expected a JSON object at the top level")
        # A misspelt key (e.g. "privacy_def") must never fall back to a default silently.
        check_keys(raw, CONFIG_KEYS, where=label)
        missing = [k for k in ("privacy_budget", "tau", "state_filter") if k not in raw]
        if missing:
            raise ValidationError(f"{label}: missing key(s) {', '.join(missing)}")
        budgets = raw["privacy_budget"]
        if not isinstance(budgets, Mapping):
            raise ValidationError(f"{label}: privacy_budget must be an object of tables")
        tau = raw["tau"]
        if not isinstance(tau, Mapping):
            raise ValidationError(f"{label}: tau must be an object mapping tables to integers")
        state_filter = raw["state_filter"]
        if not isinstance(state_filter, list):
            raise ValidationError(f"{label}: state_filter must be a list of state FIPS strings")
        return cls(
            privacy_budget={str(t): _budget_dict(label, str(t), b) for t, b in budgets.items()},
            tau={str(t): _tau_value(label, str(t), v) for t, v in tau.items()},
            state_filter=[s for s in state_filter],
            privacy_defn=str(raw.get("privacy_defn", "zcdp")),
            extra={k: v for k, v in raw.items() if k == "reader"},
        )


def _budget_dict(label: str, table: str, value: Any) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise ValidationError(f"{label}: privacy_budget[{table!r}] must be an object of levels")
    out: dict[str, float] = {}
    for level, budget in value.items():
        if isinstance(budget, bool) or not isinstance(budget, int | float):
            raise ValidationError(
                f"{label}: privacy_budget[{table!r}][{level!r}] must be a number, got {budget!r}"
            )
        out[str(level)] = float(budget)
    return out


def _tau_value(label: str, table: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{label}: tau[{table!r}] must be a whole number, got {value!r}")
    return int(value)


def _validate(config: PHSafeConfig) -> None:
    if config.privacy_defn not in PRIVACY_DEFNS:
        raise ValidationError(
            f"privacy_defn must be one of {', '.join(PRIVACY_DEFNS)}; got {config.privacy_defn!r}"
        )
    unknown = sorted(set(config.privacy_budget) - set(MEASURED_TABLES))
    if unknown:
        raise ValidationError(
            f"privacy_budget has unknown table(s) {unknown}; the measured tables are "
            f"{', '.join(MEASURED_TABLES)} (PH5_num and PH8_num are derived, PHS §6.4.1)"
        )
    for table, levels in config.privacy_budget.items():
        allowed = levels_of(table)
        for level, budget in levels.items():
            if level not in allowed:
                raise ValidationError(
                    f"privacy_budget[{table!r}] has level {level!r}; allowed: {', '.join(allowed)}"
                )
            if math.isnan(budget) or budget < 0:
                raise ValidationError(
                    f"privacy_budget[{table!r}][{level!r}] must be ≥ 0 (0 skips the level); "
                    f"got {budget!r}"
                )
    missing_tau = [t for t in TRUNCATED_TABLES if t not in config.tau and config.enabled_levels(t)]
    if missing_tau:
        raise ValidationError(f"tau is missing for {', '.join(missing_tau)}")
    for table, value in config.tau.items():
        if table not in TRUNCATED_TABLES:
            raise ValidationError(
                f"tau has table {table!r}; only {', '.join(TRUNCATED_TABLES)} are truncated"
            )
        if value <= 0 or value > 10_000:
            raise ValidationError(
                f"tau[{table!r}] must be at least 1 and at most 10,000 (persons kept per "
                f"household); got {value}"
            )
    states = config.state_filter
    if not states:
        raise ValidationError("state_filter must list at least one state FIPS code")
    bad = sorted({str(s) for s in states if not isinstance(s, str) or s not in VALID_STATE_CODES})
    if bad:
        raise ValidationError(
            f'state_filter has invalid code(s) {bad}; use two-digit FIPS strings such as "06"'
        )
    if len(set(states)) != len(states):
        raise ValidationError("state_filter lists a state more than once")
    if PUERTO_RICO in states and len(states) > 1:
        raise ValidationError(
            'state_filter: Puerto Rico ("72") runs separately from the states (PHS §6.6)'
        )
    if config.is_puerto_rico:
        nation = [
            f"{t}/{lvl}"
            for t in MEASURED_TABLES
            for lvl in levels_of(t)
            if lvl.startswith("usa_") and config.budget(t, lvl) != 0
        ]
        if nation:
            raise ValidationError(
                "the Puerto Rico run has no Nation level (PHS §6.6); set these budgets to 0: "
                + ", ".join(nation[:6])
                + (" …" if len(nation) > 6 else "")
            )


# Older names of the shipped PHSafe presets (``phexplore presets list --format json``).
PRESET_ALIASES: dict[str, str] = {"production-us": "phsafe-2020", "production-pr": "phsafe-2020-pr"}


def _phsafe_preset_names() -> tuple[str, ...]:
    return tuple(p.name for p in list_presets("phsafe"))


def preset(name: str) -> PHSafeConfig:
    """A shipped PHSafe preset as an engine configuration (``phsafe-2020``: PHS Table 10;
    ``phsafe-2020-pr``: its Puerto Rico run). The parameters live once, as data, in
    :mod:`engine.dp.presets`; ``production-us`` / ``production-pr`` are accepted aliases."""

    key = PRESET_ALIASES.get(name, name)
    if key not in _phsafe_preset_names():
        raise ValidationError(
            f"unknown PHSafe preset {name!r}; use one of {', '.join(PRESET_NAMES)} or a config.json path"
        )
    return PHSafeConfig.from_json(load_phsafe_preset(key).to_official_config())


PRESET_NAMES: tuple[str, ...] = (*_phsafe_preset_names(), *PRESET_ALIASES)
