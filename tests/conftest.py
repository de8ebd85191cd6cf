"""Shared pytest fixtures: the Debian chromium that the real-browser tests drive through Playwright.

Never downloads a browser. Outside CI a missing /usr/bin/chromium skips the browser tests; under CI
(``CI`` set, as in ``.ci/run``) it fails them, because ``make test`` installs chromium first.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
SCREENSHOTS = Path(__file__).resolve().parents[1] / "test-output" / "screenshots"


@pytest.fixture(scope="session")
def chromium_launch() -> dict[str, Any]:
    """Keyword arguments for ``playwright.chromium.launch`` (skips or fails if chromium is absent)."""
    if not CHROMIUM.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing under CI; `make test` installs Debian's chromium")
        pytest.skip(f"{CHROMIUM} not installed (run `make browser`); skipped outside CI")
    pytest.importorskip("playwright.sync_api")
    return {"executable_path": str(CHROMIUM), "args": list(CHROMIUM_ARGS), "headless": True}


@pytest.fixture(scope="session")
def screenshots_dir() -> Path:
    """Where browser tests save their screenshots (git-ignored)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
