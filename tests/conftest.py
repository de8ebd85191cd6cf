"""Shared pytest fixtures: the Debian chromium that the real-browser tests drive through Playwright,
and the one local Spark session that every Spark test shares.

Never downloads a browser. Outside CI a missing /usr/bin/chromium skips the browser tests; under CI
(``CI`` set, as in ``.ci/run``) it fails them, because ``make test`` installs chromium first. The
Spark tests are treated alike: without pyspark or Java 17+ they skip outside CI and fail under CI
(``make test`` installs the dev extra, which has pyspark, and Debian's openjdk-17-jre-headless).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
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


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One ``local[2]`` Spark session for the whole test run (≈ 10 s to start; UI off, 127.0.0.1)."""
    from engine.spark.session import get_session, spark_unavailable_reason

    reason = spark_unavailable_reason()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"Spark tests cannot run under CI: {reason}; `make test` installs both")
        pytest.skip(f"Spark tests skipped outside CI: {reason}")
    session = get_session(
        "local[2]",
        app_name="phexplore-tests",
        ui=False,
        shuffle_partitions=2,
        conf={"spark.default.parallelism": "2", "spark.sql.adaptive.enabled": "true"},
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
