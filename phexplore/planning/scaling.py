"""Scale a budget by a percentage: the total ρ, or one geolevel (TopDown) or population-group level
(PHSafe) — the committee's "what if we cut the budget by 30%?" without hand arithmetic.

TopDown (TDA §4, App. B): a query's budget is ρ·c·d (total ρ, level share c, query share d). Scaling
the total by f multiplies every query's budget by f and keeps the shares. Scaling level l by f_l
multiplies that level's budget ρ·c_l by f_l and leaves every other level's budget as it was, so the
total becomes ρ' = ρ·Σ_k c_k f_k and the level shares c'_k = c_k f_k / Σ_j c_j f_j (query shares
unchanged). Percentages are read as exact decimals (−30 → 7/10), so the shares stay exact fractions
and 2.5562 × (1 − 30%) is exactly 1.78934.

PHSafe (PHS §7.1): every measured (table, level) cell has its own ρ; scaling multiplies the cells'
ρ (and so divides their noise σ by √f). A cell's MOE target, if it had one, no longer determines
its ρ and is dropped (the grid then shows the MOE bound of the scaled ρ).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

from engine.core.errors import ValidationError
from engine.dp.budget import LEVEL_KEYS, PHSafeBudget, TopDownAllocation, resolve_level_spec
from engine.dp.budget.fractions_io import format_fraction

MIN_PERCENT = Fraction(-99)
MAX_PERCENT = Fraction(900)
"""Allowed scaling, in percent: down to 1% of the budget (−99%), up to ten times (+900%)."""


def percent_factor(percent: float | int | str | Fraction, *, where: str = "scale") -> Fraction:
    """The exact factor ``1 + percent/100`` of a percentage given as a number or text ("−30", "+5%").

    Floats are read as the decimal they print as (−30.0 → 7/10), so a typed percentage scales
    exactly. Outside −99% … +900% (or not a number) is refused, naming ``where``.
    """
    text = str(percent).strip().replace("−", "-").removesuffix("%").strip()
    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise ValidationError(
            f"{where}: {percent!r} is not a percentage; write e.g. -30 for a 30% cut or 10 for a "
            "10% increase"
        ) from None
    if isinstance(percent, float) and not math.isfinite(percent):
        raise ValidationError(f"{where}: {percent!r} is not a finite percentage")
    if not MIN_PERCENT <= value <= MAX_PERCENT:
        raise ValidationError(
            f"{where}: {format_percent(value)} is outside {format_percent(MIN_PERCENT)} … "
            f"{format_percent(MAX_PERCENT)} (a budget can be cut to 1% of itself or raised tenfold)"
        )
    return 1 + value / 100


def format_percent(value: Fraction | float) -> str:
    """``-30`` → "−30%", ``12.5`` → "+12.5%" (sign always shown, typographic minus)."""
    number = float(value)
    text = f"{number:+.4g}%"
    return text.replace("-", "−")


def scale_topdown(
    alloc: TopDownAllocation,
    percent: float | int | str | Fraction = 0,
    level_percents: Mapping[str, float | int | str | Fraction] | None = None,
) -> TopDownAllocation:
    """``alloc`` with its total budget scaled by ``percent`` and each geolevel in
    ``level_percents`` scaled by its own percentage (module docstring); exact fractions throughout.

    An unknown geolevel is refused, naming the allocation's levels.
    """
    total = percent_factor(percent, where=f"{alloc.name}: total scaling")
    factors: dict[str, Fraction] = {}
    for level, pct in (level_percents or {}).items():
        if level not in alloc.level_shares:
            raise ValidationError(
                f"{alloc.name} has no geolevel {level!r} to scale; its levels are "
                f"{', '.join(alloc.geolevels)}"
            )
        factors[level] = percent_factor(pct, where=f"{alloc.name}: scaling of {level}")
    if any(f != 1 for f in factors.values()):
        weighted = {
            lv: alloc.level_shares[lv] * factors.get(lv, Fraction(1)) for lv in alloc.geolevels
        }
        norm = sum(weighted.values(), Fraction(0))
        shares = {lv: w / norm for lv, w in weighted.items()}
        total *= norm
    else:
        shares = dict(alloc.level_shares)
    if total == 1 and shares == dict(alloc.level_shares):
        return alloc
    data = alloc.to_dict()
    data["rho"] = format_fraction(alloc.rho * total)
    data["level_shares"] = {lv: format_fraction(shares[lv]) for lv in alloc.geolevels}
    return TopDownAllocation.from_dict(data, name=alloc.name)


def scale_topdown_runs(
    runs: Mapping[str, TopDownAllocation],
    percent: float | int | str | Fraction = 0,
    level_percents: Mapping[str, float | int | str | Fraction] | None = None,
    *,
    only: str | None = None,
) -> dict[str, TopDownAllocation]:
    """:func:`scale_topdown` applied to every run (or to the run named ``only``); levels a run lacks
    are skipped for that run (a units run has the persons run's levels too in every preset)."""
    if only is not None and only not in runs:
        raise ValidationError(f"no run {only!r} to scale; this scenario has {', '.join(runs)}")
    out = {}
    for name, alloc in runs.items():
        if only is not None and name != only:
            out[name] = alloc
            continue
        mine = {lv: p for lv, p in (level_percents or {}).items() if lv in alloc.level_shares}
        out[name] = scale_topdown(alloc, percent, mine)
    return out


def scale_phsafe(
    budget: PHSafeBudget,
    percent: float | int | str | Fraction = 0,
    level_percents: Mapping[str, float | int | str | Fraction] | None = None,
) -> PHSafeBudget:
    """``budget`` with every measured cell's ρ scaled by ``percent`` and, on top, the cells of each
    population-group level in ``level_percents`` by its own percentage.

    Levels are official keys (``state_A-G``) or what :func:`~engine.dp.budget.resolve_level_spec`
    reads ("Nation", "State:A-G"); a cell's MOE target is dropped (module docstring).
    """
    total = percent_factor(percent, where=f"{budget.name}: total scaling")
    factors: dict[str, Fraction] = dict.fromkeys(LEVEL_KEYS, Fraction(1))
    for spec, pct in (level_percents or {}).items():
        factor = percent_factor(pct, where=f"{budget.name}: scaling of {spec}")
        for key in resolve_level_spec(spec):
            factors[key] = factors[key] * factor
    new = budget
    for table in budget.tables():
        for level in budget.levels(table):
            factor = total * factors[level]
            if factor != 1:
                new = new.with_rho(table, level, float(budget.rho(table, level) * factor))
    return new
