"""Where a working budget comes from: a shipped preset, "modified from" one, or its own name.

A budget is a preset while its fingerprint (:func:`engine.dp.budget.fingerprint.budget_fingerprint`)
equals the preset's; after any edit of a number it is "modified from" that preset. Every run's
``metrics.json`` ``budget_origin``, the planners and the report use this one function.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from engine.dp.budget import PHSafeBudget, TopDownAllocation
from engine.dp.budget.fingerprint import budget_fingerprint
from engine.dp.presets import list_presets, load_phsafe_preset, load_topdown_preset


def budget_origin(
    budget: PHSafeBudget | Mapping[str, TopDownAllocation] | TopDownAllocation,
    preset: str | None = None,
) -> str:
    """Where a working budget comes from: ``"phsafe-2020"`` or ``"modified from phsafe-2020"``.

    ``preset`` names the preset it was loaded from (for a PHSafe budget its name by default). The
    budget is that preset while its fingerprint equals the preset's; after any edit of a number it
    is "modified from" it. A budget from no known preset is named by its own name.
    """
    name = preset
    if name is None:
        if isinstance(budget, PHSafeBudget | TopDownAllocation):
            name = budget.name
        elif budget:
            # Allocations of a TopDown preset are named "<preset> (<universe>)" or "<preset>".
            name = str(next(iter(budget.values())).name).split(" (")[0]
    known = {p.name for p in list_presets()}
    if not name or name not in known:
        return str(getattr(budget, "name", None) or name or "custom budget")
    universe = budget.universe if isinstance(budget, TopDownAllocation) else None
    kind = "phsafe" if isinstance(budget, PHSafeBudget) else "topdown"
    if budget_fingerprint(budget) == _preset_fingerprint(name, kind, universe):
        return name
    return f"modified from {name}"


@functools.lru_cache(maxsize=64)
def _preset_fingerprint(name: str, kind: str, universe: str | None) -> str | None:
    """Fingerprint of a shipped preset (a universe of a TopDown preset); None if it has none."""
    if kind == "phsafe":
        return budget_fingerprint(load_phsafe_preset(name))
    runs = load_topdown_preset(name)
    if universe is None:
        return budget_fingerprint(runs)
    return budget_fingerprint(runs[universe]) if universe in runs else None
