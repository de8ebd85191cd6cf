"""Preset registry: named budget configurations stored as JSON data files beside this module.

Each file carries a ``citation``. TopDown presets (TDA Tables 3–8, PF's 1940 E2E settings) hold
exact 'a/b' shares validated to sum to 1 (docs/science.md §4 lists the transcription typos that
validation must catch); PHSafe presets hold τ and MOE targets from PHS Table 10, from which ρ
follows (docs/science.md §2). A preset may be ``derived_from`` another: TopDown derivations fold or
rename geolevels (per-query budgets c·d add, as in SPN Algorithm 3) and project queries onto a
smaller schema; PHSafe derivations drop levels and set a state filter (Puerto Rico, PHS §6.6).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Any

from engine.core.errors import ValidationError
from engine.core.numbers import as_float
from engine.core.strict_json import as_mapping, check_keys, loads_strict_json
from engine.dp.budget import PHSafeBudget, TopDownAllocation, parse_fraction
from engine.dp.budget.phsafe import PHSAFE_KEYS, allowed_levels, parse_moe_targets, parse_tau
from engine.dp.moe import PHSAFE_TABLES, phsafe_sensitivity, rho_for_moe
from engine.schema.query_cells import allocation_schema

PRESET_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class PresetInfo:
    """What ``phexplore presets list`` shows about one preset."""

    name: str
    kind: str
    title: str
    citation: str
    notes: tuple[str, ...]


def _read(name: str) -> dict[str, Any]:
    return copy.deepcopy(dict(_read_cached(name)))


@lru_cache(maxsize=32)
def _read_cached(name: str) -> Mapping[str, Any]:
    path = PRESET_DIR / f"{name}.json"
    if not path.is_file():
        known = ", ".join(p.name for p in list_presets())
        raise ValidationError(f"unknown preset {name!r}; known presets: {known}")
    return loads_strict_json(path.read_bytes(), label=str(path), allow_infinity=True)


def list_presets(kind: str | None = None) -> list[PresetInfo]:
    """Every shipped preset (optionally only ``kind`` = "topdown" or "phsafe"), sorted by name."""
    out = []
    for path in sorted(PRESET_DIR.glob("*.json")):
        data = loads_strict_json(path.read_bytes(), label=str(path), allow_infinity=True)
        info = PresetInfo(
            name=data["name"],
            kind=data["kind"],
            title=data.get("title", ""),
            citation=data.get("citation", ""),
            notes=tuple(data.get("notes", ())),
        )
        if kind is None or info.kind == kind:
            out.append(info)
    return out


def preset_info(name: str) -> PresetInfo:
    """Metadata of one preset."""
    data = _read(name)
    return PresetInfo(
        name,
        data["kind"],
        data.get("title", ""),
        data.get("citation", ""),
        tuple(data.get("notes", ())),
    )


# ---------------------------------------------------------------------------- TopDown


def topdown_from_dict(data: Mapping[str, Any]) -> dict[str, TopDownAllocation]:
    """Allocations keyed by universe from a preset-shaped dict (``runs``) or a single allocation."""
    data = as_mapping(data, where="allocation")
    name = str(data.get("name", "allocation"))
    citation = str(data.get("citation", ""))
    schema = data.get("schema")
    if "runs" not in data:
        alloc = TopDownAllocation.from_dict({**data, "citation": citation}, name=name)
        return {alloc.universe: alloc}
    runs = data["runs"]
    if not isinstance(runs, Mapping) or not runs:
        raise ValidationError(f"{name}: 'runs' must map universes (persons, units) to allocations")
    out = {}
    for universe, run in runs.items():
        run = as_mapping(run, where=f"{name}: runs[{universe!r}]")
        out[str(universe)] = TopDownAllocation.from_dict(
            {
                **run,
                "universe": universe,
                "citation": citation,
                "schema": run.get("schema", schema),
            },
            name=f"{name} ({universe})",
        )
    return out


def preset_spine(name: str) -> dict[str, str] | None:
    """The spine a TopDown preset ran on in the Census Bureau's runs (its ``spine`` entry: ``kind``,
    ``targets``, ``citation``), or None when it names none (the conventional spine). ``name`` may
    be an allocation's name, ``"topdown-2020-production (persons)"``."""
    base = str(name).split(" (", 1)[0].strip()
    if not (PRESET_DIR / f"{base}.json").is_file():
        return None
    entry = _read_cached(base).get("spine")
    if not isinstance(entry, Mapping):
        return None
    return {str(k): str(v) for k, v in entry.items()}


def load_topdown_preset(name: str) -> dict[str, TopDownAllocation]:
    """Load a TopDown preset: ``{"persons": TopDownAllocation, ...}`` (validated; exact shares)."""
    data = _read(name)
    if data.get("kind") != "topdown":
        raise ValidationError(f"preset {name!r} is a {data.get('kind')} preset, not a TopDown one")
    if "derived_from" in data:
        return {"persons": _derive_topdown(data)}
    return topdown_from_dict(data)


def _derive_topdown(data: Mapping[str, Any]) -> TopDownAllocation:
    spec = data["derived_from"]
    base = load_topdown_preset(spec["preset"])[spec.get("run", "persons")]
    rename: dict[str, str] = spec.get("level_rename", {})
    qmap: dict[str, str] = spec.get("query_map", {})
    absolute: dict[str, dict[str, Fraction]] = {}
    for level in base.geolevels:
        target = rename.get(level, level)
        bucket = absolute.setdefault(target, {})
        for q in base.queries(level):
            if q not in qmap:
                raise ValidationError(f"{data['name']}: query_map lacks {q!r} (from {level})")
            tq = qmap[q]
            bucket[tq] = bucket.get(tq, Fraction(0)) + base.level_shares[level] * base.query_share(
                level, q
            )
    levels = list(absolute)
    for extra, where in spec.get("extra_levels", {}).items():
        levels.insert(levels.index(where["after"]) + 1, extra)
        absolute[extra] = {}
        if parse_fraction(where.get("share", "0"), where=extra) != 0:
            raise ValidationError(f"{data['name']}: extra levels carry no budget")
    level_shares = {lv: sum(absolute[lv].values(), Fraction(0)) for lv in levels}
    query_shares = {
        lv: {q: a / level_shares[lv] for q, a in absolute[lv].items()} if level_shares[lv] else {}
        for lv in levels
    }
    return TopDownAllocation(
        name=data["name"],
        universe=base.universe,
        rho=parse_fraction(spec.get("rho", base.rho), where=f"{data['name']}: rho"),
        geolevels=tuple(levels),
        level_shares=level_shares,
        query_shares=query_shares,
        mechanism=base.mechanism,
        citation=str(data.get("citation", "")),
        schema=data.get("schema", base.schema),
    )


# ---------------------------------------------------------------------------- PHSafe


def phsafe_from_dict(data: Mapping[str, Any], *, name: str | None = None) -> PHSafeBudget:
    """A PHSafe budget from a preset-shaped dict (τ + MOE targets) or an official config."""
    data = as_mapping(data, where=name or "config.json")
    label = name or str(data.get("name", "config.json"))
    check_keys(data, (*PHSAFE_KEYS, "derived_from"), where=label)
    if data.get("rho_from") != "moe_targets":
        return PHSafeBudget.from_dict(data, name=label)
    missing = [k for k in ("tau", "moe_targets") if k not in data]
    if missing:
        raise ValidationError(
            f"{label}: MOE-target budgets need {' and '.join(repr(m) for m in missing)}"
        )
    tau = parse_tau(data["tau"], where=label)
    confidence = as_float(data.get("confidence", 0.90), where=f"{label}: confidence")
    targets = parse_moe_targets(data["moe_targets"], where=label)
    budgets: dict[str, dict[str, float]] = {}
    for table, row in targets.items():
        if table not in PHSAFE_TABLES:
            raise ValidationError(f"{label}: unknown table {table!r} in moe_targets")
        delta = phsafe_sensitivity(table, tau.get(table))
        budgets[table] = {
            k: rho_for_moe(float(m), delta, confidence)
            for k, m in row.items()
            if k in allowed_levels(table)
        }
    return PHSafeBudget(
        name=label,
        budgets=budgets,
        tau=tau,
        privacy_defn=str(data.get("privacy_defn", "zcdp")),
        state_filter=tuple(data["state_filter"]) if data.get("state_filter") else None,
        moe_targets=targets,
        confidence=confidence,
        citation=str(data.get("citation", "")),
    )


def load_phsafe_preset(name: str) -> PHSafeBudget:
    """Load a PHSafe preset (e.g. ``phsafe-2020``: PHS Table 10)."""
    data = _read(name)
    if data.get("kind") != "phsafe":
        raise ValidationError(f"preset {name!r} is a {data.get('kind')} preset, not a PHSafe one")
    if "derived_from" in data:
        spec = data["derived_from"]
        base = load_phsafe_preset(spec["preset"]).without_levels(spec.get("drop_levels", ()))

        return replace(
            base,
            name=data["name"],
            state_filter=tuple(spec["state_filter"]) if spec.get("state_filter") else None,
            citation=str(data.get("citation", "")),
        )
    return phsafe_from_dict(data, name=data["name"])


def default_topdown_preset(schema: str) -> str | None:
    """The TopDown preset to start from for data of ``schema`` (the default allocation follows the
    data's schema).

    Among the presets whose persons allocation counts cells of ``schema``, a production-like one
    is preferred (``ri2010`` → ``ri2010-production-like``, ``redistricting2020`` →
    ``topdown-2020-production``); None when no preset fits the schema.
    """

    fitting = []
    for info in list_presets("topdown"):
        persons = load_topdown_preset(info.name).get("persons")
        if persons is not None and allocation_schema(persons.all_queries(), persons.schema) == (
            schema
        ):
            fitting.append(info.name)
    preferred = [n for n in fitting if "production" in n]
    return (preferred or fitting or [None])[0]
