"""Shared fixtures of the browser tests in tests/pages: one `phexplore app` server per module."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 90


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def server(
    chromium_launch: dict, screenshots_dir: Path, request: pytest.FixtureRequest
) -> Iterator[str]:
    """Start `phexplore app` on a free loopback port; always terminate its process group.

    One server per test module (module scope); its log is test-output/<module>-server.log.
    """
    port = _free_port()
    module = request.module.__name__.rsplit(".", 1)[-1]
    log_path = screenshots_dir.parent / f"{module}-server.log"
    log = log_path.open("w", encoding="utf-8")
    code = (
        f"import sys; from phexplore.cli import main; sys.exit(main(['app', '--port', '{port}']))"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
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
