"""Run page: run TopDown or PHSafe on a shipped sample or an uploaded file, with progress and cancel.

Thin page: data loading and validation are :mod:`engine.data`'s (problems listed as a readable
list), runs and metrics go through :mod:`phexplore.api` (the one run pipeline, :mod:`engine.runs`) to the engines. Results are kept in
the session (Results page) and downloadable here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import streamlit as st

from phexplore import api as R
from phexplore import app_state as S
from phexplore.budget.fingerprint import budget_fingerprint, short_fingerprint
from phexplore.errors import PHExploreError
from phexplore.presets import default_topdown_preset, load_topdown_preset
from phexplore.query_cells import schema_mismatch
from phexplore.scenarios import budget_origin

if TYPE_CHECKING:
    from phexplore.api import BlockHistogram
    from phexplore.budget import TopDownAllocation

JOB = R.JOB_KEY
UPLOAD_HIST = "run_upload_hist"
UPLOAD_CEF = "run_upload_cef"
UPLOAD_PROBLEMS = "run_upload_problems"
"""``{engine:source:choice: problem lines}``: a data problem belongs to its engine and data choice
and is shown only while that choice is on screen."""
WORKING = "__working__"
DEFAULT_ALLOCATION = {
    "ri2010": "ri2010-production-like",
    "pl94171_ri2018": "ri2010-production-like",
}
ENTITY_SAMPLE = {"ri2010": "providence-wards"}
TOPDOWN_DEFAULTS: dict[str, object] = {
    "run_td_seed": 2020,
    "run_td_workers": 1,
    "run_td_noise": "fast",
    "run_td_sweep": False,
    "run_td_rhos": "0.25, 1, 4",
    "run_td_sweep_seeds": 1,
    "run_td_srs": True,
    "run_td_epl_p": R.EPL_PERCENTILE,
    "run_td_epl_m": R.EPL_MULTIPLIER,
}
PHSAFE_DEFAULTS: dict[str, object] = {
    "run_ph_states": "44",
    "run_ph_seed": 2020,
    "run_ph_trials": 20,
    "run_ph_noise": "fast",
}


def _set_problems(key: str, lines: list[str] | None) -> None:
    """Keep (or clear) the data problems of one engine + data choice."""
    s = st.session_state
    problems = dict(s.get(UPLOAD_PROBLEMS) or {})
    if lines:
        problems[key] = lines
    else:
        problems.pop(key, None)
    s[UPLOAD_PROBLEMS] = problems


def _validate_topdown_upload() -> None:
    s = st.session_state
    kind = s["run_upload_kind"]
    key = f"topdown:upload:{kind}"
    _set_problems(key, None)
    s.pop(UPLOAD_HIST, None)
    try:
        files = s.get("run_upload_files") or []
        s[UPLOAD_HIST] = (
            R.load_topdown_upload(kind, files),
            ", ".join(f.name for f in files),
            kind,
        )
    except PHExploreError as exc:
        _set_problems(key, R.problem_lines(exc))


def _validate_cef_upload() -> None:
    s = st.session_state
    _set_problems("phsafe:upload", None)
    s.pop(UPLOAD_CEF, None)
    try:
        files = s.get("run_cef_files") or []
        s[UPLOAD_CEF] = (R.load_cef_upload(files), ", ".join(f.name for f in files))
    except PHExploreError as exc:
        _set_problems("phsafe:upload", R.problem_lines(exc))


def _problems(key: str) -> None:
    """The data problems of the engine + data choice ``key`` (none of another choice)."""
    lines = (st.session_state.get(UPLOAD_PROBLEMS) or {}).get(key)
    if lines:
        shown = "\n".join(f"- {line}" for line in lines[:30])
        more = f"\n- … and {len(lines) - 30} more" if len(lines) > 30 else ""
        st.error(f"The data did not pass validation ({len(lines)} problem(s)):\n\n{shown}{more}")


def _next_id() -> int:
    runs = st.session_state[S.RUNS]
    return 1 + max((r.id for r in runs), default=0)


@dataclass
class _TopDownData:
    """The Data column's choices: the loaded histogram (None until valid) and the subset."""

    hist: BlockHistogram | None
    data_label: str
    sample: str | None
    level: str | None
    units: list[str]


@dataclass
class _TopDownBudget:
    """The Budget column's choices."""

    choice: str
    allocation: TopDownAllocation
    what: str
    rho: float
    seed: int
    workers: int
    entity: str | None
    use_entities: bool
    special_areas: str | None = None
    origin: str = ""
    mismatch: str | None = None
    noise_method: str = "fast"


def _pick_sample(
    kind: str, key: str, help_text: str, load: Callable[[str], Any]
) -> tuple[str, Any | None]:
    """A shipped-sample selectbox; returns the name and the loaded data (None + listed problems)."""
    samples = R.samples_of(kind)
    sample = st.selectbox(
        "Sample",
        list(samples),
        format_func=lambda n: f"{n} — {samples[n]}",
        key=key,
        help=help_text,
    )
    try:
        loaded = load(sample)
        _set_problems(f"{kind}:sample:{sample}", None)
        return sample, loaded
    except PHExploreError as exc:
        _set_problems(f"{kind}:sample:{sample}", R.problem_lines(exc))
        return sample, None


def _generated_controls(prefix: str) -> str | None:
    """Persons, states and seed of a generated population; its folder once generated."""
    s = st.session_state
    low, high = R.GENERATED_PERSONS_RANGE
    c1, c2, c3 = st.columns([2, 2, 1])
    persons = c1.number_input(
        f"Persons ({low:,} – {high:,})",
        min_value=low,
        max_value=high,
        value=100_000,
        step=10_000,
        key=f"{prefix}_gen_persons",
        help="Size of the synthetic population (the same persons feed TopDown and PHSafe). "
        "Larger ones: `phexplore generate population`.",
    )
    states = c2.text_input(
        "States (postal codes)",
        value="RI",
        key=f"{prefix}_gen_states",
        help="e.g. RI or RI CT; empty = all 50 states and DC in proportion to 2010 populations.",
    )
    seed = c3.number_input("Seed", min_value=0, value=1, step=1, key=f"{prefix}_gen_seed")
    wanted = tuple(x.strip().upper() for x in states.replace(",", " ").split() if x.strip())
    key = (int(persons), wanted, int(seed))
    if st.button("Generate", key=f"{prefix}_gen_go"):
        try:
            s["run_generated"] = (key, R.generated_population(*key))
        except PHExploreError as exc:
            st.error(str(exc))
    held = s.get("run_generated")
    if held is not None and held[0] == key:
        return held[1]
    st.caption("Choose the size and press Generate (about 4 s per million persons).")
    return None


def _topdown_data() -> _TopDownData:
    """Data column: shipped sample or validated upload, and the subset to run on."""
    s = st.session_state
    st.markdown("**Data**")
    source = st.radio(
        "Source",
        ["sample", "upload", "generated"],
        format_func={
            "sample": "Shipped sample",
            "upload": "Upload a file",
            "generated": "Generated population",
        }.get,
        horizontal=True,
        key="run_td_source",
        help="Shipped public or synthetic samples, or your own files in a supported layout.",
    )
    hist, data_label, sample = None, "", None
    problem_key = ""
    if source == "sample":
        samples = R.samples_of("topdown")
        if s.get("run_td_sample") not in samples:
            s["run_td_sample"] = "ri2010" if "ri2010" in samples else next(iter(samples))
        sample, hist = _pick_sample(
            "topdown",
            "run_td_sample",
            "Public, non-confidential test data shipped with PHExplore.",
            R.topdown_sample,
        )
        data_label = sample if hist is not None else ""
        problem_key = f"topdown:sample:{sample}"
    elif source == "generated":
        folder = _generated_controls("run_td")
        if folder is not None:
            hist = R.generated_topdown(folder)
            persons, states, seed = s["run_generated"][0]
            data_label = f"generated {persons:,} ({' '.join(states) or 'US'}, seed {seed})"
            st.success(
                f"{hist.n_blocks:,} blocks, {hist.total:,} persons, with housing units and GQ"
            )
    else:
        st.selectbox(
            "File type",
            list(R.TOPDOWN_UPLOAD_KINDS),
            format_func=R.TOPDOWN_UPLOAD_KINDS.get,
            key="run_upload_kind",
            help="The layout of your file; the data layer checks every row and column and lists each problem.",
        )
        st.file_uploader(
            "Files",
            type=["csv", "txt", "pl", "gz", "json"],
            accept_multiple_files=True,
            key="run_upload_files",
            help="Validated by the data layer; every problem is listed with its file, row "
            "and column.",
        )
        st.button(
            "Validate upload",
            on_click=S.guarded(_validate_topdown_upload, "run: validate_topdown_upload"),
        )
        problem_key = f"topdown:upload:{s.get('run_upload_kind')}"
        loaded = s.get(UPLOAD_HIST)
        if loaded is not None and loaded[2] == s.get("run_upload_kind"):
            hist, data_label = loaded[0], loaded[1]
            st.success(
                f"Loaded {data_label}: {hist.n_blocks:,} blocks, {hist.total:,} persons "
                f"({hist.schema.name} schema)"
            )
    _problems(problem_key)
    level, units = None, []
    if hist is not None:
        choices = [lv for lv in hist.levels[1:-1]]
        options = ["(all data)", *choices]
        # Many cells per block (the 2,016-cell schema) → start from the finest level.
        default_level = (choices[0] if hist.schema.size <= 64 else choices[-1]) if choices else None
        level_key = f"run_td_subset_level_{data_label}"
        if s.get(level_key) not in options:
            s[level_key] = default_level or options[0]
        level = st.selectbox(
            "Run on a subset (geolevel)",
            options,
            key=level_key,
            help="A small subset (one county, a few tracts) runs in seconds; all of RI takes "
            "minutes. Run time grows with blocks × cells per block.",
        )
        if level == "(all data)":
            level = None
        else:
            sizes = R.subset_units(hist, level)
            default = [str(sizes.index[0])]
            key = f"run_td_units_{data_label}_{level}"
            if key not in s:
                s[key] = default
            units = st.multiselect(
                f"{level}s to include",
                [str(u) for u in sizes.index],
                format_func=lambda u, z=sizes: f"{u} ({int(z[u]):,} blocks)",
                key=key,
                help="Geounits whose blocks are run; the smallest comes first.",
            )
        n_blocks = (
            int(R.subset_units(hist, level).loc[units].sum()) if level and units else hist.n_blocks
        )
        st.caption(
            f"Run size: {n_blocks:,} blocks × {hist.schema.size:,} cells per block "
            f"({hist.schema.name} schema). " + R.topdown_cost_sentence(n_blocks, hist.schema.size)
        )
    return _TopDownData(hist, data_label, sample, level, list(units))


def _topdown_budget(data: _TopDownData) -> _TopDownBudget | None:
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
        on_change=S.guarded(
            lambda: canonical.__setitem__(data_label, s["run_td_alloc"]), "run: update"
        ),
        help="Shares of the budget over geolevels and queries. The data's schema must have "
        "the allocation's queries (RI 2010: VOTINGAGE × RACEETH → the ri2010 presets).",
    )
    try:
        runs = s[S.TOPDOWN] if choice == WORKING else load_topdown_preset(choice)
        allocation = runs.get("persons")
    except PHExploreError as exc:
        st.error(str(exc))
        allocation = None
    if allocation is None:
        st.error("This allocation has no persons run; TopDown estimates person histograms.")
        return None
    what = "ε" if allocation.mechanism == "puredp" else "ρ"
    if choice == WORKING:
        # The planner's allocation as it is: the same total as the planner shows (edit it there).
        rho = float(allocation.rho)
        origin = S.topdown_origin()
        st.markdown(
            f"Total {what} **{rho:.4f}** of the persons run, from the TopDown planner "
            f"(**{origin}**; change it there)."
        )
    else:
        rho_key = f"run_td_rho_{choice}"
        if rho_key not in s:
            s[rho_key] = float(allocation.rho)
        rho = st.number_input(
            f"Total {what}",
            min_value=1e-4,
            step=0.1,
            format="%.4f",
            key=rho_key,
            help=S.HELP_RHO + " A total other than the preset's makes it “modified from” it.",
        )
        origin = budget_origin(allocation.with_rho(rho), choice)
    fingerprint = budget_fingerprint(allocation.with_rho(rho))
    st.caption(f"Budget: **{origin}** · fingerprint `{short_fingerprint(fingerprint)}`")
    mismatch = (
        schema_mismatch(allocation.all_queries(), allocation.schema, data.hist.schema.name)
        if data.hist is not None
        else None
    )
    if mismatch:
        st.error(f"Cannot run: {mismatch}.", icon=":material/warning:")
    seed = st.number_input(
        "Seed",
        min_value=0,
        step=1,
        key="run_td_seed",
        help="Seeds the noise: the same seed gives the same run.",
    )
    workers = st.number_input(
        "Workers (processes)",
        min_value=1,
        max_value=8,
        key="run_td_workers",
        help="Parallel processes for the estimation; results do not depend on it.",
    )
    _noise_choice("run_td_noise")
    _backend_choice("run_td_backend")
    st.caption(f"Spine: **{S.SPINES[s[S.SPINE]]}** (change it on the TopDown planner).")
    if s[S.SPREAD_INVARIANT]:
        st.caption(
            "Held-exact shares **spread over each level's other queries — a departure from "
            "production** (change it on the TopDown planner)."
        )
    entity = ENTITY_SAMPLE.get(sample or "")
    needs_entities = s[S.SPINE] != "conventional"
    if needs_entities and not entity:
        st.warning(
            "The AIAN-style and optimized spines are built around entity areas; the shipped "
            "ones (Providence wards) exist for the ri2010 sample only."
        )
    if needs_entities and entity:
        s["run_td_entities"] = True
    elif "run_td_entities" not in s:
        s["run_td_entities"] = False
    use_entities = bool(entity) and st.checkbox(
        "Report off-spine MAE for Providence city and its wards",
        key="run_td_entities",
        disabled=needs_entities,
        help="Off-spine entities (SPN §7): their MAE is compared with on-spine levels. The "
        "subset must contain Providence blocks: County 44007, or some of its tracts "
        "(a few tracts run in seconds).",
    )
    special = None
    if entity and s[S.SPINE] in ("aian", "optimized"):
        is_aian = s[S.SPINE] == "aian"
        if is_aian or "run_td_branch" not in s:
            s["run_td_branch"] = is_aian
        branch = st.checkbox(
            "AIAN-style branch around the city of Providence",
            key="run_td_branch",
            disabled=is_aian,
            help="Split the state into the part inside and outside these special areas (SPN §1, "
            "§6: in production, the AIAN tribal areas). Required by the AIAN-style spine; off by "
            "default on the optimized spine, whose block groups target the entities without it.",
        )
        special = entity if branch else None
    return _TopDownBudget(
        choice,
        allocation,
        what,
        float(rho),
        int(seed),
        int(workers),
        entity,
        use_entities,
        special,
        origin,
        mismatch,
        str(s["run_td_noise"]),
    )


def _noise_choice(key: str) -> None:
    """The noise sampler: keyed and reproducible (default) or OpenDP's exact samplers."""
    st.radio(
        "Noise",
        list(R.NOISE_METHODS),
        format_func=R.NOISE_METHODS.get,
        key=key,
        help=R.NOISE_HELP,
    )


def _topdown_sweep(
    data: _TopDownData, budget: _TopDownBudget
) -> tuple[str | None, bool, str, int, bool, bool]:
    """Sweep column and the Run button: (preset, sweep, budgets text, seeds, SRS, Run pressed)."""
    s = st.session_state
    choice, what, hist = budget.choice, budget.what, data.hist
    st.markdown("**Sweep (optional)**")
    preset = None if choice == WORKING else choice
    sweep = st.checkbox(
        "Also run a budget sweep (EPL vs ρ, SRS comparison)",
        key="run_td_sweep",
        disabled=preset is None,
        help="Re-runs the allocation preset at several budgets × seeds and a simple random "
        "sample baseline (PF Fig. 2). Needs a preset allocation.",
    )
    rhos_text = st.text_input(
        f"Sweep budgets ({what}, comma separated)",
        key="run_td_rhos",
        disabled=not sweep,
        help="Each budget is one more TopDown run with the same shares; EPL and error are plotted against it.",
    )
    sweep_seeds = st.number_input(
        "Seeds per budget (trials)",
        min_value=1,
        max_value=10,
        key="run_td_sweep_seeds",
        disabled=not sweep,
        help="Repeated runs per budget with consecutive seeds; their spread shows the noise in EPL and MAE.",
    )
    srs = st.checkbox(
        "Include the SRS baseline",
        key="run_td_srs",
        disabled=not sweep,
        help=R.SRS_HELP,
    )
    _epl_options()
    go = st.button(
        "Run TopDown",
        type="primary",
        disabled=hist is None or s.get(JOB) is not None or budget.mismatch is not None,
        key="run_td_go",
    )
    return preset, sweep, rhos_text, int(sweep_seeds), srs, go


def _epl_options() -> None:
    """EPL density-range settings (default: Petti & Flaxman's published p = 95, m = 1.0)."""
    (p_lo, p_hi), (m_lo, m_hi) = R.EPL_PERCENTILE_RANGE, R.EPL_MULTIPLIER_RANGE
    with st.expander("EPL settings (default: Petti & Flaxman's published)"):
        st.number_input(
            f"EPL percentile p ({p_lo:g} < p ≤ {p_hi:g})",
            min_value=p_lo + 0.5,
            max_value=p_hi,
            step=0.5,
            key="run_td_epl_p",
            help="EPL's density range is ±m × max(|P(100−p)|, |P(p)|) of the residuals. PF "
            "published every EPL with p = 95, m = 1.0; their function's defaults 99 / 1.5 give "
            "values up to ~10× larger. PF's numbers are drawn only beside EPLs with p = 95, m = 1.",
        )
        st.number_input(
            f"EPL multiplier m ({m_lo:g} < m ≤ {m_hi:g})",
            min_value=0.1,
            max_value=m_hi,
            step=0.1,
            key="run_td_epl_m",
            help="Multiplier of the density range (PF's published setting: 1.0).",
        )


def _topdown_form() -> R.RunJob | None:
    """Controls of a TopDown run; returns a started job when Run is pressed."""
    s = st.session_state
    for key, default in TOPDOWN_DEFAULTS.items():
        s.setdefault(key, default)
    c1, c2, c3 = st.columns(3)
    with c1:
        data = _topdown_data()
    with c2:
        budget = _topdown_budget(data)
    if budget is None:
        return None
    with c3:
        preset, sweep, rhos_text, sweep_seeds, srs, go = _topdown_sweep(data, budget)
    hist, data_label, level, units = data.hist, data.data_label, data.level, data.units
    allocation, rho = budget.allocation, budget.rho
    if not go or hist is None or budget.mismatch:
        return None
    try:
        rhos = (
            [float(x) for x in rhos_text.replace(";", ",").split(",") if x.strip()] if sweep else []
        )
        if any(not math.isfinite(r) or r <= 0 for r in rhos):
            raise ValueError
    except ValueError:
        st.error(f"Sweep budgets must be positive numbers separated by commas; got {rhos_text!r}")
        return None
    try:
        run_data = R.subset(hist, level, units)
        alloc = allocation.with_rho(rho)
    except PHExploreError as exc:
        st.error(str(exc))
        return None
    label = data_label + (f" [{level} {', '.join(units)}]" if level and units else "")
    try:
        R.epl_settings(s["run_td_epl_p"], s["run_td_epl_m"])
    except PHExploreError as exc:
        st.error(str(exc))
        return None
    work = R.topdown_work(
        run_id=_next_id(),
        scenario=s[S.SCENARIO_NAME],
        hist=run_data,
        data_label=label,
        allocation=alloc,
        preset=preset,
        seed=budget.seed,
        workers=budget.workers,
        noise_method=budget.noise_method,
        spine=s[S.SPINE],
        entities=[budget.entity] if budget.use_entities and budget.entity else [],
        special_areas=budget.special_areas,
        spread_invariant_share=bool(s[S.SPREAD_INVARIANT]),
        sweep_rhos=rhos,
        sweep_seeds=sweep_seeds,
        srs=srs,
        epl_percentile=float(s["run_td_epl_p"]),
        epl_multiplier=float(s["run_td_epl_m"]),
        backend=s.get("run_td_backend", "local"),
        origin=budget.origin,
    )
    return R.start_job(R.RunJob(engine="topdown", label=label, phases=2 if rhos else 1), work)


def _phsafe_form() -> R.RunJob | None:
    """Controls of a PHSafe run on the working PHSafe budget; returns a started job on Run."""
    s = st.session_state
    for key, default in PHSAFE_DEFAULTS.items():
        s.setdefault(key, default)
    c1, c2 = st.columns(2)
    extract, data_label, scale = None, "", None
    with c1:
        st.markdown("**Data (CEF extract)**")
        source = st.radio(
            "Source",
            ["sample", "upload", "generated"],
            format_func={
                "sample": "Shipped sample",
                "upload": "Upload persons/units/geo CSV",
                "generated": "Generated population",
            }.get,
            horizontal=True,
            key="run_ph_source",
            help="Shipped public or synthetic samples, or your own files in a supported layout.",
        )
        if source == "sample":
            sample, loaded = _pick_sample(
                "phsafe", "run_ph_sample", "Synthetic or public records only.", R.phsafe_sample
            )
            if loaded is not None:
                extract, data_label, scale = loaded, sample, R.sample_scale(sample)
        elif source == "generated":
            folder = _generated_controls("run_ph")
            if folder is not None:
                extract = R.generated_cef(folder)
                persons, states, seed = s["run_generated"][0]
                data_label = f"generated {persons:,} ({' '.join(states) or 'US'}, seed {seed})"
        else:
            st.file_uploader(
                "CEF extract files (persons, units, geo)",
                type=["csv", "gz"],
                accept_multiple_files=True,
                key="run_cef_files",
                help="Three files named persons…, units… and geo… (CSV, optionally gzip-compressed).",
            )
            st.button(
                "Validate upload",
                on_click=S.guarded(_validate_cef_upload, "run: validate_cef_upload"),
                key="run_cef_validate",
            )
            if UPLOAD_CEF in s:
                extract, data_label = s[UPLOAD_CEF]
                st.success(f"Loaded {data_label}")
        _problems(
            f"phsafe:sample:{s.get('run_ph_sample')}" if source == "sample" else "phsafe:upload"
        )
        states = st.text_input(
            "States to run (2-digit FIPS, comma separated)",
            key="run_ph_states",
            help="A subset keeps the run short (44 = Rhode Island). Leave empty for the states "
            "of the budget's state filter.",
        )
    with c2:
        budget = S.effective_phsafe()
        st.markdown("**Budget**")
        ph_origin = S.phsafe_origin()
        st.markdown(
            f"Working PHSafe budget **{ph_origin}** from the PHSafe planner: total ρ "
            f"**{budget.total_unbounded():.4f}** (unbounded), {len(budget.tables())} tables."
        )
        st.caption(f"Budget fingerprint `{short_fingerprint(budget_fingerprint(budget))}`")
        seed = st.number_input(
            "Seed",
            min_value=0,
            step=1,
            key="run_ph_seed",
            help="Seeds the noise: the same seed gives the same run.",
        )
        trials = st.number_input(
            "Trials (noise redraws)",
            min_value=1,
            max_value=200,
            key="run_ph_trials",
            help="Several noise draws on one join give the empirical MOE next to the analytic one.",
        )
        _noise_choice("run_ph_noise")
        _backend_choice("run_ph_backend")
        go = st.button(
            "Run PHSafe",
            type="primary",
            disabled=extract is None or s.get(JOB) is not None,
            key="run_ph_go",
        )
    if not go or extract is None:
        return None
    wanted = [x.strip() for x in states.split(",") if x.strip()]
    work = R.phsafe_work(
        run_id=_next_id(),
        scenario=s[S.SCENARIO_NAME],
        extract=extract,
        data_label=data_label + (f" [states {', '.join(wanted)}]" if wanted else ""),
        budget=budget,
        origin=ph_origin,
        states=wanted,
        seed=int(seed),
        trials=int(trials),
        scale=scale,
        noise_method=str(s["run_ph_noise"]),
        backend=s.get("run_ph_backend", "local"),
    )
    return R.start_job(R.RunJob(engine="phsafe", label=data_label), work)


def _backend_choice(key: str) -> None:
    """Local or Spark, offered only when pyspark is installed and a Spark master is configured."""
    options = R.spark_backend_options()
    if options is None:
        return
    target = options.get("master") or options.get("remote")
    st.radio(
        "Where to run",
        ["local", "spark"],
        format_func=lambda b: "This machine" if b == "local" else f"Spark ({target})",
        key=key,
        horizontal=True,
        help="The same numbers either way (docs/spark.md); Spark pays off on a cluster.",
    )


@st.fragment(run_every=1.0)
def _job_panel() -> None:
    """Progress of the running job (refreshed every second) with a Cancel button."""
    s = st.session_state
    job: R.RunJob | None = s.get(JOB)
    if job is None:
        return
    if R.collect_finished(s, S.RUNS):
        st.rerun()
    st.markdown(f"**Running {job.engine}** on {job.label} — {job.elapsed():.0f} s")
    eta = job.eta()
    left = (
        ""
        if eta is None
        else f" — about {eta:.0f} s left"
        if eta < 120
        else f" — about {eta / 60:.0f} min left"
    )
    st.progress(job.shown_fraction, text=f"Overall {job.shown_fraction:.0%}{left}")
    stages = list(job.stages.items())
    for i, (label, fraction) in enumerate(stages):
        done = i < len(stages) - 1 or fraction >= 1.0
        st.progress(
            1.0 if done else max(min(fraction, 1.0), 0.0), text=("✓ " if done else "… ") + label
        )
    if st.button("Cancel run", key="run_cancel"):
        job.cancel_event.set()
        st.info("Cancelling after the current step…")


def _results_list() -> None:
    s = st.session_state
    runs = s[S.RUNS]
    if not runs:
        st.info("No runs yet in this session. Results appear here and on the Results page.")
        return
    record = runs[-1]
    st.subheader("Latest result")
    st.caption(R.TRUTH_NOTE)
    settings = record.settings
    m = st.columns(4)
    m[0].metric("Engine", record.engine)
    m[1].metric("Budget" if record.engine == "phsafe" else "ρ / ε", f"{record.rho:.4g}")
    m[2].metric(
        "Runtime",
        f"{settings.get('elapsed_s', settings.get('runtime_s', 0)):.1f} s",
        help="Wall-clock time of the whole run (engine, metrics and any sweep), the same as in "
        "the “Finished” message.",
    )
    label, value, help_text = R.headline_error(record)
    m[3].metric(label, f"{value:.2f}" if value is not None else "—", help=help_text)
    spent = R.budget_caption(record)
    if spent:
        st.caption(spent)
    folded = (record.metrics or {}).get("schema_note") or {}
    if folded.get("note"):
        st.caption(str(folded["note"]) + " Production's σ for comparison: Results page.")
    d = st.columns(4)
    d[0].download_button(
        "Tidy table (CSV)",
        partial(R.tidy_bytes, record.tidy, "csv"),
        file_name=f"run{record.id}_tidy.csv",
        mime="text/csv",
        key=f"dl_csv_{record.id}",
        on_click="ignore",
    )
    d[1].download_button(
        "Tidy table (Parquet)",
        partial(R.tidy_bytes, record.tidy, "parquet"),
        file_name=f"run{record.id}_tidy.parquet",
        mime="application/octet-stream",
        key=f"dl_parquet_{record.id}",
        on_click="ignore",
    )
    d[2].download_button(
        "metrics.json",
        partial(R.metrics_bytes, record.metrics),
        file_name=f"run{record.id}_metrics.json",
        mime="application/json",
        key=f"dl_metrics_{record.id}",
        on_click="ignore",
    )
    d[3].page_link("pages/results.py", label="Open the Results page", icon=":material/bar_chart:")
    with st.expander(f"All runs of this session ({len(runs)})"):
        for r in runs:
            st.write(r.label)


def render() -> None:
    """Draw the page."""
    S.init_state()
    s = st.session_state
    st.title("Run an engine")
    st.caption(
        "Run the full TopDown or PHSafe engine on public test data and measure its error against "
        "the truth. Start small (one county, one state): the first results appear in seconds."
    )
    message = s.pop(R.MESSAGE_KEY, None)
    if message:
        getattr(st, message[0])(message[1])
    engine = st.radio(
        "Engine",
        ["topdown", "phsafe"],
        format_func={"topdown": "TopDown (redistricting data)", "phsafe": "PHSafe (S-DHC)"}.get,
        horizontal=True,
        key="run_engine",
        help="TopDown protects the redistricting (P.L. 94-171) tables; PHSafe the S-DHC household tables.",
    )
    busy = s.get(JOB) is not None
    if busy:
        st.warning("A run is in progress; wait for it or cancel it to start another.")
    job = _topdown_form() if engine == "topdown" else _phsafe_form()
    if job is not None and not busy:
        s[JOB] = job
    _job_panel()
    _results_list()


render()
