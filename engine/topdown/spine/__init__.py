"""Geographic spines for TopDown (SPN: Cumings-Menon et al., Geographic Spines in the 2020 DAS).

* :mod:`.levels` — a spine as nested block-membership arrays (SPN §3);
* :mod:`.osed` — off-spine entity distance (Algorithm 1, eq. 2–5);
* :mod:`.aian` — the AIAN-style inside/outside branch (§1, Figure 1);
* :mod:`.optimized` — optimized block groups and greedy tract groups (§4, §6, Algorithm 2);
* :mod:`.bypass` — bypassing single-child parents (§5, Algorithm 3, Theorem 3);
* :mod:`.entities` — off-spine entity sets by block (shipped Providence wards, uploaded CSVs);
* :mod:`.build` — the spine of a run as a GeoTree with per-node budget proportions;
* :mod:`.options` — the spine kinds and defaults, importable without the numerical stack;
* :mod:`.plan` — what a run's spine options resolve to (the built spine, its entity sets; the
  run's MAE by geography is a metric of the run pipeline: :mod:`engine.runs.spine`,
  :mod:`engine.metrics.spine`).

Import the names from their modules (the package itself imports nothing).
"""
