"""The committee's table on a page: published-count error of two TopDown budgets by geolevel, with ρ,
ε and the differences, as one HTML table that fits 1366×768, and its CSV.

Rows from :func:`phexplore.api.planning.committee_rows` (docs/science.md §7 for the prediction);
HTML and CSV from :mod:`phexplore.app.committee`, the same markup as the HTML report. The
prediction samples whole families per level as the heatmap, ``phexplore compare`` and the report
do, so all give the same numbers (docs/prediction.md, "The committee's table").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import streamlit as st

from phexplore import api as R
from phexplore.api.budgets import PHExploreError, TopDownAllocation
from phexplore.api.planning import MEASURE_LABELS, committee_rows, published_rows
from phexplore.app import state as S
from phexplore.app.committee import OUT_OF_RANGE, committee_csv_frame, committee_html

MEASURES = {"rmse": "RMSE", "moe90": "90% MOE"}


def committee_section(
    a_label: str,
    a_runs: Mapping[str, TopDownAllocation],
    b_label: str,
    b_runs: Mapping[str, TopDownAllocation],
    *,
    key: str,
    n_states: int | None = None,
    heading: str = "Published-count error",
) -> list[dict[str, Any]] | None:
    """Draw the committee's table of A (reference) and B (compared) and its CSV download.

    The predictions sample whole families per level (:func:`_published`, cached per budget), as the CLI's
    and the report's. Returns the rows, or None when a budget has no published-count prediction
    (said on the page).
    """
    s = st.session_state
    delta, conversion = float(s[S.DELTA]), str(s[S.CONVERSION])
    try:
        with st.spinner("Predicting the published counts' error…"):
            a_rows, a_notes = _published(a_runs, n_states)
            b_rows, b_notes = _published(b_runs, n_states)
        head = st.columns([0.62, 0.38], vertical_alignment="bottom")
        head[0].markdown(f"#### {heading}")
        measure = head[1].radio(
            "Error measure",
            list(MEASURES),
            format_func=MEASURES.get,
            horizontal=True,
            key=f"{key}_measure",
            persist_state="session",
            help="RMSE or 90% margin of error of the published counts, predicted after least "
            "squares, non-negativity and rounding (docs/prediction.md) — not the noisy "
            "measurements' MOE.",
        )
        rows = committee_rows(
            a_runs,
            a_rows,
            b_runs,
            b_rows,
            delta=delta,
            conversion=conversion,
            measure=measure,
        )
    except PHExploreError as exc:
        st.info(f"No published-count comparison for these budgets: {exc}")
        return None
    caption = f"{MEASURE_LABELS[measure]}: {a_label} → {b_label}"
    st.html(committee_html(rows, a_label, b_label, caption=caption))
    if any(OUT_OF_RANGE in (r["a_note"], r["b_note"]) for r in rows):
        st.caption(
            "† Outside the prediction's validated range: the mean count per cell is below 1 "
            "(docs/prediction.md)."
        )
    notes = sorted(set(a_notes) | set(b_notes))
    with st.expander("What the prediction rests on"):
        st.markdown(
            "Each cell reads *A → B* with *B − A* and its percentage under it. Predicted from "
            "the allocations alone on the shipped count profile of their schema, for the "
            f"queries a committee reads first; ρ and ε ({S.conversion_label(conversion)}, "
            f"δ = {S.fmt_delta(delta)}) head the table. The prediction samples whole families "
            "per level, as the heatmap, `phexplore compare` and the HTML report do, so all give these numbers; evaluating every geounit "
            "moves production's Block TOTAL RMSE by about 3% (5.57 sampled, 5.40 on every "
            "geounit; docs/prediction.md)."
        )
        for note in notes:
            st.caption(f"Prediction note: {note}.")
    st.download_button(
        "Download this table (CSV)",
        R.tidy_bytes(committee_csv_frame(rows, a_label, b_label), "csv"),
        file_name=f"{key}_published_error.csv",
        mime="text/csv",
        key=f"{key}_csv_download",
    )
    return rows


def _published(
    runs: Mapping[str, TopDownAllocation], n_states: int | None
) -> tuple[list[dict[str, Any]], list[str]]:
    """:func:`phexplore.api.planning.published_rows` of ``runs`` (the planner's sample; cached)."""
    payload = json.dumps({k: a.to_dict() for k, a in runs.items()}, sort_keys=True)
    return _published_cached(payload, n_states)


@st.cache_data(show_spinner=False, max_entries=64)
def _published_cached(payload: str, n_states: int | None) -> tuple[list[dict[str, Any]], list[str]]:
    runs = {
        name: TopDownAllocation.from_dict(data, name=data.get("name"))
        for name, data in json.loads(payload).items()
    }
    return published_rows(runs, n_states=n_states)
