"""Real-browser tests of the committee's question on one screen, readable on a projector (Debian
chromium at 1366×768, the laptop size a committee projects).

One `phexplore app` server for the module (tests/pages/conftest.py) and one chromium page, every
request recorded (none may leave the machine). What a user sees is measured in the browser:

* (a) production ρ cut by 30% with the planner's "Scale … by %" control, and the county, tract and
  block published-error deltas read from the one committee table, which fits the screen;
* (b) the bounding boxes of the main tables: inside the 1366 px viewport, with no sideways scrolling
  (every column, so every key column, visible);
* (c) the computed contrast (WCAG 2.1) of chart text (axis ticks and titles, chart titles, legends,
  colour bars) and of captions: at least 4.5:1, chart text at least 12 px;
* every grid and radio group has an accessible name, keyboard focus is visible, the main controls
  are a few Tab stops into the page; the TopDown exercise and "Reset to start" on the Start page,
  a run's EPL interval that contains its EPL.

Screenshots of every page go to test-output/screenshots/28_*.png; the measurements to
test-output/projector-measurements.json (both git-ignored).
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from phexplore.api.budgets import load_topdown_preset
from phexplore.planning.committee import committee_rows, published_rows
from phexplore.planning.scaling import scale_topdown_runs
from tests.pages.conftest import assert_offline as _assert_offline
from tests.pages.conftest import box as _box
from tests.pages.conftest import goto as _goto
from tests.pages.conftest import idle as _idle
from tests.pages.conftest import recording_page
from tests.pages.conftest import select as _select

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-output" / "screenshots"
MEASURED = ROOT / "test-output" / "projector-measurements.json"
WIDTH, HEIGHT = 1366, 768
AA = 4.5
"""WCAG 2.1 AA contrast for text."""


@pytest.fixture(scope="module")
def measurements() -> Any:
    """What the tests measured, written to test-output/ at the end of the module."""
    found: dict[str, Any] = {}
    yield found
    MEASURED.parent.mkdir(parents=True, exist_ok=True)
    MEASURED.write_text(json.dumps(found, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def page(server: str, chromium_launch: dict):  # type: ignore[no-untyped-def]
    """One chromium page at 1366×768; ``page.requests`` lists every URL requested."""
    with recording_page(chromium_launch, server, WIDTH, HEIGHT) as pg:
        yield pg


# ------------------------------------------------------------------ helpers


def _shot(pg, name: str, at=None) -> None:  # type: ignore[no-untyped-def]
    """A 1366×768 screenshot of what is on screen (``at`` scrolled into view first)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    _idle(pg)
    if at is not None:
        with contextlib.suppress(Exception):
            at.scroll_into_view_if_needed(timeout=10_000)
    pg.wait_for_timeout(400)
    pg.screenshot(path=str(SHOTS / f"28_{name}.png"), full_page=False)


def _number(text: str) -> float | None:
    """ "1,234.5" → 1234.5, "< 0.01" → 0.0, "—" → None."""
    text = text.strip().replace(",", "").replace("−", "-")
    if text.startswith("<"):
        return 0.0
    try:
        return float(text)
    except ValueError:
        return None


# Contrast per WCAG 2.1: relative luminance of sRGB colours; the text colour is composited with
# its opacity (CSS opacity of ancestors, SVG fill-opacity) over the background, which is the
# composite of every ancestor's background colour over the white page.
_CONTRAST_JS = """
(elements) => {
  const parse = c => {
    const m = (c || '').match(/rgba?\\(([^)]+)\\)/);
    if (!m) return null;
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const lum = c => {
    const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
  };
  const over = (top, bottom) => [0, 1, 2].map(i => top[i] * top[3] + bottom[i] * (1 - top[3]));
  const background = el => {
    const chain = [];
    for (let e = el; e; e = e.parentElement) chain.push(e);
    let bg = [255, 255, 255];
    for (const e of chain.reverse()) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) bg = over(c, bg);
    }
    return bg;
  };
  const opacity = el => {
    let a = 1;
    for (let e = el; e; e = e.parentElement) a *= parseFloat(getComputedStyle(e).opacity || '1');
    return a;
  };
  return elements.map(el => {
    const cs = getComputedStyle(el);
    const svg = el instanceof SVGElement;
    const fg = parse(svg ? cs.fill : cs.color) || [0, 0, 0, 1];
    const alpha = fg[3] * opacity(el) * (svg ? parseFloat(cs.fillOpacity || '1') : 1);
    const bg = background(el);
    const text = over([fg[0], fg[1], fg[2], alpha], bg);
    const [a, b] = [lum(text), lum(bg)].sort((x, y) => y - x);
    return {
      text: (el.textContent || '').trim().slice(0, 60),
      ratio: Math.round(((a + 0.05) / (b + 0.05)) * 100) / 100,
      size: parseFloat(cs.fontSize),
      color: svg ? cs.fill : cs.color,
    };
  });
}
"""

_CHART_TEXT_JS = (
    "() => [...document.querySelectorAll('.js-plotly-plot .main-svg text')]"
    ".filter(t => t.textContent.trim() && t.getBBox().width > 0"
    " && !t.closest('.hoverlayer') && !t.closest('.heatmaplayer'))"
)
_CAPTION_JS = (
    '() => [...document.querySelectorAll(\'[data-testid="stMain"] '
    '[data-testid="stCaptionContainer"] *\')]'
    ".filter(e => [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim()))"
)


def _contrast(pg, selector_js: str) -> list[dict]:  # type: ignore[no-untyped-def]
    handle = pg.evaluate_handle(selector_js)
    return pg.evaluate(_CONTRAST_JS, handle)


_GRIDS_JS = """
() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stDataFrame"]')]
  .filter(d => d.getBoundingClientRect().width > 0 && !d.closest('details:not([open])'))
  .map(d => {
    const r = d.getBoundingClientRect();
    const sc = d.querySelector('.dvn-scroller');
    const grid = d.querySelector('[role=grid]');
    const heads = grid ? [...grid.querySelectorAll('[role=columnheader]')].map(h => h.textContent) : [];
    // Streamlit puts the accessible name (``alt=``) on the grid's region.
    const region = d.querySelector('[data-testid="stDataFrameResizable"][role=region]');
    return {name: (region && region.getAttribute('aria-label'))
                  || (grid && grid.getAttribute('aria-label')) || '',
            left: r.left, right: r.right, width: r.width,
            scroll_width: sc ? sc.scrollWidth : null, client_width: sc ? sc.clientWidth : null,
            columns: heads};
  })
"""


def _grids(pg, page_name: str, measurements: dict) -> list[dict]:  # type: ignore[no-untyped-def]
    """Every visible grid of the page: inside the viewport, no sideways scrolling, named."""
    _idle(pg)
    # A grid draws its cells once it is in view: bring each into view before measuring.
    # (Grids inside a closed expander are not on screen: the user opens them on demand.)
    frames = pg.locator('[data-testid="stMain"] [data-testid="stDataFrame"]')
    shown = pg.evaluate(
        '() => [...document.querySelectorAll(\'[data-testid="stMain"] '
        "[data-testid=\"stDataFrame\"]')].map(d => !d.closest('details:not([open])'))"
    )
    for i in [i for i, on_screen in enumerate(shown) if on_screen]:
        with contextlib.suppress(Exception):
            frames.nth(i).scroll_into_view_if_needed(timeout=5_000)
            frames.nth(i).locator("[role=grid]").first.wait_for(timeout=10_000)
    pg.wait_for_timeout(500)
    grids = pg.evaluate(_GRIDS_JS)
    for g in grids:
        where = f"{page_name}: grid {g['name']!r} {g['columns'][:3]}"
        assert g["name"].strip(), f"{where} has no accessible name"
        assert g["left"] >= 0 and g["right"] <= WIDTH, f"{where} box {g['left']}–{g['right']}"
        assert g["scroll_width"] is not None and g["scroll_width"] <= g["client_width"] + 1, (
            f"{where} scrolls sideways: {g['scroll_width']} px of columns in {g['client_width']} px"
        )
    measurements.setdefault("grids", {})[page_name] = [
        {k: g[k] for k in ("name", "left", "right", "scroll_width", "client_width")} for g in grids
    ]
    return grids


def _radios_named(pg) -> None:  # type: ignore[no-untyped-def]
    names = pg.evaluate(
        "[...document.querySelectorAll('[data-testid=\"stMain\"] [role=radiogroup]')]"
        ".map(r => r.getAttribute('aria-label') || '')"
    )
    assert all(n.strip() for n in names), f"radio groups without a name: {names}"


def _set_number(pg, label: str, value: str) -> None:  # type: ignore[no-untyped-def]
    _idle(pg)
    field = pg.get_by_label(label, exact=True).first
    field.fill(value)
    field.press("Enter")
    _idle(pg)


def _committee_cells(pg) -> dict[tuple[str, str], str]:  # type: ignore[no-untyped-def]
    """The committee table's cells by (row header, column header)."""
    return {
        (row, col): text
        for row, col, text in pg.evaluate(
            """() => { const t = document.querySelector('table.ph-committee');
              const cols = [...t.querySelectorAll('thead th')].map(h => h.textContent.trim());
              return [...t.querySelectorAll('tbody tr')].flatMap(tr => {
                const head = tr.querySelector('th').textContent.trim();
                return [...tr.querySelectorAll('td')].map((td, i) =>
                  [head, td.colSpan > 1 ? 'all' : cols[i + 1], td.innerText.trim()]); }); }"""
        )
    }


_CELL = re.compile(
    r"^(?P<a>[<\d.,\s]+) → (?P<b>[<\d.,\s]+)\n(?P<d>[+−±][\d.,]+)(?: · (?P<p>[+−][\d.]+)%)?"
)


def _cut_by_30_percent(pg) -> None:  # type: ignore[no-untyped-def]
    """The TopDown planner's "Scale … by %" control at −30%, until the committee's table shows
    the new budget (drawn once its prediction is in: a second or two)."""
    _set_number(pg, "by %", "-30")
    pg.get_by_role("button", name="Apply", exact=True).click()
    main = pg.locator('[data-testid="stMain"]')
    main.get_by_text("Scaled the persons run's total ρ by −30%").first.wait_for()
    _idle(pg)
    pg.wait_for_function(
        "() => { const t = document.querySelector('table.ph-committee');"
        " return t && t.innerText.includes('−30.0%'); }",
        timeout=60_000,
    )


# ------------------------------------------------------------------ tests


def test_a_production_cut_by_30_percent_read_from_one_table(page, measurements) -> None:  # type: ignore[no-untyped-def]
    _goto(page, "TopDown planner", "TopDown planner")
    main = page.locator('[data-testid="stMain"]')
    main.get_by_text("Working allocations: topdown-2020-production", exact=False).first.wait_for()
    _cut_by_30_percent(page)
    assert "modified from topdown-2020-production" in main.inner_text()
    table = page.locator("table.ph-committee").first
    table.wait_for()
    table.scroll_into_view_if_needed()
    _idle(page)
    box = _box(table)
    # One table, on one screen: inside the viewport's width and shorter than its height.
    assert box["x"] >= 0 and box["x"] + box["width"] <= WIDTH, box
    assert box["height"] <= HEIGHT, box
    assert page.evaluate(
        "(() => { const t = document.querySelector('table.ph-committee');"
        " return t.scrollWidth <= t.parentElement.clientWidth + 1; })()"
    )
    cells = _committee_cells(page)
    assert "−30.0%" in cells[("ρ of the persons run", "all")]
    # The expected numbers from the functions `phexplore compare` and the report use (same
    # profile, the same sample of geounits): the app's table gives the CLI's numbers.
    base = load_topdown_preset("topdown-2020-production")
    cut = scale_topdown_runs(base, -30, only="persons")
    kw = {"n_states": 52}
    rows = committee_rows(
        base, published_rows(base, **kw)[0], cut, published_rows(cut, **kw)[0], delta=1e-10
    )
    expected = {(r["geolevel"], r["query"]): r for r in rows if r["section"] != "privacy"}
    read: dict[str, Any] = {}
    for level, label in (("County", "County"), ("Tract", "Tract"), ("Block", "Block")):
        text = cells[(label, "TOTAL")]
        want = expected[(level, "TOTAL")]
        if max(want["a"], want["b"]) < 0.005:
            # Below the table's precision (County TOTAL: a copy of the exact State total on the
            # one-state profile): no percentage of rounding-level numbers.
            assert text.startswith("< 0.01 → < 0.01\n≈ 0"), text
            read[level] = {"cell": text, "a": want["a"], "b": want["b"]}
            continue
        m = _CELL.match(text)
        assert m, f"{level} TOTAL reads {text!r}"
        a, b = _number(m["a"]), _number(m["b"])
        assert a == pytest.approx(want["a"], rel=0.01, abs=0.006), (level, text, want)
        assert b == pytest.approx(want["b"], rel=0.01, abs=0.006), (level, text, want)
        if m["p"] is not None:
            assert float(m["p"].replace("−", "-")) == pytest.approx(
                100 * want["relative"], abs=0.06
            )
        read[level] = {"cell": text, "a": want["a"], "b": want["b"], "relative": want["relative"]}
    # Less budget, larger error of the published tract and block totals (noise: +19.5%).
    for level in ("Tract", "Block"):
        assert 0.05 < read[level]["relative"] < 0.25, read[level]
    measurements["committee_table"] = {
        "box": box,
        "TOTAL": read,
        "rho_persons": cells[("ρ of the persons run", "all")],
    }
    _shot(page, "01_topdown_committee_cut30", table)
    _assert_offline(page)


def test_b_key_columns_of_the_main_tables_are_inside_the_viewport(page, measurements) -> None:  # type: ignore[no-untyped-def]
    # TopDown planner: the share editors and, opened, the table of every query.
    _goto(page, "TopDown planner", "TopDown planner")
    page.get_by_text("All queries (table)").first.click()
    _idle(page)
    grids = _grids(page, "TopDown planner", measurements)
    assert len(grids) >= 3
    _radios_named(page)
    _shot(page, "02_topdown_shares", page.locator('[data-testid="stDataFrame"]').first)
    _shot(page, "03_topdown_heatmap", page.locator(".js-plotly-plot").first)
    # PHSafe planner: the six-level grid and the MOE table.
    _goto(page, "PHSafe planner", "PHSafe planner")
    grids = _grids(page, "PHSafe planner", measurements)
    assert len(grids) >= 2
    headers = " ".join(" ".join(g["columns"]) for g in grids)
    for level in ("Nation", "Nation A-G", "State H-I"):
        assert level in headers
    _radios_named(page)
    _shot(page, "04_phsafe_planner")
    _shot(page, "05_phsafe_grid", page.locator('[data-testid="stDataFrame"]').first)
    # Privacy loss: the ε table (reported conversion, baseline, Δ) and the reference points.
    _goto(page, "Privacy loss (ε, δ)", "Privacy loss (ε, δ)")
    page.locator(".js-plotly-plot .main-svg").first.wait_for()
    grids = _grids(page, "Privacy loss", measurements)
    assert any("ε CKS" in g["columns"] and "Δε" in g["columns"] for g in grids), grids
    _shot(page, "06_privacy_loss")
    _shot(page, "07_privacy_loss_tables", page.locator('[data-testid="stDataFrame"]').first)
    # Scenarios: save the cut and production, compare them.
    _goto(page, "Scenarios", "Scenarios")
    main = page.locator('[data-testid="stMain"]')
    page.get_by_text("TopDown allocations (redistricting)", exact=True).click()
    _idle(page)
    for name, action in (("Cut 30", None), ("Production", "restore")):
        if action == "restore":
            _goto(page, "TopDown planner", "TopDown planner")
            page.get_by_role("button", name="Reset to baseline").click()
            main.get_by_text("The working budget is the baseline again").first.wait_for()
            _goto(page, "Scenarios", "Scenarios")
            page.get_by_text("TopDown allocations (redistricting)", exact=True).click()
            _idle(page)
        field = page.get_by_label("Name", exact=True).first
        field.fill(name)
        field.press("Enter")
        _idle(page)
        page.get_by_role("button", name="Save scenario").click()
        try:
            main.get_by_text(f"Saved “{name}”").first.wait_for()
        except Exception:
            _shot(page, f"failed_save_{name.replace(' ', '_')}")
            raise
        _idle(page)
    main.get_by_text("What changed:").first.wait_for()
    assert "scales the total budget" in main.inner_text()
    page.locator("table.ph-committee").first.wait_for()
    grids = _grids(page, "Scenarios", measurements)
    assert any("Δ (B − A)" in g["columns"] for g in grids), grids
    _shot(page, "08_scenarios_compare", main.get_by_text("What changed:").first)
    _shot(page, "09_scenarios_committee", page.locator("table.ph-committee").first)
    _assert_offline(page)


def test_c_chart_text_and_captions_reach_aa_contrast(page, measurements) -> None:  # type: ignore[no-untyped-def]
    found: dict[str, Any] = {}
    for title, heading in (
        ("PHSafe planner", "PHSafe planner"),
        ("TopDown planner", "TopDown planner"),
        ("Privacy loss (ε, δ)", "Privacy loss (ε, δ)"),
    ):
        _goto(page, title, heading)
        page.locator(".js-plotly-plot .main-svg").first.wait_for()
        page.wait_for_timeout(800)
        chart = _contrast(page, _CHART_TEXT_JS)
        captions = _contrast(page, _CAPTION_JS)
        assert chart and captions, title
        low = [c for c in chart if c["ratio"] < AA or c["size"] < 12]
        assert not low, f"{title}: chart text below 4.5:1 or 12 px: {low[:5]}"
        dim = [c for c in captions if c["ratio"] < AA]
        assert not dim, f"{title}: captions below 4.5:1: {dim[:5]}"
        found[title] = {
            "chart_texts": len(chart),
            "chart_min_contrast": min(c["ratio"] for c in chart),
            "chart_min_px": min(c["size"] for c in chart),
            "captions": len(captions),
            "caption_min_contrast": min(c["ratio"] for c in captions),
            "caption_colour": captions[0]["color"],
        }
    measurements["contrast"] = found


def test_keyboard_focus_is_visible_and_main_controls_are_near(page, measurements) -> None:  # type: ignore[no-untyped-def]
    _goto(page, "TopDown planner", "TopDown planner")
    # Start at the top of the main area (after the sidebar) and count Tab stops.
    page.evaluate(
        "document.querySelector('[data-testid=\"stMain\"]').setAttribute('tabindex', '-1');"
        "document.querySelector('[data-testid=\"stMain\"]').focus()"
    )
    stops: dict[str, int] = {}
    rings: list[dict] = []
    for i in range(1, 41):
        page.keyboard.press("Tab")
        info = page.evaluate(
            "() => { const e = document.activeElement, cs = getComputedStyle(e);"
            " return {label: e.getAttribute('aria-label') || (e.innerText || '').trim().slice(0, 30),"
            " style: cs.outlineStyle, width: parseFloat(cs.outlineWidth), colour: cs.outlineColor}; }"
        )
        rings.append(info)
        for wanted in ("Total ρ of the persons run", "by %", "Apply", "Baseline (compared with)"):
            if wanted not in stops and info["label"] == wanted:
                stops[wanted] = i
    assert set(stops) == {"Total ρ of the persons run", "by %", "Apply", "Baseline (compared with)"}
    assert max(stops.values()) <= 20, stops
    # Every focused element shows a ring of at least 2 px (the page style's 3 px blue ring).
    unringed = [(i, r) for i, r in enumerate(rings, 1) if r["style"] == "none" or r["width"] < 2]
    assert not unringed, f"Tab stops without a visible focus ring: {unringed}"
    measurements["tab_stops_from_main"] = stops
    measurements["focus_ring"] = rings[0]


def test_start_page_exercise_reset_and_epl_interval(page, measurements) -> None:  # type: ignore[no-untyped-def]
    _goto(page, "Start here", "Start here")
    main = page.locator('[data-testid="stMain"]')
    main.get_by_text("A TopDown exercise", exact=False).first.wait_for()
    main.get_by_text("2. Read county vs block", exact=False).first.wait_for()
    _idle(page)
    text = main.inner_text()
    assert "1. Cut ρ by 30%" in text and "2. Read county vs block" in text
    # ε as a readable number ("≈ 24 million"), never an exponent such as "e^16.98".
    assert not re.search(r"e\^\d", text) and "≈ 24 million" in text
    _shot(page, "10_start", main.get_by_text("A TopDown exercise", exact=False).first)
    # The exercise: load the RI preset (the baseline follows it), cut by 30%, run the cut budget.
    _goto(page, "TopDown planner", "TopDown planner")
    _select(page, "Preset", "ri2010-production-like", prefix=True)
    page.get_by_role("button", name="Load preset").click()
    main.get_by_text("compared with the baseline ri2010-production-like").first.wait_for()
    _cut_by_30_percent(page)
    cells = _committee_cells(page)
    assert _CELL.match(cells[("County", "TOTAL")]) and _CELL.match(cells[("Block", "TOTAL")])
    _goto(page, "Run", "Run an engine")
    _select(page, "Allocation", "Working scenario (TopDown planner)")
    main.get_by_text("modified from ri2010-production-like").first.wait_for()
    page.get_by_role("button", name="Run TopDown").click()
    page.get_by_text("Finished #").first.wait_for(timeout=240_000)
    _shot(page, "11_run")
    _goto(page, "Results", "Results")
    page.get_by_role("tab", name="EPL", exact=True).click()
    sentence = main.get_by_text(re.compile(r"interval \[[\d.]+, [\d.]+\] contains the EPL")).first
    sentence.wait_for()
    said = sentence.locator("xpath=ancestor-or-self::p[1]").inner_text()  # the whole sentence
    m = re.search(r"interval \[(\d+\.\d+), (\d+\.\d+)\] contains the EPL (\d+\.\d+)", said)
    assert m, said
    low, high, epl = (float(v) for v in m.groups())
    assert low <= epl <= high
    assert "covers the spread" in said
    measurements["epl_interval"] = {"epl": epl, "low": low, "high": high, "sentence": said}
    _shot(page, "12_results_epl", sentence)
    page.get_by_role("tab", name="MAE", exact=True).click()
    _grids(page, "Results", measurements)
    _shot(page, "13_results_mae", page.locator(".js-plotly-plot").first)
    # Reset to start: production budgets again, runs kept.
    _goto(page, "Start here", "Start here")
    page.get_by_role("button", name="Reset to start").click()
    main.get_by_text("Back to the start").first.wait_for()
    _goto(page, "TopDown planner", "TopDown planner")
    main.get_by_text("Working allocations: topdown-2020-production", exact=False).first.wait_for()
    _goto(page, "Budget session", "Budget session")
    _shot(page, "14_budget_session")
    _assert_offline(page)
