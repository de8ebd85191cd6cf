"""Where a budget comes from: a shipped preset, "modified from" one (and what differs), or its own name.

A budget is a preset while its fingerprint (:func:`engine.dp.budget.fingerprint.budget_fingerprint`
— a TopDown budget's persons and units together) equals the preset's; after any edit of a number it
is "modified from" that preset, and :func:`budget_changes` says which numbers differ (total ρ,
level shares, query shares, universes; PHSafe: ρ per table × level, τ, definition, state filter).
Every run's ``metrics.json`` (``budget_origin``, ``budget_changes``), the planners, the Run page,
the CLI's summary and the report use these functions.

The preset a budget is compared with is the one named (the preset loaded into a planner, the CLI's
``--preset``), else the one its names point to (a preset's allocations are named
"<preset> (<universe>)" and keep that name through edits and scenario files); a budget equal to
any shipped preset of its kind is that preset, whatever it was loaded as.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from engine.dp.budget import PHSafeBudget, TopDownAllocation
from engine.dp.budget.fingerprint import budget_fingerprint, topdown_budget
from engine.dp.budget.fractions_io import format_fraction
from engine.dp.budget.phsafe import LEVEL_LABELS
from engine.dp.presets import list_presets, load_phsafe_preset, load_topdown_preset

AnyBudget = PHSafeBudget | Mapping[str, TopDownAllocation] | TopDownAllocation


@dataclass(frozen=True)
class BudgetChange:
    """One number of a budget that differs from its preset: what, the preset's value, this one's."""

    item: str
    """What differs, e.g. ``"persons · total ρ"`` or ``"persons · Tract · HISPANIC*CENRACE share"``."""
    preset: str
    """The preset's value as text (``"—"``: the preset has none)."""
    value: str
    """This budget's value as text (``"—"``: this budget has none)."""

    def text(self) -> str:
        """``"persons · total ρ: 293764/114921 (≈ 2.556) → 5/2 (= 2.5)"``."""
        return f"{self.item}: {self.preset} → {self.value}"

    def as_dict(self) -> dict[str, str]:
        """The metrics.json entry of ``budget_changes``."""
        return {"item": self.item, "preset": self.preset, "value": self.value}


@dataclass(frozen=True)
class Origin:
    """A budget's origin: its label, the preset it is compared with, and what differs from it."""

    label: str
    """``"topdown-2020-production"``, ``"modified from topdown-2020-production"`` or a name."""
    preset: str | None
    """The preset compared with (None: the budget comes from no known preset)."""
    changes: tuple[BudgetChange, ...] = ()

    @property
    def modified(self) -> bool:
        """True when the budget differs from its preset."""
        return bool(self.changes)

    def summary(self, limit: int = 3) -> str:
        """The label, with the first ``limit`` changes: ``"modified from X: persons · total ρ: a
        → b; … (+2 more)"``; just the label when nothing differs."""
        if not self.changes:
            return self.label
        shown = "; ".join(c.text() for c in self.changes[:limit])
        more = len(self.changes) - limit
        return f"{self.label}: {shown}" + (f" (+{more} more)" if more > 0 else "")


def number_text(value: Fraction | float | None) -> str:
    """An exact fraction with its decimal (``"293764/114921 (≈ 2.556)"``), a float as written."""
    if value is None:
        return "—"
    if isinstance(value, Fraction):
        text = format_fraction(value)
        if value.denominator == 1:
            return text
        decimal = float(value)
        exact = Fraction(repr(decimal)) == value
        return f"{text} ({'=' if exact else '≈'} {decimal:.6g})"
    return f"{float(value):.6g}"


def _topdown_changes(
    mine: Mapping[str, TopDownAllocation], preset: Mapping[str, TopDownAllocation]
) -> list[BudgetChange]:
    out: list[BudgetChange] = []
    for universe in list(preset) + [u for u in mine if u not in preset]:
        a, b = preset.get(universe), mine.get(universe)
        if a is None or b is None:
            out.append(
                BudgetChange(
                    f"{universe} allocation",
                    "present" if a is not None else "—",
                    "present" if b is not None else "—",
                )
            )
            continue
        what = "ε" if b.mechanism == "puredp" else "ρ"
        if a.mechanism != b.mechanism:
            out.append(BudgetChange(f"{universe} · mechanism", a.mechanism, b.mechanism))
        if a.rho != b.rho:
            out.append(
                BudgetChange(f"{universe} · total {what}", number_text(a.rho), number_text(b.rho))
            )
        if a.geolevels != b.geolevels:
            out.append(
                BudgetChange(
                    f"{universe} · geolevels", ", ".join(a.geolevels), ", ".join(b.geolevels)
                )
            )
        if (a.schema or "") != (b.schema or ""):
            out.append(BudgetChange(f"{universe} · schema", a.schema or "—", b.schema or "—"))
        for level in list(a.geolevels) + [lv for lv in b.geolevels if lv not in a.geolevels]:
            sa, sb = a.level_shares.get(level), b.level_shares.get(level)
            if sa != sb:
                out.append(
                    BudgetChange(
                        f"{universe} · level share of {level}", number_text(sa), number_text(sb)
                    )
                )
            qa, qb = a.query_shares.get(level, {}), b.query_shares.get(level, {})
            for query in list(qa) + [q for q in qb if q not in qa]:
                da, db = qa.get(query), qb.get(query)
                if (da or 0) != (db or 0):
                    out.append(
                        BudgetChange(
                            f"{universe} · {level} · {query} share",
                            number_text(da),
                            number_text(db),
                        )
                    )
    return out


def _level_text(key: str) -> str:
    geo, iteration = LEVEL_LABELS.get(key, (key, ""))
    return f"{geo} · {iteration}" if iteration else geo


def _phsafe_changes(mine: PHSafeBudget, preset: PHSafeBudget) -> list[BudgetChange]:
    out: list[BudgetChange] = []
    if mine.privacy_defn != preset.privacy_defn:
        out.append(BudgetChange("privacy definition", preset.privacy_defn, mine.privacy_defn))
    what = "ε" if mine.privacy_defn == "puredp" else "ρ"
    a_cfg, b_cfg = preset.to_official_config(), mine.to_official_config()
    a_pb, b_pb = a_cfg["privacy_budget"], b_cfg["privacy_budget"]
    for table in list(a_pb) + [t for t in b_pb if t not in a_pb]:
        ra, rb = a_pb.get(table, {}), b_pb.get(table, {})
        for level in list(ra) + [k for k in rb if k not in ra]:
            va, vb = ra.get(level), rb.get(level)
            if va != vb:
                out.append(
                    BudgetChange(
                        f"{table} · {_level_text(level)} {what}",
                        "skipped" if va is None else number_text(va),
                        "skipped" if vb is None else number_text(vb),
                    )
                )
    ta, tb = a_cfg["tau"], b_cfg["tau"]
    for table in list(ta) + [t for t in tb if t not in ta]:
        if ta.get(table) != tb.get(table):
            out.append(
                BudgetChange(f"τ of {table}", str(ta.get(table, "—")), str(tb.get(table, "—")))
            )
    if sorted(a_cfg["state_filter"]) != sorted(b_cfg["state_filter"]):
        out.append(
            BudgetChange(
                "state filter",
                ", ".join(a_cfg["state_filter"]) or "none",
                ", ".join(b_cfg["state_filter"]) or "none",
            )
        )
    return out


def budget_changes(budget: AnyBudget, preset: str) -> tuple[BudgetChange, ...]:
    """The numbers in which ``budget`` differs from the shipped preset ``preset`` (empty when it
    is that preset's budget exactly)."""
    if isinstance(budget, PHSafeBudget):
        return tuple(_phsafe_changes(budget, load_phsafe_preset(preset)))
    return tuple(_topdown_changes(topdown_budget(budget), load_topdown_preset(preset)))


def _kind(budget: AnyBudget) -> str:
    return "phsafe" if isinstance(budget, PHSafeBudget) else "topdown"


def base_preset(budget: AnyBudget) -> str | None:
    """The shipped preset a budget's names point to (``"topdown-2020-production (persons)"`` →
    ``"topdown-2020-production"``), or None."""
    if isinstance(budget, PHSafeBudget):
        names = [budget.name]
    else:
        names = [str(a.name) for a in topdown_budget(budget).values()]
    known = {p.name for p in list_presets(_kind(budget))}
    for name in names:
        base = name.split(" (")[0].strip()
        if base in known:
            return base
    return None


def describe_origin(budget: AnyBudget, preset: str | None = None) -> Origin:
    """The :class:`Origin` of ``budget``: the shipped preset it equals, else "modified from" the
    preset named by ``preset`` or by its names (with the changes), else its own name."""
    kind = _kind(budget)
    fingerprint = budget_fingerprint(budget)
    known = {p.name for p in list_presets(kind)}
    name = preset if preset in known else base_preset(budget)
    if name is not None and fingerprint == _preset_fingerprint(name, kind):
        return Origin(name, name)
    for other in sorted(known):
        if fingerprint == _preset_fingerprint(other, kind):
            return Origin(other, other)
    if name is None:
        return Origin(_own_name(budget) or "custom budget", None)
    changes = budget_changes(budget, name)
    return Origin(f"modified from {name}", name, changes)


def _own_name(budget: AnyBudget) -> str | None:
    if isinstance(budget, PHSafeBudget):
        return budget.name or None
    runs = topdown_budget(budget)
    return str(next(iter(runs.values())).name).split(" (")[0] if runs else None


def budget_origin(budget: AnyBudget, preset: str | None = None) -> str:
    """Where a budget comes from: ``"phsafe-2020"`` or ``"modified from phsafe-2020"``
    (:func:`describe_origin`'s label)."""
    return describe_origin(budget, preset).label


@functools.lru_cache(maxsize=64)
def _preset_fingerprint(name: str, kind: str) -> str | None:
    """Fingerprint of a shipped preset's budget (a TopDown preset: all its universes)."""
    if kind == "phsafe":
        return budget_fingerprint(load_phsafe_preset(name))
    return budget_fingerprint(load_topdown_preset(name))


def changes_of(entries: Any) -> tuple[BudgetChange, ...]:
    """The :class:`BudgetChange` entries of a metrics.json ``budget_changes`` list (malformed
    entries are skipped: the list is a description, never checked numbers)."""
    out = []
    for entry in entries or ():
        if isinstance(entry, Mapping) and {"item", "preset", "value"} <= set(entry):
            out.append(BudgetChange(str(entry["item"]), str(entry["preset"]), str(entry["value"])))
    return tuple(out)
