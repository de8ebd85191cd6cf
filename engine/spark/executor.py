"""An executor that runs a stage's independent units of work as Spark tasks (docs/spark.md).

The run pipeline cuts a stage into independent units — for TopDown a batch of parent families of
one geolevel, as arrays, with their parents' estimates (TDA §7; docs/spark.md: hand a task a batch
of families, not one family) — and hands them to an executor with a top-level function.
:class:`SparkExecutor` is that executor on Spark: the units, pickled, become the rows of a
DataFrame with one partition per unit; ``mapInArrow`` unpickles each on an executor, calls the
function (the same family solver the local backend calls) and returns the pickled result. Only the
DataFrame API is used, so it also runs over Spark Connect. Results come back in unit order, so the
numbers are those of the in-process executor.

Slices: the units of one ``map`` go to Spark in consecutive slices of at most ``slice_bytes``
pickled bytes (default :data:`DEFAULT_SLICE_BYTES`), one ``createDataFrame`` and one Spark job per
slice, at most ``jobs_in_flight`` jobs at a time (the next slice is pickled and sent while the
previous one runs, so the cluster does not idle between slices). A level's units are pickled one
slice at a time, so the driver's memory for them — the Python process, the JVM that builds the
DataFrame and collects the results and, over Spark Connect, the server — is bounded by
``jobs_in_flight × slice_bytes`` plus their results, whatever the number of families (a large
run's block level holds more units than Spark's default driver heap: docs/spark.md, "What runs
where"). Slicing does not change the numbers: every unit is still solved alone.

Checkpoints: with ``checkpoint_dir`` every finished slice is saved as a Parquet file named by the
SHA-256 of the function and the slice's pickled units. A run that failed or was stopped, started
again with the same inputs, seed and slice size, finds the slices it already finished (their
units, which hold the parents' estimates, are byte-identical) and resumes at the first slice it had
not finished — within a level, not only at a level's start.

A checkpoint is reused only when it reads back whole and its results hash to the SHA-256 stored
in its metadata when it was written; a damaged one (truncated, edited, not Parquet) is never an
error: its slice is computed again and the file rewritten, with one warning naming the file
(:attr:`SparkExecutor.recomputed`). Checkpoints hold pickled results: keep the folder private.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from engine.core.errors import PHExploreError, RunCancelled, ValidationError
from engine.core.executors import check_backend_options
from engine.spark.session import fail_fast, get_session

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import SparkSession

POLL_S = 0.2
"""Seconds between two checks of ``cancel()`` while a Spark job runs."""
CANCEL_WAIT_S = 30.0
"""After a cancel, wait at most this long for the interrupted job before returning."""
CHECKPOINT_VERSION = 2
"""Part of every checkpoint's name: version 2 files carry the SHA-256 of their results."""
_RESULTS_SHA = b"phexplore_results_sha256"
_LOG = logging.getLogger(__name__)
MAX_PARTITIONS = 10_000
"""At most this many units (tasks) per slice: one unit per task (units are already batches)."""
MIB = 1 << 20
DEFAULT_SLICE_BYTES = 64 * MIB
"""Pickled units sent to Spark per job (64 MiB ≈ 150–200 TopDown batches of the 2,016-cell schema,
≈ 0.3–0.45 MiB each): enough tasks per job for a cluster of ~100 cores, a small share of a 1 GB
driver heap, and a Spark Connect local relation well under gRPC's 128 MiB message limit."""
MIN_SLICE_BYTES = 1
MAX_SLICE_BYTES = 1 << 30
"""Valid ``slice_bytes``: 1 byte (every unit alone: tests) to 1 GiB."""
SLICE_BYTES_ENV = "PHEXPLORE_SPARK_SLICE_BYTES"
"""Environment variable overriding :data:`DEFAULT_SLICE_BYTES` for runs of the run pipeline (a
whole number of bytes in the valid range; larger slices give a big cluster more tasks per job)."""
DEFAULT_JOBS_IN_FLIGHT = 2
MAX_JOBS_IN_FLIGHT = 16
"""Spark jobs (slices) of one ``map`` running at once: 1–16, default 2."""


class SparkTaskFailed(PHExploreError):
    """A unit of work raised on a Spark executor; the message carries the executor's error."""


def check_slice_bytes(value: object) -> int:
    """``value`` as an int in :data:`MIN_SLICE_BYTES`–:data:`MAX_SLICE_BYTES`, else a
    ValidationError saying so."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"slice_bytes must be a whole number of bytes; got {value!r}")
    if not MIN_SLICE_BYTES <= value <= MAX_SLICE_BYTES:
        raise ValidationError(
            f"slice_bytes must be from {MIN_SLICE_BYTES} to {MAX_SLICE_BYTES:,} (1 GiB); "
            f"got {value:,}"
        )
    return value


def _dumps(value: Any) -> bytes:
    # optional dependency (the spark extra): imported where Spark runs
    from pyspark import cloudpickle

    return cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def _run_units(
    fn: Callable[[Any], Any],
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function: unpickle each unit, run ``fn``, return the pickled result."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            index = batch.column("i").to_pylist()
            units = batch.column("unit").to_pylist()
            results, seconds = [], []
            for unit in units:
                t0 = time.perf_counter()
                results.append(_dumps(fn(pickle.loads(unit))))
                seconds.append(time.perf_counter() - t0)
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array(index, type=pa.int64()),
                    pa.array(results, type=pa.large_binary()),
                    pa.array(seconds, type=pa.float64()),
                ],
                names=["i", "result", "seconds"],
            )

    return run


class SparkExecutor:
    """Runs units of work on a Spark session (classic or Spark Connect), one task per unit.

    A ``map`` sends its units to Spark in slices of at most ``slice_bytes`` pickled bytes (and at
    most :data:`MAX_PARTITIONS` units), one Spark job per slice with at most ``jobs_in_flight``
    jobs running at once, so the driver — the Python process, the JVM and, over Spark Connect,
    the server — holds at most ``jobs_in_flight`` slices of units and their results at a time
    however many units a level has (see the module docstring).

    ``checkpoint_dir`` (a local or mounted folder on the driver): save every finished slice to
    Parquet and reuse it when the same units come again.
    """

    name = "spark"

    def __init__(
        self,
        session: SparkSession,
        *,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        owns_session: bool = False,
        slice_bytes: int = DEFAULT_SLICE_BYTES,
        jobs_in_flight: int = DEFAULT_JOBS_IN_FLIGHT,
    ) -> None:
        self.session = session
        self.checkpoint_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
        self._owns = owns_session
        self.slice_bytes = check_slice_bytes(slice_bytes)
        if isinstance(jobs_in_flight, bool) or not isinstance(jobs_in_flight, int):
            raise ValidationError(f"jobs_in_flight must be a whole number; got {jobs_in_flight!r}")
        if not 1 <= jobs_in_flight <= MAX_JOBS_IN_FLIGHT:
            raise ValidationError(
                f"jobs_in_flight must be from 1 to {MAX_JOBS_IN_FLIGHT}; got {jobs_in_flight}"
            )
        self.jobs_in_flight = jobs_in_flight
        self.task_seconds: list[float] = []
        """Seconds each unit took on its executor, in unit order (for benchmarks)."""
        self.checkpoint_hits = 0
        """Slices read back from checkpoints instead of being run."""
        self.recomputed: list[Path] = []
        """Damaged checkpoint files whose slices were computed again (and the files rewritten)."""
        self.jobs = 0
        """Spark jobs (slices) run so far."""
        try:
            parallelism = int(session.conf.get("spark.default.parallelism", "0") or 0)
        except Exception:  # Spark Connect may not expose it
            parallelism = 0
        self.workers = max(parallelism, 1)

    # ------------------------------------------------------------------ checkpoints
    def _key(self, fn: Callable[[Any], Any], blobs: Sequence[bytes]) -> str:
        digest = hashlib.sha256(f"v{CHECKPOINT_VERSION}|{fn.__module__}.{fn.__qualname__}".encode())
        for blob in blobs:
            digest.update(len(blob).to_bytes(8, "little"))
            digest.update(blob)
        return digest.hexdigest()

    def _load_checkpoint(self, key: str, n: int) -> pa.Table | None:
        """The finished slice ``key`` of ``n`` units, or None when there is no usable checkpoint:
        absent, or damaged (unreadable, other rows, results not matching their stored SHA-256 —
        then the slice is recomputed and the file rewritten, see the module docstring)."""
        if self.checkpoint_dir is None:
            return None
        path = self.checkpoint_dir / f"{key}.parquet"
        if not path.is_file():
            return None
        try:
            table = pq.read_table(path)
            meta = table.schema.metadata or {}
            problem = None
            if table.num_rows != n or meta.get(b"phexplore_units") != str(n).encode():
                problem = f"it holds {table.num_rows} results for {n} units"
            elif meta.get(_RESULTS_SHA) != _results_digest(table).encode():
                problem = "its results do not match their SHA-256"
        except (pa.ArrowException, OSError, KeyError, ValueError) as exc:
            problem = f"{type(exc).__name__}: {str(exc).strip()[:120]}"
        if problem is None:
            return table
        self.recomputed.append(path)
        _LOG.warning(
            "Spark checkpoint %s is damaged (%s); computing its units again and rewriting it",
            path,
            problem,
        )
        return None

    def _save_checkpoint(self, key: str, table: pa.Table) -> None:
        if self.checkpoint_dir is None:
            return
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        meta = {
            b"phexplore_units": str(table.num_rows).encode(),
            _RESULTS_SHA: _results_digest(table).encode(),
        }
        tmp = self.checkpoint_dir / f".{key}.{uuid.uuid4().hex}.tmp"
        pq.write_table(table.replace_schema_metadata(meta), tmp)
        os.replace(tmp, self.checkpoint_dir / f"{key}.parquet")

    # ------------------------------------------------------------------ slices
    def _slices(self, units: Sequence[Any]) -> Iterator[tuple[int, list[bytes]]]:
        """(index of the first unit, pickled units) of consecutive slices of ``units``: each at
        most ``slice_bytes`` (a larger unit goes alone) and :data:`MAX_PARTITIONS` units, pickled
        only when the slice is about to be sent, so one slice is in memory at a time."""
        first, blobs, size = 0, [], 0
        for i, unit in enumerate(units):
            blob = _dumps(unit)
            if blobs and (size + len(blob) > self.slice_bytes or len(blobs) >= MAX_PARTITIONS):
                yield first, blobs
                first, blobs, size = i, [], 0
            blobs.append(blob)
            size += len(blob)
        if blobs:
            yield first, blobs

    # ------------------------------------------------------------------ the protocol
    def map(
        self,
        fn: Callable[[Any], Any],
        units: Sequence[Any],
        *,
        cancel: Callable[[], bool] | None = None,
        done: Callable[[int, Any], None] | None = None,
    ) -> list[Any]:
        """``[fn(u) for u in units]`` on Spark, sent in slices; ``done(i, result)`` per unit once
        its slice's job ended (in unit order), ``cancel()`` polled while jobs run (then every
        running job is interrupted and :class:`~engine.core.errors.RunCancelled` raised)."""
        if not units:
            return []
        if cancel is not None and cancel():
            raise RunCancelled("cancelled before the Spark job started")
        results: list[Any] = []
        running: deque[_SliceJob] = deque()
        slices = self._slices(units)
        exhausted = False
        try:
            while True:
                # keep up to jobs_in_flight slices running; a checkpointed slice runs no job
                while not exhausted and len(running) < self.jobs_in_flight:
                    nxt = next(slices, None)
                    if nxt is None:
                        exhausted = True
                        break
                    first, blobs = nxt
                    key = self._key(fn, blobs)
                    cached = self._load_checkpoint(key, len(blobs))
                    if cached is not None:
                        self.checkpoint_hits += 1
                        running.append(_SliceJob.finished(first, key, cached))
                    else:
                        running.append(self._start_job(fn, first, key, blobs))
                    del blobs
                if not running:
                    break
                job = running[0]
                job.wait(cancel, self._cancel_all(running))
                running.popleft()
                table = job.result()
                if not job.from_checkpoint:
                    self._save_checkpoint(job.key, table)
                    self.jobs += 1
                ranked = sorted(
                    zip(
                        table.column("i").to_pylist(),
                        table.column("seconds").to_pylist(),
                        table.column("result").to_pylist(),
                        strict=True,
                    )
                )
                del table
                if [i for i, _, _ in ranked] != list(range(job.n)) or job.first != len(results):
                    raise SparkTaskFailed(
                        f"the Spark job of units {job.first}–{job.first + job.n - 1} returned "
                        f"{len(ranked)} results for {job.n} units; run it again"
                    )
                if not job.from_checkpoint:
                    self.task_seconds += [s for _, s, _ in ranked]
                for _, _, blob in ranked:
                    result = pickle.loads(blob)
                    if done is not None:
                        done(len(results), result)
                    results.append(result)
        except BaseException:
            if _classic_context(self.session) is None:  # Spark Connect: give up fast when the
                fail_fast(self.session)  # server is gone (an interrupt must end the process)
            self._cancel_all(running)()
            raise
        return results

    def _cancel_all(self, running: deque[_SliceJob]) -> Callable[[], None]:
        """A function that interrupts every job of ``running`` still going."""

        def stop() -> None:
            for job in running:
                job.interrupt()

        return stop

    def _start_job(
        self, fn: Callable[[Any], Any], first: int, key: str, blobs: list[bytes]
    ) -> _SliceJob:
        """One slice as a Spark job, collected in a thread (its job group or tag lets it be
        interrupted): unit ``k`` of the slice is row ``i = k``, one partition per unit."""
        spark = self.session
        source = pa.table(
            {
                "i": pa.array(range(len(blobs)), type=pa.int64()),
                "unit": pa.array(blobs, type=pa.large_binary()),
            }
        )
        frame = spark.createDataFrame(source).repartitionByRange(len(blobs), "i")
        del source
        job = frame.mapInArrow(_run_units(fn), "i long, result binary, seconds double")
        return _SliceJob.start(spark, job, first, len(blobs), key)

    def close(self) -> None:
        """Stop the session when this executor started it (idempotent)."""
        if self._owns:
            self.session.stop()
            self._owns = False

    def __enter__(self) -> SparkExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _SliceJob:
    """A slice's Spark job collecting in a thread (or a slice read back from a checkpoint)."""

    def __init__(self, first: int, n: int, key: str) -> None:
        self.first = first
        self.n = n
        self.key = key
        self.from_checkpoint = False
        self.outcome: dict[str, Any] = {}
        self.thread: threading.Thread | None = None
        self._interrupt: Callable[[], None] = lambda: None

    @classmethod
    def finished(cls, first: int, key: str, table: pa.Table) -> _SliceJob:
        job = cls(first, table.num_rows, key)
        job.from_checkpoint = True
        job.outcome["table"] = table
        return job

    @classmethod
    def start(cls, spark: SparkSession, frame: Any, first: int, n: int, key: str) -> _SliceJob:
        job = cls(first, n, key)
        tag = f"phexplore-{uuid.uuid4().hex}"
        context = _classic_context(spark)

        def collect() -> None:
            if context is not None:  # classic: a job group whose tasks are killed on cancel
                context.setJobGroup(tag, "PHExplore units of work", interruptOnCancel=True)
            else:  # Spark Connect: an operation tag (per thread)
                spark.addTag(tag)
            try:
                job.outcome["table"] = frame.toArrow()
            except BaseException as exc:  # re-raised in the calling thread
                job.outcome["error"] = exc
            finally:
                if context is None:
                    spark.removeTag(tag)

        def interrupt() -> None:
            if job.thread is None or not job.thread.is_alive():
                return
            if context is not None:
                context.cancelJobGroup(tag)
            else:
                spark.interruptTag(tag)

        job._interrupt = interrupt
        job.thread = threading.Thread(target=collect, name=tag, daemon=True)
        job.thread.start()
        return job

    def interrupt(self) -> None:
        self._interrupt()

    def wait(self, cancel: Callable[[], bool] | None, stop_all: Callable[[], None]) -> None:
        """Until the job ends; on ``cancel()`` interrupt every running job and raise."""
        if self.thread is None:
            return
        while self.thread.is_alive():
            self.thread.join(POLL_S)
            if cancel is not None and self.thread.is_alive() and cancel():
                stop_all()
                self.thread.join(CANCEL_WAIT_S)
                raise RunCancelled("cancelled; the Spark job was interrupted")

    def result(self) -> pa.Table:
        if "error" in self.outcome:
            error = self.outcome["error"]
            raise SparkTaskFailed(
                f"a unit of work failed on Spark: {_first_line(error)}"
            ) from error
        return self.outcome["table"]


def _results_digest(table: pa.Table) -> str:
    """SHA-256 of a slice's results in unit order (index, length and bytes of each result)."""
    digest = hashlib.sha256()
    for i, blob in sorted(
        zip(table.column("i").to_pylist(), table.column("result").to_pylist(), strict=True)
    ):
        digest.update(int(i).to_bytes(8, "little", signed=True))
        digest.update(len(blob).to_bytes(8, "little"))
        digest.update(blob)
    return digest.hexdigest()


def _classic_context(spark: SparkSession) -> Any:
    """The SparkContext of a classic session; None over Spark Connect (which has none)."""
    try:
        return spark.sparkContext
    except Exception:
        return None


def _first_line(error: BaseException) -> str:
    """The most useful line of a Spark/Py4J error: the Python exception raised in the task."""
    text = str(error)
    for line in reversed(text.splitlines()):
        stripped = line.strip()
        python_error = ("Error" in stripped or "Exception" in stripped) and ":" in stripped
        if python_error and not stripped.startswith("at ") and "org.apache" not in stripped:
            return stripped
    return text.splitlines()[0] if text else type(error).__name__


def spark_executor(
    backend_options: Mapping[str, Any], *, app_name: str = "phexplore"
) -> SparkExecutor:
    """The executor of a run with ``backend = "spark"``: a session on ``master`` or ``remote``
    (reused if this process already has one; a new classic one with ``driver_memory``, see
    :func:`engine.spark.session.get_session`), the optional ``checkpoint`` folder, and slices of
    :data:`SLICE_BYTES_ENV` bytes when that variable is set."""

    options = check_backend_options("spark", backend_options)
    slice_bytes = DEFAULT_SLICE_BYTES
    env = os.environ.get(SLICE_BYTES_ENV, "").strip()
    if env:
        try:
            slice_bytes = check_slice_bytes(int(env.replace("_", "")))
        except (ValueError, ValidationError):
            raise ValidationError(
                f"{SLICE_BYTES_ENV}={env!r} is not valid; give a whole number of bytes from "
                f"{MIN_SLICE_BYTES} to {MAX_SLICE_BYTES:,} (1 GiB), e.g. {DEFAULT_SLICE_BYTES} "
                "(the default, 64 MiB), or unset it"
            ) from None
    session = get_session(
        options.get("master"),
        options.get("remote"),
        app_name=app_name,
        driver_memory=options.get("driver_memory"),
    )
    return SparkExecutor(session, checkpoint_dir=options.get("checkpoint"), slice_bytes=slice_bytes)
