"""Controlled rounding (TDA eq. 7.7): the engine's rounder against the previous one, on real batches.

Reads recordings of :mod:`benchmarks.recorded_families` (every unit of work of a run with the
least-squares x̃ it rounded) and rounds every batch with

* **new**: ``engine.topdown.rounding.round_batch`` of this tree (each pass a min-cost flow solved
  by OR-Tools' network simplex where the batch is a network, else an LP handed to HiGHS through
  ``highspy``), and
* **previous**: ``round_batch`` of ``--baseline-tree`` (a checkout of the commit before, e.g.
  ``git archive d98ca56 | tar -x -C /tmp/qp-base``: one block-diagonal LP per pass through SciPy's
  ``linprog(method="highs-ds")``),

alternating per batch, ``--repeats`` times (CPU seconds, medians per level). It then checks every
pass of the new rounder on its own inputs: the same pass (same frozen answers of the earlier
passes) solved as an LP by HiGHS must give the same L1 objective 1ᵀ|Q^(k)(x̃ − x̂)| (to 1e-9
relative), and every result is verified — integers, children summing to the parent, structural
bounds held, frozen answers kept. Prints a table per level and the totals.

Usage::

    .venv/bin/python benchmarks/rounding.py /tmp/rec-ri1m.pkl --baseline-tree /tmp/qp-base
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from recorded_families import load  # noqa: E402

from engine.topdown import rounding, rounding_flow  # noqa: E402


def _baseline(tree: str):
    spec = importlib.util.spec_from_file_location(
        "baseline_rounding", Path(tree) / "engine" / "topdown" / "rounding.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _l1(spec, x_tilde: np.ndarray, x_hat: np.ndarray) -> float:
    return float(np.abs(spec.answer(x_tilde) - spec.answer(x_hat.astype(np.float64))).sum())


def check_passes(unit) -> tuple[int, float, list[str]]:
    """Every pass of the new rounder against the LP of the same pass on the same inputs:
    (passes compared, largest relative L1 difference, problems found)."""
    batch, chain = unit["batch"], unit["chain"]
    x_tilde = unit["x_tilde"].toarray()
    compared, worst, problems = 0, 0.0, []
    original = rounding_flow.solve_pass

    def both(net, batch_, chain_, k, child, cell, residual, answers, frac, frozen):
        nonlocal compared, worst
        y = original(net, batch_, chain_, k, child, cell, residual, answers, frac, frozen)
        if y is None:
            return None
        n_cells = batch_.n_cells
        cols = child * n_cells + cell
        spec = chain_[k]
        keys = child * spec.size + spec.cell_index[cell]
        previous = []
        if frozen is not None:
            prev = chain_[k - 1]
            previous = [(child * prev.size + prev.cell_index[cell], frozen)]
        highs = rounding._solver()
        fixed = rounding._fixed_rows(batch_, n_cells, cols, residual, answers)
        y_lp, _ = rounding._lp_pass(highs, fixed, previous, spec, keys, frac, answers)
        base = np.zeros(x_tilde.size)
        flat = x_tilde.reshape(-1)
        where = np.flatnonzero(flat > 0)
        near = np.abs(flat[where] - np.round(flat[where])) <= rounding.SNAP_TOL
        base[where] = np.where(near, np.round(flat[where]), np.floor(flat[where]))
        values = []
        for choice in (y, y_lp):
            x_hat = base.copy()
            x_hat[cols] += choice
            values.append(_l1(spec, x_tilde, x_hat.reshape(x_tilde.shape)))
        diff = abs(values[0] - values[1]) / max(values[1], 1.0)
        worst = max(worst, diff)
        compared += 1
        if diff > 1e-9:
            problems.append(f"{batch_.child_level} pass {spec.name}: L1 {values[0]} vs {values[1]}")
        return y

    rounding_flow.solve_pass = both
    try:
        x_hat, _ = rounding.round_batch(batch, x_tilde, chain)
    finally:
        rounding_flow.solve_pass = original
    if batch.parent is not None and not np.array_equal(
        np.add.reduceat(x_hat, batch.child_ptr[:-1], axis=0), batch.parent
    ):
        problems.append(f"{batch.child_level}: children do not sum to the parent")
    if x_hat.min(initial=0) < 0:
        problems.append(f"{batch.child_level}: a negative count")
    for bound in batch.bounds:
        answers = bound.spec.answer(x_hat.astype(np.float64))
        if np.any(answers > bound.upper + 1e-9) or np.any(answers < bound.lower - 1e-9):
            problems.append(f"{batch.child_level}: a structural bound violated")
    return compared, worst, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recordings", nargs="+")
    parser.add_argument("--baseline-tree", required=True, help="checkout of the previous commit")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    old = _baseline(args.baseline_tree)
    for path in args.recordings:
        units = load(path)["units"]
        times: dict[str, dict[str, list[float]]] = {}
        differing = total = 0
        for rep in range(args.repeats):
            per = {"new": {}, "previous": {}}
            for unit in units:
                batch, chain = unit["batch"], unit["chain"]
                x_tilde = unit["x_tilde"].toarray()
                for name, fn in (("previous", old.round_batch), ("new", rounding.round_batch)):
                    c0 = time.process_time()
                    x_hat, _ = fn(batch, x_tilde, chain)
                    seconds = time.process_time() - c0
                    level = per[name]
                    level[batch.child_level] = level.get(batch.child_level, 0.0) + seconds
                    if name == "previous":
                        previous = x_hat
                    elif rep == 0:
                        differing += int(np.count_nonzero(previous != x_hat))
                        total += x_hat.size
            for name, levels in per.items():
                for level, seconds in levels.items():
                    times.setdefault(level, {"new": [], "previous": []})[name].append(seconds)
        compared, worst, problems = 0, 0.0, []
        for unit in units:
            c, w, p = check_passes(unit)
            compared += c
            worst = max(worst, w)
            problems += p
        print(f"\n{path}: {len(units)} batches, CPU seconds (median of {args.repeats})")
        print("| level | previous (SciPy linprog) s | new s | previous ÷ new |")
        print("|---|---|---|---|")
        sums = {"new": 0.0, "previous": 0.0}
        for level, t in times.items():
            new, prev = float(np.median(t["new"])), float(np.median(t["previous"]))
            sums["new"] += new
            sums["previous"] += prev
            print(f"| {level} | {prev:.3f} | {new:.3f} | {prev / new:.1f}× |")
        print(
            f"| all | {sums['previous']:.3f} | {sums['new']:.3f} | "
            f"**{sums['previous'] / sums['new']:.1f}×** |"
        )
        print(
            f"flow passes checked against the LP of the same pass: {compared}, largest relative "
            f"L1 difference {worst:.1e}; problems: {len(problems)}"
        )
        for p in problems[:10]:
            print("  ", p)
        print(f"estimate cells differing from the previous rounder: {differing:,} of {total:,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
