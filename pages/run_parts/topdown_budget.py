"""Budget column of the TopDown run form: allocation, total, seed, workers, error universe, spine
entities."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import streamlit as st

from pages.run_parts.data_source import TopDownData
from pages.run_parts.run_options import (
    backend_choice,
    noise_choice,
    seed_input,
    solver_choice,
    universe_choice,
)
from phexplore import api as R
from phexplore.api.budgets import (
    Origin,
    PHExploreError,
    budget_fingerprint,
    default_topdown_preset,
    describe_origin,
    exact_from_input,
    load_topdown_preset,
    schema_mismatch,
    short_fingerprint,
)
from phexplore.app import state as S

if TYPE_CHECKING:
    from collections.abc import Mapping

    from phexplore.api.budgets import TopDownAllocation

WORKING = "__working__"
DEFAULT_ALLOCATION = {
    "ri2010": "ri2010-production-like",
    "pl94171_ri2018": "ri2010-production-like",
}
ENTITY_SAMPLE = {"ri2010": "providence-wards"}


@dataclass
class TopDownBudget:
    """The Budget column's choices."""

    choice: str
    allocation: TopDownAllocation
    """The persons allocation the run measures with (exact shares and total)."""
    what: str
    budget: Mapping[str, TopDownAllocation]
    """The whole budget it belongs to (every universe: one budget, one fingerprint)."""
    origin: Origin
    seed: int
    workers: int
    entity: str | None
    use_entities: bool
    special_areas: str | None = None
    mismatch: str | None = None
    noise_method: str = "fast"
    preset: str | None = None
    """The preset the origin is compared with (the planner's last loaded one, or the choice)."""
    solver: str = "auto"
    error_universe: str = "housed"


def topdown_budget(data: TopDownData) -> TopDownBudget | None:
    """Budget column: allocation, total budget, seed, workers and off-spine entities.

    None (after an error message) when the allocation cannot be used.
    """
    s = st.session_state
    sample, data_label = data.sample, data.data_label
    st.markdown("**Budget**")
    options = {WORKING: "Working scenario (TopDown planner)", **S.preset_options("topdown")}
    # The default follows the data: a shipped sample's own allocation, else a preset of the
    # data's schema (an upload of RI 2010 layout → ri2010-production-like).
    by_schema = default_topdown_preset(data.hist.schema.name) if data.hist is not None else None
    default_alloc = DEFAULT_ALLOCATION.get(sample or "") or by_schema or WORKING
    # The choice is remembered per data set (canonical copy survives page changes).
    canonical = s.setdefault("run_td_alloc_by_data", {})
    canonical.setdefault(data_label, default_alloc)
    if s.get("run_td_alloc_for") != data_label or "run_td_alloc" not in s:
        s["run_td_alloc"] = canonical[data_label]
        s["run_td_alloc_for"] = data_label
    choice = st.selectbox(
        "Allocation",
        list(options),
        format_func=options.get,
        key="run_td_alloc",
        persist_state="session",
        on_change=S.guarded(
            lambda: canonical.__setitem__(data_label, s["run_td_alloc"]), "run: update"
        ),
        help="Shares of the budget over geolevels and queries. The data's schema must have "
        "the allocation's queries (RI 2010: VOTINGAGE × RACEETH → the ri2010 presets).",
    )
    try:
        runs = dict(s[S.TOPDOWN] if choice == WORKING else load_topdown_preset(choice))
        allocation = runs.get("persons")
    except PHExploreError as exc:
        st.error(str(exc))
        allocation = None
    if allocation is None:
        st.error("This allocation has no persons run; TopDown estimates person histograms.")
        return None
    what = "ε" if allocation.mechanism == "puredp" else "ρ"
    if choice == WORKING:
        # The planner's budget as it is: the same total as the planner shows (edit it there).
        preset = s.get(S.TOPDOWN_PRESET)
        st.markdown(
            f"Total {what} **{float(allocation.rho):.4f}** of the persons run, from the TopDown "
            "planner (change it there)."
        )
    else:
        preset = choice
        rho_key = f"run_td_rho_{choice}"
        if rho_key not in s:
            s[rho_key] = float(allocation.rho)
        typed = st.number_input(
            f"Total {what}",
            min_value=1e-4,
            step=0.1,
            format="%.4f",
            key=rho_key,
            persist_state="session",
            help=S.HELP_RHO + " A total other than the preset's makes it “modified from” it.",
        )
        try:
            # exact: left as shown, it is the preset's own fraction; typed, the decimal typed
            exact = exact_from_input(typed, allocation.rho, where=f"total {what}")
            allocation = allocation.with_rho(exact)
        except PHExploreError as exc:
            st.error(str(exc))
            return None
        runs["persons"] = allocation
    origin = describe_origin(runs, preset)
    fingerprint = budget_fingerprint(runs)
    st.caption(
        f"Budget: **{origin.label}** · fingerprint `{short_fingerprint(fingerprint)}`"
        + (" — " + origin.summary().removeprefix(origin.label + ": ") if origin.changes else "")
    )
    mismatch = (
        schema_mismatch(allocation.all_queries(), allocation.schema, data.hist.schema.name)
        if data.hist is not None
        else None
    )
    if mismatch:
        st.error(f"Cannot run: {mismatch}.", icon=":material/warning:")
    seed = seed_input("run_td_seed")
    workers = st.number_input(
        "Workers (processes)",
        min_value=1,
        max_value=8,
        key="run_td_workers",
        persist_state="session",
        help="Parallel processes for the estimation; results do not depend on it.",
    )
    noise_choice("run_td_noise")
    solver_choice("run_td_solver")
    universe_choice("run_td_universe")
    backend_choice("run_td_backend")
    chosen = s[S.SPINE]
    spine_text = (
        R.spine_label(chosen, allocation, data.hist, data.level, data.units)
        if chosen == R.PRESET_SPINE
        else S.SPINES[chosen]
    )
    st.caption(f"Spine: **{spine_text}** (change it on the TopDown planner).")
    if s[S.SPREAD_INVARIANT]:
        st.caption(
            "Held-exact shares **spread over each level's other queries — a departure from "
            "production** (change it on the TopDown planner)."
        )
    places = R.data_has_places(data.hist)
    entity = ENTITY_SAMPLE.get(sample or "") or ("places" if places else None)
    needs_entities = s[S.SPINE] in ("aian", "optimized")
    if needs_entities and not entity:
        st.warning(
            "The AIAN-style and optimized spines are built around entity areas: the shipped "
            "Providence wards (ri2010 sample) or the places of a generated population."
        )
    if needs_entities and entity:
        s["run_td_entities"] = True
    elif "run_td_entities" not in s:
        s["run_td_entities"] = False
    use_entities = bool(entity) and st.checkbox(
        "Report off-spine MAE for the data's places"
        if entity == "places"
        else "Report off-spine MAE for Providence city and its wards",
        key="run_td_entities",
        persist_state="session",
        disabled=needs_entities,
        help="Off-spine entities (SPN §7): their MAE is compared with on-spine levels. "
        + (
            "The places come with the generated population (places.csv)."
            if entity == "places"
            else "The subset must contain Providence blocks: County 44007, or some of its "
            "tracts (a few tracts run in seconds)."
        ),
    )
    special = None
    if entity and s[S.SPINE] in ("aian", "optimized"):
        is_aian = s[S.SPINE] == "aian"
        if is_aian or "run_td_branch" not in s:
            s["run_td_branch"] = is_aian
        branch = st.checkbox(
            "AIAN-style branch around the data's places"
            if entity == "places"
            else "AIAN-style branch around the city of Providence",
            key="run_td_branch",
            persist_state="session",
            disabled=is_aian,
            help="Split the state into the part inside and outside these special areas (SPN §1, "
            "§6: in production, the AIAN tribal areas). Required by the AIAN-style spine; off by "
            "default on the optimized spine, whose block groups target the entities without it.",
        )
        special = entity if branch else None
    return TopDownBudget(
        choice=choice,
        allocation=allocation,
        what=what,
        budget=runs,
        origin=origin,
        seed=int(seed),
        workers=int(workers),
        entity=entity,
        use_entities=use_entities,
        special_areas=special,
        mismatch=mismatch,
        noise_method=str(s["run_td_noise"]),
        preset=preset,
        error_universe=str(s["run_td_universe"]),
        solver=str(s.get("run_td_solver", "auto")),
    )
