"""The latest run of the engine shown: its headline numbers and downloads; the workspace's runs."""

from __future__ import annotations

from functools import partial

import streamlit as st

from phexplore import api as R
from phexplore.app import state as S

ENGINE_NAMES = {"topdown": "TopDown", "phsafe": "PHSafe"}


def latest_result(engine: str) -> None:
    """The latest run of ``engine`` in the workspace (never the other engine's)."""
    s = st.session_state
    runs = [r for r in s[S.RUNS] if r.engine == engine]
    if not runs:
        st.info(
            f"No {ENGINE_NAMES[engine]} runs yet in this workspace. Results appear here and on "
            "the Results page."
        )
        all_runs()
        return
    record = runs[-1]
    st.subheader(f"Latest {ENGINE_NAMES[engine]} result")
    st.caption(record.label)
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
    left_out = settings.get("queries_left_out")
    if left_out:
        st.caption(
            "The tidy table leaves out " + ", ".join(left_out) + " (more dense rows than the app "
            "holds); their MAE and EPL are in metrics.json and on the Results page."
        )
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
    problem = record.settings.get("sweep_problem")
    if problem:
        st.warning(f"Budget sweep: {problem}.", icon=":material/warning:")
    all_runs()


def all_runs() -> None:
    """Every run of the workspace, with how the ones that left no result ended."""
    entries = S.workspace().run_entries()
    if not entries:
        return
    with st.expander(f"All runs of this workspace ({len(entries)})"):
        for entry in entries:
            if entry.status == "finished":
                st.write(entry.label)
            else:
                why = f": {entry.message}" if entry.message else ""
                st.write(f"#{entry.number} · {entry.label} — **{entry.status}**{why}")
