"""How much of a run the app holds in memory (the Results page and runs of the session).

A TopDown run has one dense comparison row per geounit × query cell: tens of millions at production
scale. The app keeps at most :data:`APP_MAX_ROWS` of them (the queries chosen by
:func:`engine.runs.dense_rows.chosen_queries`); the other queries' metrics stay in ``metrics.json``.
Read as ``limits.APP_MAX_ROWS`` at call time, so a test can lower it.
"""

from __future__ import annotations

APP_MAX_ROWS = 5_000_000
"""Dense estimate rows the app holds for one run or opened folder (≈ 0.5 GB in pandas)."""
CSV_CONVERSION_MAX_ROWS = 1_000_000
"""Tables of at most this many rows are offered as CSV too (a conversion in memory)."""
