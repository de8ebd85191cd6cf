"""How much the GQ / occupied-unit lower bounds change TopDown's published error (docs/science.md §6; TDA §5.3).

The prediction (docs/prediction.md) models structural zeros of the unit frame but not the lower
bounds (each GQ facility holds at least one person, each occupied unit its householder). This
script measures what they do: the same runs (same seeds, hence the same noise) with the unit
frame's bounds as the engine builds them, and with their lower bounds set to 0 (upper bounds —
the structural zeros — kept), on a generated population with ``topdown-2020-production``; it
prints the RMSE of the published counts per geolevel × query for both and their ratio. The
baseline is the run without lower bounds, in the same process.

Usage: ``.venv/bin/python benchmarks/gq_lower_bounds.py [--persons 30000] [--population-seed 11]
[--rho 2.556] [--seeds 4]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline_run import topdown_result  # noqa: E402

import engine.topdown.plan as plan_module  # noqa: E402
from engine.data.histogram import BlockHistogram  # noqa: E402
from engine.data.inputs import load_topdown_input  # noqa: E402
from engine.data.population import generate_population  # noqa: E402
from engine.dp.presets import load_topdown_preset  # noqa: E402
from engine.topdown.constraints import CountBounds, block_bounds  # noqa: E402


def _without_lower(hist: BlockHistogram) -> CountBounds | None:
    bounds = block_bounds(hist)
    if bounds is None:
        return None
    return CountBounds(bounds.query, np.zeros_like(bounds.lower), bounds.upper, bounds.source)


def _rmse(
    hist: BlockHistogram, rho: float, seeds: int, bounds: Callable[..., CountBounds | None]
) -> dict[tuple[str, str], float]:
    alloc = load_topdown_preset("topdown-2020-production")["persons"].with_rho(rho)
    queries = list(dict.fromkeys(["TOTAL", *alloc.all_queries()]))
    original = plan_module.block_bounds
    plan_module.block_bounds = bounds  # the planner's source of the unit frame's bounds
    try:
        mse: dict[tuple[str, str], list[float]] = {}
        for seed in range(seeds):
            tidy = topdown_result(hist, alloc, seed=seed).to_tidy(queries)
            err2 = (tidy["estimate"] - tidy["true"]).astype(float) ** 2
            for key, value in err2.groupby([tidy["geolevel"], tidy["query"]]).mean().items():
                mse.setdefault((str(key[0]), str(key[1])), []).append(float(value))
    finally:
        plan_module.block_bounds = original
    return {k: float(np.sqrt(np.mean(v))) for k, v in mse.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persons", type=int, default=30_000, help="persons generated (RI)")
    parser.add_argument("--population-seed", type=int, default=11, help="generator seed")
    parser.add_argument("--rho", type=float, default=2.556, help="total ρ")
    parser.add_argument("--seeds", type=int, default=4, help="runs (seeds 0..n-1)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "population"
        generate_population(args.persons, seed=args.population_seed, out_dir=folder, states=["RI"])
        hist = load_topdown_input(str(folder))
        frame = block_bounds(hist)
        if frame is None:
            print("the population carries no unit frame: no bounds to compare")
            return 1
        print(
            f"{args.persons:,} persons (seed {args.population_seed}), ρ = {args.rho:g}, "
            f"{args.seeds} runs; lower bounds on {frame.query}: {frame.lower.sum():,.0f} persons "
            f"in {int((frame.lower > 0).any(axis=1).sum()):,} of {frame.lower.shape[0]:,} blocks"
        )
        with_lower = _rmse(hist, args.rho, args.seeds, block_bounds)
        without = _rmse(hist, args.rho, args.seeds, _without_lower)
    print(f"{'geolevel':12s} {'query':27s} {'with':>8s} {'without':>8s} {'ratio':>7s}")
    worst = 0.0
    for key in sorted(with_lower):
        w, o = with_lower[key], without.get(key, float("nan"))
        if w <= 0 or o <= 0:
            continue
        worst = max(worst, abs(np.log(w / o)))
        print(f"{key[0]:12s} {key[1]:27s} {w:8.3f} {o:8.3f} {w / o:7.3f}")
    print(f"largest change of a published RMSE: {100 * (np.exp(worst) - 1):.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
