"""Benchmark the Spark executor's slices against one slice per level (docs/spark.md; docs/science.md §8).

Usage: ``.venv/bin/python benchmarks/spark_slices.py --population /tmp/pop_1e6 [--repeats 2]
[--master local[2]]``

TopDown with ``topdown-2020-production`` (2,016 cells) on a generated population folder
(``phexplore generate population``), the whole pipeline on one Spark session, alternating:

* **baseline — one slice per level**: ``SparkExecutor(slice_bytes=1 GiB, jobs_in_flight=1)``,
  i.e. a level's units sent in one ``createDataFrame`` and one job, as before slicing (the
  behaviour that overflowed the 1 GB driver heap at 10⁷ persons);
* **slices**: the defaults (64 MiB of pickled units per job, two jobs in flight).

Prints wall seconds of each run, the medians, the Spark jobs run and whether the estimates are
identical to the first run's. The Python workers are started before timing.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--population", type=Path, required=True, help="a generated population")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    from engine.dp.presets import load_topdown_preset
    from engine.runs.data_source import DataSource
    from engine.runs.pipeline import execute
    from engine.runs.spec import RunSpec
    from engine.runs.topdown import load
    from engine.spark.executor import SparkExecutor
    from engine.spark.session import get_session

    session = get_session(args.master, app_name="phexplore-slices", ui=False)
    session.sparkContext.setLogLevel("ERROR")
    allocation = load_topdown_preset("topdown-2020-production")["persons"]
    spec = RunSpec(
        engine="topdown",
        data=DataSource(source=str(args.population)),
        config=allocation.to_dict(),
        seed=args.seed,
    )
    hist = load(spec)
    SparkExecutor(session).map(abs, [1, -2])  # start the Python workers
    variants: dict[str, dict[str, Any]] = {
        "one slice per level (baseline)": {"slice_bytes": 1 << 30, "jobs_in_flight": 1},
        "64 MiB slices, 2 in flight": {},
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    jobs: dict[str, int] = {}
    reference = None
    identical = True
    for _ in range(args.repeats):
        for name, settings in variants.items():
            executor = SparkExecutor(session, **settings)
            t = time.perf_counter()
            result = execute(
                spec, data=hist, executor=executor, outputs="tidy", max_tidy_rows=2_000_000
            ).result
            times[name].append(time.perf_counter() - t)
            jobs[name] = executor.jobs
            if reference is None:
                reference = result.estimates_sparse
            else:
                identical &= (reference != result.estimates_sparse).nnz == 0
    print(f"TopDown topdown-2020-production, {hist.n_blocks:,} blocks, {args.master}")
    print(f"{'variant':<32} {'median s':>9} {'jobs':>5}  runs (s, in order)")
    for name in variants:
        runs = ", ".join(f"{t:.1f}" for t in times[name])
        print(f"{name:<32} {statistics.median(times[name]):>9.1f} {jobs[name]:>5}  {runs}")
    print(f"estimates identical in every run: {'yes' if identical else 'NO'}")


if __name__ == "__main__":
    main()
