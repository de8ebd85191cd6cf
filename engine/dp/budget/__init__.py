"""Typed budget models: TopDown allocations and PHSafe parameters (docs/science.md §1, §3, §4).

Re-exports :class:`TopDownAllocation` (:mod:`engine.dp.budget.allocation`) and :class:`PHSafeBudget`
(:mod:`engine.dp.budget.phsafe`) so callers write ``from engine.dp.budget import ...``.
"""

from engine.dp.budget.allocation import (
    ShareProblem,
    TopDownAllocation,
    locate_share_problems,
    validate_topdown,
)
from engine.dp.budget.fractions_io import format_fraction, parse_fraction
from engine.dp.budget.invariants import (
    HELD_EXACT,
    BudgetUse,
    budget_use,
    default_states,
    spread_invariant_share,
)
from engine.dp.budget.phsafe import (
    LEVEL_KEYS,
    LEVEL_LABELS,
    PHSafeBudget,
    allowed_levels,
    level_key,
    resolve_level_spec,
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
