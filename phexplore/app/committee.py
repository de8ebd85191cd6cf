"""The committee's table on screen, in the report and as CSV: one table that fits 1366×768.

Presentation of :func:`phexplore.planning.committee.committee_rows` (no science): rows are geolevels
from the root down, columns the committee's queries, each cell "A → B" with "Δ · Δ%" under it;
the privacy totals (ρ, ε) head the table. It is a plain HTML ``<table>`` (with a caption and
header cells, so screen readers read it as a table, and text that wraps instead of scrolling
sideways): the app shows it with ``st.html`` and the HTML report embeds the same markup. The CSV is
the long form, with numbers, one row per quantity.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from phexplore.app.naming import geolevel_label
from phexplore.planning.committee import HELD_EXACT, OUT_OF_RANGE, table_queries

WORSE = "#9a3412"
"""Text colour of a Δ that raises an error or a privacy loss (contrast 7.0:1 on white)."""
BETTER = "#1d4ed8"
"""Text colour of a Δ that lowers it (contrast 6.7:1 on white); the sign and words say it too."""

CSS = f"""
<style>
.ph-committee{{border-collapse:collapse;width:100%;font-size:15px;line-height:1.3;color:#1b1b1b;
margin:.25rem 0 .5rem 0}}
.ph-committee caption{{caption-side:top;text-align:left;font-weight:600;padding:.2rem 0 .4rem 0;
color:#1b1b1b}}
.ph-committee th,.ph-committee td{{border:1px solid #c9ccd1;padding:.3rem .5rem;text-align:right;
vertical-align:top}}
.ph-committee thead th{{background:#eef1f4;text-align:center}}
.ph-committee th[scope=row]{{text-align:left;background:#f6f7f9;white-space:nowrap}}
.ph-committee td.priv{{text-align:left}}
.ph-committee .ab{{display:block;white-space:nowrap}}
.ph-committee .d{{display:block;font-weight:600;white-space:nowrap}}
.ph-committee .up{{color:{WORSE}}}.ph-committee .down{{color:{BETTER}}}
.ph-committee .same{{color:#1b1b1b}}
.ph-committee .note{{display:block;font-size:13px;color:#3d3d3d;white-space:normal}}
</style>
"""


def number(value: float | None, digits: int = 3) -> str:
    """A number for a committee: 3 significant digits, thousands separators, "—" when missing."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    v = float(value)
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) < 0.005:
        return "< 0.01"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(v))))
    return f"{v:,.{decimals}f}"


def signed(value: float | None, digits: int = 3) -> str:
    """``+1.23`` / ``−0.45`` (typographic minus) or "—"."""
    if value is None or not math.isfinite(value):
        return "—"
    text = number(abs(value), digits)
    return ("−" if value < 0 else "+") + text if value != 0 else "±0"


def percent(value: float | None) -> str:
    """A relative change as "+19.5%" / "−30.0%", or "" when undefined."""
    if value is None or not math.isfinite(value):
        return ""
    return f"{value * 100:+.1f}%".replace("-", "−")


def _direction(value: float | None) -> str:
    if value is None or not math.isfinite(value) or abs(value) < 1e-12:
        return "same"
    return "up" if value > 0 else "down"


def _negligible(value: float | None) -> bool:
    """A value that :func:`number` shows as "< 0.01" (or 0)."""
    return value is not None and math.isfinite(value) and abs(value) < 0.005


def _cell(row: Mapping[str, Any]) -> str:
    """HTML of one cell: "A → B", then "Δ · Δ%" and any note."""
    if row["a_note"] == HELD_EXACT and row["b_note"] == HELD_EXACT:
        return "<span class='ab'>exact</span><span class='note'>invariant, no noise</span>"
    ab = f"{number(row['a'])} → {number(row['b'])}"
    if _negligible(row["a"]) and _negligible(row["b"]):
        # Both below the table's precision: a percentage of two rounding-level numbers would
        # read as a change a committee should weigh (the CSV keeps the numbers).
        return (
            f"<span class='ab'>{html.escape(ab)}</span>"
            "<span class='d same' title='unchanged'>≈ 0</span>"
            "<span class='note'>both below 0.01</span>"
        )
    delta = signed(row["difference"])
    rel = percent(row["relative"])
    words = {"up": "larger", "down": "smaller", "same": "unchanged"}[_direction(row["difference"])]
    shown = delta + (f" · {rel}" if rel else "")
    out = (
        f"<span class='ab'>{html.escape(ab)}</span>"
        f"<span class='d {_direction(row['difference'])}' title='{words}'>{html.escape(shown)}</span>"
    )
    notes = {n for n in (row["a_note"], row["b_note"]) if n and n != HELD_EXACT}
    # outside the prediction's validated range: one short mark per cell, the reasons on hover
    outside = sorted(n for n in notes if n.startswith(OUT_OF_RANGE))
    if outside:
        reasons = html.escape("; ".join(outside), quote=True)
        out += f"<span class='note' title='{reasons}'>†outside validated range</span>"
    for n in sorted(notes - set(outside)):
        out += f"<span class='note'>{html.escape(n)}</span>"
    return out


def committee_html(
    rows: Sequence[Mapping[str, Any]], a_name: str, b_name: str, *, caption: str | None = None
) -> str:
    """The committee's table as an HTML ``<table>`` (with its CSS): privacy rows, then geolevels."""
    privacy = [r for r in rows if r["section"] == "privacy"]
    errors = [r for r in rows if r["section"] != "privacy"]
    queries = table_queries(errors)
    levels = list(dict.fromkeys(r["geolevel"] for r in errors))
    by_key = {(r["geolevel"], r["query"]): r for r in errors}
    measure = errors[0]["quantity"] if errors else "published-count error"
    title = caption or f"{measure}: {a_name} → {b_name}"
    parts = [
        CSS,
        "<table class='ph-committee' data-testid='committee-table'>",
        f"<caption>{html.escape(title)}</caption>",
        "<thead><tr><th scope='col'>Geolevel</th>",
        *(f"<th scope='col'>{html.escape(q)}</th>" for q in queries),
        "</tr></thead><tbody>",
    ]
    span = max(1, len(queries))
    for r in privacy:
        ab = f"{number(r['a'], 5)} → {number(r['b'], 5)}"
        rel = percent(r["relative"])
        shown = signed(r["difference"], 4) + (f" · {rel}" if rel else "")
        parts.append(
            f"<tr><th scope='row'>{html.escape(r['quantity'])}</th>"
            f"<td class='priv' colspan='{span}'><span class='ab'>{html.escape(ab)}"
            f" <span class='d {_direction(r['difference'])}' style='display:inline'>"
            f"({html.escape(shown)})</span></span></td></tr>"
        )
    for level in levels:
        cells = []
        for q in queries:
            row = by_key.get((level, q))
            cells.append(f"<td>{'not measured' if row is None else _cell(row)}</td>")
        parts.append(
            f"<tr><th scope='row'>{html.escape(geolevel_label(level))}</th>{''.join(cells)}</tr>"
        )
    parts.append("</tbody></table>")
    return "".join(parts)


def committee_csv_frame(
    rows: Sequence[Mapping[str, Any]], a_name: str, b_name: str
) -> pd.DataFrame:
    """The long form with numbers, columns named in words (A and B by their names)."""
    frame = pd.DataFrame(list(rows))
    if frame.empty:
        return frame
    frame["geolevel"] = frame["geolevel"].map(lambda v: geolevel_label(v) if v else "")
    frame["query"] = frame["query"].fillna("")
    return frame.rename(
        columns={
            "section": "Section",
            "quantity": "Quantity",
            "geolevel": "Geolevel",
            "query": "Query",
            "a": a_name,
            "b": b_name,
            "difference": f"Δ ({b_name} − {a_name})",
            "relative": "Δ relative (fraction of A)",
            "a_note": f"Note on {a_name}",
            "b_note": f"Note on {b_name}",
        }
    )


def committee_cell(rows: Sequence[Mapping[str, Any]], geolevel: str, query: str) -> dict | None:
    """The row of one geolevel × query (for sentences that quote the table)."""
    for r in rows:
        if r["section"] != "privacy" and r["geolevel"] == geolevel and r["query"] == query:
            return dict(r)
    return None
