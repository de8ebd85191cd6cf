"""Typed budget models: TopDown allocations and PHSafe parameters (SPEC §1, §3, §4).

Re-exports :class:`TopDownAllocation` (:mod:`phexplore.budget.topdown`) and :class:`PHSafeBudget`
(:mod:`phexplore.budget.phsafe`) so callers write ``from phexplore.budget import ...``.
"""

from phexplore.budget.fractions_io import format_fraction, parse_fraction
from phexplore.budget.invariants import (
    HELD_EXACT,
    BudgetUse,
    budget_use,
    default_states,
    spread_invariant_share,
)
from phexplore.budget.phsafe import (
    LEVEL_KEYS,
    LEVEL_LABELS,
    PHSafeBudget,
    allowed_levels,
    level_key,
    resolve_level_spec,
)
from phexplore.budget.topdown import (
    ShareProblem,
    TopDownAllocation,
    locate_share_problems,
    validate_topdown,
)

__all__ = [
    "HELD_EXACT",
    "BudgetUse",
    "budget_use",
    "default_states",
    "spread_invariant_share",
    "LEVEL_KEYS",
    "LEVEL_LABELS",
    "PHSafeBudget",
    "ShareProblem",
    "TopDownAllocation",
    "allowed_levels",
    "format_fraction",
    "level_key",
    "locate_share_problems",
    "parse_fraction",
    "resolve_level_spec",
    "validate_topdown",
]
