"""Where a stage's independent units of work run: in this process or in worker processes
(docs/science.md §8).

An engine cuts a stage into independent units — for TopDown a batch of parent families of one
geolevel (a :class:`~engine.topdown.family.FamilyBatch` of arrays, TDA §7: a task gets a batch of
families as arrays, not one family, docs/spark.md "Settings that matter"), for PHSafe one measured
table (PHS §3) — and hands them to an :class:`Executor` with a top-level function. The executor
decides where they run; the engine never does. Results come back in the order of the units whatever
order they finish in, and the noise is keyed by (seed, level, geounit, query)
(:mod:`engine.noise.keyed`), so every executor and every number of workers gives the same numbers.

* :class:`InProcessExecutor` — one after the other in the calling process (default; no pickling).
* :class:`ProcessExecutor` — a *spawn* process pool (a fork pool deadlocked after Clarabel had run in
  the parent). Units and the function must be picklable.

The Spark executor (:mod:`engine.spark.executor`) implements the same :class:`Executor` protocol:
``map`` over a sequence of picklable units, in order, with ``cancel`` polled and ``done`` called per
unit.

This module imports nothing from the engines, so every engine can take an executor as a parameter.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, TimeoutError
from typing import Any, Protocol, TypeVar, runtime_checkable

from engine.core.errors import RunCancelled, ValidationError
from engine.core.numbers import RANGES

U = TypeVar("U")
R = TypeVar("R")

BACKENDS: tuple[str, ...] = ("local", "processes", "spark")
"""Executor names a run description may hold (``local`` = in this process; ``spark`` = the Spark
backend, made by the run pipeline from the run's ``backend_options``, :mod:`engine.spark`)."""
SPARK_OPTIONS: tuple[str, ...] = ("master", "remote", "checkpoint", "driver_memory")
"""Keys of a Spark run's ``backend_options``: ``master`` (e.g. ``local[2]``, ``spark://…``,
``yarn``) or ``remote`` (``sc://…``, Spark Connect), an optional ``checkpoint`` folder and an
optional ``driver_memory`` (a JVM size, 512m–1t; classic sessions only)."""
MAX_WORKERS = int(RANGES["workers"].high or 256)
"""Upper bound on worker processes: the shared range of ``--workers`` (1–256, engine.core.strict_json)."""
POLL_S = 0.2
"""Seconds between two checks of ``cancel()`` while waiting for a worker."""


@runtime_checkable
class Executor(Protocol):
    """Runs independent units of work of one stage and returns their results in unit order."""

    name: str
    workers: int

    def map(
        self,
        fn: Callable[[Any], Any],
        units: Sequence[Any],
        *,
        cancel: Callable[[], bool] | None = None,
        done: Callable[[int, Any], None] | None = None,
    ) -> list[Any]:
        """``[fn(u) for u in units]``; ``done(i, result)`` after each unit, ``cancel()`` polled.

        ``units`` may build each unit when indexed (TopDown's ``LevelUnits``, so the driver never holds a whole level's units: docs/spark.md, "Driver memory"; building
        may raise): take them in order and drop them once sent rather than listing them all,
        where the executor can. Raises :class:`~engine.core.errors.RunCancelled` when ``cancel()``
        returns True (nothing of the stage is kept).
        """
        ...

    def close(self) -> None:
        """Release workers (idempotent)."""
        ...


class InProcessExecutor:
    """Every unit in the calling process, in order."""

    name = "local"
    workers = 1

    def map(
        self,
        fn: Callable[[U], R],
        units: Sequence[U],
        *,
        cancel: Callable[[], bool] | None = None,
        done: Callable[[int, R], None] | None = None,
    ) -> list[R]:
        out: list[R] = []
        for i, unit in enumerate(units):
            if cancel is not None and cancel():
                raise RunCancelled("cancelled")
            result = fn(unit)
            out.append(result)
            if done is not None:
                done(i, result)
        return out

    def close(self) -> None:
        return None

    def __enter__(self) -> InProcessExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ProcessExecutor:
    """Units in a spawn process pool of ``workers`` processes (started on first use)."""

    name = "processes"

    def __init__(self, workers: int) -> None:
        self.workers = check_workers(workers)
        self._pool: ProcessPoolExecutor | None = None

    def _get_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context("spawn")
            )
        return self._pool

    def map(
        self,
        fn: Callable[[U], R],
        units: Sequence[U],
        *,
        cancel: Callable[[], bool] | None = None,
        done: Callable[[int, R], None] | None = None,
    ) -> list[R]:
        if not units:
            return []
        if cancel is not None and cancel():
            raise RunCancelled("cancelled")
        # A lazy sequence's units are all built (and any error raised) before one is submitted;
        # the pool holds them all anyway.
        ready = list(units)
        pool = self._get_pool()
        futures: list[Future[R]] = [pool.submit(fn, u) for u in ready]
        del ready
        out: list[R] = []
        try:
            for i, fut in enumerate(futures):
                while True:
                    if cancel is not None and cancel():
                        raise RunCancelled("cancelled")
                    try:
                        result = fut.result(timeout=POLL_S)
                        break
                    except TimeoutError:
                        continue
                out.append(result)
                if done is not None:
                    done(i, result)
        except BaseException:
            for f in futures:
                f.cancel()
            raise
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> ProcessExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_backend_options(backend: str, options: Any) -> dict[str, str]:
    """``options`` as a plain dict, checked for ``backend``: a Spark run names exactly one of
    ``master`` or ``remote`` (plus an optional ``checkpoint`` folder); other backends take none."""
    if options is None:
        options = {}
    if not hasattr(options, "items"):
        raise ValidationError("backend_options must be a JSON object")
    out = {str(k): str(v) for k, v in options.items() if v not in (None, "")}
    if backend != "spark":
        if out:
            raise ValidationError(
                f"backend_options ({', '.join(sorted(out))}) apply only to --backend spark"
            )
        return out
    unknown = sorted(set(out) - set(SPARK_OPTIONS))
    if unknown:
        raise ValidationError(
            f"unknown Spark backend option(s) {', '.join(unknown)}; known: {', '.join(SPARK_OPTIONS)}"
        )
    if ("master" in out) == ("remote" in out):
        raise ValidationError(
            "--backend spark needs exactly one of --spark-master URL (e.g. local[2], "
            "spark://HOST:7077, yarn) or --spark-remote sc://HOST:15002"
        )
    return out


def check_workers(workers: object) -> int:
    """``workers`` as an int in 1–:data:`MAX_WORKERS`, else a ValidationError saying so."""
    if (
        isinstance(workers, bool)
        or not isinstance(workers, int)
        or not (1 <= workers <= MAX_WORKERS)
    ):
        raise ValidationError(
            f"workers must be a whole number from 1 to {MAX_WORKERS}; got {workers!r}"
        )
    return int(workers)


def make_executor(backend: str = "local", workers: int = 1) -> InProcessExecutor | ProcessExecutor:
    """The executor named by a run description: ``local`` (in process) or ``processes``.

    ``local`` with ``workers > 1`` means a process pool, as ``--workers N`` always has.
    """
    workers = check_workers(workers)
    if backend not in BACKENDS:
        raise ValidationError(f"unknown backend {backend!r}; available: {', '.join(BACKENDS)}")
    if backend == "spark":
        raise ValidationError(
            "the spark backend needs a master or a Spark Connect address; run it through the run "
            "pipeline (engine.runs.pipeline.execute) with backend_options, or build an "
            "engine.spark.executor.SparkExecutor"
        )
    if backend == "processes" or workers > 1:
        return ProcessExecutor(workers)
    return InProcessExecutor()
