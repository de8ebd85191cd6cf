"""Keyed noise (docs/science.md §8) against the earlier single-stream noise: same accuracy, same cost.

Runs TopDown on the shipped RI 2010 sample (``ri2010-production-like`` at ρ = 2.56 by default) for
several seeds twice — the noise drawn from the counter-based generator keyed by (seed, level,
geounit, query) (:mod:`engine.noise.keyed`, what every run now uses) and, as the named baseline,
from one ``numpy.random.default_rng(seed)`` stream drawn query by query in node order (what runs
used before keyed noise). Everything else (spine, budgets, estimation) is the same code. Prints the
MAE of every (geolevel, query) per design as mean ± standard deviation over the seeds, the Welch t
statistic of the difference, and the median measurement-phase time.

    python benchmarks/keyed_noise.py [--seeds 1,2,3,4,5] [--rho 2.56] [--preset ri2010-production-like]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pandas as pd

from engine.data.samples import load_topdown_sample
from engine.dp.presets import load_topdown_preset
from engine.metrics.error_tables import mae_table
from engine.noise.keyed import geounit_hashes
from engine.topdown.estimation import estimate
from engine.topdown.measure import measure
from engine.topdown.plan import plan_run
from engine.topdown.result import result_of


def run_once(hist, allocation, seed: int, keyed: bool) -> tuple[pd.DataFrame, float]:
    """MAE table and measurement seconds of one run with keyed or single-stream noise."""
    plan = plan_run(hist, allocation)
    truth = plan.tree.aggregate(hist.counts.astype(np.int64))
    t0 = time.perf_counter()
    kwargs = (
        {"seed": seed, "geounit_hash": geounit_hashes(plan.tree.level_names, plan.tree.node_id)}
        if keyed
        else {}
    )
    rng = None if keyed else np.random.default_rng(seed)
    measured = measure(
        truth, plan.queries, plan.budget, plan.invariant, allocation.mechanism, rng, **kwargs
    )
    seconds = time.perf_counter() - t0
    estimation = estimate(plan, measured, truth)
    result = result_of(
        plan, hist, truth, measured, estimation, seed=seed, runtime_s=0.0, timings={}, workers=1
    )
    return mae_table(result.to_tidy()), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--rho", type=float, default=2.56)
    parser.add_argument("--preset", default="ri2010-production-like")
    parser.add_argument("--data", default="ri2010")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    hist = load_topdown_sample(args.data)
    allocation = load_topdown_preset(args.preset)["persons"].with_rho(args.rho)
    frames, times = [], {"single stream (before)": [], "keyed (after)": []}
    for seed in seeds:
        for design, keyed in (("single stream (before)", False), ("keyed (after)", True)):
            mae, seconds = run_once(hist, allocation, seed, keyed)
            frames.append(mae.assign(design=design, seed=seed))
            times[design].append(seconds)
    table = pd.concat(frames, ignore_index=True)
    wide = table.pivot_table(
        index=["geolevel", "query"], columns="design", values="mae", aggfunc=["mean", "std"]
    )
    before, after = "single stream (before)", "keyed (after)"
    n = len(seeds)
    diff = wide[("mean", after)] - wide[("mean", before)]
    se = np.sqrt((wide[("std", after)] ** 2 + wide[("std", before)] ** 2) / n)
    out = pd.DataFrame(
        {
            "MAE before (mean)": wide[("mean", before)],
            "± sd": wide[("std", before)],
            "MAE after (mean)": wide[("mean", after)],
            "± sd ": wide[("std", after)],
            "Welch t": np.where(se > 0, diff / se, 0.0),
        }
    )
    print(
        f"TopDown on {args.data}, {args.preset} at ρ = {args.rho:g}, seeds {seeds} "
        f"(MAE per geolevel × query over the seeds)"
    )
    with pd.option_context("display.width", 200, "display.float_format", "{:.4f}".format):
        print(out.to_string())
    print()
    for design, values in times.items():
        print(
            f"measurement phase, {design}: median {statistics.median(values):.3f} s over {n} runs"
        )


if __name__ == "__main__":
    main()
