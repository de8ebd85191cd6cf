"""Benchmark of the TopDown engine (TDA §7): batched solvers vs a per-family cvxpy + SCS baseline.

1. One full run (through the run pipeline, ``benchmarks/pipeline_run.py``) on the data, recording every family batch.
2. The same per-family least-squares problems (TDA eq. 7.5), with the passes the engine used for
   each batch as recorded: one pass with every query for the root and for families whose
   children are blocks; elsewhere pass 1 TOTAL, then pass 2 the rest with the pass-1 totals held
   within 0.1. Each is solved by the engine's method and by a plain cvxpy model per family with
   SCS (tolerance ``--eps``); objective values are compared (relative difference).
3. The rounding LPs (eq. 7.7) per family as cvxpy MILPs (HiGHS) for the whole-run baseline:
   baseline whole run = the engine's run time − its least-squares and rounding time + the
   baseline's per-family least-squares and rounding time.
4. Whole-run time on subsets of the blocks (by tracts) to show how the run scales.

Usage: ``.venv/bin/python benchmarks/topdown.py [--data ri2010] [--fractions 0.1,0.3,1]
[--baseline-families N] [--out results.json]``. ``--baseline-families`` times the baseline on a
random sample of families and extrapolates (labelled in the output); the default solves all.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import cvxpy as cp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline_run import topdown_result  # noqa: E402

from engine.data.histogram import BlockHistogram  # noqa: E402
from engine.data.samples import load_topdown_sample  # noqa: E402
from engine.dp.presets import load_topdown_preset  # noqa: E402
from engine.topdown import estimation as estimation_module  # noqa: E402
from engine.topdown.family import FamilyBatch  # noqa: E402
from engine.topdown.qp.problem import Band  # noqa: E402
from engine.topdown.qp.route import PASS_TOLERANCE, solve_pass


def subset_by_tracts(hist: BlockHistogram, fraction: float, seed: int = 0) -> BlockHistogram:
    tracts = np.sort(hist.geography["Tract"].unique())
    rng = np.random.default_rng(seed)
    chosen = rng.choice(tracts, size=max(1, round(fraction * tracts.size)), replace=False)
    keep = hist.geography["Tract"].isin(chosen).to_numpy()
    return BlockHistogram(
        hist.schema, hist.levels, hist.geography[keep].reset_index(drop=True), hist.counts[keep]
    )


def recorded_run(hist, allocation, seed):
    """Run TopDown once, recording every batch handed to ``estimate_batch``."""
    batches = []
    original = estimation_module.estimate_batch

    def recording(batch, passes, chain, *rest):
        batches.append((batch, passes, chain))
        return original(batch, passes, chain, *rest)

    estimation_module.estimate_batch = recording
    try:
        result = topdown_result(hist, allocation, seed=seed)
    finally:
        estimation_module.estimate_batch = original
    return result, batches


def cvxpy_family(batch: FamilyBatch, f: int, queries, bands, eps: float) -> tuple[float, float]:
    """TDA eq. 7.5 for family ``f`` as a plain cvxpy model solved by SCS: (objective, seconds)."""
    t0 = time.perf_counter()
    lo, hi = batch.child_ptr[f], batch.child_ptr[f + 1]
    x = cp.Variable((hi - lo, batch.n_cells), nonneg=True)
    terms = []
    for q in queries:
        w = batch.weight[lo:hi, q]
        if not np.any(w > 0):
            continue
        a = batch.queries[q].matrix().toarray()
        terms.append(cp.sum(cp.multiply(w[:, None], cp.square(x @ a.T - batch.noisy[q][lo:hi]))))
    constraints = []
    if batch.parent is not None:
        constraints.append(cp.sum(x, axis=0) == batch.parent[f])
    for q, target in enumerate(batch.invariant):
        if target is None:
            continue
        a = batch.queries[q].matrix().toarray()
        for c in range(hi - lo):
            fixed = np.isfinite(target[lo + c])
            if fixed.any():
                constraints.append(a[fixed] @ x[c] == target[lo + c][fixed])
    for band in bands:
        a = batch.queries[band.query].matrix().toarray()
        constraints.append(cp.abs(x @ a.T - band.target[lo:hi]) <= band.tol[f])
    problem = cp.Problem(cp.Minimize(sum(terms)), constraints)
    problem.solve(solver=cp.SCS, eps_abs=eps, eps_rel=eps, max_iters=500_000)
    return float(problem.value), time.perf_counter() - t0


def cvxpy_rounding(batch: FamilyBatch, f: int, x: np.ndarray, chain) -> float:
    """The multi-pass rounder (eq. 7.7) for family ``f`` as cvxpy MILPs (HiGHS): seconds."""
    t0 = time.perf_counter()
    lo, hi = batch.child_ptr[f], batch.child_ptr[f + 1]
    xt = np.maximum(x[lo:hi], 0.0)
    base = np.floor(xt + 1e-9)
    y = cp.Variable(base.shape, boolean=True)
    est = base + y
    constraints = [] if batch.parent is None else [cp.sum(est, axis=0) == batch.parent[f]]
    for spec in chain:
        a = spec.matrix().toarray()
        problem = cp.Problem(cp.Minimize(cp.sum(cp.abs(est @ a.T - xt @ a.T))), constraints)
        problem.solve(solver=cp.HIGHS)
        if not spec.is_detailed:
            constraints = [*constraints, est @ a.T == np.round(est.value @ a.T)]
    return time.perf_counter() - t0


def compare_least_squares(batches, eps: float, sample: int | None, seed: int) -> dict:
    ours_s = 0.0
    base_s = 0.0
    round_s = 0.0
    rel_diffs: list[float] = []
    n_families = sum(b.n_families for b, _, _ in batches)
    rng = np.random.default_rng(seed)
    chosen = None
    if sample is not None and sample < n_families:
        chosen = set(rng.choice(n_families, size=sample, replace=False).tolist())
    offset = 0
    solved = 0
    for batch, passes, chain in batches:
        t0 = time.perf_counter()
        first = solve_pass(batch, passes[0]) if len(passes) > 1 else None
        bands = (
            [
                Band(q, batch.queries[q].answer(first.x), np.full(batch.n_families, PASS_TOLERANCE))
                for q in passes[0]
            ]
            if first is not None
            else []
        )
        second = solve_pass(batch, passes[-1], bands)
        ours_s += time.perf_counter() - t0
        for f in range(batch.n_families):
            if chosen is not None and offset + f not in chosen:
                continue
            solved += 1
            if first is not None:
                value, sec = cvxpy_family(batch, f, passes[0], [], eps)
                base_s += sec
                rel_diffs.append(abs(value - first.objective[f]) / max(abs(value), 1e-9))
            value, sec = cvxpy_family(batch, f, passes[-1], bands, eps)
            base_s += sec
            rel_diffs.append(abs(value - second.objective[f]) / max(abs(value), 1e-9))
            round_s += cvxpy_rounding(batch, f, second.x, chain)
        offset += batch.n_families
    scale = n_families / max(solved, 1)
    return {
        "families": n_families,
        "families_solved_by_baseline": solved,
        "extrapolated": chosen is not None,
        "ours_least_squares_s": ours_s,
        "baseline_least_squares_s": base_s * scale,
        "baseline_rounding_s": round_s * scale,
        "max_relative_objective_difference": max(rel_diffs) if rel_diffs else float("nan"),
        "median_relative_objective_difference": float(np.median(rel_diffs))
        if rel_diffs
        else float("nan"),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="ri2010")
    parser.add_argument("--preset", default="ri2010-production-like")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eps", type=float, default=1e-8, help="SCS eps_abs = eps_rel")
    parser.add_argument("--fractions", default="0.1,0.3,1.0")
    parser.add_argument("--baseline-families", type=int, default=None)
    parser.add_argument("--out", default=None, help="write the numbers as JSON here")
    args = parser.parse_args(argv)

    hist = load_topdown_sample(args.data)
    allocation = load_topdown_preset(args.preset)["persons"]
    result, batches = recorded_run(hist, allocation, args.seed)
    ls = compare_least_squares(batches, args.eps, args.baseline_families, args.seed)
    ours_ls = result.timings["least_squares_cpu"]
    ours_round = result.timings["rounding_cpu"]
    baseline_run = result.runtime_s - ours_ls - ours_round + ls["baseline_least_squares_s"]
    baseline_run += ls["baseline_rounding_s"]
    report = {
        "data": args.data,
        "blocks": hist.n_blocks,
        "preset": args.preset,
        "run_s": result.runtime_s,
        "run_least_squares_s": ours_ls,
        "run_rounding_s": ours_round,
        "timings": result.timings,
        **ls,
        "speedup_least_squares": ls["baseline_least_squares_s"] / ls["ours_least_squares_s"],
        "baseline_run_s": baseline_run,
        "speedup_run": baseline_run / result.runtime_s,
        "scaling": [],
    }
    for fraction in [float(f) for f in args.fractions.split(",") if f]:
        sub = hist if fraction >= 1.0 else subset_by_tracts(hist, fraction, args.seed)
        t0 = time.perf_counter()
        topdown_result(sub, allocation, seed=args.seed)
        report["scaling"].append(
            {"fraction": fraction, "blocks": sub.n_blocks, "run_s": time.perf_counter() - t0}
        )
    # The machine may be shared: also compare against the full-size repeat of the run.
    repeat = [r["run_s"] for r in report["scaling"] if r["fraction"] >= 1.0]
    if repeat:
        report["run_repeat_s"] = repeat[0]
        report["speedup_run_repeat"] = baseline_run / repeat[0]
    text = json.dumps(report, indent=2, default=float)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
