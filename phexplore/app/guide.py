"""Plain-language guide: what ε means, a glossary, and the worked examples of the start page.

No new science: :func:`epsilon_reading` restates the (ε, δ)-DP definition (Dwork & Roth 2014,
Def. 2.4; docs/science.md §1) for one number — for any set of outputs S and neighbouring data sets
D, D', P[M(D) ∈ S] ≤ e^ε · P[M(D') ∈ S] + δ — with e^ε written as a number a meeting can read
("about 24 million"), never as "e^16.98". :func:`worked_example` (PHSafe) and
:func:`topdown_exercise` (TopDown: cut ρ by 30%, read county against block) compute their numbers
with the same functions as the planners (PHS §7.1, ρ = z²Δ²/(2·MOE²); docs/science.md §1
conversions; docs/science.md §7 for the published counts), so the start page, the planners and the
privacy page never disagree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from engine.dp.budget import default_states
from engine.dp.conversions import CONVERSION_LABELS, DEFAULT_DELTA
from engine.dp.moe import moe_for_rho
from engine.dp.presets import load_phsafe_preset, load_topdown_preset
from phexplore.app.naming import cell_label, level_label
from phexplore.planning.committee import committee_rows, persons_run, published_rows
from phexplore.planning.moe_tables import epsilons
from phexplore.planning.scaling import scale_topdown_runs

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


def delta_text(delta: float) -> str:
    """δ for a reader: ``1e-10`` → "10⁻¹⁰ (one in 10 billion)"; other values as numbers."""
    exponent = -math.log10(delta) if delta > 0 else math.inf
    if math.isfinite(exponent) and abs(exponent - round(exponent)) < 1e-9 and exponent >= 1:
        power = "10" + str(-round(exponent)).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))
        return f"{power} (one in {_factor_text(10.0 ** round(exponent))})"
    return f"{delta:g}"


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
        f"changes its probability by at most a factor of ≈ {odds}, except with probability "
        f"δ = {delta_text(delta)}. So anyone's odds about a fact of one person can grow at most "
        f"{odds}-fold from what they are without the data — {strength}. It is a worst-case bound "
        "over all people and all outputs; it is not the chance that someone is identified, nor "
        "the typical risk, and it says nothing about accuracy (read the MOEs for that)."
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


EXERCISE_PRESET = "ri2010-production-like"
"""The TopDown exercise's baseline: production's shares on the RI 2010 sample's schema, so the
run step works on the shipped sample."""
EXERCISE_CUT = -30
"""The exercise cuts the persons run's total ρ by this many percent."""
EXERCISE_LEVELS = ("County", "Tract", "Block")


def topdown_exercise(
    delta: float = DEFAULT_DELTA, conversion: str = "cks", percent: float = EXERCISE_CUT
) -> dict[str, Any]:
    """The numbers of the TopDown exercise: ``ri2010-production-like`` and its persons ρ cut by
    ``percent``; the predicted RMSE of the published TOTAL at County, Tract and Block before and
    after, computed as the TopDown planner's committee table computes them (same count profile,
    every geounit evaluated: docs/science.md §7, docs/prediction.md)."""
    before = load_topdown_preset(EXERCISE_PRESET)
    after = scale_topdown_runs(before, percent, only=persons_run(before)[0])
    _, alloc = persons_run(before)
    rows_before, _ = published_rows(before, n_states=default_states(alloc))
    rows_after, _ = published_rows(after, n_states=default_states(alloc))
    rows = committee_rows(
        before, rows_before, after, rows_after, delta=delta, conversion=conversion
    )
    total = {r["geolevel"]: r for r in rows if r["section"] != "privacy" and r["query"] == "TOTAL"}
    eps = next(r for r in rows if r["quantity"].startswith("ε, all runs"))
    return {
        "preset": EXERCISE_PRESET,
        "percent": percent,
        "rho_before": float(alloc.rho),
        "rho_after": float(persons_run(after)[1].rho),
        "epsilon_before": eps["a"],
        "epsilon_after": eps["b"],
        "levels": {lv: total[lv] for lv in EXERCISE_LEVELS if lv in total},
        "delta": delta,
        "conversion": CONVERSION_LABELS[conversion],
    }


def exercise_steps(e: dict[str, Any]) -> list[Step]:
    """The TopDown exercise for trainers: cut ρ, read county against block, run it, compare."""
    levels = e["levels"]

    def change(level: str) -> str:
        r = levels[level]
        return f"{level} {r['a']:.2f} → {r['b']:.2f} persons ({r['relative'] * 100:+.1f}%)".replace(
            "-", "−"
        )

    read = "; ".join(change(lv) for lv in EXERCISE_LEVELS if lv in levels)
    noise = (1 / math.sqrt(1 + e["percent"] / 100) - 1) * 100
    why = f"The noise of every measurement grows by {noise:+.1f}%".replace("-", "−")
    if "County" in levels and "Block" in levels:
        county, block = levels["County"]["relative"], levels["Block"]["relative"]
        if block < county:
            why += (
                "; the published block counts lose less of their accuracy than the county "
                "counts, because part of their error comes from non-negativity and rounding, "
                "which do not grow with the noise"
            )
        else:
            why += "; the published counts follow it at every level"
    cut = f"{e['percent']:+.1f}%".replace("-", "−")
    return [
        Step(
            f"1. Cut ρ by {abs(e['percent']):g}%",
            "TopDown planner",
            f"Choose the preset {e['preset']} and press Load preset (the baseline follows it). "
            f"In the baseline bar keep Scale “total ρ (every level)”, type {e['percent']:g} in “by %” "
            "and press Apply.",
            f"The persons run's ρ goes from {e['rho_before']:.4f} to {e['rho_after']:.4f} "
            f"({cut}) and ε (δ = {e['delta']:g}) from {e['epsilon_before']:.2f} to "
            f"{e['epsilon_after']:.2f}.",
        ),
        Step(
            "2. Read county vs block",
            "TopDown planner",
            "Read the committee's table “Published-count error: baseline → working”: the "
            "predicted RMSE of the published TOTAL by geolevel.",
            f"TOTAL: {read}. {why}.",
        ),
        Step(
            "3. Run it",
            "Run",
            "Choose TopDown and the shipped sample ri2010 (subset: one county, seconds); as "
            "Allocation pick “Working scenario (TopDown planner)” — the cut budget "
            f"(ρ {cut}) — and press Run TopDown. Then pick the allocation {e['preset']} (the "
            "baseline) and run again.",
            "Two runs, each labelled with the budget it used (“modified from …” and the preset).",
        ),
        Step(
            "4. Compare",
            "Results",
            "Pick each run on Results → MAE and compare County with Block; or save each budget "
            "as a scenario and compare them on Scenarios.",
            "One run is one draw of the noise: the measured errors scatter around the predicted "
            "ones (Results → “Predicted vs measured”).",
        ),
    ]
