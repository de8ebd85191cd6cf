"""Real-browser end-to-end test: Debian chromium driven by Playwright against `phexplore app`.

One Streamlit server (started through the ``phexplore app`` command on a free 127.0.0.1 port) and
one browser page for the whole module. For each page: open it from the sidebar navigation, check
that real numbers and plots are shown, change a control and see a number change, and save a
screenshot under ``test-output/screenshots/``. The Run page runs the RI 2010 TopDown sample on a
small subset to completion.

Skipped only when /usr/bin/chromium is absent and the ``CI`` environment variable is unset; under
CI a missing browser is a failure (``make test`` installs Debian's chromium first).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.pages.conftest import UI_TIMEOUT_MS, chromium_page, open_app
from tests.pages.conftest import goto as _goto
from tests.pages.conftest import idle as _idle

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS_DIR = ROOT / "test-output" / "screenshots"
STARTUP_TIMEOUT_S = 90


@pytest.fixture(scope="module")
def page(server: str, chromium_launch: dict):  # type: ignore[no-untyped-def]
    """One chromium page on the app for the whole module (session state carries across pages)."""
    with chromium_page(chromium_launch, 1600, 1250) as pg:
        open_app(pg, server)
        yield pg


def _click(pg, name: str) -> None:  # type: ignore[no-untyped-def]
    """Click a button once Streamlit is idle (stale copies may linger during a rerun)."""
    _idle(pg)
    pg.get_by_role("button", name=name).first.click()


def _choose_radio(pg, label: str) -> None:  # type: ignore[no-untyped-def]
    """Select a radio option, retrying while Streamlit replaces stale elements."""
    deadline = time.monotonic() + UI_TIMEOUT_MS / 1000
    while True:
        _idle(pg)
        radio = pg.get_by_role("radio", name=label)
        if radio.count() and radio.last.is_checked():
            return
        assert time.monotonic() < deadline, f"radio {label!r} could not be selected"
        pg.get_by_text(label, exact=True).last.click()
        pg.wait_for_timeout(300)


def _metric(pg, label: str) -> str:  # type: ignore[no-untyped-def]
    box = pg.locator('[data-testid="stMetric"]').filter(has_text=label).first
    return box.locator('[data-testid="stMetricValue"]').inner_text().strip()


def _wait_plot(pg) -> None:  # type: ignore[no-untyped-def]
    # the Results page draws its first chart after the run's tables load: up to 3 min on a loaded
    # 2-core machine running the other tests beside it
    pg.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=180_000)


def _set_number(pg, label: str, value: str) -> None:  # type: ignore[no-untyped-def]
    _idle(pg)
    box = pg.get_by_label(label, exact=True).first
    box.fill(value)
    box.press("Enter")
    _idle(pg)


def _shot(pg, name: str) -> None:  # type: ignore[no-untyped-def]
    pg.evaluate(
        "for (const el of document.querySelectorAll('[data-testid=\"stMain\"], section.main'))"
        " { el.scrollTop = 0; }"
    )
    pg.wait_for_timeout(500)
    pg.screenshot(path=str(SCREENSHOTS_DIR / f"{name}.png"), full_page=True)


def _wait_changed(pg, label: str, before: str) -> str:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + UI_TIMEOUT_MS / 1000
    while time.monotonic() < deadline:
        now = _metric(pg, label)
        if now != before:
            return now
        pg.wait_for_timeout(250)
    raise AssertionError(f"metric {label!r} stayed at {before!r}")


def test_phsafe_planner(page) -> None:  # type: ignore[no-untyped-def]
    _goto(page, "PHSafe planner", "PHSafe planner")
    _wait_plot(page)
    label = "Total ρ (unbounded neighbours)"
    before = _metric(page, label)
    assert before == "1.2573"
    page.get_by_role("heading", name="PHSafe planner").wait_for()
    _set_number(page, "τ of the table", "8")
    after = _wait_changed(page, label, before)
    assert float(after) < float(before)
    _shot(page, "01_phsafe_planner")


def test_topdown_planner(page) -> None:  # type: ignore[no-untyped-def]
    _goto(page, "TopDown planner", "TopDown planner")
    _wait_plot(page)
    label = "persons: ρ"
    before = _metric(page, label)
    assert before == "2.5562"
    _set_number(page, "Total ρ of the persons run", "1.5")
    assert _wait_changed(page, label, before) == "1.5000"
    _shot(page, "02_topdown_planner")


def test_privacy_loss(page) -> None:  # type: ignore[no-untyped-def]
    _goto(page, "Privacy loss (ε, δ)", "Privacy loss (ε, δ)")
    _wait_plot(page)
    page.get_by_text("Production persons (certificate): ε=17.14").first.wait_for()
    label = "TopDown persons: ε at δ = 1e-10"
    before = _metric(page, label)
    # One step right on the page's δ slider: δ = 1e-9, so ε falls.
    thumb = page.locator('[data-testid="stMain"] input[type="range"]').first
    thumb.focus()
    thumb.press("ArrowRight")
    _idle(page)
    after = _metric(page, "TopDown persons: ε at δ = 1e-9")
    assert float(after) < float(before)
    _shot(page, "03_privacy_loss")


def test_run_ri_topdown_small(page) -> None:  # type: ignore[no-untyped-def]
    _goto(page, "Run", "Run an engine")
    # Default: the RI 2010 sample, subset = its smallest county, the RI production-like shares.
    page.get_by_text("44001 (1,092 blocks)").first.wait_for()
    _click(page, "Run TopDown")
    page.get_by_text("Finished #1").first.wait_for(timeout=180_000)
    _idle(page)
    mae = _metric(page, "MAE of TOTAL (Block)")
    assert float(mae) > 0
    _shot(page, "04_run")


def test_results(page) -> None:  # type: ignore[no-untyped-def]
    _goto(page, "Results", "Results")
    _wait_plot(page)
    page.get_by_text("non-confidential test data").first.wait_for()
    page.get_by_role("tab", name="EPL", exact=True).click()
    _idle(page)
    epl = _metric(page, "EPL")
    assert epl != "undefined" and float(epl) > 0
    _shot(page, "05_results_epl")
    page.get_by_role("tab", name="Blau-index bias").click()
    _idle(page)
    _shot(page, "05_results_blau")


def test_replay_run(page, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Results page: a bad file is refused in one line; "Replay this run" repeats run #1 through
    the same pipeline and says the same seed gave the same numbers."""
    _goto(page, "Results", "Results")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    _idle(page)
    box = page.locator('[data-testid="stExpander"]').filter(has_text="Replay a run from a file")
    box.locator("summary").first.click()
    box.locator('input[type="file"]').first.set_input_files(str(broken))
    page.get_by_text("Cannot replay broken.json").first.wait_for()
    assert "not valid JSON" in page.get_by_text("Cannot replay broken.json").first.inner_text()
    _click(page, "Replay this run")
    page.get_by_text("same seed, same numbers").first.wait_for(timeout=180_000)
    _idle(page)
    assert "replay of #1" in page.get_by_text("Finished #2").first.inner_text()
    _shot(page, "05_results_replay")


def test_scenarios(page) -> None:  # type: ignore[no-untyped-def]
    _goto(page, "Scenarios", "Scenarios")
    name = page.get_by_label("Name", exact=True).first
    name.fill("Production PHSafe")
    name.press("Enter")
    _idle(page)
    _click(page, "Save scenario")
    page.get_by_text("Saved “Production PHSafe”").first.wait_for()
    name.fill("RI TopDown")
    name.press("Enter")
    _idle(page)
    _choose_radio(page, "TopDown allocations (redistricting)")
    _click(page, "Save scenario")
    page.get_by_text(
        "Saved “RI TopDown” (TopDown allocations (redistricting)) in the workspace."
    ).first.wait_for()
    page.get_by_role("heading", name="Compare two scenarios").wait_for()
    _idle(page)
    _shot(page, "06_scenarios")


def test_budget_session(page) -> None:  # type: ignore[no-untyped-def]
    _goto(page, "Budget session", "Budget session")
    label = "Total ρ (unbounded)"
    before = _metric(page, label)
    _set_number(page, "Cap on total unbounded ρ (0 = no cap: meet every target)", "0.8")
    assert _wait_changed(page, label, before) == "0.8000"
    _shot(page, "07_budget_session")


def test_open_parquet_run_folder(page, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Results page: a Parquet run folder written by `phexplore run topdown` opens as a run, with
    its files offered for download in the format written (docs/app.md)."""
    from phexplore.cli import main

    folder = tmp_path / "td-parquet"
    argv = [
        "run", "topdown", "--data", "ri2010", "--filter", "Tract=44001030100", "--preset",
        "ri2010-production-like", "--seed", "3", "--output-format", "parquet", "--quiet",
        "--out", str(folder),
    ]  # fmt: skip
    assert main(argv) == 0
    _goto(page, "Results", "Results")
    _idle(page)
    box = page.locator('[data-testid="stExpander"]').filter(has_text="Open a run folder")
    if not box.get_by_label("Run folder").first.is_visible():
        box.locator("summary").first.click()
    box.get_by_label("Run folder").first.fill(str(folder))
    box.get_by_label("Run folder").first.press("Enter")
    _click(page, "Open folder")
    page.get_by_text("tables as parquet").first.wait_for()
    _wait_plot(page)
    files = page.locator('[data-testid="stExpander"]').filter(has_text="Files of this run folder")
    files.locator("summary").first.click()
    page.get_by_role("button", name="estimates.parquet (sparse)").first.wait_for()
    _shot(page, "05_results_parquet_folder")
