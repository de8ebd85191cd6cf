"""Geographic spines for TopDown (SPN: Cumings-Menon et al., Geographic Spines in the 2020 DAS).

* :mod:`.levels` — a spine as nested block-membership arrays (SPN §3);
* :mod:`.osed` — off-spine entity distance (Algorithm 1, eq. 2–5);
* :mod:`.aian` — the AIAN-style inside/outside branch (§1, Figure 1);
* :mod:`.optimized` — optimized block groups and greedy tract groups (§4, §6, Algorithm 2);
* :mod:`.bypass` — bypassing single-child parents (§5, Algorithm 3, Theorem 3);
* :mod:`.entities` — off-spine entity sets by block (shipped Providence wards, uploaded CSVs);
* :mod:`.build` — the spine of a run as a GeoTree with per-node budget proportions;
* :mod:`.plan` — what a run's spine options resolve to (the built spine, its entity sets; the
  run's MAE by geography is a metric of the run pipeline: :mod:`engine.runs.spine`,
  :mod:`engine.metrics.spine`).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS: dict[str, str] = {
    "SPINE_KINDS": "engine.topdown.spine.options",
    "BuiltSpine": "engine.topdown.spine.build",
    "build_spine": "engine.topdown.spine.build",
    "EntitySet": "engine.topdown.spine.entities",
    "block_ids_of": "engine.topdown.spine.entities",
    "load_entities": "engine.topdown.spine.entities",
}
"""Public names, imported on first use so that the CLI can parse options without NumPy/SciPy."""

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)
