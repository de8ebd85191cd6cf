"""Real-browser test of the workspace (Debian chromium, 1366×768): work survives a reload, a second
tab and a shared link; a production run attaches to its scenario; a budget sweep runs on the
2,016-cell Perry County sample; a run started before a reload is found again after it.

One `phexplore app` server with a workspace of its own (tests/pages/conftest.py). Screenshots
go to test-output/screenshots/.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from pathlib import Path
from urllib.parse import parse_qs, quote, urlencode, urlparse

import pytest

from tests.pages.conftest import (
    UI_TIMEOUT_MS,
    app_server,
    box,
    chromium_page,
    goto,
    idle,
    open_app,
    select,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-output" / "screenshots"
WIDTH, HEIGHT = 1366, 768
RUN_TIMEOUT_MS = 600_000


def _radio(pg, option: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + UI_TIMEOUT_MS / 1000
    while True:
        idle(pg)
        radio = pg.get_by_role("radio", name=option, exact=True)
        if radio.count() and radio.last.is_checked():
            return
        assert time.monotonic() < deadline, f"radio {option!r} could not be selected"
        pg.locator('[data-testid="stMain"]').get_by_text(option, exact=True).last.click()
        pg.wait_for_timeout(300)


def _main(pg):  # type: ignore[no-untyped-def]
    return pg.locator('[data-testid="stMain"]')


def _shot(pg, name: str) -> None:  # type: ignore[no-untyped-def]
    SHOTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(SHOTS / f"27_{name}.png"))


def _perry(pg) -> None:  # type: ignore[no-untyped-def]
    """The Run page with TopDown on all of Perry County (2,016 cells per block)."""
    goto(pg, "Run", "Run an engine")
    _radio(pg, "TopDown (redistricting data)")
    select(pg, "Sample", "ppmf_perry_al", prefix=True)
    select(pg, "Run on a subset (geolevel)", "(all data)", prefix=True)
    allocation = pg.get_by_role("combobox", name="Allocation", exact=True).first
    assert allocation.input_value().startswith("topdown-2020-production")


def _press_run(pg) -> None:  # type: ignore[no-untyped-def]
    """Press Run as a user does: the button in the middle of the screen, not at its edge."""
    button = pg.get_by_role("button", name="Run TopDown")
    button.evaluate("e => e.scrollIntoView({block: 'center'})")
    pg.wait_for_timeout(200)
    button.click()


def _panel_in_view(pg) -> None:  # type: ignore[no-untyped-def]
    """The run panel (progress and Cancel) is on screen right after Run, at 1366×768."""
    panel = pg.locator(".st-key-run_panel")
    panel.wait_for(timeout=60_000)
    pbox = box(panel)
    assert pbox["y"] >= 0 and pbox["y"] + 40 <= HEIGHT, pbox
    cancel = pg.get_by_role("button", name=re.compile("Cancel run"))
    cbox = box(cancel)
    assert cbox["y"] + cbox["height"] <= HEIGHT, cbox


def _finished(pg, number: int) -> str:  # type: ignore[no-untyped-def]
    message = _main(pg).get_by_text(f"Finished #{number} ").first
    message.wait_for(timeout=RUN_TIMEOUT_MS)
    idle(pg)
    return str(message.inner_text())


def _save(pg, name: str, kind: str) -> None:  # type: ignore[no-untyped-def]
    goto(pg, "Scenarios", "Scenarios")
    field = pg.get_by_label("Name", exact=True).first
    field.fill(name)
    field.press("Enter")
    _radio(pg, kind)
    pg.get_by_role("button", name="Save scenario").click()
    _main(pg).get_by_text(f"Saved “{name}”").first.wait_for()
    idle(pg)


def _saved_names(pg) -> set[str]:  # type: ignore[no-untyped-def]
    """The saved scenarios the Scenarios page offers (its picker's options: the saved list
    itself is a canvas table whose text the DOM does not hold)."""
    goto(pg, "Scenarios", "Scenarios")
    box = pg.get_by_role("combobox", name="Scenario", exact=True).first
    box.click()
    pg.get_by_role("option").first.wait_for()
    names = {t.strip() for t in pg.get_by_role("option").all_inner_texts()}
    box.press("Escape")
    idle(pg)
    return names


def test_workspace_survives_reload_tabs_and_links(server, chromium_launch) -> None:  # type: ignore[no-untyped-def]
    with chromium_page(chromium_launch, WIDTH, HEIGHT) as pg:
        open_app(pg, server)
        idle(pg)
        # Run #1: the unedited production preset on Perry County.
        _perry(pg)
        _press_run(pg)
        _panel_in_view(pg)
        _shot(pg, "01_run_panel_beside_run")
        done = _finished(pg, 1)
        assert "ppmf_perry_al" in done
        _main(pg).get_by_text("Latest TopDown result").wait_for()

        # Run #2 with a budget sweep on the 2,016-cell schema; reload while it runs.
        pg.get_by_text("Also run a budget sweep", exact=False).first.click()
        idle(pg)
        rhos = pg.get_by_label(re.compile("^Sweep budgets")).first
        rhos.fill("1, 4")
        rhos.press("Enter")
        idle(pg)
        # the estimate beside Run includes the sweep
        _main(pg).get_by_text(
            re.compile(r"budget sweep ≈ .* \(2 runs, 7 SRS replicates\)")
        ).wait_for()
        _press_run(pg)
        _panel_in_view(pg)
        pg.reload()
        idle(pg)
        # the reloaded page follows the run it did not start: progress, then the result
        _main(pg).get_by_text(re.compile(r"Run #2 in progress")).first.wait_for(timeout=60_000)
        _shot(pg, "02_run_found_after_reload")
        done = _finished(pg, 2)
        assert "sweep failed" not in done and "sweep was cancelled" not in done, done
        idle(pg)
        assert "The budget sweep failed" not in _main(pg).inner_text()

        # Two scenarios; the production one attaches both production runs.
        goto(pg, "Scenarios", "Scenarios")
        _radio(pg, "TopDown allocations (redistricting)")
        attach = (
            _main(pg).locator('[data-testid="stMultiSelect"]').filter(has_text="Attach run results")
        )
        chosen = attach.inner_text()  # both production runs attach to the production budget
        assert "#1 · TopDown · ppmf_perry_al" in chosen and "#2 · TopDown" in chosen, chosen
        assert "another budget and cannot be attached" not in _main(pg).inner_text()
        _save(pg, "Production", "TopDown allocations (redistricting)")
        _save(pg, "PHSafe plan", "PHSafe budget (S-DHC)")
        workspace = Path(server.workspace)
        with sqlite3.connect(workspace / "workspace.sqlite") as db:
            rows = db.execute("SELECT name FROM scenarios WHERE deleted IS NULL").fetchall()
            runs = db.execute("SELECT number, status FROM runs ORDER BY number").fetchall()
        assert {r[0] for r in rows} == {"Production", "PHSafe plan"}
        assert runs == [(1, "finished"), (2, "finished")]

        # Reload: everything is still there.
        pg.reload()
        idle(pg)
        assert _saved_names(pg) == {"Production", "PHSafe plan"}
        goto(pg, "Run", "Run an engine")
        _main(pg).get_by_text("All runs of this workspace (2)").wait_for()

        # Open "Production" and take its link.
        goto(pg, "Scenarios", "Scenarios")
        select(pg, "Open scenario", "Production", prefix=True)
        idle(pg)
        link = pg.url
        params = parse_qs(urlparse(link).query)
        assert params["scenario"][0].startswith("Production · ")

        # A second tab of the same browser: the same scenarios and runs.
        tab = pg.context.new_page()
        tab.set_default_timeout(UI_TIMEOUT_MS)
        open_app(tab, server)
        idle(tab)
        assert _saved_names(tab) == {"Production", "PHSafe plan"}
        tab.close()

    # A trainer's shared link, opened by someone else (a new browser): the same scenario.
    with chromium_page(chromium_launch, WIDTH, HEIGHT) as other:
        other.goto(link)
        _main(other).get_by_text("Opened scenario “Production” from the link.").wait_for()
        idle(other)
        _shot(other, "03_shared_link")
        fingerprint = params["scenario"][0].rsplit(" · ", 1)[1]
        tampered = fingerprint[:-1] + ("0" if fingerprint[-1] != "0" else "1")
        base = link.split("?", 1)[0]
        other.goto(f"{base}?{urlencode({'scenario': f'Production · {tampered}'}, quote_via=quote)}")
        _main(other).get_by_text("changed after the link was made").first.wait_for()
        other.goto(f"{base}?scenario=Nobody")
        _main(other).get_by_text("which this workspace does not hold").first.wait_for()
        other.goto(f"{base}?budget=b1.garbage")
        _main(other).get_by_text("budget code is damaged").first.wait_for()


def test_a_run_whose_workspace_is_closed_is_cancelled(chromium_launch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Close the browser while a long run (all of Rhode Island and a sweep) runs: with no page of its
    workspace open for the grace period (3 s here), the run is cancelled, not left on a core."""
    log = ROOT / "test-output" / "test_browser_workspace-close-server.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("", encoding="utf-8")
    with app_server(tmp_path / "ws", log, env={"PHEXPLORE_CLOSE_GRACE_S": "3"}) as url:
        with chromium_page(chromium_launch, WIDTH, HEIGHT) as pg:
            open_app(pg, url)
            idle(pg)
            goto(pg, "Run", "Run an engine")
            select(pg, "Run on a subset (geolevel)", "(all data)", prefix=True)
            # a sweep of 6 budgets × 10 seeds makes the job long enough to outlive the page
            pg.get_by_text("Also run a budget sweep", exact=False).first.click()
            idle(pg)
            rhos = pg.get_by_label(re.compile("^Sweep budgets")).first
            rhos.fill("0.25, 0.5, 1, 2, 4, 8")
            rhos.press("Enter")
            idle(pg)
            seeds = pg.get_by_label("Seeds per budget (trials)", exact=True).first
            seeds.fill("10")
            seeds.press("Enter")
            idle(pg)
            _main(pg).get_by_text(re.compile(r"budget sweep ≈ .* \(60 runs")).wait_for()
            _press_run(pg)
            _panel_in_view(pg)
        deadline = time.monotonic() + 120
        status = folder = message = None
        while time.monotonic() < deadline:
            with sqlite3.connect(tmp_path / "ws" / "workspace.sqlite") as db:
                status, folder, message = db.execute(
                    "SELECT status, folder, message FROM runs"
                ).fetchone()
            if status != "running":
                break
            time.sleep(1)
        # cancelled; or, when the run itself had finished and its sweep was stopped, the run's
        # own result kept with the sweep marked cancelled (never the 60 sweep runs completed)
        if status == "finished":
            record = json.loads((tmp_path / "ws" / folder / "record.json").read_text())
            problem = record["settings"]["sweep_problem"]
            assert "sweep was cancelled (its workspace was closed" in problem, problem
        else:
            assert status == "cancelled", (status, message)
            assert "its workspace was closed" in str(message)
