"""The HTML session report opens in a real browser with its MOE table and (ε, δ) chart.

Drives Debian's chromium (/usr/bin/chromium) through Playwright; never downloads a browser. Skips
only outside CI when chromium is absent; under CI (CI=true) a missing browser fails the test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from phexplore.app.report import build_report_html
from phexplore.planning.scenarios import scenario_from_preset

pytestmark = pytest.mark.browser


@pytest.fixture
def browser_page(chromium_launch: dict):  # type: ignore[no-untyped-def]
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(**chromium_launch)
        try:
            yield browser.new_page(viewport={"width": 1280, "height": 1600})
        finally:
            browser.close()


def test_report_opens_with_table_and_chart(
    browser_page, tmp_path: Path, screenshots_dir: Path
) -> None:
    base = scenario_from_preset("phsafe-2020")
    scenario = base.with_result(
        {
            "engine": "phsafe",
            "budget_fingerprint": next(iter(base.fingerprints())),
            "run_id": 1,
            "data": "phsafe_synthetic_us",
            "seed": 7,
            "mae": {"State": {"PH1_num": 3.2}},
        }
    )
    report = tmp_path / "report.html"
    report.write_text(build_report_html(scenario), encoding="utf-8")
    page = browser_page
    page.goto(report.as_uri())
    table = page.locator("#moe-table table")
    assert table.count() == 1
    assert "PH1 numerator" in table.inner_text()
    assert page.locator("#moe-table tbody tr").count() == 46
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=30_000)
    assert page.locator(".js-plotly-plot").count() >= 2  # (ε, δ) chart and the run's MAE chart
    legend = page.locator(".js-plotly-plot").first.inner_text()
    assert "Canonne" in legend and "Bun" in legend
    page.screenshot(path=str(screenshots_dir / "report.png"), full_page=False)
