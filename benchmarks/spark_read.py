"""Benchmark: TopDown on Spark with the person records read on the driver vs on the executors (docs/spark.md).

Usage: ``.venv/bin/python benchmarks/spark_read.py --persons 1000000 [--population DIR]
[--baseline-tree /tmp/main-at-2b5abce] [--master local[2]] [--input generated|ppmf] [--load-only]``

One generated population (``topdown-2020-production``, 2,016 cells; generated once into
``--population`` with :func:`engine.data.population.generate_population`, ``--states``, ``--seed``),
the whole TopDown pipeline on a ``local[2]`` Spark session, each variant in a fresh Python
process (so each peak is its own):

* ``driver`` — the previous path: the driver loads the population itself
  (:func:`engine.runs.topdown.load` without an executor: the local loader), then measures and
  estimates on Spark (the pipeline's stages, no metrics);
* ``executors`` — this change: ``load(spec, executor)`` has Spark read and recode the person
  records on the executors (:mod:`engine.spark.persons`), the driver receives the non-zero block
  cells only, and the true histograms are summed from the cells left in Spark;
* ``baseline`` (with ``--baseline-tree``, a checkout of an older commit, e.g. main at 2b5abce
  with its dense loader) — the ``driver`` variant run with that tree's code.

Printed per variant: seconds to the loaded histogram, seconds of the whole run (session start-up
excluded), the driver's peak RSS (``ru_maxrss`` of the Python driver process; in ``local[N]`` the
JVM — Spark's driver and executors — is a separate process, not included) and a SHA-256 of the
estimates, which must be equal. One run per variant (a 1e6-person run takes minutes on 2 cores).
``--input ppmf`` reads the population's ``ppmf.csv`` as a plain PPMF file (the generic loader with
its located checks: :func:`engine.data.ppmf.load_ppmf` on the driver, ``ppmf_records`` per batch on
the executors); ``--load-only`` stops after the load (the histogram's persons are printed instead
of the estimates' hash); ``--reads N`` then reads N times in the one session (the first Spark job
also starts the Python workers; the later reads show the read alone).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _rss_mib() -> float:
    """Peak resident set size of this process so far (MiB; Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(
    mode: str,
    folder: str,
    master: str,
    seed: int,
    data_format: str | None,
    load_only: bool,
    reads: int = 1,
) -> dict[str, Any]:
    """One timed run in this process (called in a fresh interpreter by :func:`main`)."""
    from engine.dp.presets import load_topdown_preset
    from engine.runs.control import RunControl
    from engine.runs.data_source import DataSource
    from engine.runs.spec import RunSpec
    from engine.runs.topdown import estimate, load, measure
    from engine.spark.executor import SparkExecutor
    from engine.spark.session import get_session

    allocation = load_topdown_preset("topdown-2020-production")["persons"]
    data = DataSource(source=folder, format=data_format or None)
    spec = RunSpec(engine="topdown", data=data, config=allocation.to_dict(), seed=seed)
    t = time.perf_counter()
    session = get_session(master, ui=False)
    session.sparkContext.setLogLevel("ERROR")
    startup = time.perf_counter() - t
    rss_session = _rss_mib()
    executor = SparkExecutor(session)
    started = time.perf_counter()
    hist = load(spec, executor) if mode == "executors" else load(spec)  # type: ignore[call-arg]
    load_s = time.perf_counter() - started
    rss_load = _rss_mib()
    again = []
    for _ in range(reads - 1):  # the same read again in the same session (workers started)
        _release(hist)
        t = time.perf_counter()
        hist = load(spec, executor) if mode == "executors" else load(spec)  # type: ignore[call-arg]
        again.append(round(time.perf_counter() - t, 1))
    if load_only:
        return {
            "mode": mode,
            "blocks": int(hist.n_blocks),
            "startup_s": round(startup, 1),
            "load_s": round(load_s, 1),
            "total_s": "-",
            "rss_session_mib": round(rss_session),
            "rss_after_load_mib": round(rss_load),
            "peak_rss_mib": round(_rss_mib()),
            "estimates_sha256": f"{int(hist.total)} persons",
            "reads_again_s": again,
        }
    control = RunControl()
    measured = measure(spec, hist, control, executor)
    result = estimate(spec, hist, measured, executor, control, started)
    total = time.perf_counter() - started
    estimates = result.estimates_sparse.tocsr()
    digest = hashlib.sha256()
    for array in (estimates.indptr, estimates.indices, estimates.data):
        digest.update(array.astype("int64").tobytes())
    return {
        "mode": mode,
        "blocks": int(hist.n_blocks),
        "startup_s": round(startup, 1),
        "load_s": round(load_s, 1),
        "total_s": round(total, 1),
        "rss_session_mib": round(rss_session),
        "rss_after_load_mib": round(rss_load),
        "peak_rss_mib": round(_rss_mib()),
        "estimates_sha256": digest.hexdigest()[:16],
    }


def _release(hist: Any) -> None:
    """Unpersist the person cells a read on the executors left in Spark (if any)."""
    held = getattr(hist, "extra", {}).pop("spark_block_cells", None)
    if held is not None:
        held.release()


def _run_child(
    mode: str, tree: Path, source: Path, master: str, seed: int, extra: list[str]
) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", mode, "--population",
         str(source), "--master", master, "--seed", str(seed), *extra],
        env=env, capture_output=True, text=True, check=False, cwd=tree,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{mode} run failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persons", type=int, default=1_000_000)
    parser.add_argument("--states", default="RI")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--population", type=Path, default=None)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--baseline-tree", type=Path, default=None)
    parser.add_argument(
        "--input",
        choices=["generated", "ppmf"],
        default="generated",
        help="the population folder, or its ppmf.csv read as a plain PPMF file (generic loader)",
    )
    parser.add_argument("--load-only", action="store_true", help="time and measure the load only")
    parser.add_argument(
        "--reads", type=int, default=1, help="with --load-only: read N times in one session"
    )
    parser.add_argument("--child", choices=["driver", "executors"], default=None)
    parser.add_argument("--format", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        row = child(
            args.child,
            str(args.population),
            args.master,
            args.seed,
            args.format,
            args.load_only,
            args.reads,
        )
        print(json.dumps(row))
        return
    folder = args.population or Path(f"/tmp/spark-read-pop-{args.persons}")
    if not folder.exists():
        from engine.data.population import generate_population

        generate_population(args.persons, seed=args.seed, out_dir=folder, states=[args.states])
    runs = [("executors", ROOT), ("driver", ROOT)]
    if args.baseline_tree is not None:
        runs.append(("baseline", args.baseline_tree))
    source = folder / "ppmf.csv" if args.input == "ppmf" else folder
    extra = ["--format", "ppmf"] if args.input == "ppmf" else []
    extra += ["--load-only", "--reads", str(args.reads)] if args.load_only else []
    rows = []
    for label, tree in runs:
        mode = "driver" if label == "baseline" else label
        row = _run_child(mode, tree, source, args.master, args.seed, extra)
        row["variant"] = label
        rows.append(row)
        print(json.dumps(row), flush=True)
    what = "load only" if args.load_only else "TopDown topdown-2020-production"
    print(f"\n{what} on Spark {args.master}, {source} ({args.input}; {args.persons:,} "
          f"persons, {rows[0]['blocks']:,} blocks), one run each; session start-up excluded")  # fmt: skip
    print(f"{'variant':<10} {'load s':>7} {'run s':>7} {'driver peak MiB':>16} "
          f"{'after load MiB':>15} {'estimates':>18}")  # fmt: skip
    for row in rows:
        print(f"{row['variant']:<10} {row['load_s']:>7} {row['total_s']:>7} "
              f"{row['peak_rss_mib']:>16} {row['rss_after_load_mib']:>15} "
              f"{row['estimates_sha256']:>18}")  # fmt: skip
    for row in rows:
        if row.get("reads_again_s"):
            print(f"{row['variant']}: read again in the same session: {row['reads_again_s']} s")
    same = len({r["estimates_sha256"] for r in rows}) == 1
    print(f"identical estimates: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
