"""An executor that runs a stage's independent units of work as Spark tasks (SPEC §8).

The run pipeline cuts a stage into independent units — for TopDown a batch of parent families of
one geolevel, as arrays, with their parents' estimates (TDA §7; SCALE-NOTES: hand a task a batch
of families, not one family) — and hands them to an executor with a top-level function.
:class:`SparkExecutor` is that executor on Spark: the units, pickled, become the rows of a
DataFrame with one partition per unit; ``mapInArrow`` unpickles each on an executor, calls the
function (the same family solver the local backend calls) and returns the pickled result. Only the
DataFrame API is used, so it also runs over Spark Connect. Results come back in unit order, so the
numbers are those of the in-process executor.

Checkpoints: with ``checkpoint_dir`` every finished ``map`` call (one level's batches in TopDown)
is saved as a Parquet file named by the SHA-256 of the function and the pickled units. A run that
failed or was stopped, started again with the same inputs and seed, finds the levels it already
finished (their units, which hold the parents' estimates, are byte-identical) and resumes at the
first level it had not finished.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from engine.executors import ExecutionCancelled, check_backend_options
from phexplore.errors import PHExploreError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import SparkSession

POLL_S = 0.2
"""Seconds between two checks of ``cancel()`` while a Spark job runs."""
CANCEL_WAIT_S = 30.0
"""After a cancel, wait at most this long for the interrupted job before returning."""
CHECKPOINT_VERSION = 1
MAX_PARTITIONS = 10_000
"""At most this many tasks per ``map``: one unit per task up to it (units are already batches)."""


class SparkCancelled(ExecutionCancelled):
    """``cancel()`` returned True while a Spark job ran; the job was interrupted."""


class SparkTaskFailed(PHExploreError):
    """A unit of work raised on a Spark executor; the message carries the executor's error."""


def _dumps(value: Any) -> bytes:
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

    ``checkpoint_dir`` (a local or mounted folder on the driver): save every finished ``map`` to
    Parquet and reuse it when the same units come again (see the module docstring).
    """

    name = "spark"

    def __init__(
        self,
        session: SparkSession,
        *,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        owns_session: bool = False,
    ) -> None:
        self.session = session
        self.checkpoint_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
        self._owns = owns_session
        self.task_seconds: list[float] = []
        """Seconds each unit took on its executor, in the order the units ran (for benchmarks)."""
        self.checkpoint_hits = 0
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

    def _load_checkpoint(self, key: str, n: int) -> list[bytes] | None:
        if self.checkpoint_dir is None:
            return None
        path = self.checkpoint_dir / f"{key}.parquet"
        if not path.is_file():
            return None
        table = pq.read_table(path)
        if table.num_rows != n or table.schema.metadata is None:
            return None
        if table.schema.metadata.get(b"phexplore_units") != str(n).encode():
            return None
        order = table.column("i").to_pylist()
        blobs = table.column("result").to_pylist()
        return [blob for _, blob in sorted(zip(order, blobs, strict=True))]

    def _save_checkpoint(self, key: str, table: pa.Table) -> None:
        if self.checkpoint_dir is None:
            return
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        meta = {b"phexplore_units": str(table.num_rows).encode()}
        tmp = self.checkpoint_dir / f".{key}.{uuid.uuid4().hex}.tmp"
        pq.write_table(table.replace_schema_metadata(meta), tmp)
        os.replace(tmp, self.checkpoint_dir / f"{key}.parquet")

    # ------------------------------------------------------------------ the protocol
    def map(
        self,
        fn: Callable[[Any], Any],
        units: Sequence[Any],
        *,
        cancel: Callable[[], bool] | None = None,
        done: Callable[[int, Any], None] | None = None,
    ) -> list[Any]:
        """``[fn(u) for u in units]`` on Spark; ``done(i, result)`` per unit once the job ended,
        ``cancel()`` polled while it runs (then the job is interrupted, :class:`SparkCancelled`)."""
        if not units:
            return []
        if cancel is not None and cancel():
            raise SparkCancelled("cancelled before the Spark job started")
        blobs = [_dumps(u) for u in units]
        key = self._key(fn, blobs)
        cached = self._load_checkpoint(key, len(units))
        if cached is not None:
            self.checkpoint_hits += 1
            results = [pickle.loads(b) for b in cached]
        else:
            table = self._run_job(fn, blobs, cancel)
            self._save_checkpoint(key, table)
            order = table.column("i").to_pylist()
            seconds = table.column("seconds").to_pylist()
            payload = table.column("result").to_pylist()
            ranked = sorted(zip(order, seconds, payload, strict=True))
            self.task_seconds += [s for _, s, _ in ranked]
            results = [pickle.loads(b) for _, _, b in ranked]
        if done is not None:
            for i, result in enumerate(results):
                done(i, result)
        return results

    def _run_job(
        self, fn: Callable[[Any], Any], blobs: list[bytes], cancel: Callable[[], bool] | None
    ) -> pa.Table:
        spark = self.session
        source = pa.table(
            {
                "i": pa.array(range(len(blobs)), type=pa.int64()),
                "unit": pa.array(blobs, type=pa.large_binary()),
            }
        )
        frame = spark.createDataFrame(source).repartitionByRange(
            min(len(blobs), MAX_PARTITIONS), "i"
        )
        job = frame.mapInArrow(_run_units(fn), "i long, result binary, seconds double")
        tag = f"phexplore-{uuid.uuid4().hex}"
        outcome: dict[str, Any] = {}

        context = _classic_context(spark)

        def collect() -> None:
            if context is not None:  # classic: a job group whose tasks are killed on cancel
                context.setJobGroup(tag, "PHExplore units of work", interruptOnCancel=True)
            else:  # Spark Connect: an operation tag
                spark.addTag(tag)
            try:
                outcome["table"] = job.toArrow()
            except BaseException as exc:  # re-raised in the calling thread
                outcome["error"] = exc
            finally:
                if context is None:
                    spark.removeTag(tag)

        worker = threading.Thread(target=collect, name=tag, daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(POLL_S)
            if cancel is not None and worker.is_alive() and cancel():
                if context is not None:
                    context.cancelJobGroup(tag)
                else:
                    spark.interruptTag(tag)
                worker.join(CANCEL_WAIT_S)
                raise SparkCancelled("cancelled; the Spark job was interrupted")
        if "error" in outcome:
            error = outcome["error"]
            raise SparkTaskFailed(
                f"a unit of work failed on Spark: {_first_line(error)}"
            ) from error
        return outcome["table"]

    def close(self) -> None:
        """Stop the session when this executor started it (idempotent)."""
        if self._owns:
            self.session.stop()
            self._owns = False

    def __enter__(self) -> SparkExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
    (reused if this process already has one) and the optional ``checkpoint`` folder."""
    from engine.spark.session import get_session

    options = check_backend_options("spark", backend_options)
    session = get_session(options.get("master"), options.get("remote"), app_name=app_name)
    return SparkExecutor(session, checkpoint_dir=options.get("checkpoint"))
