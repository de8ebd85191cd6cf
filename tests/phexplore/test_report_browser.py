"""The HTML session report opens in a real browser with its MOE table and (ε, δ) chart (issue 10).

Drives Debian's chromium (/usr/bin/chromium) through Playwright; never downloads a browser. Skips
only outside CI when chromium is absent; under CI (CI=true) a missing browser fails the test.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from phexplore.report import build_report_html
from phexplore.scenarios import scenario_from_preset

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots"
ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = pytest.mark.browser


@pytest.fixture
def browser_page():
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail("CI: /usr/bin/chromium is missing; `make test` should have installed it")
        pytest.skip("Debian chromium not installed (run `make browser`)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield browser.new_page(viewport={"width": 1280, "height": 1600})
        finally:
            browser.close()


def test_report_opens_with_table_and_chart(browser_page, tmp_path: Path) -> None:
    scenario = scenario_from_preset("phsafe-2020").with_result(
        {
            "engine": "phsafe",
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
    assert "PH1_num" in table.inner_text()
    assert page.locator("#moe-table tbody tr").count() == 46
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=30_000)
    assert page.locator(".js-plotly-plot").count() >= 2  # (ε, δ) chart and the run's MAE chart
    legend = page.locator(".js-plotly-plot").first.inner_text()
    assert "Canonne" in legend and "Bun" in legend
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "report.png"), full_page=False)
