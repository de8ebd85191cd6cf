"""Benchmark the Spark backend against the local one (docs/spark.md; docs/science.md §8): same numbers, what cost.

Usage: ``.venv/bin/python benchmarks/spark.py [--persons 200000] [--repeats 3] [--master local[2]]
[--population /tmp/pop_1e7] [--topdown-data ri2010|population] [--tumult]``

* **PHSafe** on a generated population (:func:`engine.data.population.generate_population`,
  ``--persons`` persons, ``--seed``): the local engine (load and validate the CEF files, prepare,
  truncate-join-count, noise, outputs) against Spark (Spark reads the files, prepares, joins and
  counts; the same noise and outputs code), one trial, the production configuration
  ``phsafe-2020``. The official tables of the two must be identical (checked, printed).
  ``--population DIR`` keeps the generated files there and reuses them on the next call (generate
  1e7 persons once into /tmp); without it they go to a temporary folder.
* **TopDown** on the shipped Rhode Island 2010 blocks (``ri2010-production-like``; ``--county``
  limits it to one county) or, with ``--topdown-data population``, on the same generated
  population with the production allocation ``topdown-2020-production`` (2,016 cells): the whole
  pipeline run with the in-process executor against the Spark executor (true histograms summed by
  Spark, family batches as Spark tasks). Estimates must be identical (checked, printed).
* The **projection** for the nation, per level: the measured Spark wall seconds of each estimated
  level × the session's cores ÷ that level's families gives core-seconds per family; times the
  nation's families of that level (1 US, 52 states, 3,143 counties, 74,134 tracts, 217,740 block
  groups as parents; docs/science.md §8) ÷ ``N`` single-core executors. It is a PROJECTION, not a
  measurement: it assumes perfect scaling and per-family costs like this data's.
* ``--tumult`` adds Tumult Analytics' PHSafe-like workload on its own Spark 3.5 ``local[2]``
  (``benchmarks/tumult/``, a separate virtualenv) on the same files, per trial.

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
US_FAMILIES_BY_LEVEL = {
    "State": 1,
    "County": 52,
    "Tract": 3_143,
    "Block_Group": 74_134,
    "Block": 217_740,
}
"""The nation's families by the level of their children (a family = a parent and its children)."""


def _median_time(run: Any, repeats: int, warmup: bool = True) -> tuple[float, Any]:
    out = run() if warmup else None
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = run()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def population(folder: Path, persons: int, seed: int) -> Path:
    """``folder`` holding a generated population of ``persons`` (seed ``seed``), generated there
    unless a previous call already did (its ``population.json`` says persons and seed)."""
    from engine.data.population import generate_population

    summary = folder / "population.json"
    if summary.is_file():
        meta = json.loads(summary.read_text())
        found = (meta.get("persons", meta.get("n_persons")), meta.get("seed"))
        if found == (persons, seed):
            return folder
        raise SystemExit(
            f"{folder} holds a population of {found[0]} persons (seed {found[1]}), not "
            f"{persons} (seed {seed}); give another --population folder"
        )
    generate_population(persons, seed=seed, out_dir=folder)
    return folder


def bench_phsafe(
    session: Any, folder: Path, persons: int, seed: int, repeats: int, warmup: bool
) -> dict[str, Any]:
    """PHSafe, one trial of ``phsafe-2020``, local engine against Spark on the files in ``folder``."""
    from engine.data.cef import load_cef_extract
    from engine.phsafe.config import preset
    from engine.phsafe.release import run_phsafe
    from engine.spark import phsafe as spark_phsafe

    config = preset("phsafe-2020")

    def local() -> Any:
        # the generated files are trusted: no per-file size limit (1e7 persons: 229 MB persons.csv)
        extract = load_cef_extract(folder, state_filter=config.state_filter, max_bytes=1 << 40)
        return run_phsafe(extract, config, seed=seed)

    def spark() -> Any:
        cef = spark_phsafe.read_cef(session, folder)
        prepared = spark_phsafe.prepare(session, cef, config.state_filter)
        return run_phsafe(
            None, config, seed=seed, prepared=prepared, tabulate=spark_phsafe.tabulate_all
        )

    t_local, r_local = _median_time(local, repeats, warmup)
    t_spark, r_spark = _median_time(spark, repeats, warmup)
    same = set(r_local.official) == set(r_spark.official) and all(
        r_local.official[k].equals(r_spark.official[k]) for k in r_local.official
    )
    return {
        "engine": "phsafe",
        "data": f"generated population, {persons:,} persons (seed {seed})",
        "local_s": t_local,
        "spark_s": t_spark,
        "identical": same,
        "persons": r_local.n_persons,
    }


TIDY_ROWS = 2_000_000
"""Dense comparison rows a benchmarked TopDown run keeps (TOTAL and other small queries)."""


def bench_topdown(
    session: Any,
    data: str,
    county: str | None,
    folder: Path | None,
    seed: int,
    repeats: int,
    warmup: bool,
) -> dict[str, Any]:
    """TopDown, the whole pipeline, in-process executor against the Spark executor."""
    from engine.core.executors import InProcessExecutor
    from engine.dp.presets import load_topdown_preset
    from engine.runs.data_source import BlockFilter, DataSource
    from engine.runs.pipeline import execute
    from engine.runs.spec import RunSpec
    from engine.runs.topdown import load
    from engine.spark.executor import SparkExecutor

    if data == "population":
        assert folder is not None
        preset_name, source, label = "topdown-2020-production", str(folder), "generated"
    else:
        preset_name, source, label = "ri2010-production-like", "ri2010", "ri2010"
    allocation = load_topdown_preset(preset_name)["persons"]
    spec_data = DataSource(
        source=source, filter=BlockFilter("County", (county,)) if county else None
    )
    spec = RunSpec(engine="topdown", data=spec_data, config=allocation.to_dict(), seed=seed)
    hist = load(spec)
    spark_executor = SparkExecutor(session)

    # The runs' tidy tables are not compared: keep only small queries (a 1e7-person run's whole
    # table would be ~630 M rows; one such run was killed for memory at 22.8 GB).
    def local() -> Any:
        return execute(
            spec, data=hist, executor=InProcessExecutor(), outputs="tidy", max_tidy_rows=TIDY_ROWS
        ).result

    def spark() -> Any:
        return execute(
            spec, data=hist, executor=spark_executor, outputs="tidy", max_tidy_rows=TIDY_ROWS
        ).result

    t_local, r_local = _median_time(local, repeats, warmup)
    t_spark, r_spark = _median_time(spark, repeats, warmup)
    tree = r_local.tree
    families: dict[str, int] = {}
    ptr, idx = tree.children_ptr
    for parents in tree.families_by_depth():
        kids = np.concatenate([idx[ptr[p] : ptr[p + 1]] for p in parents])
        level = "/".join(sorted(set(tree.level_names[kids])))
        families[level] = families.get(level, 0) + int(parents.size)
    level_s = {k: float(v) for k, v in r_spark.timings.items() if k in families}
    if county:
        where = f"County {county}"
    elif data == "population":
        where = "every generated state"
    else:
        where = "whole state"
    return {
        "engine": "topdown",
        "data": f"{label} {preset_name}, {where} ({hist.n_blocks:,} blocks)",
        "local_s": t_local,
        "spark_s": t_spark,
        "identical": (r_local.estimates_sparse != r_spark.estimates_sparse).nnz == 0,
        "families": families,
        "spark_level_s": level_s,
    }


def _same(identical: bool | str) -> str:
    return identical if isinstance(identical, str) else ("yes" if identical else "NO")


def project(row: dict[str, Any], cores: int, executors: list[int]) -> list[dict[str, Any]]:
    """PROJECTION of the nation's estimation hours on ``N`` single-core executors, per level:
    measured core-seconds per family (level wall seconds × ``cores`` ÷ families) × the nation's
    families of that level ÷ ``N``. Perfect scaling assumed; not a measurement."""
    per_family = {
        level: row["spark_level_s"][level] * cores / n
        for level, n in row["families"].items()
        if level in row["spark_level_s"] and level in US_FAMILIES_BY_LEVEL
    }
    core_s = sum(US_FAMILIES_BY_LEVEL[level] * c for level, c in per_family.items())
    return [
        {"executors": n, "projected_hours": core_s / n / 3600, "core_s_per_family": per_family}
        for n in executors
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persons", type=int, default=200_000)
    parser.add_argument(
        "--population",
        type=Path,
        default=None,
        help="folder for the generated population: reused when it already holds it",
    )
    parser.add_argument("--topdown-data", choices=["ri2010", "population"], default="ri2010")
    parser.add_argument("--county", default=None, help="county FIPS, e.g. 44001 (default: all)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-warmup", action="store_true", help="time the first runs too")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--executors", type=int, nargs="*", default=[10, 100, 1000])
    parser.add_argument("--engines", nargs="*", default=["phsafe", "topdown"])
    parser.add_argument("--tumult", action="store_true", help="add Tumult Analytics (PHSafe-like)")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = parser.parse_args()

    from engine.spark.session import get_session

    t = time.perf_counter()
    session = get_session(args.master, app_name="phexplore-benchmark", ui=False)
    session.sparkContext.setLogLevel("ERROR")
    startup = time.perf_counter() - t
    cores = max(1, int(session.sparkContext.defaultParallelism))
    warmup = not args.no_warmup
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        need_population = (
            "phsafe" in args.engines or args.topdown_data == "population" or args.tumult
        )
        folder = None
        if need_population:
            folder = population(
                args.population or Path(tmp) / "population", args.persons, args.seed
            )
        if "phsafe" in args.engines:
            assert folder is not None
            rows.append(
                bench_phsafe(session, folder, args.persons, args.seed, args.repeats, warmup)
            )
        if args.tumult:
            assert folder is not None
            from tumult.compare import run_tumult  # benchmarks/tumult/compare.py

            rows.append(run_tumult(folder, args.persons, args.seed, args.repeats, warmup))
        if "topdown" in args.engines:
            rows.append(
                bench_topdown(
                    session,
                    args.topdown_data,
                    args.county,
                    folder,
                    args.seed,
                    args.repeats,
                    warmup,
                )
            )
    projection = [
        p for row in rows if "spark_level_s" in row for p in project(row, cores, args.executors)
    ]
    if args.json:
        print(json.dumps({"startup_s": startup, "rows": rows, "projection": projection}, indent=2))
        return
    print(f"Spark session start-up ({args.master}): {startup:.1f} s (not in the times below)")
    runs = f"median of {args.repeats} runs" + (" after a warm-up" if warmup else "")
    print(f"{runs}, wall-clock seconds")
    print(f"{'engine':<8} {'data':<60} {'local':>8} {'spark':>8} {'ratio':>6} identical")
    for row in rows:
        ratio = row["spark_s"] / row["local_s"] if row.get("local_s") else float("nan")
        local = f"{row['local_s']:>8.2f}" if row.get("local_s") is not None else f"{'-':>8}"
        print(
            f"{row['engine']:<8} {row['data']:<60} {local} {row['spark_s']:>8.2f} "
            f"{ratio:>6.2f} {_same(row['identical'])}"
        )
    for row in rows:
        if "spark_level_s" in row and projection:
            per = projection[0]["core_s_per_family"]
            print(
                f"\nPROJECTION (not a measurement) for the nation's {US_FAMILIES:,} families, "
                f"from core-seconds per family measured here on {args.master} ({cores} cores): "
                + ", ".join(f"{lv} {c * 1e3:.1f} ms" for lv, c in per.items())
            )
            for p in projection:
                print(f"  {p['executors']:>5} single-core executors: {p['projected_hours']:.2f} h")


if __name__ == "__main__":
    main()
