"""Writing a TopDown run's tables: CSV vs Parquet, streamed vs whole frames (docs/topdown.md, "Outputs").

For each population size (default 1e5 and 1e6 persons, a generated Rhode Island) the script, in a
fresh subprocess per size:

1. generates the population, runs ``topdown-2020-production`` once (through the run pipeline, one worker);
2. writes each table in each way ``--repeats`` times (default 3; ``--csv-repeats`` for the CSV
   ways), round-robin over the ways so that load changes on the shared machine fall on all of
   them alike, every write in a forked child so its extra memory is its own: wall seconds (median
   over the repeats), file size, and the peak resident memory the write added above the process
   at the fork (max over repeats):

   * ``estimates``: dense CSV (what ``estimates.csv`` always was), sparse Parquet (the default above
     1,000,000 dense rows), dense Parquet;
   * ``measurements`` and ``microdata``: CSV and Parquet;
   * the **baseline** — the approach of the writer of main at b4c49b3 (``result.to_tidy().to_csv``,
     ``result.measurements.to_csv``, ``microdata_frame(result).to_csv``: each table built whole,
     then written) — while its dense table has at most ``--baseline-max-rows`` rows (default
     20,000,000; above, it is skipped and the table says so: building it whole would need many GB
     on this shared machine).

Usage::

    .venv/bin/python benchmarks/outputs.py [--persons 1e5,1e6] [--repeats 3] [--csv-repeats N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1024**2


def in_child(work: Callable[[], Any]) -> dict[str, float]:
    """Run ``work`` in a forked child: wall seconds and peak RSS added (MB) above the fork."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read)
        code = 0
        try:
            start_rss = _rss_mb()
            t0 = time.perf_counter()
            work()
            seconds = time.perf_counter() - t0
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            os.write(write, json.dumps({"s": seconds, "mb": max(0.0, peak - start_rss)}).encode())
        except BaseException as exc:  # report, never fall back into the parent's code
            os.write(write, json.dumps({"error": repr(exc)}).encode())
            code = 1
        finally:
            os.close(write)
            os._exit(code)
    os.close(write)
    chunks = []
    while block := os.read(read, 65536):
        chunks.append(block)
    os.close(read)
    os.waitpid(pid, 0)
    answer = json.loads(b"".join(chunks).decode())
    if "error" in answer:
        raise RuntimeError(answer["error"])
    return answer


def _ways(result: Any, baseline_max_rows: int) -> list[tuple[str, str, Callable[[Path], Path]]]:
    """(table, way, write(folder) → file) of every write measured."""
    from engine.runs.table_files import write_table
    from engine.runs.writers import _estimate_schema, _measurement_schema
    from engine.topdown.export import (
        estimate_rows,
        iter_estimate_frames,
        iter_measurement_frames,
        iter_microdata_frames,
        measurement_rows,
        microdata_frame,
    )

    def table(name: str, chunks: Callable[[], Any], fmt: str, schema: Any = None):
        def write(folder: Path) -> Path:
            return folder / write_table(chunks(), folder, name, fmt, schema=schema).file

        return write

    def whole(name: str, frame: Callable[[], Any]):
        def write(folder: Path) -> Path:
            path = folder / f"{name}.csv"
            frame().to_csv(path, index=False)
            return path

        return write

    est = _estimate_schema()
    ways = [
        ("estimates", "streamed CSV, dense", table("estimates", lambda: iter_estimate_frames(result), "csv", est)),
        ("estimates", "streamed Parquet, sparse", table("estimates", lambda: iter_estimate_frames(result, sparse=True), "parquet", est)),
        ("estimates", "streamed Parquet, dense", table("estimates", lambda: iter_estimate_frames(result), "parquet", est)),
        ("measurements", "streamed CSV", table("measurements", lambda: iter_measurement_frames(result), "csv", _measurement_schema())),
        ("measurements", "streamed Parquet", table("measurements", lambda: iter_measurement_frames(result), "parquet", _measurement_schema())),
        ("microdata", "streamed CSV", table("microdata", lambda: iter_microdata_frames(result), "csv")),
        ("microdata", "streamed Parquet", table("microdata", lambda: iter_microdata_frames(result), "parquet")),
    ]  # fmt: skip
    ways.sort(key=lambda way: "CSV" in way[1])  # Parquet first: the long CSV writes come last
    if estimate_rows(result) <= baseline_max_rows:
        ways.append(
            ("estimates", "baseline b4c49b3: whole frame CSV", whole("estimates", result.to_tidy))
        )
    if measurement_rows(result) <= baseline_max_rows:
        ways.append(
            (
                "measurements",
                "baseline b4c49b3: whole frame CSV",
                whole("measurements", lambda: result.measurements),
            )
        )
    ways.append(("microdata", "baseline b4c49b3: whole frame CSV", whole("microdata", lambda: microdata_frame(result))))  # fmt: skip
    return ways


def one_size(
    persons: int,
    seed: int,
    repeats: int,
    baseline_max_rows: int,
    csv_repeats: int,
    skip: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Generate, run once, then time every way of writing (inside its own subprocess)."""
    from pipeline_run import topdown_result

    from engine.data.generated import load_generated_population
    from engine.data.population import generate_population
    from engine.dp.presets import load_topdown_preset
    from engine.topdown.export import estimate_rows, iter_estimate_frames, measurement_rows

    with tempfile.TemporaryDirectory() as tmp:
        generate_population(persons, seed=seed, states=["RI"], out_dir=Path(tmp) / "p")
        hist = load_generated_population(Path(tmp) / "p")
    allocation = load_topdown_preset("topdown-2020-production")["persons"]
    t0 = time.perf_counter()
    result = topdown_result(hist, allocation, seed=seed)
    run_s = time.perf_counter() - t0
    ways = [w for w in _ways(result, baseline_max_rows) if f"{w[0]}:{w[1]}" not in skip]
    seconds: dict[tuple[str, str], list[float]] = {(t, w): [] for t, w, _ in ways}
    extra: dict[tuple[str, str], list[float]] = {(t, w): [] for t, w, _ in ways}
    sizes: dict[tuple[str, str], int] = {}
    # Round-robin over the ways (repeat 1 of every way, then repeat 2 …) so that a change of
    # load on the shared machine falls on every way alike, not on the last ones.
    for repeat in range(max(repeats, csv_repeats)):
        for table, way, write in ways:
            if repeat >= (csv_repeats if "CSV" in way else repeats):
                continue
            with tempfile.TemporaryDirectory(dir=os.environ.get("PHEXPLORE_BENCH_DIR")) as tmp:
                folder = Path(tmp)

                def work(folder: Path = folder, write: Callable[[Path], Path] = write) -> None:
                    path = write(folder)
                    (folder / "size").write_text(str(path.stat().st_size))

                measured = in_child(work)
                key = (table, way)
                sizes[key] = int((folder / "size").read_text())
            seconds[key].append(measured["s"])
            extra[key].append(measured["mb"])
            print(
                f"{persons:,} persons · repeat {repeat + 1} · {table} · {way}: "
                f"{measured['s']:.2f} s, {sizes[key] / 1e6:.3f} MB, +{measured['mb']:.0f} MB",
                file=sys.stderr,
                flush=True,
            )
    rows = [
        {
            "table": table,
            "way": way,
            "seconds_median": statistics.median(seconds[(table, way)]),
            "writes": len(seconds[(table, way)]),
            "seconds": seconds[(table, way)],
            "mb": sizes[(table, way)] / 1e6,
            "extra_rss_mb_max": max(extra[(table, way)]),
        }
        for table, way, _ in ways
    ]
    skipped = [
        name
        for name, n in (
            ("estimates", estimate_rows(result)),
            ("measurements", measurement_rows(result)),
        )
        if n > baseline_max_rows
    ]
    return {
        "persons": persons,
        "blocks": int(result.tree.n_blocks),
        "geounits": int(result.tree.n_nodes),
        "dense_estimate_rows": estimate_rows(result),
        "measurement_rows": measurement_rows(result),
        "sparse_estimate_rows": sum(len(f) for f in iter_estimate_frames(result, sparse=True)),
        "microdata_rows": int(result.block_histogram_sparse().sum()),
        "run_s": run_s,
        "repeats": repeats,
        "baseline_skipped": skipped,
        "skipped": list(skip),
        "writes": rows,
    }


def _table(size: dict[str, Any]) -> str:
    lines = [
        f"{size['persons']:,} persons: {size['blocks']:,} blocks, {size['geounits']:,} geounits; "
        f"estimates {size['dense_estimate_rows']:,} dense rows ({size['sparse_estimate_rows']:,} "
        f"non-zero), measurements {size['measurement_rows']:,} rows, microdata "
        f"{size['microdata_rows']:,} rows; engine run {size['run_s']:.0f} s; medians of "
        f"{size['repeats']} writes (CSV: see the writes column)",
        "",
        "| table | way | write s (median) | writes | file MB | extra peak RSS MB (max) |",
        "|---|---|---|---|---|---|",
    ]
    for r in size["writes"]:
        lines.append(
            f"| {r['table']} | {r['way']} | {r['seconds_median']:.2f} | {r['writes']} | "
            f"{r['mb']:.3g} | "
            f"{r['extra_rss_mb_max']:.0f} |"
        )
    for way in size.get("skipped") or ():
        lines.append(f"| {way.split(':')[0]} | {way.split(':')[1]} | not run (--skip) | | | |")
    if size["baseline_skipped"]:
        lines.append(
            f"| {', '.join(size['baseline_skipped'])} | baseline b4c49b3 | skipped: more dense "
            "rows than --baseline-max-rows | | |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--persons", default="1e5,1e6", help="comma-separated sizes (1e3 – 1e7)")
    parser.add_argument("--repeats", type=int, default=3, help="writes per way, 1 – 20 (default 3)")
    parser.add_argument(
        "--csv-repeats",
        type=int,
        default=None,
        help="writes per CSV way, 1 – 20 (default: --repeats; a dense CSV at 1e6 persons takes "
        "minutes)",
    )
    parser.add_argument(
        "--skip",
        default="",
        help="semicolon-separated TABLE:WAY to leave out, e.g. 'measurements:streamed CSV'",
    )
    parser.add_argument("--seed", type=int, default=1, help="population and noise seed")
    parser.add_argument(
        "--baseline-max-rows",
        type=int,
        default=20_000_000,
        help="skip the whole-frame baseline of a table with more dense rows (default 20,000,000)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    csv_repeats = args.repeats if args.csv_repeats is None else args.csv_repeats
    if not 1 <= args.repeats <= 20 or not 1 <= csv_repeats <= 20:
        parser.error("--repeats and --csv-repeats must be 1 – 20")
    if args.one is not None:
        skip = tuple(w.strip() for w in args.skip.split(";") if w.strip())
        size = one_size(
            args.one, args.seed, args.repeats, args.baseline_max_rows, csv_repeats, skip
        )
        print(json.dumps(size))
        return 0
    sizes = [int(float(t)) for t in args.persons.split(",") if t.strip()]
    if any(not 1_000 <= s <= 10_000_000 for s in sizes):
        parser.error("--persons: every size must be 1e3 – 1e7")
    results = []
    for persons in sizes:
        command = [
            sys.executable, __file__, "--one", str(persons), "--seed", str(args.seed),
            "--repeats", str(args.repeats), "--baseline-max-rows", str(args.baseline_max_rows),
            "--csv-repeats", str(csv_repeats), "--skip", args.skip,
        ]  # fmt: skip
        done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
        if done.returncode != 0:
            return 1
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        if not args.json:
            print(_table(results[-1]), flush=True)
            print()
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
