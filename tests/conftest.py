"""Shared pytest fixtures: the Debian chromium that the real-browser tests drive through Playwright,
the one local Spark session that every Spark test shares, and one real local Spark Connect server.

Never downloads a browser. Outside CI a missing /usr/bin/chromium skips the browser tests; under CI
(``CI`` set, as in ``.ci/run``) it fails them, because ``make test`` installs chromium first. The
Spark tests are treated alike: without pyspark or Java 17+ they skip outside CI and fail under CI
(``make test`` installs the dev extra, which has pyspark, and Debian's openjdk-17-jre-headless).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKSPACE_ENV = "PHEXPLORE_WORKSPACE"
# No test may write into the user's real data directory: the app and the CLI default to a
# workspace there. Every test gets its own folder (the fixture below); this is the fallback for
# anything started before a test's fixtures (and for subprocesses of session fixtures).
os.environ[WORKSPACE_ENV] = tempfile.mkdtemp(prefix="phexplore-test-workspace-")
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
SPARK_FIXTURES = frozenset({"spark", "spark_connect"})


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep tests that must share a process on one pytest-xdist worker (``--dist loadgroup``).

    ``make test`` runs the suite on two workers. The Spark session and the Spark Connect server
    are session fixtures, so tests spread over both workers would start each twice (two JVMs on a
    2-core machine): tests marked ``spark`` or asking for either fixture share the group "spark".
    A real-browser module drives one app server and one page through a story (a run, then its
    results, then its replay), so it must stay whole and in order on one worker; all browser tests
    share the group "browser", so one app server and one chromium run at a time (two of each on a
    2-core machine made their timeouts flaky).

    ``tryfirst``: pytest-xdist's worker reads the ``xdist_group`` marks in its own
    ``pytest_collection_modifyitems``, so the marks must be added before it runs; ``tryfirst``
    says so whatever order the plugins were registered in.
    """
    for item in items:
        uses = set(getattr(item, "fixturenames", ()))
        if item.get_closest_marker("spark") or uses & SPARK_FIXTURES:
            item.add_marker(pytest.mark.xdist_group("spark"))
        elif item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.xdist_group("browser"))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """On a pytest-xdist worker under ``--dist loadgroup``, fail a test marked with an
    ``xdist_group`` that did not get its group: xdist tells groups apart only by the ``@group``
    suffix it writes into the node id, and with pytest 9.2 that write is silently lost
    (pytest-dev/pytest-xdist#1386). The browser modules then split over two workers (a run on one
    app server, its results looked for on another) and fail in ways that point nowhere near the
    cause."""
    config = item.config
    if not hasattr(config, "workerinput") or not config.getvalue("loadgroup"):
        return
    if item.get_closest_marker("xdist_group") and "@" not in item.nodeid:
        pytest.fail(
            f"pytest-xdist did not put {item.nodeid} in its group: this pytest release breaks "
            "--dist loadgroup (pytest-dev/pytest-xdist#1386). Install the versions "
            "pyproject.toml's dev extra allows (pytest<9.2): make test does.",
            pytrace=False,
        )


@pytest.fixture(autouse=True)
def _restore_main_module() -> Iterator[None]:
    """Put back ``sys.modules["__main__"]`` after each test: Streamlit's AppTest leaves its
    temporary script there, and a process pool started later (``--workers 2``) re-runs that
    script in its spawned workers, which then die (BrokenProcessPool)."""
    main = sys.modules.get("__main__")
    yield
    if main is not None:
        sys.modules["__main__"] = main


@pytest.fixture(autouse=True)
def workspace_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A fresh, empty workspace folder for the test's app and CLI ($PHEXPLORE_WORKSPACE)."""
    folder = tmp_path_factory.mktemp("workspace") / "ws"
    monkeypatch.setenv(WORKSPACE_ENV, str(folder))
    return folder


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


CONNECT_START_S = 180.0
"""Longest wait for the Spark Connect server to listen (≈ 5 s on an idle 2-core machine)."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def spark_connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The address (``sc://127.0.0.1:PORT``) of a real Spark Connect server for the whole test run.

    Started as its own process with pyspark's ``spark-submit`` and the Connect server class that
    pyspark 4 ships (``org.apache.spark.sql.connect.service.SparkConnectServer``), in
    ``local[2]``, bound to 127.0.0.1 on a free port; its Python workers run this interpreter with
    this checkout first on the path. Clients should run in a child process: a Connect client
    switches the whole Python process into Connect mode (pyspark sets
    ``SPARK_CONNECT_MODE_ENABLED``), which the classic session of the other tests must not see.
    Skips outside CI and fails under CI without pyspark or Java 17+, like :func:`spark`.
    """
    from engine.spark.session import spark_unavailable_reason

    reason = spark_unavailable_reason() or spark_unavailable_reason(remote=True)
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(
                f"Spark Connect tests cannot run under CI: {reason}; `make test` installs both"
            )
        pytest.skip(f"Spark Connect tests skipped outside CI: {reason}")
    import pyspark

    submit = Path(pyspark.__file__).resolve().parent / "bin" / "spark-submit"
    port = _free_port()
    workdir = tmp_path_factory.mktemp("spark-connect")
    log_path = workdir / "server.log"
    env = dict(os.environ)
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    command = [
        str(submit),
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--master",
        "local[2]",
        "--name",
        "phexplore-tests-connect",
    ]
    for key, value in {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.session.timeZone": "UTC",
    }.items():
        command += ["--conf", f"{key}={value}"]
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            command,
            cwd=workdir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + CONNECT_START_S
        while "Spark Connect server started" not in log_path.read_text(errors="replace"):
            if server.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace")[-2000:]
                pytest.fail(f"the Spark Connect server did not start (log tail):\n{tail}")
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)
