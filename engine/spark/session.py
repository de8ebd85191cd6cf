"""Getting a Spark session for the Spark backend: a master URL or a Spark Connect address (SPEC §8).

Both production systems run on Apache Spark (SCALE-NOTES, "How the production systems distribute
work"). The backend uses the DataFrame API only (``mapInArrow``, ``groupBy``, joins, Parquet), so
the same code runs on a classic session (``--spark-master local[2]``, ``spark://host:7077``,
``yarn``, ``k8s://…``) and over Spark Connect (``--spark-remote sc://host:15002``), which has no
RDD or SparkContext API.

pyspark is an optional dependency (``pip install 'phexplore[spark]'``); Spark 4 needs a Java 17+
runtime on the driver for a classic session. :func:`spark_unavailable_reason` says in one sentence
what is missing and how to fix it, so the CLI and the app can refuse with a clear message instead
of a Py4J traceback.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from phexplore.errors import PHExploreError, ValidationError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import SparkSession

MIN_JAVA = 17
"""Spark 4 runs on Java 17 or later."""
DEFAULT_SHUFFLE_PARTITIONS = 8
"""``spark.sql.shuffle.partitions`` for local masters: Spark's 200 makes tiny tasks on a laptop."""
_LOCAL_MASTER = re.compile(r"^local(\[(\d+|\*)(,\s*\d+)?\])?$")
_MASTER = re.compile(r"^(local(\[(\d+|\*)(,\s*\d+)?\])?|spark://\S+|yarn|k8s://\S+|mesos://\S+)$")
_REMOTE = re.compile(r"^sc://[^\s/:]+(:\d{1,5})?(/;?\S*)?$")


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
) -> SparkSession:
    """A Spark session on ``master`` (classic) or ``remote`` (Spark Connect); exactly one is given.

    An existing active session with the same master is reused (Spark allows one per process).
    Local masters bind to 127.0.0.1, run the Python workers with this interpreter (``PYSPARK_PYTHON``
    unless already set, so the installed PHExplore is importable on the executors) and default to
    :data:`DEFAULT_SHUFFLE_PARTITIONS` shuffle partitions. Arrow is switched on for every session.
    """
    if (master is None) == (remote is None):
        raise ValidationError("give exactly one of --spark-master URL or --spark-remote sc://…")
    reason = spark_unavailable_reason(remote=remote is not None)
    if reason is not None:
        raise SparkUnavailable(reason)
    from pyspark.sql import SparkSession

    settings: dict[str, Any] = {
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
    }
    if remote is not None:
        builder = SparkSession.builder.remote(check_remote(remote)).appName(app_name)
    else:
        master = check_master(master or "")
        builder = SparkSession.builder.master(master).appName(app_name)
        settings["spark.ui.enabled"] = "true" if ui else "false"
        settings["spark.ui.showConsoleProgress"] = "false"
        if is_local_master(master):
            # PySpark starts local Python workers with $PYSPARK_PYTHON (default python3), not the
            # interpreter running PHExplore; point it here so the workers import the same install.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            settings |= {
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1",
                "spark.sql.shuffle.partitions": str(
                    shuffle_partitions or DEFAULT_SHUFFLE_PARTITIONS
                ),
            }
        elif shuffle_partitions is not None:
            settings["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    settings |= dict(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
