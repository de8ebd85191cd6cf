"""Results page: what the runs of the workspace did — error, bias, empirical privacy loss.

Thin page: every statistic comes from :mod:`engine.metrics` (MAE tables, Blau-quintile bias, EPL
with its interval and curves, the ρ sweep and SRS trade-off) or from the PHSafe engine's error
analysis, as kept by the Run page in :class:`phexplore.api.RunRecord`. Charts are Plotly
(download with the camera icon) and labelled with the scenario; tables download as CSV. A run of
the session, or one recorded in a metrics.json or scenario file, can be replayed here
(:mod:`pages.run_parts.replay`, :mod:`phexplore.api.replay`).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages.results_parts.epl import epl_section, sweep_section
from pages.results_parts.folder import folder_section, left_out_caption, open_folder
from pages.results_parts.spine_phsafe import phsafe_sections, spine_section
from pages.results_parts.tables import blau_section, mae_section
from pages.run_parts import replay
from phexplore import api as R
from phexplore.app import state as S
from phexplore.app.naming import display_frame


def _on_delete_run(record: R.RunRecord) -> None:
    S.delete_run(record)
    st.session_state["res_flash"] = f"Deleted run #{record.id} (Undo brings it back)."


def _on_undo_run() -> None:
    restored = S.undo_delete()
    st.session_state["res_flash"] = f"Restored {restored}." if restored else "Nothing to undo."


def _delete_controls(record: R.RunRecord | None) -> None:
    """Delete the run shown (from the workspace), and Undo this session's last deletion."""
    s = st.session_state
    flash = s.pop("res_flash", None)
    if flash:
        st.success(flash)
    c1, c2 = st.columns([1, 3])
    if record is not None and not record.settings.get("unsaved"):
        c1.button(
            f"Delete run #{record.id}",
            key="res_delete_go",
            icon=":material/delete:",
            on_click=S.guarded(_on_delete_run, "results: delete run"),
            args=(record,),
            help="Removes the run from the workspace (its record folder stays until purged a day "
            "later); Undo brings it back.",
        )
    undo = [item for item in s.get(S.UNDO) or [] if item[0] == "run"]
    if undo and (s.get(S.UNDO) or [])[-1][0] == "run":
        c2.button(
            f"Undo: bring back {undo[-1][2]}",
            key="res_undo_go",
            icon=":material/undo:",
            on_click=S.guarded(_on_undo_run, "results: undo"),
        )


def render() -> None:
    """Draw the page."""
    S.init_state()
    s = st.session_state
    st.title("Results")
    replay.show_new_replay()
    replay.messages()
    runs: list[R.RunRecord] = s[S.RUNS]
    open_folder(runs)
    if not runs:
        st.info(
            "No runs yet. Start one on the Run page, or open a run folder written by "
            "`phexplore run topdown` above; results are kept in the workspace."
        )
        st.page_link("pages/run.py", label="Go to the Run page", icon=":material/play_arrow:")
        _delete_controls(None)
        replay.replay_controls()
        replay.replay_from_file()
        replay.replay_progress()
        return
    st.warning(R.TRUTH_NOTE, icon=":material/shield:")
    labels = {r.id: r.label for r in runs}
    run_id = st.selectbox(
        "Run",
        list(labels)[::-1],
        format_func=labels.get,
        key="res_run",
        persist_state="session",
        help="Runs of this workspace, newest first.",
    )
    record = next(r for r in runs if r.id == run_id)
    _delete_controls(record)
    replay.replay_controls()
    replay.replay_session_run(record)
    replay.replay_from_file()
    replay.replay_progress()
    replay.replay_outcome(record)
    if record.settings.get("folder"):
        folder_section(record)
    left_out_caption(record)
    if record.engine == "phsafe":
        phsafe_sections(record)
        return
    spent = R.budget_caption(record)
    if spent:
        st.caption(spent)
    st.caption(R.spine_caption(record.metrics or {}))
    structural = (record.metrics or {}).get("structural_zeros") or {}
    if structural.get("note"):
        held = structural.get("structural_zeros_held")
        st.caption(("Constraints: " if held else "Not held: ") + str(structural["note"]))
    folded = (record.metrics or {}).get("schema_note") or {}
    if folded.get("note"):
        st.info(str(folded["note"]), icon=":material/info:")
        if folded.get("sigma_comparison"):
            with st.expander(
                f"σ on RI vs production's HISPANIC × CENRACE at ρ = {folded['rho']:g}"
            ):
                st.dataframe(
                    display_frame(pd.DataFrame(folded["sigma_comparison"])),
                    hide_index=True,
                    width="stretch",
                    alt="Noisy-measurement σ on the RI schema against production's",
                )
    tabs = st.tabs(["MAE", "Blau-index bias", "EPL", "EPL vs budget · SRS", "On/off spine"])
    with tabs[0]:
        mae_section(record)
    with tabs[1]:
        blau_section(record)
    with tabs[2]:
        epl_section(record)
    with tabs[3]:
        sweep_section(record, runs)
    with tabs[4]:
        spine_section(record)


render()
