"""What the pages use of planning: scenarios, target-driven budgets and the MOE tables.

Re-exports the names of :mod:`phexplore.planning` that the Budget session, Scenarios and Start pages
use, so pages import :mod:`phexplore.api` and :mod:`phexplore.app` only.
"""

from __future__ import annotations

from phexplore.planning.moe_tables import phsafe_summary
from phexplore.planning.objectives import OBJECTIVE_LABELS
from phexplore.planning.scenarios import Scenario, compare
from phexplore.planning.targets import (
    plan_phsafe,
    plan_topdown_published,
    tradeoff_scale_phsafe,
    tradeoff_scale_topdown,
)

__all__ = [
    "OBJECTIVE_LABELS",
    "Scenario",
    "compare",
    "phsafe_summary",
    "plan_phsafe",
    "plan_topdown_published",
    "tradeoff_scale_phsafe",
    "tradeoff_scale_topdown",
]
