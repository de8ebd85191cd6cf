"""Real-browser tests of what a committee, an expert and a trainer see (Debian chromium).

One `phexplore app` server for the module (shared fixture in conftest.py) and one chromium page at
1366×768, the laptop size of the issue, with every request the browser makes recorded: no request
may leave the machine. Each test asserts what a user sees — labels, colours, tick labels, state
after navigation — and saves a screenshot under test-output/screenshots/.
"""

from __future__ import annotations

import contextlib
import math
import re
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.pages.conftest import LOCAL_HOSTS, UI_TIMEOUT_MS, recording_page
from tests.pages.conftest import assert_offline as _assert_offline
from tests.pages.conftest import box as _box
from tests.pages.conftest import goto as _goto
from tests.pages.conftest import idle as _idle
from tests.pages.conftest import select as _select

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-output" / "screenshots"
_SUPERSCRIPT = str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")


@pytest.fixture(scope="module")
def page(server: str, chromium_launch: dict):  # type: ignore[no-untyped-def]
    """One chromium page at 1366×768 for the module; ``page.requests`` lists every URL requested."""
    with recording_page(chromium_launch, server, 1366, 768) as pg:
        yield pg


# ------------------------------------------------------------------ helpers


def _shot(pg, name: str, at=None) -> None:  # type: ignore[no-untyped-def]
    """Screenshot (the main area scrolls inside the page: ``at`` is scrolled into view first)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    if at is not None:
        _idle(pg)
        # A rerun may replace the element; then shoot what is there.
        with contextlib.suppress(Exception):
            at.scroll_into_view_if_needed(timeout=10_000)
    pg.wait_for_timeout(300)
    pg.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def _badge(text: str) -> re.Pattern[str]:
    """The planners' budget line: ``text``, the budget's fingerprint, for a modified budget what
    differs (after " — "), then the baseline it is compared with."""
    return re.compile(rf"^{re.escape(text)} · fingerprint [0-9a-f]{{12}}( — .+)? · compared with")


def _metric(pg, label: str) -> str:  # type: ignore[no-untyped-def]
    box = pg.locator('[data-testid="stMetric"]').filter(has_text=label).first
    return box.locator('[data-testid="stMetricValue"]').inner_text().strip()


def _set_number(pg, label: str, value: str) -> None:  # type: ignore[no-untyped-def]
    _idle(pg)
    field = pg.get_by_label(label, exact=True).first
    field.fill(value)
    field.press("Enter")
    _idle(pg)


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


def _edit_cell(
    pg, grid, *, row: int, x_fraction: float, text: str, then, state: str = "visible"
) -> None:  # type: ignore[no-untyped-def]
    """Type ``text`` into a data-editor cell (row 0 = first data row; rows are 35 px high).

    The grid is a canvas: the cell is selected by a click at its position and typing replaces its
    content. A click during a rerun can miss, so the edit is retried until ``then`` (a locator
    that the edit makes appear, or with ``state="detached"`` disappear) reaches ``state``.
    """
    for _attempt in range(4):
        _idle(pg)
        grid.scroll_into_view_if_needed()
        pg.wait_for_timeout(800)  # let the layout settle before measuring
        box = _box(grid)
        pg.mouse.click(box["x"] + box["width"] * x_fraction, box["y"] + 35 + 35 * (row + 0.5))
        pg.wait_for_timeout(400)
        pg.keyboard.type(text)
        pg.wait_for_timeout(200)
        pg.keyboard.press("Enter")
        _idle(pg)
        try:
            then.first.wait_for(state=state, timeout=15_000)
            return
        except Exception:  # noqa: BLE001 - the click missed; try again
            pg.keyboard.press("Escape")
    raise AssertionError(f"could not type {text!r} into row {row} of the data editor")


# ------------------------------------------------------------------ tests


def test_start_page_guides_and_nothing_leaves_the_machine(page) -> None:  # type: ignore[no-untyped-def]
    main = page.locator('[data-testid="stMain"]')
    for step in ("1. Plan", "2. Test", "3. Decide"):
        main.get_by_role("heading", name=step).wait_for()
    main.get_by_text("For trainers: running a workshop").wait_for()
    _idle(page)
    text = main.inner_text()
    # ε read as a number a meeting can read (e^16.98 ≈ 24 million), never as an exponent.
    assert "An ε of 16.98 means" in text and "a factor of ≈ 24 million" in text
    assert not re.search(r"e\^\d", text)
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
    main.get_by_text(_badge("Working budget: phsafe-2020")).wait_for()
    assert "ε in words: An ε of 16.98 means" in main.inner_text()
    assert _assert_readable_plots(page) >= 4  # MOE vs ρ: both axes log, labelled in full
    _select(page, "Table", "PH3")
    _select(page, "Population-group level", "State · A-G")
    _set_number(page, "MOE target (90%)", "40")
    main.get_by_text(_badge("Working budget: modified from phsafe-2020")).wait_for()
    assert _metric(page, "Total ρ (unbounded neighbours)") == "0.7600"
    assert _metric(page, "ε at δ = 1e-10 (bounded)") == "12.71"
    assert "An ε of 12.71 means" in main.inner_text()  # the reading follows the number
    _shot(page, "15_02_phsafe_planner_modified", page.locator(".js-plotly-plot").first)
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
    assert (
        "ε in words (all runs): An ε of 17.44 means"
        in page.locator('[data-testid="stMain"]').inner_text()
    )
    grid = page.locator('[data-testid="stDataFrame"]').first
    alert = page.locator('[data-testid="stAlert"]').filter(has_text="Invalid shares")
    _edit_cell(page, grid, row=1, x_fraction=0.75, text="0", then=alert)  # State's share → 0
    alert.first.wait_for()
    # The error is at the top of the page, above the editors, and names the offending cells.
    _idle(page)
    assert _box(alert.first)["y"] < _box(grid)["y"]
    assert "geolevel shares must sum to exactly 1" in alert.first.inner_text()
    # The numbers computed from the last valid state are greyed and labelled stale.
    stale = page.locator(".st-key-td_stale_label")
    stale.wait_for()
    assert "Stale" in stale.inner_text()
    page.wait_for_function(
        "() => { const l = document.querySelector('.st-key-td_stale_label');"
        " const n = l && l.parentElement.nextElementSibling;"
        " return n && parseFloat(getComputedStyle(n).opacity) < 0.6; }",
        timeout=15_000,
    )
    opacity = page.evaluate(
        "parseFloat(getComputedStyle(document.querySelector('.st-key-td_stale_label')"
        ".parentElement.nextElementSibling).opacity)"
    )
    assert opacity < 0.6  # the metrics and the heatmap after the label are greyed
    assert _metric(page, "persons: ρ") == before
    _shot(page, "15_04_topdown_invalid_shares")
    # Fixing the cell clears the error and the stale mark.
    fixed = page.locator('[data-testid="stMain"]').get_by_text(
        _badge("Working allocations: topdown-2020-production")
    )
    page.wait_for_timeout(300)
    # Retried until the stale mark is gone (a slow rerun on a loaded machine is not a miss).
    _edit_cell(page, grid, row=1, x_fraction=0.75, text="1440/4099", then=stale, state="detached")
    fixed.first.wait_for()
    assert page.locator('[data-testid="stAlert"]').filter(has_text="Invalid shares").count() == 0


def _radio(pg, option: str) -> None:  # type: ignore[no-untyped-def]
    """Select the radio option labelled ``option`` (retrying while Streamlit reruns)."""
    deadline = time.monotonic() + UI_TIMEOUT_MS / 1000
    while True:
        _idle(pg)
        radio = pg.get_by_role("radio", name=option, exact=True)
        if radio.count() and radio.last.is_checked():
            _idle(pg)
            return
        assert time.monotonic() < deadline, f"radio {option!r} could not be selected"
        pg.locator('[data-testid="stMain"]').get_by_text(option, exact=True).last.click()
        pg.wait_for_timeout(300)


def _value(pg, label: str) -> str:  # type: ignore[no-untyped-def]
    return pg.get_by_label(label, exact=True).first.input_value()


def test_run_is_tied_to_its_budget_and_controls_survive_navigation(page, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _goto(page, "Run", "Run an engine")
    _radio(page, "PHSafe (S-DHC)")
    page.get_by_label("Trials (noise redraws)", exact=True).wait_for()
    page.get_by_label("Workers (processes)", exact=True).wait_for(state="detached")
    main = page.locator('[data-testid="stMain"]')
    # The working budget as the planner left it: modified, with the planner's total ρ.
    main.get_by_text("modified from phsafe-2020").first.wait_for()
    assert "total ρ 0.7600 (unbounded)" in main.inner_text()
    _set_number(page, "Seed", "7")
    _set_number(page, "Trials (noise redraws)", "5")
    _idle(page)
    assert _value(page, "Seed") == "7" and _value(page, "Trials (noise redraws)") == "5"
    page.get_by_role("button", name="Run PHSafe").click()
    page.get_by_text("Finished #1").first.wait_for(timeout=180_000)
    _idle(page)
    done = main.get_by_text("Finished #1").first.inner_text()
    assert "modified from phsafe-2020" in done and "seed 7" in done
    # One runtime figure: the message and the Runtime metric agree.
    seconds = re.search(r"in ([\d.]+) s", done).group(1)  # type: ignore[union-attr]
    assert _metric(page, "Runtime") == f"{seconds} s"
    _shot(page, "15_05_run_phsafe")

    # TopDown keeps its own seed; both survive a trip to another page.
    _radio(page, "TopDown (redistricting data)")
    page.get_by_label("Workers (processes)", exact=True).wait_for()  # the TopDown form is shown
    page.get_by_label("Trials (noise redraws)", exact=True).wait_for(state="detached")
    _set_number(page, "Seed", "11")
    # Leave as a person does, after a pause longer than the run panel's one-second refresh: a
    # fragment run between the edit and the page change made the value forgettable (Streamlit
    # #10805; failed every time before the pages declared persist_state="session").
    page.wait_for_timeout(2_500)
    _goto(page, "Results", "Results")
    # The PHSafe run's charts at 1366×768: full log labels, nothing clipped, every bar outlined
    # (a zero bar still shows), table · level names in words.
    _assert_readable_plots(page)
    widths = page.evaluate(
        "[...document.querySelectorAll('.js-plotly-plot .bars path')]"
        ".map(p => parseFloat(getComputedStyle(p).strokeWidth))"
    )
    assert widths and min(widths) > 0, widths
    assert "PH1 numerator · Nation · Unattributed" in page.locator(
        '[data-testid="stMain"]'
    ).inner_text() or page.locator(".js-plotly-plot").first.inner_text().count("PH1 numerator")
    _shot(page, "15_05b_results_phsafe", page.locator(".js-plotly-plot").first)
    _goto(page, "Run", "Run an engine")
    assert page.get_by_role("radio", name="TopDown (redistricting data)").is_checked()
    page.get_by_label("Workers (processes)", exact=True).wait_for()
    assert _value(page, "Seed") == "11"
    _radio(page, "PHSafe (S-DHC)")
    page.get_by_label("Trials (noise redraws)", exact=True).wait_for()
    page.get_by_label("Workers (processes)", exact=True).wait_for(state="detached")
    _idle(page)
    assert _value(page, "Seed") == "7" and _value(page, "Trials (noise redraws)") == "5"

    # Uploads: two files where one is expected is an error that belongs to that choice.
    _radio(page, "TopDown (redistricting data)")
    _radio(page, "Upload a file")
    lines = (ROOT / "data/samples/ri2010/ri2010_blocks.csv").read_text().splitlines()
    small = tmp_path / "ri_small.csv"
    small.write_text("\n".join(lines[:400]) + "\n")
    copy = tmp_path / "ri_copy.csv"
    copy.write_text(small.read_text())
    upload = main.locator('input[type="file"]').first
    upload.set_input_files([str(small)])
    _idle(page)
    page.get_by_role("button", name="Validate upload").click()
    main.get_by_text("Loaded ri_small.csv").first.wait_for()
    _idle(page)
    # The default allocation follows the data's schema; another schema is refused before Run.
    allocation = page.get_by_role("combobox", name="Allocation", exact=True).first
    assert allocation.input_value().startswith("ri2010-production-like")
    _select(
        page,
        "Allocation",
        "topdown-2020-production — 2020 Census redistricting data (P.L. 94-171), production settings",
    )
    main.get_by_text("Cannot run: the allocation's queries count cells of the").first.wait_for()
    from playwright.sync_api import expect

    expect(page.get_by_role("button", name="Run TopDown")).to_be_disabled(timeout=15_000)
    _shot(page, "15_06_run_upload_schema")
    # A second file where one is expected is an error, not a silent choice; it belongs to this
    # file type and is not shown once another one is picked.
    main.locator('input[type="file"]').first.set_input_files([str(copy)])
    _idle(page)
    page.get_by_role("button", name="Validate upload").click()
    problem = main.get_by_text("takes exactly one file")
    problem.first.wait_for()
    _select(page, "File type", "PPMF / MDF person records (CSV)")
    problem.first.wait_for(state="detached", timeout=15_000)  # not another choice's error
    _assert_offline(page)


def test_scenario_attaches_own_runs_and_report_is_readable(page) -> None:  # type: ignore[no-untyped-def]
    _goto(page, "Scenarios", "Scenarios")
    name = page.get_by_label("Name", exact=True).first
    name.fill("Looser PH3")
    name.press("Enter")
    _radio(page, "PHSafe budget (S-DHC)")
    main = page.locator('[data-testid="stMain"]')
    assert "Budget: modified from phsafe-2020" in main.inner_text()
    page.get_by_role("button", name="Save scenario").click()
    main.get_by_text("Saved “Looser PH3”").first.wait_for()
    _idle(page)

    # The production budget as a second scenario: the comparison lists only what differs.
    _goto(page, "PHSafe planner", "PHSafe planner")
    page.get_by_role("button", name="Load preset").click()
    main.get_by_text(_badge("Working budget: phsafe-2020")).wait_for()
    _goto(page, "Scenarios", "Scenarios")
    name = page.get_by_label("Name", exact=True).first
    name.fill("Production")
    name.press("Enter")
    _idle(page)
    assert "another budget and cannot be attached" in main.inner_text()
    page.get_by_role("button", name="Save scenario").click()
    main.get_by_text("Saved “Production”").first.wait_for()
    _idle(page)
    main.get_by_text("90% MOE: 1 of 46 rows differ").wait_for()
    _shot(page, "15_07_scenarios_compare", main.get_by_text("90% MOE: 1 of 46 rows differ"))

    # The report of "Looser PH3": its run once, with number, data and seed; distinct colours.
    _goto(page, "Budget session", "Budget session")
    page.get_by_role("tab", name="Session report").click()
    _select(page, "Scenario to report", "Saved: Looser PH3")
    page.get_by_role("button", name="Build the report").click()
    _idle(page)
    with page.expect_download() as info:
        page.get_by_role("button", name=re.compile("Download the report")).click()
    html = Path(info.value.path()).read_text(encoding="utf-8")
    assert html.count("<h3>Run #1: PHSafe on") == 1 and ", seed 7<" in html
    assert " on ?" not in html and "<h3>Run #2" not in html
    assert "Budget: <b>modified from phsafe-2020</b>" in html
    report = page.context.new_page()
    outside: list[str] = []
    report.on(
        "request",
        lambda r: outside.append(r.url) if not r.url.startswith(("data:", "about:")) else None,
    )
    report.set_content(html, wait_until="load")
    report.locator(".js-plotly-plot .main-svg").first.wait_for()
    colours = report.evaluate(
        "[...document.querySelectorAll('.js-plotly-plot')[0]"
        ".querySelectorAll('.scatterlayer path.js-line')].map(p => getComputedStyle(p).stroke)"
    )
    assert len(colours) == 3 and len(set(colours)) == 3, colours
    assert not any(c in ("rgb(0, 0, 0)", "none", "") for c in colours), colours
    assert _assert_readable_plots(report) >= 5
    report.screenshot(path=str(SHOTS / "15_08_report.png"), full_page=False)
    assert not outside, f"the report fetched {outside}"
    report.close()
