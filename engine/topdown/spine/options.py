"""Names and defaults of the spine options, importable without the numerical stack (CLI parsing).

* :data:`SPINE_KINDS` — the spines of SPN §1, §4–§6: conventional, AIAN-style, optimized;
* :data:`DEFAULT_FANOUT_CUTOFF` — optimized block groups and tract groups hold at most
  ⌊√n + fanout_cutoff⌋ units (SPN §4, Algorithm 2); 12 is the default of the Census Bureau's DAS
  production code;
* :data:`DATA_PLACES` — the entity source ``places``: the data's own places.
"""

from __future__ import annotations

SPINE_KINDS: tuple[str, ...] = ("conventional", "aian", "optimized")
DEFAULT_FANOUT_CUTOFF = 12
DATA_PLACES = "places"
"""The entity source naming the data's own places (a generated population's ``places.csv``,
``extra["places"]`` of its histogram; :func:`engine.topdown.spine.entities.places_entity_set`)."""
