"""Target files of ``phexplore plan``: every value's JSON type checked, each problem located.

``plan phsafe --targets FILE`` reads ``{"tau": {TABLE: τ}, "moe_targets": {TABLE: {LEVEL: MOE}}}``
(plus, optionally, the other keys of a PHSafe budget file); ``plan topdown --targets FILE`` reads
``{"runs": {RUN: {"sigma" | "moe90": {LEVEL: {QUERY: value}}, "geolevels": [LEVEL, …]}}}``. A
list where an object belongs, a string where a list belongs, a number where a mapping belongs or an
unknown key is refused here with the key path (``t.json: runs.persons.moe90.State: expected a JSON
object, got a list``), never met later as an internal error. Numbers are checked by the planners
(:func:`phexplore.planning.targets.plan_topdown`, the PHSafe budget reader).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.core.errors import ValidationError
from engine.core.numbers import as_float, value_kind
from engine.core.strict_json import as_mapping, check_keys

TOPDOWN_RUN_KEYS = ("sigma", "moe90", "geolevels")
"""Keys of one run of a TopDown targets file."""


def _objects_of_objects(value: Any, where: str) -> dict[str, dict[str, Any]]:
    """``{A: {B: value}}`` with both levels JSON objects, located when not."""
    outer = as_mapping(value, where=where)
    return {str(k): as_mapping(v, where=f"{where}.{k}") for k, v in outer.items()}


def phsafe_targets_budget(data: Mapping[str, Any], label: str) -> dict[str, Any]:
    """The PHSafe budget dict a targets file stands for: its own keys, with a placeholder
    ``privacy_budget`` (ρ 1 for every targeted table and level) that the planner replaces."""
    missing = [key for key in ("tau", "moe_targets") if key not in data]
    if missing:
        raise ValidationError(f"{label}: needs 'tau' and 'moe_targets' (missing {missing})")
    as_mapping(data["tau"], where=f"{label}: tau")
    targets = _objects_of_objects(data["moe_targets"], f"{label}: moe_targets")
    placeholder = {table: dict.fromkeys(levels, 1.0) for table, levels in targets.items()}
    return {**data, "privacy_budget": placeholder}


def topdown_targets(
    data: Mapping[str, Any], label: str, z90: float
) -> tuple[dict[str, dict[str, dict[str, float]]], dict[str, list[str]]]:
    """(σ targets per run → level → query, geolevels per run) of a TopDown targets file; MOE
    targets (``moe90``) are divided by ``z90`` (the 90% normal quantile) into σ."""
    runs = data.get("runs")
    if not isinstance(runs, Mapping) or not runs:
        raise ValidationError(
            f"{label}: needs 'runs' mapping run names to targets, e.g. "
            '{"runs": {"persons": {"sigma": {"State": {"TOTAL": 5}}}}}'
            + ("" if runs is None else f"; got {value_kind(runs)}")
        )
    targets: dict[str, dict[str, dict[str, float]]] = {}
    geolevels: dict[str, list[str]] = {}
    for run, raw in runs.items():
        where = f"{label}: runs.{run}"
        spec = as_mapping(raw, where=where)
        check_keys(spec, TOPDOWN_RUN_KEYS, where=where)
        if ("sigma" in spec) == ("moe90" in spec):
            raise ValidationError(f"{where}: give either 'sigma' or 'moe90' targets (one of them)")
        key = "sigma" if "sigma" in spec else "moe90"
        levels = _objects_of_objects(spec[key], f"{where}.{key}")
        divisor = 1.0 if key == "sigma" else z90
        targets[str(run)] = {
            level: {
                str(q): as_float(v, where=f"{where}.{key}.{level}.{q}") / divisor
                for q, v in queries.items()
            }
            for level, queries in levels.items()
        }
        order = spec.get("geolevels", list(levels))
        if not isinstance(order, list) or not all(isinstance(lv, str) for lv in order):
            raise ValidationError(
                f'{where}.geolevels: expected a list of level names (e.g. ["State", '
                f'"County"]), got {value_kind(order)}'
            )
        geolevels[str(run)] = list(order)
    return targets, geolevels
