"""The committee's table as HTML and CSV (phexplore.app.committee): what a reader sees in each cell.

Rows made by hand so each presentation rule is checked on its own: "A → B" with the signed
difference and its percentage, a held-exact cell in words, two rounding-level numbers without a
percentage, geolevels from the root down in words, a caption and header cells for screen readers.
"""

from __future__ import annotations

import pytest

from phexplore.app.committee import committee_csv_frame, committee_html, number, percent, signed
from phexplore.planning.committee import HELD_EXACT

Q = "RMSE of the published count (predicted, persons)"


def _row(level: str, query: str, a: float, b: float, note: str = "") -> dict:
    return {
        "section": "published error",
        "quantity": Q,
        "geolevel": level,
        "query": query,
        "a": a,
        "b": b,
        "difference": b - a,
        "relative": (b - a) / a if a else None,
        "a_note": note,
        "b_note": note,
    }


ROWS = [
    {
        "section": "privacy",
        "quantity": "ρ of the persons run",
        "geolevel": None,
        "query": None,
        "a": 2.56,
        "b": 1.792,
        "difference": -0.768,
        "relative": -0.3,
        "a_note": "",
        "b_note": "",
    },
    _row("State", "TOTAL", 0.0, 0.0, HELD_EXACT),
    _row("County", "TOTAL", 1.1e-6, 1.2e-6),
    _row("Tract", "TOTAL", 2.458, 2.9257),
    _row("Block_Group", "TOTAL", 1.77, 2.10),
]


@pytest.mark.parametrize(
    ("value", "text"),
    [(0, "0"), (0.004, "< 0.01"), (2.458, "2.46"), (14.6027, "14.6"), (12345.6, "12,346")],
)
def test_numbers_read_with_three_significant_digits(value: float, text: str) -> None:
    assert number(value) == text


def test_signed_and_percent_use_typographic_signs() -> None:
    assert signed(-0.768) == "−0.768" and signed(0.4677) == "+0.468" and signed(0.0) == "±0"
    assert percent(-0.3) == "−30.0%" and percent(0.19027) == "+19.0%" and percent(None) == ""


def test_html_cells_say_a_to_b_with_the_difference() -> None:
    page = committee_html(ROWS, "baseline", "working", caption="RMSE: baseline → working")
    assert "<caption>RMSE: baseline → working</caption>" in page
    assert "<th scope='col'>TOTAL</th>" in page
    assert "2.46 → 2.93</span><span class='d up' title='larger'>+0.468 · +19.0%" in page
    assert "2.5600 → 1.7920" in page and "(−0.7680 · −30.0%)" in page
    # Held exact: words, no numbers; two rounding-level numbers: no percentage to weigh.
    assert "exact</span><span class='note'>invariant, no noise" in page
    assert "&lt; 0.01 → &lt; 0.01</span><span class='d same' title='unchanged'>≈ 0" in page
    assert "+9.1%" not in page
    # Geolevels in words, from the root down.
    order = [page.index(f"<th scope='row'>{w}</th>") for w in ("State", "County", "Tract")]
    assert order == sorted(order)
    assert "<th scope='row'>Block group</th>" in page


def test_csv_keeps_the_numbers_under_the_budget_names() -> None:
    frame = committee_csv_frame(ROWS, "baseline", "working")
    assert list(frame.columns[:6]) == [
        "Section",
        "Quantity",
        "Geolevel",
        "Query",
        "baseline",
        "working",
    ]
    county = frame[(frame["Geolevel"] == "County") & (frame["Query"] == "TOTAL")].iloc[0]
    assert county["working"] == pytest.approx(1.2e-6)
    assert county["Δ relative (fraction of A)"] == pytest.approx(1 / 11)
