"""Real-browser tests of issue 15: what a committee, an expert and a trainer see (Debian chromium).

One `phexplore app` server for the module (shared fixture in conftest.py) and one chromium page at
1366×768, the laptop size of the issue, with every request the browser makes recorded: no request
may leave the machine. Each test asserts what a user sees — labels, colours, tick labels, state
after navigation — and saves a screenshot under test-output/screenshots/.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from urllib.parse import urlparse

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-output" / "screenshots"
UI_TIMEOUT_MS = 60_000
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
_SUPERSCRIPT = str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")


@pytest.fixture(scope="module")
def page(server: str, chromium_launch: dict):  # type: ignore[no-untyped-def]
    """One chromium page at 1366×768 for the module; ``page.requests`` lists every URL requested."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(**chromium_launch)
        try:
            context = browser.new_context(viewport={"width": 1366, "height": 768})
            pg = context.new_page()
            pg.set_default_timeout(UI_TIMEOUT_MS)
            requests: list[str] = []
            pg.on("request", lambda r: requests.append(r.url))
            pg.requests = requests  # type: ignore[attr-defined]
            pg.goto(server)
            pg.get_by_role("heading", name="Start here").wait_for()
            _idle(pg)
            yield pg
        finally:
            browser.close()


# ------------------------------------------------------------------ helpers


def _idle(pg) -> None:  # type: ignore[no-untyped-def]
    pg.wait_for_timeout(300)
    pg.locator('[data-testid="stStatusWidget"]').wait_for(state="hidden", timeout=UI_TIMEOUT_MS)


def _goto(pg, title: str, heading: str) -> None:  # type: ignore[no-untyped-def]
    pg.locator('[data-testid="stSidebarNav"]').get_by_text(title, exact=True).click()
    pg.get_by_role("heading", name=heading, exact=True).first.wait_for()
    _idle(pg)


def _shot(pg, name: str) -> None:  # type: ignore[no-untyped-def]
    SHOTS.mkdir(parents=True, exist_ok=True)
    pg.wait_for_timeout(300)
    pg.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def _metric(pg, label: str) -> str:  # type: ignore[no-untyped-def]
    box = pg.locator('[data-testid="stMetric"]').filter(has_text=label).first
    return box.locator('[data-testid="stMetricValue"]').inner_text().strip()


def _select(pg, label: str, option: str) -> None:  # type: ignore[no-untyped-def]
    """Pick ``option`` in the Streamlit select box labelled ``label``."""
    _idle(pg)
    box = pg.get_by_role("combobox", name=label, exact=True).first
    box.click()
    box.fill(option)
    pg.wait_for_timeout(300)
    box.press("Enter")
    _idle(pg)
    assert box.input_value() == option, f"{label}: {box.input_value()!r} instead of {option!r}"


def _set_number(pg, label: str, value: str) -> None:  # type: ignore[no-untyped-def]
    _idle(pg)
    field = pg.get_by_label(label, exact=True).first
    field.fill(value)
    field.press("Enter")
    _idle(pg)


def _assert_offline(pg) -> None:  # type: ignore[no-untyped-def]
    """Every request the browser made went to this machine (data:/blob: URLs never leave it)."""
    outside = [
        u
        for u in pg.requests
        if not u.startswith(("data:", "blob:", "about:"))
        and urlparse(u).hostname not in LOCAL_HOSTS
    ]
    assert not outside, f"requests left the machine: {outside}"
    assert pg.requests, "the request recorder saw nothing"


def _parse_tick(text: str) -> float:
    """A tick label as a number: "1,000" → 1000, "10⁻¹⁰" → 1e-10, "2×10⁻⁵" → 2e-5."""
    t = text.replace(",", "").replace("−", "-").translate(_SUPERSCRIPT).strip()
    m = re.fullmatch(r"(?:([\d.]+)×)?10(-?\d+)", t)
    if m and t != text.replace(",", "").strip():  # a power of ten written with superscripts
        return float(m.group(1) or 1) * 10.0 ** int(m.group(2))
    return float(t)


_LOG_TICKS_JS = """
() => [...document.querySelectorAll('.js-plotly-plot')].flatMap((gd, i) =>
  Object.keys(gd._fullLayout || {})
    .filter(k => /^[xy]axis\\d*$/.test(k) && gd._fullLayout[k].type === 'log')
    .flatMap(k => (gd._fullLayout[k]._vals || []).map(v => [i, k, v.x, v.text])))
"""

_CUT_JS = """
() => [...document.querySelectorAll('.js-plotly-plot')].flatMap((gd, i) => {
  const root = gd.querySelector('.main-svg').getBoundingClientRect();
  return [...gd.querySelectorAll('.main-svg text, .main-svg ~ svg text')]
    .filter(t => t.textContent.trim() && t.getBBox().width > 0
                 && !t.closest('.legend .scrollbox') && !t.closest('.hoverlayer'))
    .map(t => [i, t.textContent, t.getBoundingClientRect()])
    .filter(([, , r]) => r.left < root.left - 2 || r.right > root.right + 2
                         || r.top < root.top - 2 || r.bottom > root.bottom + 2)
    .map(([i, text]) => [i, text]);
})
"""


def _assert_readable_plots(pg) -> int:  # type: ignore[no-untyped-def]
    """Every log-axis tick label states its value in full; no plot text sticks out of its plot."""
    pg.locator(".js-plotly-plot .main-svg").first.wait_for()
    pg.wait_for_timeout(500)
    ticks = pg.evaluate(_LOG_TICKS_JS)
    for plot, axis, x, text in ticks:
        value = _parse_tick(text)
        assert math.isclose(math.log10(value), x, abs_tol=0.01), (
            f"plot {plot} {axis}: tick at 10^{x:.2f} is labelled {text!r}"
        )
    assert not pg.evaluate(_CUT_JS), "labels cut off at the plot's edge"
    return len(ticks)


def _edit_cell(pg, grid, *, row: int, x_fraction: float, text: str) -> None:  # type: ignore[no-untyped-def]
    """Type ``text`` into a data-editor cell (row 0 = first data row; rows are 35 px high)."""
    _idle(pg)
    grid.scroll_into_view_if_needed()
    pg.wait_for_timeout(800)  # let the layout settle before measuring
    box = grid.bounding_box()
    assert box is not None
    pg.mouse.click(box["x"] + box["width"] * x_fraction, box["y"] + 35 + 35 * (row + 0.5))
    pg.wait_for_timeout(300)
    pg.keyboard.press("Enter")  # open the cell editor
    pg.wait_for_timeout(300)
    pg.keyboard.press("Control+A")
    pg.keyboard.type(text)
    pg.keyboard.press("Enter")
    _idle(pg)


# ------------------------------------------------------------------ tests


def test_start_page_guides_and_nothing_leaves_the_machine(page) -> None:  # type: ignore[no-untyped-def]
    main = page.locator('[data-testid="stMain"]')
    for step in ("1. Plan", "2. Test", "3. Decide"):
        main.get_by_role("heading", name=step).wait_for()
    main.get_by_text("For trainers: running a workshop").wait_for()
    _idle(page)
    text = main.inner_text()
    assert "An ε of 17 means" in text and "e^17 ≈ 24 million" in text
    assert "not the chance that someone is identified" in text
    for term in ("ρ (rho)", "ε (epsilon)", "δ (delta)", "MOE", "τ (tau)", "Invariant", "Spine"):
        assert term in text, term
    assert "EPL" in text and "Blau index" in text
    # The worked example's numbers are the planner's: 1.2573 → 0.7600, ε 16.98 → 12.71.
    assert "from 20 to 40" in text and "16.98 to 12.71" in text
    # The tab icon is served by the app itself.
    icon = page.evaluate("document.querySelector('link[rel~=\"icon\"]').href")
    assert urlparse(icon).hostname in LOCAL_HOSTS or icon.startswith("data:"), icon
    _shot(page, "15_01_start")
    _assert_offline(page)


def test_planner_provenance_epsilon_reading_and_log_axes(page) -> None:  # type: ignore[no-untyped-def]
    _goto(page, "PHSafe planner", "PHSafe planner")
    main = page.locator('[data-testid="stMain"]')
    main.get_by_text("Working budget: phsafe-2020", exact=True).wait_for()
    assert "ε in words: An ε of 17 means" in main.inner_text()
    assert _assert_readable_plots(page) >= 4  # MOE vs ρ: both axes log, labelled in full
    _select(page, "Table", "PH3")
    _select(page, "Population-group level", "State · A-G")
    _set_number(page, "MOE target (90%)", "40")
    main.get_by_text("Working budget: modified from phsafe-2020", exact=True).wait_for()
    assert _metric(page, "Total ρ (unbounded neighbours)") == "0.7600"
    assert _metric(page, "ε at δ = 1e-10 (bounded)") == "12.71"
    assert "An ε of 12.71 means" not in main.inner_text()  # ≥ 10 is read as a whole number
    assert "An ε of 13 means" in main.inner_text()
    _shot(page, "15_02_phsafe_planner_modified")
    _assert_offline(page)


def test_privacy_page_reference_points_do_not_overlap_curves(page) -> None:  # type: ignore[no-untyped-def]
    _goto(page, "Privacy loss (ε, δ)", "Privacy loss (ε, δ)")
    page.get_by_text("Production persons (certificate): ε=17.14").first.wait_for()
    # Reference points are markers named in the legend; no text is drawn among the curves.
    assert page.locator(".js-plotly-plot .scatterlayer .textpoint").count() == 0
    assert "An ε of" in page.locator('[data-testid="stMain"]').inner_text()
    assert _assert_readable_plots(page) >= 10  # δ and ε on log axes
    _shot(page, "15_03_privacy_loss")


def test_topdown_invalid_share_error_at_top_marked_and_stale(page) -> None:  # type: ignore[no-untyped-def]
    _goto(page, "TopDown planner", "TopDown planner")
    page.locator(".js-plotly-plot .main-svg").first.wait_for()
    before = _metric(page, "persons: ρ")
    grid = page.locator('[data-testid="stDataFrame"]').first
    _edit_cell(page, grid, row=1, x_fraction=0.75, text="0")  # State's level share → 0
    alert = page.locator('[data-testid="stAlert"]').filter(has_text="Invalid shares")
    alert.first.wait_for()
    # The error is at the top of the page, above the editors, and names the offending cells.
    assert alert.first.bounding_box()["y"] < grid.bounding_box()["y"]
    assert "geolevel shares must sum to exactly 1" in alert.first.inner_text()
    # The numbers computed from the last valid state are greyed and labelled stale.
    stale = page.locator(".st-key-td_stale_label")
    stale.wait_for()
    assert "Stale" in stale.inner_text()
    opacity = page.evaluate(
        "parseFloat(getComputedStyle(document.querySelector('.st-key-td_stale_label')"
        ".parentElement.nextElementSibling).opacity)"
    )
    assert opacity < 0.6  # the metrics and the heatmap after the label are greyed
    assert _metric(page, "persons: ρ") == before
    _shot(page, "15_04_topdown_invalid_shares")
    # Fixing the cell clears the error and the stale mark.
    _edit_cell(page, grid, row=1, x_fraction=0.75, text="1440/4099")
    page.locator(".st-key-td_stale_label").wait_for(state="detached")
    assert page.locator('[data-testid="stAlert"]').filter(has_text="Invalid shares").count() == 0
