"""Where the published-count prediction was validated, and a per-row flag from it
(docs/prediction.md §3–§4).

The prediction was checked against the RMSE measured over repeated engine runs on generated
populations (``benchmarks/prediction.py``); ``validation.json`` beside this module holds what was
measured: per validated allocation (its shares) the ρ values, and per (level role, geolevel, query)
and ρ the ratio predicted / measured and the mean count per answer cell. A row of a new prediction
*holds* (``model_holds`` True) when all of these are true, else it carries the reason:

* the least-squares model is the validated one for the schema (the support model on large
  schemas, the dense model on the folded 16-cell one) — not a fallback
  (:class:`ModelUsed`), and the query is determined by the level's measurements;
* the allocation uses the noise the validation runs used (zCDP's discrete Gaussian; a pure-DP
  allocation is not validated) and is one of the validated ones up to a factor
  :data:`SHARE_FACTOR` on every
  measured query's share of ρ at the row's level and every level above it (the same queries
  measured; queries held exact are left out) — its *family*;
* the total ρ lies within the ρ range at which that family's row (level role, geolevel, query)
  was measured;
* the row was within 0.8–1.25× of the measured RMSE at the validated ρ values nearest its own
  (the one below and the one above);
* its counts are not far smaller, relative to the noise, than where it was validated: the mean
  count per answer cell over the least-squares RMSE — the regime of the non-negativity
  correction — is at least :data:`MEAN_COUNT_SLACK` of the smallest validated.

Level role: a spine's root ("root") or any level below it, by name: a root row is validated by
the root rows of the family (whatever the root is called), a State row below a US root only by a
validation run with several states.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Any

from engine.dp.budget import TopDownAllocation
from engine.prediction.designs import held_exactly
from engine.prediction.spine import SpineProfile

VALIDATION_FILE = Path(__file__).with_name("validation.json")

SHARE_FACTOR = 2.0
"""A measured query's share of ρ may differ from the validated allocation's by up to this factor
(either way) and still count as that allocation's family."""

MEAN_COUNT_SLACK = 0.5
"""A row holds down to this fraction of the smallest validated mean count per answer cell over
least-squares RMSE (generated profiles differ in block sizes and empty blocks; below that, not
validated)."""

LOW, HIGH = 0.8, 1.25
"""The validation target: predicted / measured RMSE within this range."""


class ModelUsed(StrEnum):
    """The least-squares model a prediction's rows rest on."""

    SUPPORT = "support"
    """On each family's populated cells (large schemas with a count profile): validated."""
    DENSE = "dense"
    """Every cell a variable, on small schemas (the folded RI schema): validated there."""
    DENSE_REQUESTED = "dense model requested on a large schema (a baseline, not validated)"
    DENSE_UNDETERMINED = (
        "dense model: a level does not determine the detailed cells, so the least squares on "
        "populated cells cannot be used (not validated; it over-states the error where cells "
        "are empty)"
    )
    DENSE_TOO_LARGE = (
        "dense model: a family too large for the support model's general path (not validated; "
        "it mis-states the error where cells are empty)"
    )
    LEAST_SQUARES_ONLY = (
        "least squares only: no count profile on the allocation's schema (an upper bound where "
        "counts are small, not validated)"
    )


@dataclass(frozen=True)
class ValidatedRow:
    """One (role, geolevel, query) of a validated allocation at one ρ."""

    rho: float
    ratio: float
    mean_count: float
    ls_rmse: float


@dataclass(frozen=True)
class ValidatedFamily:
    """A validated allocation: its shares of ρ per level and query, its model, and its rows."""

    name: str
    schema: tuple[str, ...]
    model: str
    shares: Mapping[str, Mapping[str, float]]
    rows: Mapping[tuple[str, str, str], tuple[ValidatedRow, ...]]
    """(role, level, query) → rows by ρ (role "root" has level "")."""
    mechanism: str = "zcdp"
    """The noise of the validated runs (``zcdp``: discrete Gaussian; ``puredp``: geometric)."""


@lru_cache(maxsize=2)
def validated_families(path: str = str(VALIDATION_FILE)) -> tuple[ValidatedFamily, ...]:
    """The families of ``validation.json`` (written by ``benchmarks/prediction.py --write``)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    out = []
    for fam in data.get("families", []):
        rows: dict[tuple[str, str, str], list[ValidatedRow]] = {}
        for r in fam["rows"]:
            key = (str(r["role"]), "" if r["role"] == "root" else str(r["level"]), str(r["query"]))
            rows.setdefault(key, []).append(
                ValidatedRow(
                    float(r["rho"]),
                    float(r["ratio"]),
                    float(r["mean_count"] or 0.0),
                    float(r["ls_rmse"]),
                )
            )
        out.append(
            ValidatedFamily(
                name=str(fam["name"]),
                schema=tuple(str(a) for a in fam["schema"]),
                model=str(fam["model"]),
                shares={
                    lv: {q: float(v) for q, v in qs.items()} for lv, qs in fam["shares"].items()
                },
                rows={k: tuple(sorted(v, key=lambda x: x.rho)) for k, v in rows.items()},
                mechanism=str(fam.get("mechanism", "zcdp")),
            )
        )
    return tuple(out)


def allocation_shares(
    allocation: TopDownAllocation, invariants: Mapping[str, Sequence[str]]
) -> dict[str, dict[str, float]]:
    """Per allocation level, each measured query's share of ρ (level share × query share),
    the queries ``invariants`` hold exact at the level (and every level above) left out."""
    exact = held_exactly(allocation.geolevels, invariants)
    out: dict[str, dict[str, float]] = {}
    for lv in allocation.geolevels:
        held = set(exact.get(lv, ()))
        out[lv] = {
            q: float(allocation.level_shares[lv] * allocation.query_share(lv, q))
            for q in allocation.queries(lv)
            if q not in held and allocation.query_share(lv, q) > 0
        }
    return out


def _share_mismatch(
    mine: Mapping[str, Mapping[str, float]],
    family: ValidatedFamily,
    levels: Sequence[str],
) -> str | None:
    """Why ``mine`` is not in ``family`` on ``levels`` (None: it is)."""
    for lv in levels:
        have, ref = mine.get(lv, {}), family.shares.get(lv, {})
        for q in sorted(set(have) | set(ref)):
            if q not in ref:
                return f"{lv} measures {q}, which {family.name} does not"
            if q not in have:
                return f"{lv} does not measure {q}, which {family.name} does"
            ratio = have[q] / ref[q]
            if not 1.0 / SHARE_FACTOR <= ratio <= SHARE_FACTOR:
                return (
                    f"{lv} {q} gets {have[q]:.3g} of ρ, {ratio:.2g}× {family.name}'s {ref[q]:.3g}"
                )
    return None


def _row_reason(
    family: ValidatedFamily,
    role: str,
    level: str,
    query: str,
    rho: float,
    mean_count: float | None,
    ls_rmse: float,
) -> str | None:
    """Why a row of ``family``'s shares is outside what was validated (None: it holds)."""
    validated = family.rows.get((role, "" if role == "root" else level, query))
    where = "the root" if role == "root" else level
    if not validated:
        return f"{where} {query} not validated for {family.name}" + (
            "" if role == "root" else " below this root"
        )
    lo, hi = validated[0].rho, validated[-1].rho
    if not lo * (1 - 1e-9) <= rho <= hi * (1 + 1e-9):
        span = f"{lo:g}" if lo == hi else f"{lo:g}–{hi:g}"
        return f"ρ = {rho:g} outside the validated {span} ({family.name})"
    below = max(r.rho for r in validated if r.rho <= rho * (1 + 1e-9))
    above = min(r.rho for r in validated if r.rho >= rho * (1 - 1e-9))
    nearest = [r for r in validated if r.rho in (below, above)]
    misses = [r for r in nearest if not (math.isfinite(r.ratio) and LOW <= r.ratio <= HIGH)]
    if misses:
        worst = max(misses, key=lambda r: abs(math.log(r.ratio)) if r.ratio > 0 else math.inf)
        return f"measured {worst.ratio:.2f}× in validation ({family.name}, ρ = {worst.rho:g})"
    floor = min(_regime(r.mean_count, r.ls_rmse) for r in validated)
    if mean_count is not None and _regime(mean_count, ls_rmse) < MEAN_COUNT_SLACK * floor:
        return (
            f"mean count per answer cell {mean_count:.3g} is {_regime(mean_count, ls_rmse):.3g}× "
            f"the least-squares RMSE; validated down to {floor:.3g}× (× {MEAN_COUNT_SLACK:g})"
        )
    return None


def _regime(mean_count: float, ls_rmse: float) -> float:
    """Mean count per answer cell over least-squares RMSE (large: non-negativity hardly
    binds)."""
    return mean_count / ls_rmse if ls_rmse > 0 else math.inf


def assess_rows(
    rows: Sequence[Any],
    allocation: TopDownAllocation,
    levels: Sequence[str],
    model: ModelUsed,
    spine: SpineProfile,
    *,
    expected: ModelUsed,
    invariants: Mapping[str, Sequence[str]],
    families: Sequence[ValidatedFamily] | None = None,
) -> list[Any]:
    """``rows`` (:class:`engine.prediction.predict.QueryPrediction`) with ``model_holds`` and
    ``validity`` set from the validated range (module docstring); ``model`` is the model the
    rows rest on, ``expected`` the one validated on this schema."""
    families = validated_families() if families is None else families
    schema = tuple(a for a, _ in spine.attributes)
    mine = allocation_shares(allocation, invariants)
    alloc_levels = list(allocation.geolevels)
    out = []
    for row in rows:
        reason = _reason(
            row, allocation, levels, model, expected, schema, mine, alloc_levels, families
        )
        out.append(replace(row, model_holds=reason is None, validity=reason))
    return out


def _reason(
    row: Any,
    allocation: TopDownAllocation,
    levels: Sequence[str],
    model: ModelUsed,
    expected: ModelUsed,
    schema: tuple[str, ...],
    mine: Mapping[str, Mapping[str, float]],
    alloc_levels: Sequence[str],
    families: Sequence[ValidatedFamily],
) -> str | None:
    if row.invariant:
        return None
    if not math.isfinite(row.post_processed_rmse):
        return "not determined by the level's measurements: no prediction"
    if model is not expected:
        return model.value if model is not ModelUsed.SUPPORT else "support model on a small schema"
    role = "root" if row.geolevel == levels[0] else "level"
    # the allocation's levels from its first down to the row's (a folded root's levels too)
    upto = alloc_levels[: alloc_levels.index(row.geolevel) + 1]
    candidates = [f for f in families if f.schema == schema and f.model == model.value]
    if not candidates:
        return "no validation on this schema and model"
    mismatches, reasons = [], []
    for family in candidates:
        if family.mechanism != allocation.mechanism:
            mismatches.append(f"{allocation.mechanism} noise; {family.name} was validated on "
                              f"{family.mechanism}")  # fmt: skip
            continue
        why = _share_mismatch(mine, family, upto)
        if why is not None:
            mismatches.append(why)
            continue
        reason = _row_reason(
            family,
            role,
            row.geolevel,
            row.query,
            float(allocation.rho),
            row.mean_count,
            row.ls_rmse,
        )
        if reason is None:
            return None
        reasons.append(reason)
    if reasons:
        return reasons[0]
    return "allocation outside the validated ones: " + min(mismatches, key=len)
