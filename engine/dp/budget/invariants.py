"""Which TopDown queries are held exact, and the budget the noisy measurements actually spend.

TDA §5.2: the total population of the US and of every state is *invariant* — published exactly,
bypassing the noise mechanism. A share of ρ assigned to such a query (e.g. State TOTAL, 86 % of the
state level's share in ``ri2010-production-like``) buys no measurement: it is **nominal** budget,
not spent. TDA §7.4 and Table 7's note: the State TOTAL share is spent only in states split into an
AIAN and a non-AIAN branch, where each branch's total is measured and only their sum is held.

SPN §5 (Algorithm 3, Observation 1): on a one-state geography an allocation rooted at ``US`` has a
single-child US geounit; it is bypassed and the state, taking its place, is measured at the summed
level share with the **US level's** query proportions — the State level's proportions are not used.

ρ (ε for pure DP) composes along a root-to-block path (parallel composition across geounits of a
level, sequential composition down the path; SPN Theorem 3), so the budget spent is the path sum of
the per-query budgets ρ·c·α over the queries that are measured with noise. This module is the
analytic twin of :func:`engine.topdown.measure.spent_budget`, which computes the same number from
a run's actual spine; the two agree on conventional spines (tested).

:func:`spread_invariant_share` is an explicit **departure from production**: it moves the share of
each held-exact query to the other queries of its level (in proportion to their shares), so the
whole nominal budget buys measurements.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from fractions import Fraction

from engine.core.errors import ValidationError
from engine.dp.budget.allocation import TopDownAllocation
from engine.dp.budget.fractions_io import format_fraction

INVARIANT_QUERIES: Mapping[str, tuple[str, ...]] = {"US": ("TOTAL",), "State": ("TOTAL",)}
"""Person queries published exactly, by level (TDA §5.2: US and state total population)."""

HELD_EXACT = "held exact — no noise"
"""How the planners label an invariant query in place of its σ and MOE."""

NOT_USED = "not used — one state: measured with the US level's shares (SPN §5)"
"""How the planners label a level whose query shares a one-state bypass replaces."""

SEVERAL_STATES = 52
"""Default number of states for an allocation with a US level (50 states, DC and Puerto Rico)."""

SPREAD_LABEL = "invariant share spread over the level's other queries (departure from production)"

STATE_TOTAL_NOTE = (
    "State TOTAL is held exact — no noise — in a state without AIAN areas on the spine, so there "
    "its share buys no measurement; the Census Bureau's runs (the April 2021 demonstration and "
    "production) did spend it in the states split into AIAN and non-AIAN branches (the states "
    "with AIAN areas, 36 in 2010), where each branch's total is measured with noise and only "
    "their sum is invariant (TDA §7.4; the notes to Tables 4 and 7). PHExplore spends it only on "
    "runs with --special-areas (an AIAN-style branch)"
)
"""Beside a held-exact State TOTAL: what TopDown did with that share in AIAN-split states."""


def default_states(allocation: TopDownAllocation) -> int:
    """Several states (52) when the allocation has a ``US`` level, one otherwise (e.g. RI)."""
    return SEVERAL_STATES if "US" in allocation.geolevels else 1


def _check_states(n_states: int) -> int:
    if isinstance(n_states, bool) or not isinstance(n_states, int) or n_states < 1:
        raise ValidationError(
            f"the number of states must be a whole number ≥ 1 (1 for one state or part of one, "
            f"52 for the US); got {n_states!r}"
        )
    return n_states


def folds_us_into_state(allocation: TopDownAllocation, n_states: int) -> bool:
    """Whether the US level is a single-child parent bypassed into the state (SPN §5)."""
    levels = allocation.geolevels
    return _check_states(n_states) == 1 and len(levels) > 1 and levels[:2] == ("US", "State")


@dataclass(frozen=True)
class BudgetUse:
    """How an allocation's nominal budget is used on a geography with ``n_states`` states.

    ``held`` lists the (level, query) pairs held exact (their share is not spent); ``unused_levels``
    the levels whose query shares are replaced by a bypassed parent's; ``spent`` the budget of the
    noisy measurements along a root-to-block path (ρ, or ε for pure DP).
    """

    nominal: Fraction
    spent: Fraction
    held: tuple[tuple[str, str], ...]
    unused_levels: tuple[str, ...]
    n_states: int
    mechanism: str

    @property
    def unspent(self) -> Fraction:
        return self.nominal - self.spent

    def level_share(self, allocation: TopDownAllocation, level: str) -> Fraction:
        """The share a level's geounits are measured at: with a one-state bypass the US level
        carries the US + State shares (SPN §5), the State level none; otherwise its own."""
        if self.unused_levels and level == "US":
            return allocation.level_shares["US"] + allocation.level_shares["State"]
        if level in self.unused_levels:
            return Fraction(0)
        return allocation.level_shares[level]

    def status(self, level: str, query: str) -> str:
        """``"measured"``, :data:`HELD_EXACT` or :data:`NOT_USED` for one planner row."""
        if level in self.unused_levels:
            return NOT_USED
        if (level, query) in self.held:
            return HELD_EXACT
        return "measured"


def budget_use(allocation: TopDownAllocation, n_states: int | None = None) -> BudgetUse:
    """Held-exact queries and the budget spent by ``allocation`` on ``n_states`` states.

    ``n_states`` default: :func:`default_states`. Only the persons universe has these invariants
    (the units run's invariant, the housing-unit count, is not one of its measured queries).
    """
    states = default_states(allocation) if n_states is None else _check_states(n_states)
    rho = allocation.rho
    held: list[tuple[str, str]] = []
    unused: tuple[str, ...] = ()
    unspent = Fraction(0)
    if allocation.universe == "persons":
        if folds_us_into_state(allocation, states):
            unused = ("State",)
            share = allocation.level_shares["US"] + allocation.level_shares["State"]
            for query in INVARIANT_QUERIES["US"]:
                alpha = allocation.query_share("US", query)
                if alpha > 0:
                    held.append(("US", query))
                    unspent += rho * share * alpha
        else:
            for level, queries in INVARIANT_QUERIES.items():
                if level not in allocation.geolevels:
                    continue
                for query in queries:
                    alpha = allocation.query_share(level, query)
                    if alpha > 0:
                        held.append((level, query))
                        unspent += rho * allocation.level_shares[level] * alpha
    return BudgetUse(
        nominal=rho,
        spent=rho - unspent,
        held=tuple(held),
        unused_levels=unused,
        n_states=states,
        mechanism=allocation.mechanism,
    )


def held_exact_notes(allocation: TopDownAllocation, n_states: int | None = None) -> list[str]:
    """Notes beside the planners' "held exact — no noise" labels: :data:`STATE_TOTAL_NOTE` where
    the allocation gives State TOTAL a share that the geography holds exact."""
    use = budget_use(allocation, n_states)
    if ("State", "TOTAL") in use.held:
        return [STATE_TOTAL_NOTE]
    return []


def spread_invariant_share(
    allocation: TopDownAllocation, n_states: int | None = None
) -> TopDownAllocation:
    """``allocation`` with each held-exact query's share moved to its level's other queries.

    A departure from production (TDA Table 7 assigns State TOTAL a share although it is invariant
    outside AIAN-split states): within each level holding an invariant, the invariant's share α is
    set to 0 and the other queries' shares are multiplied by 1/(1 − α), so the level share and the
    nominal ρ are unchanged and all of it is spent. Levels whose shares are not used (one-state
    bypass) are left as they are.
    """
    use = budget_use(allocation, n_states)
    if not use.held:
        return allocation
    shares = {lv: dict(qs) for lv, qs in allocation.query_shares.items()}
    moved = []
    for level, query in use.held:
        alpha = shares[level][query]
        rest = Fraction(1) - alpha
        if rest <= 0:
            raise ValidationError(
                f"{allocation.name}: level {level} measures only {query}, which is held exact; "
                "there is no other query to spread its share over — give the level another query"
            )
        shares[level] = {
            q: (Fraction(0) if q == query else s / rest) for q, s in shares[level].items()
        }
        moved.append(f"{level} {query} {format_fraction(alpha)}")
    notes = dict(allocation.notes)
    notes["spread_invariant_share"] = f"{SPREAD_LABEL}: moved {', '.join(moved)}"
    return replace(
        allocation,
        name=f"{allocation.name} (invariant share spread)",
        query_shares=shares,
        notes=notes,
    )


def spent_label(rho: float, spent: float | None, what: str = "ρ") -> str:
    """``ρ = 2.56 nominal, ρ spent on noisy measurements = 1.728 (67.5 %) …`` for summaries."""
    if spent is None:
        return f"{what} = {rho:g}"
    held = rho - spent
    text = f"{what} = {rho:g} nominal, {what} spent on noisy measurements = {spent:.4g}"
    if rho > 0 and held > 1e-12 * rho:
        text += f" ({spent / rho:.1%}; {held:.4g} is the share of queries held exact — no noise)"
    return text
