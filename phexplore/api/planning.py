"""What the pages use of planning: scenarios, target-driven budgets, the MOE tables, scaling a budget,
baselines and the committee's table.

Re-exports the names of :mod:`phexplore.planning` that the planners, Budget session, Scenarios and
Start pages use, so pages import :mod:`phexplore.api` and :mod:`phexplore.app` only.
"""

from __future__ import annotations

from phexplore.planning.changes import change_sentence, scenario_changes
from phexplore.planning.committee import (
    MEASURE_LABELS,
    committee_queries,
    committee_rows,
    persons_run,
    published_rows,
    table_queries,
)
from phexplore.planning.deltas import relative, with_baseline
from phexplore.planning.moe_tables import phsafe_summary
from phexplore.planning.objectives import OBJECTIVE_LABELS
from phexplore.planning.scaling import (
    format_percent,
    percent_factor,
    scale_phsafe,
    scale_topdown_runs,
)
from phexplore.planning.scenarios import Scenario, compare
from phexplore.planning.targets import (
    plan_phsafe,
    plan_topdown_published,
    tradeoff_scale_phsafe,
    tradeoff_scale_topdown,
)

__all__ = [
    "MEASURE_LABELS",
    "OBJECTIVE_LABELS",
    "Scenario",
    "change_sentence",
    "committee_queries",
    "committee_rows",
    "compare",
    "format_percent",
    "percent_factor",
    "persons_run",
    "phsafe_summary",
    "published_rows",
    "plan_phsafe",
    "plan_topdown_published",
    "relative",
    "scale_phsafe",
    "scale_topdown_runs",
    "scenario_changes",
    "table_queries",
    "tradeoff_scale_phsafe",
    "tradeoff_scale_topdown",
    "with_baseline",
]
