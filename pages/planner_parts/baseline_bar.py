"""The baseline bar of the planners: which budget the numbers are compared with, pin or restore it,
and scale the working budget by ±x% (total or one level) in one step.

Session glue in :mod:`phexplore.app.baseline`; the scaling itself is
:func:`phexplore.api.planning.scale_topdown_runs` / :func:`~phexplore.api.planning.scale_phsafe`
(exact percentages).
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from phexplore.api.budgets import PHExploreError
from phexplore.api.planning import format_percent, percent_factor
from phexplore.app import baseline as B
from phexplore.app import state as S

FLASH = "planner_flash"
"""Session key: one message about the last baseline or scaling action, shown once."""


def _pick(kind: str, prefix: str) -> None:
    s = st.session_state
    B.set_baseline(kind, s[f"{prefix}_baseline_pick"])
    s[FLASH] = f"Baseline: {B.choices(kind)[s[f'{prefix}_baseline_pick']]}."


def _pin(kind: str, prefix: str) -> None:
    label = B.pin_working(kind)
    st.session_state[f"{prefix}_baseline_pick"] = B.PINNED
    st.session_state[FLASH] = f"Baseline: {label} (a snapshot of the working budget)."


def _restore(kind: str) -> None:
    label = B.restore_baseline(kind)
    st.session_state[FLASH] = f"The working budget is the baseline again ({label})."


def _apply(prefix: str, scale: Callable[[str, float], str]) -> None:
    s = st.session_state
    percent = float(s.get(f"{prefix}_scale_pct") or 0.0)
    target = str(s.get(f"{prefix}_scale_what"))
    try:
        percent_factor(percent, where="Scale")
        s[FLASH] = scale(target, percent)
        s[f"{prefix}_scale_pct"] = 0.0
    except PHExploreError as exc:
        s[FLASH] = f"Not applied: {exc}"


def baseline_bar(
    kind: str,
    prefix: str,
    targets: dict[str, str],
    scale: Callable[[str, float], str],
) -> B.Baseline:
    """Draw the bar and return the baseline. ``targets`` maps what can be scaled ("total" first)
    to its label; ``scale(target, percent)`` edits the working budget and returns a message."""
    s = st.session_state
    options = B.choices(kind)
    pick = f"{prefix}_baseline_pick"
    current = (s.get(B.KEYS[kind]) or {}).get("choice", B.AUTO)
    if s.get(pick) not in options or s.get(pick) != current:
        s[pick] = current if current in options else B.AUTO
    base = B.topdown_baseline() if kind == "topdown" else B.phsafe_baseline()
    with st.container(border=True, key=f"{prefix}_baseline_bar"):
        c = st.columns([0.30, 0.17, 0.17, 0.16, 0.10, 0.10], vertical_alignment="bottom")
        c[0].selectbox(
            "Baseline (compared with)",
            list(options),
            format_func=lambda k: options[k] if k != B.AUTO else f"Production: {base.label}",
            key=pick,
            persist_state="session",
            on_change=S.guarded(_pick, "planner: baseline"),
            args=(kind, prefix),
            help="Every number, chart and table shows the working value beside this budget's, "
            "with Δ = working − baseline and Δ%. Production by default; any preset, saved "
            "scenario or a snapshot of the working budget.",
        )
        c[1].button(
            "Pin working as baseline",
            key=f"{prefix}_pin_go",
            on_click=S.guarded(_pin, "planner: pin"),
            args=(kind, prefix),
            width="stretch",
            help="Take a snapshot of the working budget as the baseline, then keep editing.",
        )
        c[2].button(
            "Reset to baseline",
            key=f"{prefix}_restore_go",
            on_click=S.guarded(_restore, "planner: restore"),
            args=(kind,),
            width="stretch",
            help="Make the working budget the baseline again (undo every edit since).",
        )
        s.setdefault(f"{prefix}_scale_what", next(iter(targets)))
        if s[f"{prefix}_scale_what"] not in targets:
            s[f"{prefix}_scale_what"] = next(iter(targets))
        c[3].selectbox(
            "Scale",
            list(targets),
            format_func=targets.get,
            key=f"{prefix}_scale_what",
            persist_state="session",
            help="What to scale: the total ρ (every budget, shares kept) or one level's budget "
            "(the other levels keep theirs).",
        )
        s.setdefault(f"{prefix}_scale_pct", 0.0)
        c[4].number_input(
            "by %",
            min_value=-99.0,
            max_value=900.0,
            step=5.0,
            format="%.1f",
            key=f"{prefix}_scale_pct",
            persist_state="session",
            help="−30 cuts the budget by 30%, 10 raises it by 10% (exact: ρ × 0.7, ρ × 1.1).",
        )
        c[5].button(
            "Apply",
            key=f"{prefix}_scale_go",
            type="primary",
            on_click=S.guarded(_apply, "planner: scale"),
            args=(prefix, scale),
            width="stretch",
        )
    flash = s.pop(FLASH, None)
    if flash:
        (st.warning if flash.startswith("Not applied") else st.success)(flash)
    return B.topdown_baseline() if kind == "topdown" else B.phsafe_baseline()


def scaled_message(what: str, percent: float, before: float, after: float, unit: str = "ρ") -> str:
    """ "Scaled the persons run's total ρ by −30%: 2.5562 → 1.7894." """
    return f"Scaled {what} by {format_percent(percent)}: {unit} {before:.4f} → {after:.4f}."
