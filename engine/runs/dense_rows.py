"""Which queries of a run's dense comparison table the app holds (its row limit, docs/app.md).

A TopDown run has one dense row per geounit × query cell: tens of millions at production scale.
The app (a run of the session, or a run folder opened on the Results page) keeps at most a set
number of them: every query when they fit, else the smallest queries that fit together, TOTAL
first. The other queries' metrics stay in metrics.json and the tables computed from the sparse
residuals.
"""

from __future__ import annotations

from collections.abc import Mapping


def chosen_queries(sizes: Mapping[str, int], n_nodes: int, limit: int) -> list[str]:
    """Queries (``sizes``: query → answer cells, in the run's order) whose dense rows
    (cells × ``n_nodes`` geounits) fit in ``limit`` together, smallest first (TOTAL first)."""
    chosen, used = [], 0
    for query, size in sorted(sizes.items(), key=lambda kv: (kv[0] != "TOTAL", kv[1])):
        if used + int(size) * n_nodes > limit:
            continue
        chosen.append(str(query))
        used += int(size) * n_nodes
    return chosen
