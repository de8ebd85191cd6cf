"""Truncation diagnostics of a PHSafe run, as a frame and as JSON (PHS §7.1; docs/science.md §3).

How many joined persons each truncated table's τ dropped, and the share other candidate τ values
would drop (:class:`engine.phsafe.join.TruncationStats`): a diagnostic of the engine's own
truncate-and-join step, not a comparison with the truth. The truncation *error* of the counts
(T_τ − T against the untruncated truth) is a metric: :mod:`engine.metrics.phsafe_errors`.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from engine.phsafe.join import TruncationStats


def truncation_frame(stats: Mapping[str, TruncationStats]) -> pd.DataFrame:
    """One row per truncated table and candidate τ: the share of joined persons dropped."""
    rows = []
    for table, s in stats.items():
        for tau, share in s.share_dropped_by_tau.items():
            rows.append(
                {
                    "table": table,
                    "tau": tau,
                    "share_dropped": share,
                    "configured": tau == s.tau,
                    "persons_joined": s.persons_joined,
                }
            )
    return pd.DataFrame(rows)


def truncation_summary(stats: Mapping[str, TruncationStats]) -> dict[str, dict[str, object]]:
    """JSON-ready truncation statistics per table at its configured τ."""
    return {
        table: {
            "tau": s.tau,
            "persons_joined": s.persons_joined,
            "persons_dropped": s.persons_dropped,
            "share_dropped": s.share_dropped,
            "households": s.households,
            "households_over_tau": s.households_over_tau,
            "largest_household": s.largest_household,
            "share_dropped_by_tau": {str(t): v for t, v in s.share_dropped_by_tau.items()},
        }
        for table, s in stats.items()
    }
