"""The TopDown planner's share editors: geolevel shares c and per-level query shares d as exact
fractions ("447/4099") or decimals, validated before they are drawn so the error sits at the top of
the page and the offending cells are marked in the editors (TDA §4: shares add up to 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from phexplore.api.budgets import (
    PHExploreError,
    ShareProblem,
    TopDownAllocation,
    format_fraction,
    locate_share_problems,
)
from phexplore.app import state as S

MARK = "⚠ "
SHARE_WIDTH = 110
"""Width of a query-share column in px: "Block_Group" and "1440/4099" at 14 px; six levels and the
query names fit the full-width editor at 1366×768 without sideways scrolling."""
ROW_PX = 35
"""Height of a grid row: the query-share editor shows every query without scrolling."""
HELP_LEVEL_SHARE = (
    "Share c of the run's ρ spent at this geolevel. Shares must add up to exactly 1 along the "
    "spine (US → block). Write fractions like 447/4099 or decimals like 0.25."
)
HELP_QUERY_SHARE = (
    "Share d of the level's budget spent on each query group; each level's shares must add up "
    "to exactly 1. Leave a cell empty when the query is not measured at that level."
)


def editor_keys(universe: str) -> tuple[str, str]:
    """The level and query editors' keys (fresh after a preset or file load)."""
    version = st.session_state[S.EDITOR_VERSION]
    return f"td_levels_{universe}_{version}", f"td_queries_{universe}_{version}"


def level_frame(alloc: TopDownAllocation) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "geolevel": list(alloc.geolevels),
            "share": [format_fraction(alloc.level_shares[lv]) for lv in alloc.geolevels],
        }
    )


def query_frame(alloc: TopDownAllocation) -> pd.DataFrame:
    queries: dict[str, None] = {}
    for lv in alloc.geolevels:
        for q in alloc.query_shares.get(lv, {}):
            queries.setdefault(q, None)
    data: dict[str, list[Any]] = {"query": list(queries)}
    for lv in alloc.geolevels:
        shares = alloc.query_shares.get(lv, {})
        data[lv] = [format_fraction(shares[q]) if q in shares else None for q in queries]
    return pd.DataFrame(data)


def draft(alloc: TopDownAllocation, levels: pd.DataFrame, queries: pd.DataFrame) -> dict[str, Any]:
    """The allocation's JSON dict with the edited shares (validated by ``from_dict``)."""
    out = alloc.to_dict()
    out["level_shares"] = {
        str(r.geolevel): ("0" if r.share is None or str(r.share).strip() == "" else str(r.share))
        for r in levels.itertuples(index=False)
    }
    qs: dict[str, dict[str, str]] = {lv: {} for lv in alloc.geolevels}
    for _, row in queries.iterrows():
        for lv in alloc.geolevels:
            value = row.get(lv)
            if value is None or (isinstance(value, float) and math.isnan(value)):
                continue
            if str(value).strip() == "":
                continue
            qs[lv][str(row["query"])] = str(value).strip()
    out["query_shares"] = qs
    return out


def with_edits(frame: pd.DataFrame, editor_key: str) -> pd.DataFrame:
    """``frame`` with the data editor's pending cell edits applied (the editor's own state)."""
    out = frame.copy()
    for row, changes in (st.session_state.get(editor_key) or {}).get("edited_rows", {}).items():
        for column, value in changes.items():
            if column in out.columns:
                out.loc[int(row), column] = value
    return out


def mark(label: str, hit: bool) -> str:
    """A column header with a warning mark when a problem lies in that column."""
    return MARK + label if hit else label


def styled(frame: pd.DataFrame, column: str, bad: set[str]) -> Any:
    """``frame`` with the label cells of offending rows in red (the label column is read-only)."""
    if not bad:
        return frame
    return frame.style.map(
        lambda v: "background-color:#f8d7da;color:#842029;font-weight:bold" if v in bad else "",
        subset=[column],
    )


def problem_list(problems: list[ShareProblem]) -> str:
    """Markdown list of the offending cells, each named by table, level and query."""
    lines = []
    for p in problems:
        if p.table == "levels":
            where = "Level share column" if p.level is None else f"Level share of {p.level}"
        else:
            where = f"Query shares of {p.level}" if p.query is None else f"{p.query} at {p.level}"
        lines.append(f"- **{where}**: {p.message}")
    return "\n".join(lines)


@dataclass
class Pending:
    """The share editors' pending edits, checked: the candidate allocation or the problems."""

    base: TopDownAllocation
    levels: pd.DataFrame
    queries: pd.DataFrame
    problems: list[ShareProblem]
    candidate: TopDownAllocation | None
    invalid: str | None


def check_pending(alloc: TopDownAllocation, base: TopDownAllocation, universe: str) -> Pending:
    """Apply the editors' pending edits to ``base``'s frames and validate the result."""
    level_key, query_key = editor_keys(universe)
    levels, queries = level_frame(base), query_frame(base)
    data = draft(alloc, with_edits(levels, level_key), with_edits(queries, query_key))
    problems = locate_share_problems(data)
    try:
        return Pending(
            base,
            levels,
            queries,
            problems,
            TopDownAllocation.from_dict(data, name=alloc.name),
            None,
        )
    except PHExploreError as exc:
        return Pending(base, levels, queries, problems, None, str(exc))


def share_editors(pending: Pending, universe: str, beside: Any = None) -> None:
    """The level-share editor (with ``beside()`` drawn to its right) above the full-width
    query-share editor, offending cells marked."""
    level_key, query_key = editor_keys(universe)
    problems = pending.problems
    bad_levels = {p.level for p in problems if p.table == "levels" and p.level}
    bad_queries = {p.query for p in problems if p.table == "queries" and p.query}
    level_share_bad = any(p.table == "levels" for p in problems)
    query_cols_bad = {p.level for p in problems if p.table == "queries"}
    left, right = st.columns([0.3, 0.7])
    left.data_editor(
        styled(pending.levels, "geolevel", bad_levels),
        key=level_key,
        hide_index=True,
        width="stretch",
        disabled=["geolevel"],
        alt=f"Geolevel shares of the {universe} run (editable)",
        column_config={
            "geolevel": st.column_config.TextColumn("Geolevel", width=110),
            "share": st.column_config.TextColumn(
                mark("Level share c", level_share_bad), help=HELP_LEVEL_SHARE, width=110
            ),
        },
    )
    if beside is not None:
        with right:
            beside()
    st.data_editor(
        styled(pending.queries, "query", bad_queries),
        key=query_key,
        hide_index=True,
        width="stretch",
        height=ROW_PX * (len(pending.queries) + 1) + 3,
        disabled=["query"],
        alt=f"Query shares per geolevel of the {universe} run (editable)",
        column_config={
            "query": st.column_config.TextColumn("Query group", width=230),
            **{
                lv: st.column_config.TextColumn(
                    mark(lv, lv in query_cols_bad), help=HELP_QUERY_SHARE, width=SHARE_WIDTH
                )
                for lv in pending.base.geolevels
            },
        },
    )
