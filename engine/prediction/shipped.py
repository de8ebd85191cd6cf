"""The count profiles shipped with PHExplore and which one a prediction without data uses
(docs/prediction.md; sources and licences in ``profiles/NOTICE.md``).

* ``ri2010`` — the Rhode Island 2010 blocks on the folded VOTINGAGE × RACEETH schema (real
  published counts), for allocations on that schema;
* ``generated-us-20m`` — a generated national population of 20,000,000 persons on the 2,016-cell
  production schema (``phexplore generate population --persons 20000000 --seed 26``: 50 states
  and DC, 206 counties of realistic sizes, ~5,000 tracts, ~480,000 blocks), for allocations on
  that schema: a US root with 51 states, each state with the number of counties its real mean
  county size gives (so State and County rows are those of many geounits, not one state's root
  repeated). An allocation without a US level, or ``n_states=1``, is predicted on one state of it
  (:data:`ONE_STATE`, with its counties);
* ``generated-ri-100k`` — a generated Rhode Island population of 100,000 persons (one county) on
  the production schema: small and fast, kept for tests and benchmarks.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from engine.core.errors import ValidationError
from engine.prediction.spine import SpineProfile, profile_from_json, profile_from_npz
from engine.schema.marginals import parse_marginal

PROFILE_DIR = Path(__file__).with_name("profiles")

SHIPPED_PROFILES = {
    "ri2010": "ri2010_spine.json.gz",
    "generated-us-20m": "generated_us_20m_spine.npz",
    "generated-ri-100k": "generated_ri_100k_spine.json.gz",
}
"""Shipped spine profiles by name → file in ``profiles/`` (see ``profiles/NOTICE.md``)."""

NATIONAL = "generated-us-20m"
"""The profile of predictions on the 2,016-cell production schema without data."""

ONE_STATE = "KY"
"""The state of :data:`NATIONAL` a one-state prediction uses (chosen for a median-sized state
with several counties; docs/prediction.md)."""


@lru_cache(maxsize=4)
def shipped_profile(name: str = "ri2010") -> SpineProfile:
    """A shipped spine profile by name (:data:`SHIPPED_PROFILES`)."""
    if name not in SHIPPED_PROFILES:
        raise ValidationError(
            f"unknown spine profile {name!r}; shipped: {', '.join(SHIPPED_PROFILES)}"
        )
    path = PROFILE_DIR / SHIPPED_PROFILES[name]
    if path.suffix == ".npz":
        return profile_from_npz(path)
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return profile_from_json(json.load(fh))


@lru_cache(maxsize=4)
def one_state_profile(state: str = ONE_STATE) -> SpineProfile:
    """One state of the national profile (its subtree: the state as root, with its counties)."""
    national = shipped_profile(NATIONAL)
    if state not in national.child_names:
        raise ValidationError(
            f"the national profile has no state {state!r}; it has {', '.join(national.child_names)}"
        )
    return national.subtree(national.child_names.index(state), name=f"{NATIONAL}: {state}")


def _fits(profile: SpineProfile, queries: Sequence[str]) -> bool:
    try:
        for q in queries:
            parse_marginal(q, profile.attributes)
    except ValidationError:
        return False
    return True


def profile_for(
    queries: Sequence[str], *, national: bool = True, n_states: int | None = None
) -> SpineProfile:
    """The shipped profile whose schema answers every query in ``queries``: the Rhode Island
    2010 blocks when they can (the folded schema), else the national generated profile on the
    2,016-cell schema — one state of it when ``national`` is False (an allocation without a US
    level) or ``n_states`` is 1; the RI profile (no count correction on another schema) when
    neither fits."""
    ri = shipped_profile("ri2010")
    if _fits(ri, queries):
        return ri
    if _fits(shipped_profile(NATIONAL), queries):
        if not national or n_states == 1:
            return one_state_profile()
        return shipped_profile(NATIONAL)
    return ri


def shipped_profile_for(runs: Any, n_states: int | None = None) -> SpineProfile:
    """:func:`profile_for` the queries of the persons run(s) of ``runs`` (a mapping of run name
    to :class:`engine.dp.budget.TopDownAllocation`, or one allocation); national when every
    persons run has a US level and ``n_states`` is not 1."""
    allocations = runs.values() if hasattr(runs, "values") else [runs]
    persons = [a for a in allocations if getattr(a, "universe", "persons") == "persons"]
    queries = [q for a in persons for q in a.all_queries()]
    national = bool(persons) and all("US" in a.geolevels for a in persons)
    return profile_for(list(dict.fromkeys(queries)), national=national, n_states=n_states)


def describe_profile(profile: SpineProfile) -> str:
    """A phrase naming the count profile a prediction rests on, for captions and reports ("the
    Rhode Island 2010 blocks (…)", "a generated national population of … persons (…)")."""
    counts = profile.counts
    persons = "" if counts is None else f"{int(round(float(counts[0].sum()))):,} persons, "
    shape = ", ".join(
        f"{profile.n_units(k):,} {_unit_name(level, profile.n_units(k))}"
        for k, level in enumerate(profile.levels)
        if k > 0 and level.lower() != "block"
    )
    if profile.name == "ri2010":
        return (
            "the Rhode Island 2010 blocks (published counts on the folded VOTINGAGE × RACEETH "
            f"schema; {persons}{shape})"
        )
    if profile.name == NATIONAL:
        return f"a generated national population ({persons}{shape}; 2,016-cell schema)"
    if profile.name.startswith(f"{NATIONAL}: "):
        state = profile.name.split(": ", 1)[1]
        return (
            f"one state ({state}) of the generated national population ({persons}{shape}; "
            "2,016-cell schema)"
        )
    return f"the count profile {profile.name!r} ({persons}{shape})"


def _unit_name(level: str, n: int) -> str:
    """``County`` → "counties" (or "county" for one), ``Block_Group`` → "block groups"."""
    name = level.replace("_", " ").lower()
    if n == 1:
        return name
    return name[:-1] + "ies" if name.endswith("y") else name + "s"
