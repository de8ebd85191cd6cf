"""The Spark backend fails in words, fast, and when told to (docs/spark.md, docs/reliability.md).

* ``--spark-remote`` to an address where nothing listens is refused in seconds, naming it (pyspark
  alone retries for about ten minutes);
* a Spark Connect address that accepts connections but never answers: SIGTERM ends the waiting run
  at once (exit 143), and without a signal the run is refused with a message;
* a damaged Spark checkpoint (truncated, or with results that are not the ones written) is
  computed again and rewritten — same numbers — never "an unexpected internal error (ArrowInvalid …)".

The Connect runs are the real CLI in a child process (a Connect client switches its whole process
into Connect mode, which the tests' classic session must not see); the checkpoint runs use the
tests' one ``local[2]`` session in this process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from phexplore.cli import main

ROOT = Path(__file__).resolve().parents[3]
CEF = ROOT / "tests" / "fixtures" / "phsafe_official" / "e2e_test1"
CODE = "import sys; from phexplore.cli import main; sys.exit(main(sys.argv[1:]))"


def _connect_run(remote: str, out: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "SPARK_CONNECT_MODE_ENABLED"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    argv = ["run", "phsafe", "--data", str(CEF), "--seed", "1", "--out", str(out)]
    return subprocess.Popen(
        [sys.executable, "-c", CODE, *argv, "--backend", "spark", "--spark-remote", remote],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _needs_connect_client() -> None:
    from engine.spark.session import spark_unavailable_reason

    reason = spark_unavailable_reason(remote=True)
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"Spark tests cannot run under CI: {reason}")
        pytest.skip(reason)


@contextlib.contextmanager
def _silent_listener() -> Iterator[int]:
    """A TCP port that accepts connections and never says a word (not a Spark Connect server)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    server.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(server.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()


@pytest.mark.spark
def test_a_connect_address_where_nothing_listens_is_refused_in_seconds(tmp_path: Path) -> None:
    _needs_connect_client()
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    proc = _connect_run(f"sc://127.0.0.1:{port}", tmp_path / "out")
    try:
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err[-2000:]
    assert f"nothing answers at 127.0.0.1:{port}" in err and "Traceback" not in err
    assert time.monotonic() - started < 60
    assert not (tmp_path / "out").exists()


@pytest.mark.spark
def test_sigterm_ends_a_run_waiting_for_a_silent_connect_server(tmp_path: Path) -> None:
    _needs_connect_client()
    with _silent_listener() as port:
        proc = _connect_run(f"sc://127.0.0.1:{port}", tmp_path / "out")
        try:
            time.sleep(8)  # imports, then the wait for the server's first answer
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            proc.send_signal(signal.SIGTERM)
            sent = time.monotonic()
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert time.monotonic() - sent < 15
    assert proc.returncode == 143, err[-2000:]
    assert "terminated" in err and not (tmp_path / "out").exists()


@pytest.mark.spark
def test_a_silent_connect_server_is_refused_with_a_message(tmp_path: Path) -> None:
    _needs_connect_client()
    with _silent_listener() as port:
        proc = _connect_run(f"sc://127.0.0.1:{port}", tmp_path / "out")
        try:
            _, err = proc.communicate(timeout=150)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 1, err[-2000:]
    assert f"--spark-remote sc://127.0.0.1:{port}" in err and "Spark Connect" in err
    assert "internal error" not in err and "Traceback" not in err


def _damage(checkpoints: list[Path]) -> None:
    """Truncate the first checkpoint; give the second other results under its old metadata."""
    first, second = checkpoints[:2]
    first.write_bytes(first.read_bytes()[: first.stat().st_size // 2])
    table = pq.read_table(second)
    results = table.column("result").to_pylist()
    results[0] = pickle.dumps("not the result that was computed")
    altered = table.set_column(
        table.schema.get_field_index("result"),
        table.schema.field("result"),
        pa.array(results, type=table.schema.field("result").type),
    )
    pq.write_table(altered, second)


@pytest.mark.spark
def test_a_damaged_checkpoint_is_computed_again(
    spark, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    args = ["run", "topdown", "--data", "ri2010", "--preset", "ri2010-production-like"]
    args += ["--filter", "County=44001", "--seed", "3", "--quiet"]
    spark_args = ["--backend", "spark", "--spark-master", "local[2]"]
    checkpoint = tmp_path / "checkpoint"
    spark_args += ["--spark-checkpoint", str(checkpoint)]
    assert main([*args, *spark_args, "--out", str(tmp_path / "first")]) == 0
    files = sorted(checkpoint.glob("*.parquet"))
    assert len(files) >= 2
    _damage(files)
    with caplog.at_level(logging.WARNING, logger="engine.spark.executor"):
        assert main([*args, *spark_args, "--out", str(tmp_path / "again")]) == 0
    damaged = [r.getMessage() for r in caplog.records if "is damaged" in r.getMessage()]
    assert len(damaged) == 2 and all("computing its units again" in m for m in damaged)
    assert str(files[0]) in " ".join(damaged) and str(files[1]) in " ".join(damaged)
    for name in ("estimates.csv", "measurements.csv", "microdata.csv"):
        assert (tmp_path / "again" / name).read_bytes() == (tmp_path / "first" / name).read_bytes()
    for path in files[:2]:  # rewritten whole
        assert pq.read_table(path).num_rows > 0
