"""A PHSafe-shaped workload on Tumult Analytics, for timing against PHExplore's Spark backend.

Runs ONLY inside the benchmark's own virtualenv (``benchmarks/tumult/setup.sh`` makes
``benchmarks/tumult/.venv-tumult`` with ``tmlt.analytics==0.21.0``, which pins pyspark 3.5,
pandas < 2 and numpy 1.26, so it cannot share PHExplore's environment). It imports nothing from
PHExplore. Tumult Analytics is PHSafe's production library (PHS §3; docs/science.md §8).

The workload has PHSafe's shape (PHS §3.2, Algorithms 1–2), not its exact table cells:

* the CEF files of a generated population (``persons.csv``, ``units.csv``, ``geo.csv``), read by
  Spark; housing units (RTYPE 2) joined to their state (``geo.csv``), persons in housing units
  (RTYPE 3) — the non-private preparation PHSafe's reader does;
* one Tumult session with persons and units as private tables (``AddOneRow``) and the total ρ;
* the nine measured runs at every population-group level PHSafe measures them (nation or state ×
  iteration: ``*`` all households, ``A-G`` the householder's race alone (HHRACE 1–7), ``H,I``
  Hispanic or not (HHSPAN 1–2)) — 46 noisy grouped counts for ``phsafe-2020``, as in PHSafe —
  each grouped by its geography, iteration and a small cell column, a discrete Gaussian count
  with that level's ρ (RhoZCDPBudget, ``mechanism="gaussian"``). The six Algorithm-1 runs join
  persons to units on MAFID with ``TruncationStrategy.DropExcess(τ)`` on persons and
  ``DropExcess(1)`` on units (PHSafe's truncate-and-join); the three Algorithm-2 runs count units.
  The cell columns (age group, relationship group, HHT, HHT2 group, CPLT …) are computed per record
  before the session — simpler than PHSafe's cell maps, which is what "PHSafe-shaped" means.

Usage (inside the Tumult virtualenv)::

    benchmarks/tumult/.venv-tumult/bin/python benchmarks/tumult/phsafe_like.py \\
        --data /tmp/pop --runs runs.json --trials 3 --seed 1

``runs.json``: ``[{"name": "PH2", "algorithm": 1, "tau": 10, "levels": [{"geo": "usa",
"iteration": "*", "rho": 0.0026}, …]}, …]`` (``benchmarks/tumult/compare.py`` writes it from
PHExplore's ``phsafe-2020``). Prints one JSON object: seconds per trial (session built and every
count evaluated and materialised), Spark start-up, versions.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

CELLS = {
    # Algorithm 1: persons in housing units joined to their unit
    "PH1_num": "CASE WHEN QAGE < 18 THEN 0 ELSE 1 END",
    "PH2": "CASE WHEN RELSHIP = 20 THEN 0 WHEN RELSHIP IN (21, 22, 23, 24) THEN 1 "
    "WHEN RELSHIP IN (25, 26, 27) THEN 2 ELSE 3 END",
    "PH3": "CASE WHEN QAGE < 3 THEN 0 WHEN QAGE < 6 THEN 1 WHEN QAGE < 18 THEN 2 ELSE 3 END",
    "PH4": "CASE WHEN HHT IN (1, 2, 3) THEN 0 ELSE 1 END",
    "PH6": "CASE WHEN HHT2 IN (1, 2, 3, 4) THEN HHT2 - 1 ELSE 4 END",
    "PH7": "HHT2 % 4",
    # Algorithm 2: occupied housing units
    "PH1_denom": "0",
    "PH5_denom": "HHT",
    "PH8_denom": "CPLT",
}
CELL_DOMAIN = {
    "PH1_num": range(2),
    "PH2": range(4),
    "PH3": range(4),
    "PH4": range(2),
    "PH6": range(5),
    "PH7": range(4),
    "PH1_denom": range(1),
    "PH5_denom": range(8),
    "PH8_denom": range(6),
}
ITERATIONS = {"*": None, "A-G": ("HHRACE", list(range(1, 8))), "H,I": ("HHSPAN", [1, 2])}
"""PHSafe's iterations: all households, householder's race alone (A–G), Hispanic or not (H, I)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--runs", type=Path, required=True)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--warmup", action="store_true", help="one untimed trial first")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    import pyspark
    import tmlt.analytics as ta
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from tmlt.analytics import (
        AddOneRow,
        KeySet,
        QueryBuilder,
        RhoZCDPBudget,
        Session,
        TruncationStrategy,
    )

    runs = json.loads(args.runs.read_text())
    # Spark's Python workers must run this virtualenv's interpreter (tmlt is installed only here).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.pop("SPARK_HOME", None)
    warehouse = tempfile.mkdtemp(prefix="tumult-warehouse-")  # Tumult saves tables there
    t = time.perf_counter()
    spark = (
        SparkSession.builder.master(args.master)
        .appName("tumult-phsafe-like")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.driver.memory", "8g")
        .config("spark.sql.warehouse.dir", Path(warehouse).as_uri())
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    startup = time.perf_counter() - t

    def read(name: str):
        path = args.data / f"{name}.csv"
        if not path.is_file():
            path = args.data / f"{name}.csv.gz"
        return spark.read.csv(path.resolve().as_uri(), header=True, inferSchema=False)

    ints = lambda frame, cols: frame.select(  # noqa: E731
        *[F.col(c).cast("int").alias(c) for c in cols]
    )
    geo = ints(read("geo"), ["MAFID", "TABBLKST"]).dropDuplicates(["MAFID"])
    unit_cols = ["RTYPE", "MAFID", "FINAL_POP", "HHSPAN", "HHRACE", "TEN", "HHT", "HHT2", "CPLT"]
    units = ints(read("units"), unit_cols).filter("RTYPE = 2").join(geo, "MAFID")
    persons = ints(read("persons"), ["RTYPE", "MAFID", "QAGE", "CENHISP", "CENRACE", "RELSHIP"])
    persons = persons.filter("RTYPE = 3").drop("RTYPE")
    states = sorted(r.TABBLKST for r in geo.select("TABBLKST").distinct().collect())
    # Per-record cell columns: person attributes on persons, unit attributes on units.
    person_cells = ("PH1_num", "PH2", "PH3")
    persons = persons.select(
        "MAFID", *[F.expr(CELLS[n]).cast("int").alias(f"c_{n}") for n in person_cells]
    )
    units = units.select(
        "MAFID",
        "TABBLKST",
        "HHRACE",
        "HHSPAN",
        "FINAL_POP",
        *[F.expr(CELLS[n]).cast("int").alias(f"c_{n}") for n in CELLS if n not in person_cells],
    )
    persons = persons.cache()
    units = units.cache()
    n_persons, n_units = persons.count(), units.count()
    total_rho = sum(level["rho"] for r in runs for level in r["levels"])

    def trial() -> float:
        t0 = time.perf_counter()
        session = (
            Session.Builder()
            .with_privacy_budget(RhoZCDPBudget(total_rho))
            .with_private_dataframe("persons", persons, protected_change=AddOneRow())
            .with_private_dataframe("units", units, protected_change=AddOneRow())
            .build()
        )
        for run in runs:
            name = run["name"]
            if run["algorithm"] == 1:
                base = QueryBuilder("persons").join_private(
                    QueryBuilder("units"),
                    truncation_strategy_left=TruncationStrategy.DropExcess(int(run["tau"])),
                    truncation_strategy_right=TruncationStrategy.DropExcess(1),
                    join_columns=["MAFID"],
                )
            else:
                base = QueryBuilder("units").filter("FINAL_POP > 0")
            domain = {f"c_{name}": list(CELL_DOMAIN[name])}
            for level in run["levels"]:
                keys = dict(domain)
                iteration = ITERATIONS[level["iteration"]]
                if iteration is not None:
                    keys[iteration[0]] = iteration[1]
                if level["geo"] != "usa":
                    keys["TABBLKST"] = states
                answer = session.evaluate(
                    base.groupby(KeySet.from_dict(keys)).count(mechanism="gaussian"),
                    RhoZCDPBudget(float(level["rho"])),
                )
                answer.count()  # materialise, as a release would
        return time.perf_counter() - t0

    if args.warmup:
        trial()
    seconds = [trial() for _ in range(args.trials)]
    print(
        json.dumps(
            {
                "tool": "tmlt.analytics",
                "tmlt_analytics": getattr(ta, "__version__", "0.21.x"),
                "pyspark": pyspark.__version__,
                "python": sys.version.split()[0],
                "master": args.master,
                "startup_s": startup,
                "persons": n_persons,
                "units": n_units,
                "trial_s": seconds,
                "median_trial_s": statistics.median(seconds),
                "queries_per_trial": sum(len(r["levels"]) for r in runs),
            }
        )
    )
    spark.stop()
    shutil.rmtree(warehouse, ignore_errors=True)


if __name__ == "__main__":
    main()
