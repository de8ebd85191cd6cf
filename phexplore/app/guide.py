"""Plain-language guide: what ε means, a glossary, and the worked example of the start page.

No new science: :func:`epsilon_reading` restates the (ε, δ)-DP definition (Dwork & Roth 2014,
Def. 2.4; docs/science.md §1) for one number — for any set of outputs S and neighbouring data sets
D, D', P[M(D) ∈ S] ≤ e^ε · P[M(D') ∈ S] + δ — and :func:`worked_example` computes its numbers with
the same functions as the planners (PHS §7.1, ρ = z²Δ²/(2·MOE²); docs/science.md §1 conversions), so
the start page, the planners and the privacy page never disagree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from engine.dp.conversions import CONVERSION_LABELS, DEFAULT_DELTA
from engine.dp.moe import moe_for_rho
from engine.dp.presets import load_phsafe_preset
from phexplore.app.naming import cell_label, level_label
from phexplore.planning.moe_tables import epsilons

GLOSSARY: dict[str, str] = {
    "ρ (rho)": "The privacy-loss budget in zero-concentrated differential privacy (zCDP), the "
    "accounting the 2020 Census products use. Budgets of separate measurements add up. Larger ρ "
    "means less noise, more accurate tables and a weaker privacy guarantee.",
    "ε (epsilon)": "The privacy-loss parameter of (ε, δ)-differential privacy: whatever is "
    "published, including or leaving out one person changes the probability of any outcome by at "
    "most a factor e^ε (except with probability δ). ρ is converted to ε at a chosen δ.",
    "δ (delta)": "The small probability with which the ε guarantee is allowed to fail. The Census "
    "Bureau quotes ε at δ = 10⁻¹⁰. A smaller δ gives a larger ε for the same ρ.",
    "MOE": "Margin of error: at 90%, the noisy count is within ± MOE of its expected value 9 times "
    "out of 10. Halving an MOE needs four times the ρ.",
    "τ (tau)": "PHSafe's truncation threshold: at most τ persons per household are counted. A "
    "larger τ keeps more people but raises the sensitivity Δ = 2τ + 2 and so the noise.",
    "Invariant": "A count published exactly, without noise (for the redistricting data: total "
    "population of each state, housing-unit counts of each block). Invariants spend no budget but "
    "are not protected by the DP guarantee.",
    "Spine": "The hierarchy of geographic levels TopDown works down (nation → state → county → "
    "tract → block group → block). Areas off the spine, such as cities and wards, are built from "
    "blocks and get no budget of their own.",
    "EPL": "Empirical privacy loss: an estimate, from the errors of one run on public test data, "
    "of how much the published counts reveal (Petti & Flaxman). Read it with its interval; it "
    "is a diagnostic, not a guarantee.",
    "Blau index": "A diversity index of an area, 1 − Σ p² over the shares p of the race-ethnicity "
    "groups: 0 when everyone belongs to one group, larger for mixed areas. The Results page groups "
    "areas by its quintile to show whether noise biases homogeneous and diverse areas differently.",
}


def _factor_text(value: float) -> str:
    """A positive factor in words a meeting can read: 1.65, 24, 3,300, 24 million, 10^25."""
    if not math.isfinite(value):
        return "an unbounded factor"
    if value < 10:
        return f"{value:.2f}"
    if value < 1000:
        return f"{value:,.0f}"
    if value < 1e6:
        digits = 10 ** (math.floor(math.log10(value)) - 1)  # two significant digits
        return f"{round(value / digits) * digits:,.0f}"
    for size, word in ((1e12, "trillion"), (1e9, "billion"), (1e6, "million")):
        if size <= value < size * 1000:
            return f"{value / size:.0f} {word}"
    return f"10^{math.log10(value):.0f}"


def epsilon_reading(epsilon: float, delta: float = DEFAULT_DELTA) -> str:
    """One paragraph reading ε for a non-specialist, derived from the number itself.

    The bound on the likelihood ratio is e^ε (Dwork & Roth Def. 2.4); the same bound limits how far
    anyone's odds about one person can move after seeing the output (posterior odds ≤ e^ε × prior
    odds). What ε does *not* mean is stated too, because it is the common misreading.
    """
    if not math.isfinite(epsilon):
        return (
            "ε is infinite: this budget gives no differential-privacy guarantee at all (some "
            "measurement has no noise)."
        )
    if epsilon <= 0:
        return "ε = 0: nothing is measured, so the output says nothing about anyone."
    factor = math.exp(epsilon)
    odds = _factor_text(factor)
    shown = f"{epsilon:.2f}"  # as the metrics beside it show it
    strength = (
        "a strong guarantee"
        if epsilon <= 1
        else "a moderate guarantee"
        if epsilon <= 5
        else "a weak worst-case guarantee"
    )
    return (
        f"An ε of {shown} means: for any published result, including or leaving out one person "
        f"changes its probability by at most a factor e^{shown} ≈ {odds}, except with probability "
        f"δ = {delta:g}. So anyone's odds about a fact of one person can grow at most {odds}-fold "
        f"from what they are without the data — {strength}. It is a worst-case bound over all "
        "people and all outputs; it is not the chance that someone is identified, nor the typical "
        "risk, and it says nothing about accuracy (read the MOEs for that)."
    )


@dataclass(frozen=True)
class Step:
    """One step of the guided start: where to go, what to do, what to look at."""

    stage: str
    page: str
    action: str
    look_for: str


def worked_example(
    delta: float = DEFAULT_DELTA, conversion: str = "cks", new_moe: float = 40.0
) -> dict[str, Any]:
    """The numbers of the guided start: production PHSafe budget, one MOE target changed.

    Starts from ``phsafe-2020`` (PHS Table 10), loosens the MOE target of PH3 at State · A-G (the
    cell with the largest ρ, MOE 20) to ``new_moe`` — doubling an MOE quarters its ρ — and reports
    total ρ and ε before and after, computed like the planner (bounded ρ = 2 × unbounded, PHS
    Thm 3–4).
    """

    table, level = "PH3", "state_A-G"
    before = load_phsafe_preset("phsafe-2020")
    after = before.with_moe_target(table, level, new_moe)
    old_moe = moe_for_rho(before.rho(table, level), before.sensitivity(table), before.confidence)
    eps_before = epsilons(before.total_bounded(), delta)[conversion]
    eps_after = epsilons(after.total_bounded(), delta)[conversion]
    return {
        "preset": "phsafe-2020",
        "cell": cell_label(table, level),
        "level_name": level_label(level),
        "table": table,
        "level": level,
        "moe_before": int(old_moe),
        "moe_after": float(new_moe),
        "rho_before": before.total_unbounded(),
        "rho_after": after.total_unbounded(),
        "epsilon_before": eps_before,
        "epsilon_after": eps_after,
        "delta": delta,
        "conversion": CONVERSION_LABELS[conversion],
    }


def guided_steps(example: dict[str, Any]) -> list[Step]:
    """Plan → Test → Decide, each with the worked example's concrete numbers."""
    e = example
    return [
        Step(
            "1. Plan",
            "PHSafe planner",
            f"The planner opens on the production budget ({e['preset']}). In “Edit one cell” pick "
            f"table {e['table']} and level {e['level_name']} and change the MOE target from "
            f"{e['moe_before']:,} to {e['moe_after']:,.0f}.",
            f"Total ρ falls from {e['rho_before']:.4f} to {e['rho_after']:.4f} and ε (bounded, "
            f"δ = {e['delta']:g}) from {e['epsilon_before']:.2f} to {e['epsilon_after']:.2f}; "
            f"the preset is now labelled “modified from {e['preset']}”. The Privacy loss page "
            "shows the (ε, δ) curve of the new budget.",
        ),
        Step(
            "2. Test",
            "Run",
            "Choose PHSafe, keep the shipped sample (Rhode Island in the synthetic extract) and "
            "press Run PHSafe. It takes seconds.",
            "The run is labelled with the data, the seed and the fingerprint of the budget it "
            "used. Results shows noise against truncation error and empirical against analytic "
            "MOE.",
        ),
        Step(
            "3. Decide",
            "Scenarios → Budget session",
            "Save the working PHSafe budget as a scenario (the run of this budget is attached), "
            "then on Budget session → Session report build the report.",
            "The HTML report lists the budget, its ε under all three conversions, the MOE table and "
            "exactly the runs made with this budget, each with run number, data and seed.",
        ),
    ]
