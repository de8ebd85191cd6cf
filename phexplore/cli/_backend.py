"""``--backend local|spark``, ``--spark-master``, ``--spark-remote`` (and ``--spark-checkpoint``,
``--spark-driver-memory``): where a run runs (docs/science.md §8).

Shared by ``run topdown``, ``run phsafe``, ``run replay`` and ``experiment``; the choice goes into
the run description's ``backend`` and ``backend_options``
(:class:`~engine.runs.options.BackendOptions`) and never changes the numbers (docs/spark.md). Only
these options decide where a run runs: ``run replay`` never takes the backend of the file it
replays (docs/reliability.md "Replays").
"""

from __future__ import annotations

import argparse
from typing import Any

from engine.core.errors import ValidationError
from engine.runs.options import BackendOptions


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the backend options to ``parser``."""
    group = parser.add_argument_group("where it runs (the same numbers on every backend)")
    group.add_argument(
        "--backend",
        choices=("local", "spark"),
        default="local",
        help="local: this machine (default; --workers processes); spark: an Apache Spark cluster "
        "(pip install 'phexplore[spark]'; see docs/spark.md)",
    )
    group.add_argument(
        "--spark-master",
        default=None,
        metavar="URL",
        help="Spark master for --backend spark: local[N], local[*], spark://HOST:7077, yarn, "
        "k8s://https://HOST:PORT",
    )
    group.add_argument(
        "--spark-remote",
        default=None,
        metavar="sc://HOST:PORT",
        help="Spark Connect server for --backend spark (instead of --spark-master)",
    )
    group.add_argument(
        "--spark-checkpoint",
        default=None,
        metavar="DIR",
        help="folder for per-level Parquet checkpoints: rerunning the same command resumes after "
        "the last finished level (--backend spark)",
    )
    group.add_argument(
        "--spark-driver-memory",
        default=None,
        metavar="SIZE",
        help="driver JVM heap for --spark-master, 512m to 1t (e.g. 8g); default: "
        "$PHEXPLORE_SPARK_DRIVER_MEMORY, else for local[N] a quarter of this machine's memory "
        "(1-8 GiB), else Spark's own setting. Not for --spark-remote (set it on the server)",
    )


def backend_of(args: argparse.Namespace) -> tuple[str, Any]:
    """(backend, :class:`~engine.runs.options.BackendOptions`) from parsed arguments, with a clear
    error for a bad mix."""

    backend = getattr(args, "backend", "local") or "local"
    options = {
        "master": getattr(args, "spark_master", None),
        "remote": getattr(args, "spark_remote", None),
        "checkpoint": getattr(args, "spark_checkpoint", None),
        "driver_memory": getattr(args, "spark_driver_memory", None),
    }
    options = {k: v for k, v in options.items() if v}
    if backend != "spark":
        if options:
            flags = ", ".join(f"--spark-{k.replace('_', '-')}" for k in sorted(options))
            raise ValidationError(f"{flags} apply only with --backend spark")
        return backend, BackendOptions()
    if "master" in options and "remote" in options:
        raise ValidationError("give either --spark-master or --spark-remote, not both")
    if "master" not in options and "remote" not in options:
        raise ValidationError(
            "--backend spark needs --spark-master URL (e.g. local[2], spark://HOST:7077, yarn) "
            "or --spark-remote sc://HOST:15002"
        )
    # heavy (the Spark checks): imported when the command runs, so `--help` stays light
    from engine.spark.session import (
        check_driver_memory,
        check_master,
        check_remote,
        spark_unavailable_reason,
    )

    if "master" in options:
        options["master"] = check_master(options["master"])
    else:
        options["remote"] = check_remote(options["remote"])
    if "driver_memory" in options:
        if "remote" in options:
            raise ValidationError(
                "--spark-driver-memory applies to --spark-master only; a Spark Connect server's "
                "driver memory is set where the server starts (spark.driver.memory)"
            )
        options["driver_memory"] = check_driver_memory(options["driver_memory"])
    reason = spark_unavailable_reason(remote="remote" in options)
    if reason is not None:
        raise ValidationError(f"--backend spark cannot run here: {reason}")
    return backend, BackendOptions(**options)
