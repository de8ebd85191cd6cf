"""Shared fixtures and helpers of the browser tests in tests/pages: one `phexplore app` server per
module, a chromium page on it, and waiting for Streamlit / navigating the sidebar."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
SHOTS = ROOT / "test-output" / "screenshots"
STARTUP_TIMEOUT_S = 90
UI_TIMEOUT_MS = 60_000


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server(str):
    """The app's URL, with the workspace folder it serves (``.workspace``)."""

    workspace: Path


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """When a browser test fails, keep what its page showed: a full-page screenshot
    (test-output/screenshots/FAILED_<test>.png) and, in the failure report, the address and the
    main area's text — on CI the log is all there is to read."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    pg = getattr(item, "funcargs", {}).get("page")
    if report.when != "call" or not report.failed or pg is None:
        return
    path = SHOTS / f"FAILED_{item.name}.png"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(path), full_page=True)
        text = pg.locator('[data-testid="stMain"]').inner_text(timeout=10_000)
        report.sections.append(("page at failure", f"{pg.url}\n{path}\n\n{text[:6000]}"))
    except Exception as exc:  # noqa: BLE001 - the report must still be written
        report.sections.append(("page at failure", f"could not capture the page: {exc!r}"))


@pytest.fixture(scope="module")
def server(
    chromium_launch: dict,
    screenshots_dir: Path,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Server]:
    """Start `phexplore app` on a free loopback port with a workspace of its own (never the
    user's data directory); always terminate its process group.

    One server per test module (module scope); its log is test-output/<module>-server.log.
    """
    module = request.module.__name__.rsplit(".", 1)[-1]
    workspace = tmp_path_factory.mktemp(f"{module}-workspace") / "ws"
    log_path = screenshots_dir.parent / f"{module}-server.log"
    log_path.write_text("", encoding="utf-8")
    with app_server(workspace, log_path) as url:
        yield url


@contextlib.contextmanager
def app_server(
    workspace: Path, log_path: Path, env: dict[str, str] | None = None
) -> Iterator[Server]:
    """`phexplore app --workspace WORKSPACE` on a free loopback port until the block ends (its
    process group terminated); ``env``: more environment variables for the server."""
    port = _free_port()
    log = log_path.open("a", encoding="utf-8")
    code = (
        "import sys; from phexplore.cli import main; "
        f"sys.exit(main(['app', '--port', '{port}', '--workspace', {str(workspace)!r}]))"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )
    url = Server(f"http://127.0.0.1:{port}")
    url.workspace = workspace
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the app exited early; see {log_path}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"the app did not become healthy in {STARTUP_TIMEOUT_S}s; see {log_path}"
                )
            time.sleep(0.5)
        yield url
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        log.close()


@contextlib.contextmanager
def chromium_page(chromium_launch: dict, width: int, height: int) -> Iterator[Any]:
    """A chromium page with a ``width``×``height`` viewport and the UI timeout; the browser is
    always closed (the caller records requests, then opens the app)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(**chromium_launch)
        try:
            context = browser.new_context(viewport={"width": width, "height": height})
            pg = context.new_page()
            pg.set_default_timeout(UI_TIMEOUT_MS)
            yield pg
        finally:
            browser.close()


@contextlib.contextmanager
def recording_page(chromium_launch: dict, server: str, width: int, height: int) -> Iterator[Any]:
    """A chromium page on the app (``width``×``height``) whose ``requests`` lists every URL the
    browser requested, for `assert_offline`; open at the Start page and idle."""
    with chromium_page(chromium_launch, width, height) as pg:
        requests: list[str] = []
        pg.on("request", lambda r: requests.append(r.url))
        pg.requests = requests
        open_app(pg, server)
        idle(pg)
        yield pg


def assert_offline(pg: Any) -> None:
    """Every request a `recording_page` made went to this machine (data:/blob: URLs never
    leave it)."""
    outside = [
        u
        for u in pg.requests
        if not u.startswith(("data:", "blob:", "about:"))
        and urlparse(u).hostname not in LOCAL_HOSTS
    ]
    assert not outside, f"requests left the machine: {outside}"
    assert pg.requests, "the request recorder saw nothing"


def select(pg: Any, label: str, option: str, *, prefix: bool = False) -> None:
    """Pick ``option`` (with ``prefix``: the option starting with it) in the Streamlit select box
    labelled ``label``: type it, click the listed option, and check the box shows it.

    Pressing Enter right after typing picks whatever the list highlights *then*; on a loaded
    machine the list has not filtered yet and another option is taken. So the option itself is
    clicked once listed, and the choice is retried until the box shows it (a rerun may replace
    the box meanwhile).
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    deadline = time.monotonic() + UI_TIMEOUT_MS / 1000
    box = pg.get_by_role("combobox", name=label, exact=True).first
    while True:
        idle(pg)
        value = box.input_value()
        if value == option or (prefix and value.startswith(option)):
            return
        assert time.monotonic() < deadline, f"{label}: {value!r} instead of {option!r}"
        box.click()
        box.fill(option)
        text = re.compile(r"^\s*" + re.escape(option) + ("" if prefix else r"\s*$"))
        choice = pg.get_by_role("option").filter(has_text=text).first
        try:
            choice.wait_for(timeout=15_000)
            choice.click()
        except PlaywrightTimeout:
            box.press("Escape")


def open_app(pg: Any, server: str) -> None:
    """Load the app and wait for its first page ("Start here")."""
    pg.goto(server)
    pg.get_by_role("heading", name="Start here").wait_for()


def idle(pg: Any) -> None:
    """Wait until Streamlit has finished rerunning the script."""
    pg.wait_for_timeout(300)
    pg.locator('[data-testid="stStatusWidget"]').wait_for(state="hidden", timeout=UI_TIMEOUT_MS)


def box(locator: Any, timeout_ms: int = UI_TIMEOUT_MS) -> dict[str, float]:
    """The bounding box of ``locator`` once it is visible.

    A rerun may remount an element (a data editor whose columns changed): for a moment it is
    attached but not laid out, and Playwright's ``bounding_box()`` returns None. Wait for it to be
    visible, then read the box, retrying while the element is between two renders.
    """
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        locator.wait_for(state="visible", timeout=timeout_ms)
        found = locator.bounding_box()
        if found is not None:
            return dict(found)
        if time.monotonic() > deadline:
            raise AssertionError(f"{locator} stayed without a bounding box for {timeout_ms} ms")
        time.sleep(0.1)


def goto(pg: Any, title: str, heading: str) -> None:
    """Open a page from the sidebar navigation and wait for its heading."""
    pg.locator('[data-testid="stSidebarNav"]').get_by_text(title, exact=True).click()
    pg.get_by_role("heading", name=heading, exact=True).first.wait_for()
    idle(pg)


def wait_for_job(at: Any, timeout_s: float = 150) -> None:
    """AppTest: rerun until the run job in session state has finished (or fail after
    ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while at.session_state["run_job"] is not None:
        assert time.monotonic() < deadline, "the run did not finish in time"
        time.sleep(0.5)
        at.run()
