"""Benchmark the Spark backend against the local one (issue 18; SPEC §8): same numbers, what cost.

Usage: ``.venv/bin/python benchmarks/spark.py [--persons 200000] [--repeats 3] [--master local[2]]``

* **PHSafe** on a generated population (:func:`engine.data.population.generate_population`,
  ``--persons`` persons, ``--seed``): the local engine (load and validate the CEF files, prepare,
  truncate-join-count, noise, outputs) against Spark (Spark reads the files, prepares, joins and
  counts; the same noise and outputs code), one trial, the production configuration
  ``phsafe-2020``. The official tables of the two must be identical (checked, printed).
* **TopDown** on the shipped Rhode Island 2010 blocks (``ri2010-production-like``; ``--county``
  limits it to one county): the whole pipeline run with the in-process executor against the Spark
  executor (family batches as Spark tasks). Estimates must be identical (checked, printed).
* The **projection** for the nation multiplies the measured Spark seconds per family of this run
  by the number of families of the US spine (≈ 1 + 52 + 3,143 + 74,134 + 217,740 parents: US,
  states, counties, tracts, block groups; SCALE-NOTES) and divides by ``N`` executors. It is a
  projection, not a measurement: production's 2,016-cell families cost more than these.

Times are wall-clock medians of ``--repeats`` runs after one warm-up run per backend (Spark's
first job starts the Python workers). The session start-up is reported separately.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

US_FAMILIES = 1 + 52 + 3_143 + 74_134 + 217_740
"""Parents of the US spine (US, states, counties, tracts, block groups): the families solved."""


def _median_time(run: Any, repeats: int) -> tuple[float, Any]:
    out = run()  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = run()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def bench_phsafe(session: Any, persons: int, seed: int, repeats: int) -> dict[str, Any]:
    from engine.data.cef import load_cef_extract
    from engine.data.population import generate_population
    from engine.phsafe.config import preset
    from engine.phsafe.run import run_phsafe
    from engine.spark import phsafe as spark_phsafe

    config = preset("phsafe-2020")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "population"
        generate_population(persons, seed=seed, out_dir=folder)

        def local() -> Any:
            extract = load_cef_extract(folder, state_filter=config.state_filter)
            return run_phsafe(extract, config, seed=seed)

        def spark() -> Any:
            cef = spark_phsafe.read_cef(session, folder)
            prepared = spark_phsafe.prepare(session, cef, config.state_filter)
            return run_phsafe(
                None, config, seed=seed, prepared=prepared, tabulate=spark_phsafe.tabulate_all
            )

        t_local, r_local = _median_time(local, repeats)
        t_spark, r_spark = _median_time(spark, repeats)
    same = all(r_local.official[k].equals(r_spark.official[k]) for k in r_local.official) and set(
        r_local.official
    ) == set(r_spark.official)
    return {
        "engine": "phsafe",
        "data": f"generated population, {persons:,} persons (seed {seed})",
        "local_s": t_local,
        "spark_s": t_spark,
        "identical": same,
        "persons": r_local.n_persons,
    }


def bench_topdown(session: Any, county: str | None, seed: int, repeats: int) -> dict[str, Any]:
    from engine.executors import InProcessExecutor
    from engine.runs.pipeline import execute
    from engine.runs.spec import RunSpec
    from engine.runs.topdown import load
    from engine.spark.executor import SparkExecutor
    from phexplore.presets import load_topdown_preset

    allocation = load_topdown_preset("ri2010-production-like")["persons"]
    data: dict[str, Any] = {"source": "ri2010"}
    if county:
        data["filter"] = {"level": "County", "units": [county]}
    spec = RunSpec(engine="topdown", data=data, config=allocation.to_dict(), seed=seed)
    hist = load(spec)
    spark_executor = SparkExecutor(session)

    def local() -> Any:
        return execute(spec, data=hist, executor=InProcessExecutor(), metrics=False).result

    def spark() -> Any:
        return execute(spec, data=hist, executor=spark_executor, metrics=False).result

    t_local, r_local = _median_time(local, repeats)
    spark_executor.task_seconds.clear()
    t_spark, r_spark = _median_time(spark, repeats)
    families = sum(int(p.size) for p in r_local.tree.families_by_depth())
    per_family = t_spark / max(families, 1)
    return {
        "engine": "topdown",
        "data": f"ri2010 {'County ' + county if county else 'whole state'} ({hist.n_blocks:,} blocks)",
        "local_s": t_local,
        "spark_s": t_spark,
        "identical": bool(np.array_equal(r_local.estimates, r_spark.estimates)),
        "families": families,
        "spark_s_per_family": per_family,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persons", type=int, default=200_000)
    parser.add_argument("--county", default=None, help="RI county FIPS, e.g. 44001 (default: all)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--executors", type=int, nargs="*", default=[10, 100, 1000])
    parser.add_argument("--engines", nargs="*", default=["phsafe", "topdown"])
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = parser.parse_args()

    from engine.spark.session import get_session

    t = time.perf_counter()
    session = get_session(args.master, app_name="phexplore-benchmark", ui=False)
    session.sparkContext.setLogLevel("ERROR")
    startup = time.perf_counter() - t
    rows = []
    if "phsafe" in args.engines:
        rows.append(bench_phsafe(session, args.persons, args.seed, args.repeats))
    if "topdown" in args.engines:
        rows.append(bench_topdown(session, args.county, args.seed, args.repeats))
    projection = []
    for row in rows:
        if "spark_s_per_family" in row:
            for n in args.executors:
                projection.append(
                    {
                        "executors": n,
                        "projected_hours": US_FAMILIES * row["spark_s_per_family"] * 2 / n / 3600,
                    }
                )
    if args.json:
        print(json.dumps({"startup_s": startup, "rows": rows, "projection": projection}, indent=2))
        return
    print(f"Spark session start-up ({args.master}): {startup:.1f} s (not in the times below)")
    print(f"median of {args.repeats} runs after a warm-up, wall-clock seconds")
    print(f"{'engine':<8} {'data':<52} {'local':>8} {'spark':>8} {'ratio':>6} identical")
    for row in rows:
        ratio = row["spark_s"] / row["local_s"]
        print(
            f"{row['engine']:<8} {row['data']:<52} {row['local_s']:>8.2f} {row['spark_s']:>8.2f} "
            f"{ratio:>6.2f} {'yes' if row['identical'] else 'NO'}"
        )
    for row in rows:
        if "spark_s_per_family" in row:
            print(
                f"\nPROJECTION (not a measurement) for the nation's {US_FAMILIES:,} families at "
                f"{row['spark_s_per_family'] * 1e3:.1f} ms per family measured here on "
                f"{args.master} (×{2} cores), this schema:"
            )
            for p in projection:
                print(f"  {p['executors']:>5} single-core executors: {p['projected_hours']:.2f} h")


if __name__ == "__main__":
    main()
