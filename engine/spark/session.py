"""Getting a Spark session for the Spark backend: a master URL or a Spark Connect address
(docs/spark.md; docs/science.md §8).

Both production systems run on Apache Spark (docs/spark.md, "How the production systems distribute
work"). The backend uses the DataFrame API only (``mapInArrow``, ``groupBy``, joins, Parquet), so
the same code runs on a classic session (``--spark-master local[2]``, ``spark://host:7077``,
``yarn``, ``k8s://…``) and over Spark Connect (``--spark-remote sc://host:15002``), which has no
RDD or SparkContext API.

pyspark is an optional dependency (``pip install 'phexplore[spark]'``); Spark 4 needs a Java 17+
runtime on the driver for a classic session. :func:`spark_unavailable_reason` says in one sentence
what is missing and how to fix it, so the CLI and the app can refuse with a clear message instead
of a Py4J traceback.

Driver memory: the driver's JVM heap (``spark.driver.memory``) is fixed when its JVM starts, so it
must be set before the first session of the process. :func:`get_session` sets it from
``driver_memory`` (``--spark-driver-memory``), else from the environment variable
:data:`DRIVER_MEMORY_ENV`, else — for local masters only, whose driver JVM also runs the executors —
to :func:`default_local_driver_memory` (a quarter of this machine's memory, 1–8 GiB) instead of
Spark's 1 GB. Valid sizes: :data:`MIN_DRIVER_MEMORY_MIB` MiB to 1 TiB, written as a JVM size with a
unit (``512m``, ``6g``). A Spark Connect server's driver is configured on the server.

A Spark Connect address is checked before any work (:func:`connect_session`): a TCP connection
within :data:`CONNECT_TIMEOUT_S` seconds (``$PHEXPLORE_SPARK_CONNECT_TIMEOUT``), then a first
request answered within :data:`HANDSHAKE_TIMEOUT_S` with few retries — so an address where nothing
listens is refused in seconds with a message naming it, not after pyspark's ten minutes of retries,
and Ctrl-C or SIGTERM end the wait at once (it runs in a thread the main thread polls). A session
that never answered is closed without the "release session" request pyspark would otherwise retry
at exit (:func:`fail_fast`), so the process ends when told to.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine.core.errors import PHExploreError, ValidationError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import SparkSession

MIN_JAVA = 17
"""Spark 4 runs on Java 17 or later."""
DEFAULT_SHUFFLE_PARTITIONS = 8
"""``spark.sql.shuffle.partitions`` for local masters: Spark's 200 makes tiny tasks on a laptop."""
DRIVER_MEMORY_ENV = "PHEXPLORE_SPARK_DRIVER_MEMORY"
"""Environment variable giving the driver's JVM heap (e.g. ``8g``) when no option does."""
MIN_DRIVER_MEMORY_MIB = 512
MAX_DRIVER_MEMORY_MIB = 1 << 20
"""Valid driver memory: 512 MiB to 1 TiB."""
_UNIT_MIB = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1 << 20}
_SIZE = re.compile(r"^(\d+)\s*([kmgt])b?$", re.IGNORECASE)
_LOCAL_MASTER = re.compile(r"^local(\[(\d+|\*)(,\s*\d+)?\])?$")
_MASTER = re.compile(r"^(local(\[(\d+|\*)(,\s*\d+)?\])?|spark://\S+|yarn|k8s://\S+|mesos://\S+)$")
_REMOTE = re.compile(r"^sc://(?P<host>[^\s/:]+)(:(?P<port>\d{1,5}))?(/;?\S*)?$")
CONNECT_PORT = 15002
"""The Spark Connect server's default port (an ``sc://HOST`` address without one)."""
CONNECT_TIMEOUT_S = 10.0
"""Seconds to wait for a TCP connection to a Spark Connect address before refusing it."""
CONNECT_TIMEOUT_ENV = "PHEXPLORE_SPARK_CONNECT_TIMEOUT"
"""Environment variable overriding :data:`CONNECT_TIMEOUT_S` (seconds, 0.1 – 600)."""
HANDSHAKE_TIMEOUT_S = 60.0
"""Seconds for the Connect server's answer to the first request (setting the session's options)."""
POLL_S = 0.2


class SparkUnavailable(PHExploreError):
    """The Spark backend cannot run here (pyspark or Java missing); the message says how to fix it."""


def pyspark_installed() -> bool:
    """True when the ``pyspark`` package can be imported."""
    return importlib.util.find_spec("pyspark") is not None


def java_major_version() -> int | None:
    """The major version of the ``java`` on PATH (or under ``JAVA_HOME``), None when there is none."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        return None
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def spark_unavailable_reason(*, remote: bool = False) -> str | None:
    """Why a Spark session cannot be started here, or None when it can.

    A Spark Connect client (``remote=True``) needs no local Java: the server runs it."""
    if not pyspark_installed():
        return "pyspark is not installed; install the Spark backend with pip install 'phexplore[spark]'"
    if remote:
        if importlib.util.find_spec("grpc") is None:
            return (
                "the Spark Connect client needs grpcio; install it with "
                "pip install 'phexplore[spark]' (pyspark[connect])"
            )
        return None
    major = java_major_version()
    if major is None:
        return (
            f"no Java runtime found (Spark 4 needs Java {MIN_JAVA}+); on Debian/Ubuntu: "
            "apt-get install openjdk-17-jre-headless, or set JAVA_HOME"
        )
    if major < MIN_JAVA:
        return (
            f"Java {major} found but Spark 4 needs Java {MIN_JAVA}+; install "
            "openjdk-17-jre-headless (or newer) and put it first on PATH or in JAVA_HOME"
        )
    return None


def check_master(master: str) -> str:
    """``master`` if it is a Spark master URL we accept, else a ValidationError naming the forms."""
    text = str(master).strip()
    if not _MASTER.match(text):
        raise ValidationError(
            f"--spark-master {master!r} is not a Spark master URL; use local[N] (N ≥ 1 or *), "
            "spark://HOST:PORT, yarn or k8s://https://HOST:PORT"
        )
    return text


def check_remote(remote: str) -> str:
    """``remote`` if it is a Spark Connect address (``sc://host[:port]``), else a ValidationError."""
    text = str(remote).strip()
    if not _REMOTE.match(text):
        raise ValidationError(
            f"--spark-remote {remote!r} is not a Spark Connect address; use sc://HOST:PORT "
            "(the Connect server's default port is 15002)"
        )
    return text


def check_driver_memory(size: object, *, what: str = "--spark-driver-memory") -> str:
    """``size`` as a JVM memory size (``4g``, ``6144m``) between :data:`MIN_DRIVER_MEMORY_MIB` MiB
    and 1 TiB, else a ValidationError naming ``what`` and the valid forms."""
    text = str(size).strip()
    match = _SIZE.match(text)
    if match is None:
        raise ValidationError(
            f"{what} {size!r} is not a memory size; write a whole number with a unit k, m, g or t "
            "(e.g. 4g or 6144m), from 512m to 1t"
        )
    mib = int(match.group(1)) * _UNIT_MIB[match.group(2).lower()]
    if not MIN_DRIVER_MEMORY_MIB <= mib <= MAX_DRIVER_MEMORY_MIB:
        raise ValidationError(f"{what} {size!r} is out of range; give 512m to 1t (e.g. 4g)")
    return f"{match.group(1)}{match.group(2).lower()}"


def connect_timeout() -> float:
    """:data:`CONNECT_TIMEOUT_S`, or ``$PHEXPLORE_SPARK_CONNECT_TIMEOUT`` when set (0.1 – 600 s)."""
    raw = os.environ.get(CONNECT_TIMEOUT_ENV, "").strip()
    if not raw:
        return CONNECT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.1 <= value <= 600:
        raise ValidationError(
            f"{CONNECT_TIMEOUT_ENV}={raw!r} is not valid; give seconds from 0.1 to 600, or unset it"
        )
    return value


def probe_remote(remote: str, timeout: float | None = None) -> None:
    """Refuse a Spark Connect address where nothing accepts a TCP connection within ``timeout``
    seconds (default :func:`connect_timeout`), naming the address and why."""
    match = _REMOTE.match(check_remote(remote))
    assert match is not None  # check_remote refused anything else
    host, port = match.group("host"), int(match.group("port") or CONNECT_PORT)
    seconds = connect_timeout() if timeout is None else timeout
    try:
        with socket.create_connection((host, port), timeout=seconds):
            return
    except TimeoutError:
        reason = f"no answer within {seconds:g} s"
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
    raise SparkUnavailable(
        f"--spark-remote {remote}: nothing answers at {host}:{port} ({reason}); start the Spark "
        "Connect server there (e.g. $SPARK_HOME/sbin/start-connect-server.sh) or check the "
        f"address and port (default {CONNECT_PORT}); {CONNECT_TIMEOUT_ENV} sets the wait"
    )


def fail_fast(session: Any) -> None:
    """Make a Spark Connect session's further requests give up after a few short retries (not
    pyspark's ten minutes): for cancelling and closing when a run is interrupted or failed. No-op
    for a classic session."""
    client = getattr(session, "client", None)
    if client is None or not hasattr(client, "set_retry_policies"):
        return
    from pyspark.sql.connect.client.retries import DefaultPolicy

    client.set_retry_policies(
        [DefaultPolicy(max_retries=2, initial_backoff=100, max_backoff=1000, jitter=0)]
    )


def _close_unanswered(session: Any) -> None:
    """Close a Connect session whose server never answered, without the release request."""
    fail_fast(session)
    session.release_session_on_close = False
    with contextlib.suppress(Exception):  # best effort: the channel is closed either way
        session.stop()


def _rpc_reason(error: BaseException) -> str:
    """The status and details of a gRPC error (``UNAVAILABLE: failed to connect …``), else its
    first line."""
    text = str(error)
    status = re.search(r"status = StatusCode\.(\w+)", text)
    details = re.search(r'details = "([^"]*)"', text)
    if status or details:
        return ": ".join(m.group(1) for m in (status, details) if m)
    lines = text.strip().splitlines()
    return lines[0] if lines else type(error).__name__


def connect_session(remote: str, settings: Mapping[str, str]) -> SparkSession:
    """A Spark Connect session on ``remote`` with ``settings`` applied, or :class:`SparkUnavailable`
    in seconds when the address does not answer (module docstring). Waits in a thread the calling
    thread polls every :data:`POLL_S` s, so an interrupt ends the wait at once."""
    from pyspark.sql import SparkSession

    probe_remote(remote)
    session = SparkSession.builder.remote(check_remote(remote)).getOrCreate()  # no request yet
    client = session.client
    patient = client.get_retry_policies()
    fail_fast(session)
    outcome: dict[str, BaseException] = {}

    def first_request() -> None:
        try:
            for key, value in settings.items():
                session.conf.set(key, value)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
            outcome["error"] = exc

    worker = threading.Thread(target=first_request, name="phexplore-connect", daemon=True)
    worker.start()
    try:
        deadline = HANDSHAKE_TIMEOUT_S
        while worker.is_alive() and deadline > 0:
            worker.join(POLL_S)
            deadline -= POLL_S
        if worker.is_alive():
            raise SparkUnavailable(
                f"--spark-remote {remote}: something accepts connections there but gave no "
                f"Spark Connect answer within {HANDSHAKE_TIMEOUT_S:g} s; is it a Spark Connect "
                "server (4.x)?"
            )
        if "error" in outcome:
            raise SparkUnavailable(
                f"--spark-remote {remote}: no Spark Connect session could be opened there "
                f"({_rpc_reason(outcome['error'])}); is a Spark Connect server (4.x) listening "
                "at that address?"
            )
    except BaseException:
        _close_unanswered(session)
        raise
    client.set_retry_policies(patient)
    return session


def default_local_driver_memory() -> str:
    """The driver heap for a local master: a quarter of this machine's physical memory, at least
    1 GiB and at most 8 GiB (e.g. ``6144m`` on 24 GiB). A heap limit only reserves address space;
    the JVM grows to it when it needs to."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not POSIX: Spark's own 1 GB plus a margin
        total = 8 << 30
    mib = min(max(total // 4 >> 20, 1024), 8192)
    return f"{mib}m"


def driver_memory_setting(
    master: str | None, remote: str | None, driver_memory: str | None = None
) -> str | None:
    """The ``spark.driver.memory`` a new session gets: ``driver_memory``, else the environment's
    :data:`DRIVER_MEMORY_ENV`, else :func:`default_local_driver_memory` for a local master; None
    (Spark's own setting) for a cluster master without either, and always over Spark Connect."""
    if remote is not None:
        if driver_memory:
            raise ValidationError(
                "--spark-driver-memory applies to --spark-master only; a Spark Connect server's "
                "driver memory is set where the server starts (spark.driver.memory)"
            )
        return None
    if driver_memory:
        return check_driver_memory(driver_memory)
    env = os.environ.get(DRIVER_MEMORY_ENV, "").strip()
    if env:
        return check_driver_memory(env, what=DRIVER_MEMORY_ENV)
    if master is not None and is_local_master(master):
        return default_local_driver_memory()
    return None


def is_local_master(master: str) -> bool:
    """True for ``local``, ``local[N]`` and ``local[*]`` (driver and executors on this machine)."""
    return bool(_LOCAL_MASTER.match(master.strip()))


def get_session(
    master: str | None = None,
    remote: str | None = None,
    *,
    app_name: str = "phexplore",
    ui: bool = True,
    shuffle_partitions: int | None = None,
    conf: Mapping[str, str] | None = None,
    driver_memory: str | None = None,
) -> SparkSession:
    """A Spark session on ``master`` (classic) or ``remote`` (Spark Connect); exactly one is given.

    An existing active session with the same master is reused (Spark allows one per process).
    Local masters bind to 127.0.0.1, run the Python workers with this interpreter (``PYSPARK_PYTHON``
    unless already set, so the installed PHExplore is importable on the executors) and default to
    :data:`DEFAULT_SHUFFLE_PARTITIONS` shuffle partitions. Arrow is switched on for every session.
    A classic session's driver heap is :func:`driver_memory_setting` (it takes effect only when
    this call starts the process's JVM; an already running one keeps its heap).
    """
    if (master is None) == (remote is None):
        raise ValidationError("give exactly one of --spark-master URL or --spark-remote sc://…")
    reason = spark_unavailable_reason(remote=remote is not None)
    if reason is not None:
        raise SparkUnavailable(reason)
    memory = driver_memory_setting(master, remote, driver_memory)
    # optional dependency (the spark extra): imported where Spark runs
    from pyspark.sql import SparkSession

    settings: dict[str, Any] = {
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
    }
    if remote is not None:
        return connect_session(remote, settings | dict(conf or {}))
    master = check_master(master or "")
    builder = SparkSession.builder.master(master).appName(app_name)
    settings["spark.ui.enabled"] = "true" if ui else "false"
    settings["spark.ui.showConsoleProgress"] = "false"
    if memory is not None:
        settings["spark.driver.memory"] = memory
    if is_local_master(master):
        # PySpark starts local Python workers with $PYSPARK_PYTHON (default python3), not the
        # interpreter running PHExplore; point it here so the workers import the same install.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        settings |= {
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.sql.shuffle.partitions": str(shuffle_partitions or DEFAULT_SHUFFLE_PARTITIONS),
        }
    elif shuffle_partitions is not None:
        settings["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    settings |= dict(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
