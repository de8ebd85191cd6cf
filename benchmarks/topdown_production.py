"""TopDown at production scale: the 2,016-cell schema on generated states (issue 17; TDA §7).

For each population size (default 1e5 and 1e6 persons, one generated state each; ``--persons``
accepts 1e7 too) the script, in a fresh subprocess per size (so peak memory is that size's own):

1. generates the population (``engine.data.population``; RI for sizes up to 2M persons, Ohio
   above, unless ``--state``), loads it with its block frame (structural zeros and GQ bounds held);
2. runs ``topdown-2020-production`` (through the run pipeline, one worker), recording every
   family batch;
3. reports blocks, non-zero cells (block histograms and all geounits), seconds per level, load
   and generation seconds, and peak resident memory (``ru_maxrss`` of the subprocess, in GiB:
   after loading and at the end of the run);
4. (``benchmarks/cvxpy_families.py``) for a sample of WHOLE families (``--sample`` per level, any
   number of children unless
   ``--max-children``): the engine's least squares of one family alone, the previous solver path
   (the centred Clarabel model for every pass) and a per-family cvxpy model of TDA eq. 7.5 with
   the same constraints (solved by Clarabel through cvxpy): ratios of times per level and the
   relative difference of objectives; and, since the engine solves many small families at once
   (``engine.topdown.qp.route``), WHOLE BATCHES: for ``--sample`` random families per level
   the unit of work that holds each is solved by the production path at once, and every family
   of it by the cvxpy model — reported per family (batch seconds ÷ families in the batch beside
   cvxpy's seconds per family on the same families);
5. with ``--baseline``, the whole run again with ``--solver clarabel`` (the general model for
   every family: the path before issue 17's family solvers), in the same subprocess (seconds per level before/after on the same machine state);
6. with ``--every-batch LEVEL``, EVERY batch of that level (e.g. ``Block_Group``) solved by the
   production path 3 times (median) and every family of it once by the cvxpy model, timed in CPU
   seconds as well as wall-clock (JSON key ``cvxpy_every_batch``) — the whole level, not a sample;
The last row fits cost ∝ blocks^b between the two largest sizes and projects 1e7 persons when it
was not run. Usage::

    .venv/bin/python benchmarks/topdown_production.py [--persons 1e5,1e6] [--sample 4] [--json]
        [--cache /tmp/populations]   # generate each population once, reuse it on later runs
        [--baseline] [--max-children N] [--every-batch Block_Group]

Timings are wall-clock on whatever machine runs it; the docs quote medians of several runs.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

LEVELS = ("US", "State", "County", "Tract", "Block_Group", "Block")


def _differing(a, b) -> int:
    """Cells whose estimates differ between two runs (dense or SciPy sparse arrays)."""
    if hasattr(a, "tocsr") and hasattr(b, "tocsr"):
        return int((a.tocsr() != b.tocsr()).nnz)
    a = a.toarray() if hasattr(a, "toarray") else np.asarray(a)
    b = b.toarray() if hasattr(b, "toarray") else np.asarray(b)
    return int(np.count_nonzero(a != b))


def _population(
    persons: int, state: str, seed: int, folder: Path
) -> tuple[object, float, int | None]:
    """(histogram, load seconds, structural-zero blocks or None) of the population in ``folder``,
    generated there first unless a complete one (its manifest readable) is already there."""
    from engine.core.errors import PHExploreError
    from engine.data.generated import load_generated_population
    from engine.data.population import generate_population

    structural = None
    try:
        t0 = time.perf_counter()
        hist = load_generated_population(folder)
        return hist, time.perf_counter() - t0, None
    except (OSError, PHExploreError):  # absent or incomplete (refused by the reader): generate it
        summary = generate_population(persons, seed=seed, states=[state], out_dir=folder)
        structural = summary.structural_zero_blocks
    t0 = time.perf_counter()
    hist = load_generated_population(folder)
    return hist, time.perf_counter() - t0, structural


def one_size(
    persons: int,
    state: str,
    seed: int,
    sample: int,
    cache: str | None = None,
    *,
    baseline: bool = False,
    max_children: int | None = None,
    every_batch: str | None = None,
) -> dict[str, object]:
    """Generate (or reuse from ``cache``), load, run and compare one size (in its own subprocess)."""
    from cvxpy_families import compare_batches, compare_every_batch, compare_families
    from pipeline_run import topdown_result

    from engine.dp.presets import load_topdown_preset
    from engine.topdown import estimation as estimation_module

    t0 = time.perf_counter()
    if cache:
        folder = Path(cache) / f"{state}-{persons}-seed{seed}"
        hist, load_s, structural = _population(persons, state, seed, folder)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            hist, load_s, structural = _population(persons, state, seed, Path(tmp) / "p")
    generate_s = time.perf_counter() - t0 - load_s
    peak_load = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    allocation = load_topdown_preset("topdown-2020-production")["persons"]
    batches = []
    original = estimation_module.estimate_batch

    def recording(batch, passes, chain, *rest):
        # Only the compared level's batches when only --every-batch asks (recording every
        # level's would inflate the peak memory reported)
        if sample or batch.child_level == every_batch:
            batches.append((batch, passes, chain))
        return original(batch, passes, chain, *rest)

    estimation_module.estimate_batch = recording
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        result = topdown_result(hist, allocation, seed=seed)
        run_s = time.perf_counter() - t0
        run_cpu_s = time.process_time() - c0
    finally:
        estimation_module.estimate_batch = original
    peak_run = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    previous = None
    if baseline:
        # The same run with the previous solver path (Clarabel for every 2,016-cell family).
        t0, c0 = time.perf_counter(), time.process_time()
        before = topdown_result(hist, allocation, seed=seed, solver="clarabel")
        previous = {
            "run_s": time.perf_counter() - t0,
            "run_cpu_s": time.process_time() - c0,
            "level_s": {k: v for k, v in before.timings.items() if k in LEVELS},
            "least_squares_cpu_s": before.timings.get("least_squares_cpu", 0.0),
            "rounding_cpu_s": before.timings.get("rounding_cpu", 0.0),
            "estimate_cells_differing": _differing(
                getattr(before, "estimates_sparse", before.estimates),
                getattr(result, "estimates_sparse", result.estimates),
            ),
        }
    compare = compare_families(batches, sample, seed, max_children) if sample else {}
    whole = compare_batches(batches, sample, seed) if sample else {}
    every = compare_every_batch(batches, every_batch) if every_batch else {}
    import scipy.sparse as sp

    # CSR: non-zero cells only (a checkout before issue 17's sparse histograms has dense truth)
    truth = getattr(result, "truth_sparse", None)
    truth = sp.csr_matrix(result.truth) if truth is None else truth
    block_rows = truth[result.tree.block_node]
    return {
        "persons": persons,
        "state": state,
        "blocks": hist.n_blocks,
        "structural_zero_blocks": structural,
        "geounits": int(result.tree.n_nodes),
        "nonzero_cells_blocks": int(block_rows.count_nonzero()),
        "nonzero_cells_all": int(truth.count_nonzero()),
        "dense_cells_all": int(truth.shape[0] * truth.shape[1]),
        "generate_s": generate_s,
        "load_s": load_s,
        "run_s": run_s,
        # CPU seconds of the run (one worker: the process's own work, less sensitive than wall
        # time to other jobs on a shared machine)
        "run_cpu_s": run_cpu_s,
        "end_to_end_s": load_s + run_s,
        "level_s": {k: v for k, v in result.timings.items() if k in LEVELS},
        "measurement_s": result.timings.get("measurement", 0.0),
        "least_squares_cpu_s": result.timings.get("least_squares_cpu", 0.0),
        "rounding_cpu_s": result.timings.get("rounding_cpu", 0.0),
        "peak_rss_gb": peak_run,
        "peak_rss_after_load_gb": peak_load,
        "block_histogram": "sparse" if getattr(hist, "is_sparse", False) else "dense",
        "bound_violations": result.diagnostics["structural"].get("bound_violations"),
        "cvxpy": compare,
        "cvxpy_batches": whole,
        "cvxpy_every_batch": every,
        "previous_path": previous,
    }


def _parse_sizes(text: str) -> list[int]:
    return [int(float(t)) for t in text.split(",") if t.strip()]


def _table(rows: list[dict[str, object]]) -> str:
    head = (
        "| persons | blocks | non-zero block cells | load s | run s | end-to-end s | "
        "block level s | peak GiB | peak after load GiB | cvxpy ÷ ours | "
        "max rel. objective diff |"
    )
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        cv = r.get("cvxpy") or {}
        lines.append(
            f"| {r['persons']:,} | {r['blocks']:,} | {r['nonzero_cells_blocks']:,} | "
            f"{r['load_s']:.1f} | {r['run_s']:.1f} | {r['end_to_end_s']:.1f} | "
            f"{r['level_s'].get('Block', float('nan')):.1f} | {r['peak_rss_gb']:.2f} | "
            f"{r['peak_rss_after_load_gb']:.2f} | "
            f"{cv.get('speedup', float('nan')):.1f}× | "
            f"{cv.get('max_rel_objective_diff', float('nan')):.1e} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persons", default="1e5,1e6", help="sizes, comma separated (1e5,1e6)")
    parser.add_argument("--state", default=None, help="state to generate (default RI; OH > 2M)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sample", type=int, default=2, help="families per level vs cvxpy")
    parser.add_argument(
        "--baseline",
        action="store_true",
        help="also run each size with the previous solver path (Clarabel for every family)",
    )
    parser.add_argument(
        "--max-children",
        type=int,
        default=None,
        help="compare only families with at most this many children (default: any size)",
    )
    parser.add_argument(
        "--every-batch",
        choices=LEVELS,
        default=None,
        metavar="LEVEL",
        help="every batch of LEVEL (e.g. Block_Group) solved by the production path 3 times and "
        "every family of it by the per-family cvxpy model: CPU and wall seconds per family, "
        "ratios (JSON key cvxpy_every_batch)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--cache",
        default=None,
        help="folder for generated populations: reused when present (e.g. /tmp/populations)",
    )
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one is not None:
        state = args.state or ("RI" if args.one <= 2_000_000 else "OH")
        one = one_size(
            args.one,
            state,
            args.seed,
            args.sample,
            args.cache,
            baseline=args.baseline,
            max_children=args.max_children,
            every_batch=args.every_batch,
        )
        print(json.dumps(one))
        return 0
    rows = []
    for persons in _parse_sizes(args.persons):
        command = [sys.executable, __file__, "--one", str(persons), "--seed", str(args.seed)]
        command += ["--sample", str(args.sample)]
        if args.cache:
            command += ["--cache", args.cache]
        if args.baseline:
            command.append("--baseline")
        if args.max_children is not None:
            command += ["--max-children", str(args.max_children)]
        if args.every_batch:
            command += ["--every-batch", args.every_batch]
        if args.state:
            command += ["--state", args.state]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            return 1
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        if not args.json:
            print(f"done {persons:,}: {rows[-1]['end_to_end_s']:.1f} s", file=sys.stderr)
    projection = None
    if len(rows) >= 2:
        a, b = rows[-2], rows[-1]
        exponent = float(
            np.log(b["end_to_end_s"] / a["end_to_end_s"]) / np.log(b["blocks"] / a["blocks"])
        )
        per_block = b["end_to_end_s"] / b["blocks"]
        blocks_1e7 = b["blocks"] * 1e7 / b["persons"]
        projection = {
            "exponent_time_vs_blocks": exponent,
            "projected_1e7_s_linear": per_block * blocks_1e7,
            "projected_1e7_s_fitted": b["end_to_end_s"] * (blocks_1e7 / b["blocks"]) ** exponent,
            "projected_1e7_peak_gb_linear": b["peak_rss_gb"] * 1e7 / b["persons"],
        }
    if args.json:
        print(json.dumps({"sizes": rows, "projection": projection}, indent=2))
        return 0
    print(_table(rows))
    for r in rows:
        levels = ", ".join(f"{k} {v:.1f}" for k, v in r["level_s"].items())
        print(f"\n{r['persons']:,} persons: seconds per level: {levels}")
        print(
            f"  measurement {r['measurement_s']:.1f} s, least squares CPU "
            f"{r['least_squares_cpu_s']:.1f} s, rounding CPU {r['rounding_cpu_s']:.1f} s; "
            f"non-zero cells (all geounits) {r['nonzero_cells_all']:,} of {r['dense_cells_all']:,}"
            f"; bound violations {r['bound_violations']}"
        )
        previous = r.get("previous_path")
        if previous:
            before = ", ".join(f"{k} {v:.1f}" for k, v in previous["level_s"].items())
            print(
                f"  previous solver path (same run): run {previous['run_s']:.1f} s; per level: "
                f"{before}; least squares CPU {previous['least_squares_cpu_s']:.1f} s, rounding "
                f"CPU {previous['rounding_cpu_s']:.1f} s; estimate cells differing "
                f"{previous['estimate_cells_differing']:,}"
            )
        for level, v in (r.get("cvxpy") or {}).get("per_level", {}).items():
            print(
                f"  {level} families (children {v['children']}): ours {v['ours_s']:.2f} s, "
                f"previous path {v['previous_s']:.2f} s ({v['previous_ratio']:.1f}×), cvxpy "
                f"{v['cvxpy_s']:.2f} s ({v['cvxpy_ratio']:.1f}×); max rel. objective diff "
                f"{v['max_rel_objective_diff']:.1e}"
            )
        for level, v in (r.get("cvxpy_batches") or {}).get("per_level", {}).items():
            print(
                f"  {level} whole batches ({v['batches']}, {v['families']} families, "
                f"{v['children']} children): production path {v['ours_per_family_s'] * 1e3:.1f} "
                f"ms per family (batch seconds ÷ families), cvxpy "
                f"{v['cvxpy_per_family_s'] * 1e3:.1f} ms per family ({v['cvxpy_ratio']:.1f}×); "
                f"max rel. objective diff {v['max_rel_objective_diff']:.1e}"
            )
        every = r.get("cvxpy_every_batch") or {}
        if every.get("families"):
            print(
                f"  {every['level']}: EVERY batch ({every['batches']}, {every['families']} "
                f"families, {every['children']} children), CPU seconds: production path "
                f"{every['ours_cpu_per_family_s'] * 1e3:.2f} ms per family (median of "
                f"{every['repeats']}), cvxpy {every['cvxpy_cpu_per_family_s'] * 1e3:.1f} ms "
                f"({every['cvxpy_cpu_ratio']:.1f}×); wall-clock {every['cvxpy_ratio']:.1f}×; max "
                f"rel. objective diff {every['max_rel_objective_diff']:.1e}"
            )
    if projection:
        print(
            f"\ncost ∝ blocks^{projection['exponent_time_vs_blocks']:.2f} between the two largest "
            f"sizes; 1e7 persons projected at {projection['projected_1e7_s_linear']:.0f} s "
            f"(linear) / {projection['projected_1e7_s_fitted']:.0f} s (fitted), "
            f"{projection['projected_1e7_peak_gb_linear']:.1f} GB (linear)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
