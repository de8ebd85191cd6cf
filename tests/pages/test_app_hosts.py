"""The local app answers only loopback Host names and the names the user configures.

A real ``phexplore app`` server (a child process, on a free loopback port, with ``--allow-host
myhost.example``) is sent requests whose ``Host`` and ``Origin`` headers are forged as a page using
DNS rebinding would send them (``evil.example:PORT`` for both): plain HTTP and the WebSocket
handshake of Streamlit's ``/_stcore/stream`` are refused, while 127.0.0.1, localhost, [::1] and the
configured name are served (docs/reliability.md, "The local app").
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.core.errors import ValidationError
from phexplore.app.hosts import check_host_name
from phexplore.cli import main

ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 120


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(port: int, host: str, path: str = "/") -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest("GET", path, skip_host=True)
        conn.putheader("Host", host)
        conn.endheaders()
        return conn.getresponse().status
    finally:
        conn.close()


def _websocket(port: int, host: str, origin: str) -> str:
    """The status line the server answers a WebSocket handshake for ``/_stcore/stream`` with."""
    key = base64.b64encode(os.urandom(16)).decode()
    request = (
        f"GET /_stcore/stream HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        f"Origin: {origin}\r\nSec-WebSocket-Protocol: streamlit\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request.encode())
        return sock.recv(256).split(b"\r\n")[0].decode()


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """``phexplore app --allow-host myhost.example`` on a free port; its process group is always
    terminated."""
    number = _free_port()
    log = (tmp_path_factory.mktemp("app-hosts") / "server.log").open("w")
    code = "import sys; from phexplore.cli import main; sys.exit(main(sys.argv[1:]))"
    argv = ["app", "--port", str(number), "--allow-host", "myhost.example"]
    env = {k: v for k, v in os.environ.items() if k != "PHEXPLORE_ALLOWED_HOSTS"}
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *argv],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            assert proc.poll() is None, f"the app exited early; see {log.name}"
            with contextlib.suppress(OSError):
                if _get(number, f"127.0.0.1:{number}", "/_stcore/health") == 200:
                    break
            assert time.monotonic() < deadline, f"the app did not start; see {log.name}"
            time.sleep(0.5)
        yield number
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        log.close()


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost", "[::1]", "myhost.example"])
def test_loopback_and_configured_names_are_served(port: int, name: str) -> None:
    host = f"{name}:{port}"
    assert _get(port, host) == 200
    assert _get(port, host, "/_stcore/health") == 200
    assert _websocket(port, host, f"http://{host}").startswith("HTTP/1.1 101")


@pytest.mark.parametrize("name", ["evil.example", "127.0.0.1.evil.example", "localhost.evil"])
def test_a_rebound_host_name_is_refused_for_http_and_websocket(port: int, name: str) -> None:
    host = f"{name}:{port}"
    assert _get(port, host) == 400
    assert _get(port, host, "/_stcore/health") == 400
    assert _websocket(port, host, f"http://{host}").startswith("HTTP/1.1 400")


def test_allow_host_takes_host_names_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["app", "--allow-host", "http://myhost:8501", "--print-command"]) == 1
    assert "not a host name" in capsys.readouterr().err
    assert main(["app", "--allow-host", "MyHost.Example.", "--print-command"]) == 0
    out = capsys.readouterr().out
    assert "myhost.example" in out and "serve.py" in out
    with pytest.raises(ValidationError):
        check_host_name("*")
