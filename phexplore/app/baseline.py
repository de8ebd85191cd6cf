"""The baseline every planner number is compared with, and the trainer's "reset to start".

Session glue, no science. Each planner has a baseline budget: by default the production preset of
the working budget's kind and schema (``phsafe-2020``; ``topdown-2020-production``, or
``ri2010-production-like`` for allocations of the RI 2010 sample's schema), or any shipped preset,
any saved scenario of that kind, or a snapshot of the working budget ("pinned"). Pages show the
working value beside the baseline's with Δ and Δ% (:mod:`phexplore.planning.deltas`).

Functions take the session state as a mapping (``st.session_state`` in the app), so tests can pass
a dict.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

import streamlit as st

from engine.dp.budget import PHSafeBudget, TopDownAllocation
from engine.dp.conversions import DEFAULT_DELTA
from engine.dp.presets import (
    default_topdown_preset,
    list_presets,
    load_phsafe_preset,
    load_topdown_preset,
)
from engine.schema.query_cells import allocation_schema
from phexplore.app import state as S

AUTO = "auto"
PINNED = "pinned"
KEYS = {"phsafe": "baseline_phsafe", "topdown": "baseline_topdown"}
"""Session keys: the chosen baseline of each planner (``{"choice": …, "budget": …, "label": …}``)."""


@dataclass(frozen=True)
class Baseline:
    """A planner's baseline: what it is called on screen and the budget itself."""

    label: str
    choice: str
    phsafe: PHSafeBudget | None = None
    topdown: Mapping[str, TopDownAllocation] | None = None


@functools.lru_cache(maxsize=8)
def _production_for(schema: str) -> str:
    """The production-like TopDown preset of a schema (cached: it reads every preset once)."""
    return default_topdown_preset(schema) or S.DEFAULT_TOPDOWN_PRESET


@functools.lru_cache(maxsize=16)
def _topdown_preset(name: str) -> dict[str, TopDownAllocation]:
    return load_topdown_preset(name)


@functools.lru_cache(maxsize=8)
def _phsafe_preset(name: str) -> PHSafeBudget:
    return load_phsafe_preset(name)


def schema_of(runs: Mapping[str, TopDownAllocation]) -> str:
    """The schema of the persons run (the first run when there is none)."""
    alloc = next((a for a in runs.values() if a.universe == "persons"), next(iter(runs.values())))
    return allocation_schema(alloc.all_queries(), alloc.schema)


def choices(kind: str, state: Mapping[str, Any] | None = None) -> dict[str, str]:
    """``{choice: label}`` for the baseline picker of ``kind`` ("phsafe" or "topdown")."""
    s = st.session_state if state is None else state
    out = {AUTO: "Production (default)"}
    out.update({f"preset:{p.name}": f"Preset {p.name}" for p in list_presets(kind)})
    for name, scenario in (s.get(S.SAVED) or {}).items():
        if scenario.kind == kind:
            out[f"scenario:{name}"] = f"Saved scenario “{name}”"
    chosen = s.get(KEYS[kind]) or {}
    if chosen.get("choice") == PINNED:
        out[PINNED] = chosen["label"]
    return out


def topdown_baseline(state: Mapping[str, Any] | None = None) -> Baseline:
    """The TopDown planner's baseline (default: production of the working allocations' schema)."""
    s = st.session_state if state is None else state
    chosen = s.get(KEYS["topdown"]) or {}
    choice = chosen.get("choice", AUTO)
    if choice != AUTO and chosen.get("budget"):
        return Baseline(chosen["label"], choice, topdown=chosen["budget"])
    name = _production_for(schema_of(s[S.TOPDOWN]))
    return Baseline(name, AUTO, topdown=_topdown_preset(name))


def phsafe_baseline(state: Mapping[str, Any] | None = None) -> Baseline:
    """The PHSafe planner's baseline (default: ``phsafe-2020``)."""
    s = st.session_state if state is None else state
    chosen = s.get(KEYS["phsafe"]) or {}
    choice = chosen.get("choice", AUTO)
    if choice != AUTO and chosen.get("budget") is not None:
        return Baseline(chosen["label"], choice, phsafe=chosen["budget"])
    return Baseline(S.DEFAULT_PHSAFE_PRESET, AUTO, phsafe=_phsafe_preset(S.DEFAULT_PHSAFE_PRESET))


def set_baseline(kind: str, choice: str, state: MutableMapping[str, Any] | None = None) -> None:
    """Make ``choice`` (a key of :func:`choices`) the baseline of ``kind``."""
    s = st.session_state if state is None else state
    key = KEYS[kind]
    if choice == AUTO:
        s[key] = {"choice": AUTO}
    elif choice == PINNED:
        return  # the pinned snapshot stays as it is
    elif choice.startswith("preset:"):
        name = choice.split(":", 1)[1]
        budget: Any = _phsafe_preset(name) if kind == "phsafe" else _topdown_preset(name)
        s[key] = {"choice": choice, "label": name, "budget": budget}
    elif choice.startswith("scenario:"):
        name = choice.split(":", 1)[1]
        scenario = (s.get(S.SAVED) or {})[name]
        budget = scenario.phsafe if kind == "phsafe" else dict(scenario.topdown or {})
        s[key] = {"choice": choice, "label": f"scenario “{name}”", "budget": budget}


def pin_working(kind: str, state: MutableMapping[str, Any] | None = None) -> str:
    """Make a snapshot of the working budget the baseline; returns its label."""
    s = st.session_state if state is None else state
    when = dt.datetime.now().strftime("%H:%M:%S")
    if kind == "phsafe":
        budget: Any = S.effective_phsafe(s)
        origin = S.phsafe_origin(s)
    else:
        budget = dict(s[S.TOPDOWN])
        origin = S.topdown_origin(s)
    label = f"pinned {origin} ({when})"
    s[KEYS[kind]] = {"choice": PINNED, "label": label, "budget": budget}
    return label


def restore_baseline(kind: str, state: MutableMapping[str, Any] | None = None) -> str:
    """Make the baseline the working budget again (its label is returned for a message)."""
    s = st.session_state if state is None else state
    if kind == "phsafe":
        base = phsafe_baseline(s)
        s[S.PHSAFE] = base.phsafe
        s[S.PHSAFE_DISABLED] = []
        s.pop("ps_enabled_levels", None)
    else:
        base = topdown_baseline(s)
        s[S.TOPDOWN] = dict(base.topdown or {})
        if base.label in {p.name for p in list_presets("topdown")}:
            s[S.TOPDOWN_PRESET] = base.label
            s["td_preset_pick"] = base.label
        s.pop("td_base", None)
    S.bump_editor_version(s)
    return base.label


WIDGET_PREFIXES = ("ps_", "td_", "pl_", "sb_")
"""Widget keys reset to the start: the planners', the privacy page's and the sidebar's (the Run,
Results and Budget-session pages' settings, the runs and the saved scenarios are left as they are)."""


def reset_to_start(state: MutableMapping[str, Any] | None = None) -> None:
    """Put the planners back where the app opens (trainers, between groups): the production PHSafe
    budget and TopDown allocations, the default baselines, spine, δ, conversion and scenario name.

    Runs of the session and saved scenarios are kept (nothing a user made is deleted).
    """
    s = st.session_state if state is None else state
    s[S.PHSAFE] = _phsafe_preset(S.DEFAULT_PHSAFE_PRESET)
    s[S.PHSAFE_DISABLED] = []
    s[S.TOPDOWN] = dict(_topdown_preset(S.DEFAULT_TOPDOWN_PRESET))
    s[S.TOPDOWN_PRESET] = S.DEFAULT_TOPDOWN_PRESET
    s[S.SPINE] = "conventional"
    s[S.SPREAD_INVARIANT] = False
    s[S.DELTA] = DEFAULT_DELTA
    s[S.CONVERSION] = "cks"
    s[S.SCENARIO_NAME] = "Working scenario"
    for key in KEYS.values():
        s[key] = {"choice": AUTO}
    for key in [k for k in list(s.keys()) if isinstance(k, str) and k.startswith(WIDGET_PREFIXES)]:
        del s[key]
    S.bump_editor_version(s)
