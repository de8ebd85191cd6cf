"""What the pages use of the library's budgets: allocations, PHSafe budgets, presets, accounting, MOE.

Pages import ``engine`` only through :mod:`phexplore.api`; this module names the budget and
privacy-accounting pieces of :mod:`engine.dp` (and the user-facing error type) that the planner,
Run and Results pages use, so the page code reads the same names as the library.
"""

from __future__ import annotations

from engine.core.errors import PHExploreError
from engine.core.strict_json import load_json_object
from engine.dp.accounting import conversions, epsilon_for_delta
from engine.dp.budget import (
    LEVEL_KEYS,
    PHSafeBudget,
    ShareProblem,
    TopDownAllocation,
    allowed_levels,
    default_states,
    format_fraction,
    locate_share_problems,
)
from engine.dp.budget.fingerprint import budget_fingerprint, short_fingerprint
from engine.dp.budget.fractions_io import exact_from_input
from engine.dp.budget.invariants import (
    HELD_EXACT,
    SPREAD_LABEL,
    held_exact_notes,
    spent_label,
    spread_invariant_share,
)
from engine.dp.conversions import CONVERSIONS
from engine.dp.moe import PHSAFE_DENOMINATOR_TABLES, PHSAFE_TABLES, moe_for_rho
from engine.dp.origin import BudgetChange, Origin, budget_origin, describe_origin
from engine.dp.presets import (
    default_topdown_preset,
    load_phsafe_preset,
    load_topdown_preset,
    phsafe_from_dict,
    preset_spine,
)
from engine.prediction import describe_profile, shipped_profile_for
from engine.schema.query_cells import schema_mismatch

__all__ = [
    "BudgetChange",
    "CONVERSIONS",
    "Origin",
    "describe_origin",
    "exact_from_input",
    "HELD_EXACT",
    "LEVEL_KEYS",
    "PHExploreError",
    "PHSAFE_DENOMINATOR_TABLES",
    "PHSAFE_TABLES",
    "PHSafeBudget",
    "SPREAD_LABEL",
    "ShareProblem",
    "TopDownAllocation",
    "allowed_levels",
    "budget_fingerprint",
    "budget_origin",
    "conversions",
    "default_states",
    "default_topdown_preset",
    "describe_profile",
    "epsilon_for_delta",
    "format_fraction",
    "held_exact_notes",
    "load_json_object",
    "load_phsafe_preset",
    "load_topdown_preset",
    "locate_share_problems",
    "moe_for_rho",
    "phsafe_from_dict",
    "preset_spine",
    "schema_mismatch",
    "shipped_profile_for",
    "short_fingerprint",
    "spent_label",
    "spread_invariant_share",
]
