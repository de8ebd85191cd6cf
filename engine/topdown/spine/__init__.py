"""Geographic spines for TopDown (SPN: Cumings-Menon et al., Geographic Spines in the 2020 DAS).

* :mod:`.levels` — a spine as nested block-membership arrays (SPN §3);
* :mod:`.osed` — off-spine entity distance (Algorithm 1, eq. 2–5);
* :mod:`.aian` — the AIAN-style inside/outside branch (§1, Figure 1);
* :mod:`.optimized` — optimized block groups and greedy tract groups (§4, §6, Algorithm 2);
* :mod:`.bypass` — bypassing single-child parents (§5, Algorithm 3, Theorem 3);
* :mod:`.entities` — off-spine entity sets by block (shipped Providence wards, uploaded CSVs);
* :mod:`.build` — the spine of a run as a GeoTree with per-node budget proportions;
* :mod:`.report` / :mod:`.runner` — spine-independent MAE and OSED of a run (§7, Tables 2–3);
* :mod:`.cli_options` — the ``--spine`` / ``--entities`` options of ``phexplore run topdown``.
"""

from engine.topdown.spine.build import SPINE_KINDS, BuiltSpine, build_spine
from engine.topdown.spine.entities import EntitySet, block_ids_of, load_entities
from engine.topdown.spine.runner import run_on_spine, spine_report

__all__ = [
    "SPINE_KINDS",
    "BuiltSpine",
    "EntitySet",
    "block_ids_of",
    "build_spine",
    "load_entities",
    "run_on_spine",
    "spine_report",
]
