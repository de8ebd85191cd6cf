"""The Results page's run folders: open a folder written by the command line, its files, what was left out.

Folders are checked by :func:`engine.runs.run_folder.open_run_folder` through :mod:`phexplore.api`
(docs/reliability.md, "Outputs").
"""

from __future__ import annotations

import streamlit as st

from phexplore import api as R
from phexplore.api.budgets import PHExploreError
from phexplore.app import state as S

FOLDER_PATH = "res_folder_path"
FOLDER_PROBLEM = "res_folder_problem"


def open_folder_clicked() -> None:
    """Open the typed run folder as a run of this session (refused folders leave a message)."""
    s = st.session_state
    entry = S.reserve_run("topdown", f"folder {s.get(FOLDER_PATH, '')}")
    try:
        record = R.folder_record(
            s.get(FOLDER_PATH, ""), entry.number, s.get(S.SCENARIO_NAME, "Folder"), entry.token
        )
        S.add_run(record)  # kept in the workspace like a run of the app
    except PHExploreError as exc:
        S.workspace().release_run(entry.token)
        s[FOLDER_PROBLEM] = str(exc)
        return
    s[FOLDER_PROBLEM] = None
    s["res_run"] = record.id


def open_folder(runs: list[R.RunRecord]) -> None:
    with st.expander("Open a run folder written by the command line", expanded=not runs):
        st.caption(
            "The `--out` folder of `phexplore run topdown` or `run replay`, with CSV or Parquet "
            "tables (dense or sparse). It is checked first: an incomplete, altered or truncated "
            f"folder is refused. At most {R.APP_MAX_ROWS:,} dense estimate rows are kept; a larger "
            "run keeps its smallest queries (TOTAL first) and says which were left out."
        )
        st.text_input("Run folder", key=FOLDER_PATH, persist_state="session", placeholder="out/td")
        st.button(
            "Open folder",
            key="res_open_folder",
            on_click=S.guarded(open_folder_clicked, "results: open_folder"),
        )
        problem = st.session_state.get(FOLDER_PROBLEM)
        if problem:
            st.error(problem)


def left_out_caption(record: R.RunRecord) -> None:
    """Which queries the record's dense table leaves out (over the app's row limit)."""
    left_out = record.settings.get("queries_left_out")
    if left_out:
        st.caption(
            "Queries left out of the residual charts and the estimates download (more dense rows "
            "than the app holds; their MAE and EPL are in metrics.json): " + ", ".join(left_out)
        )


def folder_section(record: R.RunRecord) -> None:
    """What an opened folder holds, its files in the format written, CSV copies of small tables."""
    settings = record.settings
    outputs = settings.get("outputs") or {}
    st.caption(
        f"Opened from {settings['folder']}: tables as {outputs.get('format', 'csv')}"
        + (
            "; " + str(outputs.get("note", "estimates are sparse"))
            if outputs.get("sparse_estimates")
            else ""
        )
        + "."
    )
    changed = R.folder_changed(record)
    if changed:
        st.error(changed, icon=":material/folder_off:")
        return
    with st.expander("Files of this run folder"):
        files = R.folder_files(record)
        cols = st.columns(3)
        for i, item in enumerate(files):
            cols[i % 3].download_button(
                item.label,
                item.data,
                file_name=item.name,
                mime=item.mime,
                key=f"folder_dl_{record.id}_{i}",
                on_click="ignore",
            )
