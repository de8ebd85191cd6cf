"""PHSafe planner page: ρ or MOE target per table × population-group level, τ per table.

Thin page: every number comes from :mod:`phexplore.planning.targets.moe_tables` / :mod:`engine.dp.moe` and every
edit goes through the :class:`~phexplore.api.budgets.PHSafeBudget` API (``with_rho``,
``with_moe_target``, ``with_tau``, ``without_levels``), whose validation messages are shown in place.
"""

from __future__ import annotations

import math
import time

import streamlit as st

from pages.planner_parts.baseline_bar import baseline_bar, scaled_message
from pages.planner_parts.phsafe_views import moe_table, moe_vs_rho_figure
from phexplore.api.budgets import (
    LEVEL_KEYS,
    PHSAFE_DENOMINATOR_TABLES,
    PHSAFE_TABLES,
    PHExploreError,
    PHSafeBudget,
    allowed_levels,
    load_json_object,
    load_phsafe_preset,
    moe_for_rho,
    phsafe_from_dict,
)
from phexplore.api.planning import relative, scale_phsafe
from phexplore.app import planner_tables as T
from phexplore.app import state as S
from phexplore.app.committee import percent
from phexplore.app.guide import epsilon_reading
from phexplore.app.naming import level_label, short_level_label, table_label

ERROR_KEY = "phsafe_error"
GRID_MODES = {"rho": "ρ (unbounded) per cell", "moe": "MOE target per cell"}


def _set_budget(budget: PHSafeBudget) -> None:
    st.session_state[S.PHSAFE] = budget
    st.session_state[ERROR_KEY] = None


def _fail(exc: Exception) -> None:
    st.session_state[ERROR_KEY] = str(exc)


def _apply_grid(editor_key: str, mode: str) -> bool:
    """Apply the data editor's pending cell edits to the budget; True when there were any.

    Errors (a ValidationError naming the table and level) are kept for display in place and the
    last valid budget is kept.
    """
    edits = st.session_state.get(editor_key, {}).get("edited_rows", {})
    if not edits:
        return False
    budget: PHSafeBudget = st.session_state[S.PHSAFE]
    try:
        for row_index, changes in edits.items():
            table = PHSAFE_TABLES[int(row_index)]
            for column, value in changes.items():
                if column == "τ":
                    if value is None:
                        continue
                    budget = budget.with_tau(table, int(value))
                elif value is None or (isinstance(value, float) and math.isnan(value)):
                    budget = budget.with_rho(table, column, 0.0)
                elif mode == "rho" or float(value) == 0:
                    budget = budget.with_rho(table, column, float(value))
                else:
                    budget = budget.with_moe_target(table, column, float(value))
        _set_budget(budget)
    except (PHExploreError, ValueError) as exc:
        _fail(exc)
    S.bump_editor_version()
    return True


def _sync_cell_inputs(budget: PHSafeBudget) -> None:
    """Show the selected cell's current ρ, MOE and τ in the single-cell inputs."""
    s = st.session_state
    table, level = s["ps_table"], s["ps_level"]
    rho = budget.rho(table, level)
    s["ps_rho"] = float(rho) if math.isfinite(rho) else 0.0
    target = budget.moe_targets.get(table, {}).get(level)
    if target is None and rho > 0 and math.isfinite(rho):
        target = moe_for_rho(rho, budget.sensitivity(table), budget.confidence)
    s["ps_moe"] = float(target or 0.0)
    if table not in PHSAFE_DENOMINATOR_TABLES:
        s["ps_tau"] = int(budget.tau.get(table, 1))


def _on_rho() -> None:
    s = st.session_state
    try:
        _set_budget(s[S.PHSAFE].with_rho(s["ps_table"], s["ps_level"], float(s["ps_rho"])))
    except PHExploreError as exc:
        _fail(exc)
    S.bump_editor_version()


def _on_moe() -> None:
    s = st.session_state
    try:
        moe = float(s["ps_moe"])
        budget = s[S.PHSAFE]
        if moe == 0:
            _set_budget(budget.with_rho(s["ps_table"], s["ps_level"], 0.0))
        else:
            _set_budget(budget.with_moe_target(s["ps_table"], s["ps_level"], moe))
    except PHExploreError as exc:
        _fail(exc)
    S.bump_editor_version()


def _on_tau() -> None:
    s = st.session_state
    try:
        _set_budget(s[S.PHSAFE].with_tau(s["ps_table"], int(s["ps_tau"])))
    except PHExploreError as exc:
        _fail(exc)
    S.bump_editor_version()


def _on_levels() -> None:
    enabled = st.session_state["ps_enabled_levels"]
    st.session_state[S.PHSAFE_DISABLED] = [k for k in LEVEL_KEYS if k not in enabled]


def _load_preset() -> None:
    try:
        _set_budget(load_phsafe_preset(st.session_state["ps_preset"]))
        st.session_state[S.PHSAFE_DISABLED] = []
        st.session_state.pop("ps_enabled_levels", None)
    except PHExploreError as exc:
        _fail(exc)
    S.bump_editor_version()


def _import_config() -> None:
    upload = st.session_state.get("ps_upload")
    if upload is None:
        return
    try:
        data = load_json_object(upload.getvalue(), label=upload.name, allow_infinity=True)
        _set_budget(phsafe_from_dict(data, name=upload.name))
        st.session_state[S.PHSAFE_DISABLED] = []
        st.session_state.pop("ps_enabled_levels", None)
    except PHExploreError as exc:
        _fail(exc)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        # A JSON value of the wrong shape that the validator did not catch: never a traceback,
        # and the current budget stays.
        _fail(f"{upload.name}: not a valid PHSafe config.json: {S.describe_bad_input(exc)}")
    S.bump_editor_version()


def _scale(target: str, pct: float) -> str:
    """Scale every measured cell's ρ, or one level's (or one geography's) cells, by ``pct``."""
    s = st.session_state
    before = S.effective_phsafe().total_unbounded()
    budget = scale_phsafe(s[S.PHSAFE], 0 if target != "total" else pct,
                          {} if target == "total" else {target: pct})  # fmt: skip
    _set_budget(budget)
    S.bump_editor_version()
    what = "every cell's ρ" if target == "total" else f"the ρ of {SCALE_TARGETS[target]}"
    return scaled_message(what, pct, before, S.effective_phsafe().total_unbounded(), "total ρ")


SCALE_TARGETS = {
    "total": "every cell (total ρ)",
    "Nation": "Nation (every group)",
    "State": "State (every group)",
    **{k: level_label(k) for k in LEVEL_KEYS},
}


def _delta(value: float, base: float, digits: int) -> str | None:
    rel = relative(value, base)
    if rel is None:
        return None
    return f"Δ {value - base:+.{digits}f} ({percent(rel)}) vs baseline".replace("-", "−")


def render() -> None:
    """Draw the page."""
    S.init_state()
    s = st.session_state
    s.setdefault(ERROR_KEY, None)
    mode = s.get("ps_grid_mode", "rho")
    t0 = time.thread_time()
    _apply_grid(f"ps_grid_{s[S.EDITOR_VERSION]}_{mode}", mode)
    budget = S.effective_phsafe()
    delta = float(s[S.DELTA])
    conversion = s[S.CONVERSION]
    confidence = float(s.get("ps_confidence", 0.90))
    rows, summary = T.phsafe_frames(budget, delta, confidence)
    grid = T.phsafe_grid_frame(budget, mode, rows)
    compute_ms = (time.thread_time() - t0) * 1000

    st.title("PHSafe planner")
    st.caption(
        "Plan the S-DHC budget: each measured table × population-group level gets a share of ρ "
        "(or a 90% MOE target, from which ρ follows: ρ = z²Δ²/(2·MOE²), z = 1.645). "
        "Every number is shown beside the baseline's, with Δ."
    )
    base = baseline_bar("phsafe", "ps", SCALE_TARGETS, _scale)
    assert base.phsafe is not None
    base_rows, base_summary = T.phsafe_frames(base.phsafe, delta, confidence)
    if s[ERROR_KEY]:
        st.error(f"Not applied: {s[ERROR_KEY]}", icon=":material/warning:")
    st.markdown(
        f"Working budget: **{S.budget_badge('phsafe')}** · compared with the baseline **{base.label}**"
    )

    eps = summary.get("epsilon_bounded", {}).get(conversion, summary.get("epsilon_total_bounded"))
    base_eps = base_summary.get("epsilon_bounded", {}).get(
        conversion, base_summary.get("epsilon_total_bounded")
    )
    m = st.columns(4)
    m[0].metric(
        "Total ρ (unbounded neighbours)",
        f"{summary['rho_total_unbounded']:.4f}",
        delta=_delta(summary["rho_total_unbounded"], base_summary["rho_total_unbounded"], 4),
        delta_color="off",
        delta_arrow="off",
        help=S.HELP_RHO
        + " Unbounded: neighbouring datasets differ by adding or removing a person.",
    )
    m[1].metric(
        "Total ρ (bounded, = 2×)",
        f"{summary['rho_total_bounded']:.4f}",
        delta=_delta(summary["rho_total_bounded"], base_summary["rho_total_bounded"], 4),
        delta_color="off",
        delta_arrow="off",
        help="Bounded neighbours change one person's record; the guarantee is exactly twice the "
        "unbounded ρ (PHS Thm 3–4).",
    )
    m[2].metric(
        f"ε at δ = {S.fmt_delta(delta)} (bounded)",
        f"{eps:.2f}",
        delta=_delta(eps, base_eps, 2),
        delta_color="off",
        delta_arrow="off",
        help=f"{S.conversion_label(conversion)}. " + S.HELP_DELTA,
    )
    m[3].metric(
        "Measured cells",
        f"{len(rows)}",
        delta=f"{len(rows) - len(base_rows):+d} vs baseline".replace("-", "−"),
        delta_color="off",
        delta_arrow="off",
        help="Number of (table, population-group level) measurements with a positive budget.",
    )
    st.caption(f"**ε in words:** {epsilon_reading(eps, delta)}")

    c1, c2, c3, c4 = st.columns([0.34, 0.12, 0.34, 0.2], vertical_alignment="bottom")
    options = S.preset_options("phsafe")
    if s.get("ps_preset") not in options:
        current = s[S.PHSAFE].name
        s["ps_preset"] = current if current in options else S.DEFAULT_PHSAFE_PRESET
    c1.selectbox(
        "Preset",
        list(options),
        format_func=options.get,
        key="ps_preset",
        persist_state="session",
        help="Shipped PHSafe parameter sets (PHS Table 10: production 2020 S-DHC).",
    )
    c2.button(
        "Load preset",
        on_click=S.guarded(_load_preset, "phsafe planner: load_preset"),
        width="stretch",
    )
    if "ps_enabled_levels" not in s:
        s["ps_enabled_levels"] = [k for k in LEVEL_KEYS if k not in s[S.PHSAFE_DISABLED]]
    c3.multiselect(
        "Measured population-group levels",
        list(LEVEL_KEYS),
        format_func=short_level_label,
        key="ps_enabled_levels",
        persist_state="session",
        on_change=S.guarded(_on_levels, "phsafe planner: on_levels"),
        help="Switch whole population-group levels on or off. Budgets of switched-off levels "
        "are kept and come back when you switch them on again.",
    )
    c4.radio(
        "The grid shows",
        list(GRID_MODES),
        format_func=GRID_MODES.get,
        key="ps_grid_mode",
        persist_state="session",
        help=S.HELP_RHO + " " + S.HELP_MOE,
    )
    editor_key = f"ps_grid_{s[S.EDITOR_VERSION]}_{mode}"
    value_help = (
        "ρ of this cell; 0 or empty skips the level."
        if mode == "rho"
        else "90% MOE target; ρ follows. 0 or empty skips the level."
    )
    st.data_editor(
        grid,
        key=editor_key,
        width="stretch",
        height=35 * (len(grid) + 1) + 3,
        alt=f"PHSafe budget grid: {GRID_MODES[mode]} by table and population-group level "
        "(editable)",
        column_config={
            "_index": st.column_config.TextColumn("Table", width=150),
            "τ": st.column_config.NumberColumn(
                "τ", min_value=1, max_value=100, step=1, format="%d", help=S.HELP_TAU, width=60
            ),
            **{
                k: st.column_config.NumberColumn(
                    short_level_label(k),
                    format="%.6f" if mode == "rho" else "%.0f",
                    min_value=0.0,
                    help=f"{level_label(k)}: {value_help}",
                    width=120,
                )
                for k in LEVEL_KEYS
            },
        },
    )
    st.caption(
        "Empty cells are not measured (PH2 and PH6 exist only at the Unattributed levels; "
        "denominator tables PH1_denom, PH5_denom, PH8_denom count households and have no τ). "
        "Nation and State without a group = Unattributed (everyone)."
    )

    left, right = st.columns([0.4, 0.6])
    with left, st.expander("Edit one cell", expanded=True):
        table = st.selectbox(
            "Table",
            PHSAFE_TABLES,
            format_func=table_label,
            key="ps_table",
            persist_state="session",
            help="Also selects the plot's table.",
        )
        levels = allowed_levels(table)
        if s.get("ps_level") not in levels:
            s["ps_level"] = levels[0]
        st.selectbox(
            "Population-group level",
            levels,
            format_func=level_label,
            key="ps_level",
            persist_state="session",
            help="Nation or State, by the population group iterated over (Unattributed = "
            "everyone, A-G = race-alone groups, H-I = Hispanic / White alone not Hispanic).",
        )
        _sync_cell_inputs(s[S.PHSAFE])
        e3, e4, e5 = st.columns(3)
        e3.number_input(
            "ρ (unbounded)",
            min_value=0.0,
            step=0.001,
            format="%.6f",
            key="ps_rho",
            persist_state="session",
            on_change=S.guarded(_on_rho, "phsafe planner: on_rho"),
            help=S.HELP_RHO + " 0 skips the level.",
        )
        e4.number_input(
            "MOE target (90%)",
            min_value=0.0,
            step=1.0,
            format="%.0f",
            key="ps_moe",
            persist_state="session",
            on_change=S.guarded(_on_moe, "phsafe planner: on_moe"),
            help=S.HELP_MOE + " Setting it recomputes ρ.",
        )
        e5.number_input(
            "τ of the table",
            min_value=1,
            max_value=100,
            step=1,
            key="ps_tau",
            persist_state="session",
            on_change=S.guarded(_on_tau, "phsafe planner: on_tau"),
            disabled=table in PHSAFE_DENOMINATOR_TABLES,
            help=S.HELP_TAU,
        )
    with right:
        st.plotly_chart(
            moe_vs_rho_figure(s[S.PHSAFE], table, rows, base_rows, S.phsafe_origin(), base.label),
            width="stretch",
            config={"toImageButtonOptions": {"filename": "phsafe_moe_vs_rho"}},
            alt=f"MOE against ρ for {table_label(table)}, working and baseline levels marked",
        )

    st.subheader("Noise and margins of error")
    details = st.toggle(
        "Show every column (σ, MOE bound, bounded ρ, τ, Δ)",
        key="ps_table_details",
        persist_state="session",
    )
    moe_table(rows, base_rows, base.label, details)
    st.caption(
        f"σ = Δ/√(2ρ); MOE bound ⌊z·σ⌋; exact MOE from the discrete-Gaussian pmf. Baseline and Δ "
        f"against {base.label}. Recomputed in {compute_ms:.0f} ms of CPU time."
    )

    st.divider()
    b1, b2, b3, b4 = st.columns(4)
    s.setdefault("ps_confidence", 0.90)
    b1.select_slider(
        "Confidence level of the displayed MOEs",
        options=[0.80, 0.90, 0.95, 0.99],
        key="ps_confidence",
        persist_state="session",
        help="MOE columns are shown at this confidence; MOE targets are defined at 90%.",
    )
    b2.file_uploader(
        "Import official config.json",
        type=["json"],
        key="ps_upload",
        on_change=S.guarded(_import_config, "phsafe planner: import_config"),
        help="The official PHSafe configuration (privacy_budget, tau, ...) or a PHExplore PHSafe JSON.",
    )
    b3.download_button(
        "Export official config.json",
        S.json_bytes(budget.to_official_config()),
        file_name="config.json",
        mime="application/json",
        help="The official PHSafe layout, ready for the PHSafe engine.",
    )
    b4.download_button(
        "Export PHExplore JSON (with MOE targets)",
        S.json_bytes(budget.to_dict()),
        file_name=f"{budget.name}.phsafe.json",
        mime="application/json",
    )
    if budget.citation:
        st.caption(f"Source: {budget.citation}")


render()
