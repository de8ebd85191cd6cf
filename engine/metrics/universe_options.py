"""Names of the error universes, importable without the numerical stack (CLI parsing, run options).

The blocks a run's block-level figures average over (:mod:`engine.metrics.universe`; docs/metrics.md
"The block universe"):

* :data:`HOUSED` — the blocks with housing units or group quarters where the data carry a unit
  frame, as TDA (Tables 9, 10, 12; §9); every block otherwise, and the run says so;
* :data:`ALL` — every block in the data (PHExplore's figures before the universe was recorded).
"""

from __future__ import annotations

HOUSED = "housed"
ALL = "all"
UNIVERSES: tuple[str, ...] = (HOUSED, ALL)
"""The universes a run may ask for (``--error-universe``, the run option ``error_universe``)."""
