"""Validation of the published-count accuracy prediction (SPEC §7) against repeated TopDown runs.

For each data set and total ρ: the prediction of :func:`engine.prediction.predict_topdown`
(made before any run, on the data's spine and counts) against the RMSE of the published counts
measured over ``--seeds`` engine runs (the run pipeline, ``benchmarks/pipeline_run.py``), per geolevel × query.
Printed per row: mean true count per answer cell, the noisy-measurement σ (the baseline: what the
planner showed before issue 19), the least-squares-only prediction, the corrected prediction, the
measured RMSE with its across-seed standard error, and the ratios predicted / measured. The
target of issue 19 is 0.8–1.25 wherever the mean count per answer cell is ≥ 1; rows below that
are marked ``(out of range)``.

Data: the Rhode Island 2010 blocks (``ri2010`` with ``ri2010-production-like``, several ρ) and a
generated population on the 2,016-cell production schema (``phexplore generate population``,
``topdown-2020-production``). A final section times the planner's recompute (the shipped profile,
``PLANNER_MAX_UNITS`` geounits per level) against the full-profile prediction, medians of several
edits; ``--baseline-tree`` first runs the same section of an older checkout (its own script, in a
child process) as the same-run baseline.

Usage: ``.venv/bin/python benchmarks/prediction.py [--rhos 0.25,1,4] [--seeds 8]
[--population 30000] [--population-seed 11] [--population-seeds 3] [--population-rhos 0.64,2.556]
[--skip-population] [--baseline-tree DIR] [--out results.json]``. Each table also prints, as
baselines of the same run, the dense model's predicted / measured (every cell a variable: the
model before the support restriction) and the model without the root's lifted empty cells ("no-root",
``predict_topdown(..., root_empty_cells=False)``: the model before that term).
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline_run import topdown_result  # noqa: E402

from engine.data.histogram import BlockHistogram  # noqa: E402
from engine.data.inputs import load_topdown_input  # noqa: E402
from engine.data.population import generate_population  # noqa: E402
from engine.data.samples import load_topdown_sample  # noqa: E402
from engine.dp.budget import TopDownAllocation  # noqa: E402
from engine.dp.presets import load_topdown_preset  # noqa: E402
from engine.prediction import (
    PLANNER_MAX_FAMILIES,
    PLANNER_MAX_UNITS,
    predict_topdown,
    shipped_profile_for,
)
from engine.prediction.predict import SUPPORT_MAX_FAMILIES  # noqa: E402
from engine.topdown.profile import spine_profile  # noqa: E402

LOW, HIGH = 0.8, 1.25


def validate(
    label: str, hist: BlockHistogram, alloc: TopDownAllocation, seeds: int
) -> list[dict[str, object]]:
    """Predicted vs measured RMSE per geolevel × query over ``seeds`` runs."""
    profile = spine_profile(hist, alloc, name=label)
    t0 = time.perf_counter()
    pred = predict_topdown(alloc, profile)
    predict_s = time.perf_counter() - t0
    # Baseline in the same run: the dense model (every cell a variable), as before the support
    # model (engine/prediction/support.py); identical on the folded 16-cell schema.
    dense = predict_topdown(alloc, profile, support=False)
    # and the model without the root's lifted empty cells (engine/prediction/root_clipping.py)
    no_root = predict_topdown(alloc, profile, root_empty_cells=False)
    queries = list(dict.fromkeys(r.query for r in pred.rows))
    mse: dict[tuple[str, str], list[float]] = {}
    run_s = []
    for seed in range(seeds):
        t0 = time.perf_counter()
        result = topdown_result(hist, alloc, seed=seed)
        run_s.append(time.perf_counter() - t0)
        tidy = result.to_tidy(queries)
        err2 = (tidy["estimate"] - tidy["true"]).astype(float) ** 2
        for key, value in err2.groupby([tidy["geolevel"], tidy["query"]]).mean().items():
            mse.setdefault((str(key[0]), str(key[1])), []).append(float(value))
    print(
        f"\n## {label}: {alloc.name} at ρ = {float(alloc.rho):g}, {seeds} runs "
        f"(prediction {predict_s:.2f} s; one run {statistics.median(run_s):.1f} s, median)"
    )
    header = (
        f"{'geolevel':12s} {'query':27s} {'units':>6s} {'mean cnt':>9s} {'σ meas.':>8s} "
        f"{'LS only':>8s} {'predicted':>9s} {'measured':>9s} {'±SE':>6s} {'σ/meas':>7s} "
        f"{'LS/meas':>7s} {'dense/meas':>10s} {'no-root/meas':>12s} {'pred/meas':>9s}"
    )
    print(header)
    rows = []
    for r in pred.rows:
        values = mse.get((r.geolevel, r.query))
        if values is None or r.invariant:
            continue
        measured = float(np.sqrt(np.mean(values)))
        se = (
            0.5 * float(np.std(values, ddof=1)) / np.sqrt(len(values)) / measured
            if len(values) > 1 and measured > 0
            else float("nan")
        )
        ratio = r.post_processed_rmse / measured if measured > 0 else float("nan")
        dense_rmse = dense.row(r.geolevel, r.query).post_processed_rmse
        dense_ratio = dense_rmse / measured if measured > 0 else float("nan")
        no_root_rmse = no_root.row(r.geolevel, r.query).post_processed_rmse
        no_root_ratio = no_root_rmse / measured if measured > 0 else float("nan")
        in_range = bool(r.mean_count is not None and r.mean_count >= 1.0)
        row = {
            "data": label,
            "rho": float(alloc.rho),
            "geolevel": r.geolevel,
            "query": r.query,
            "units": r.units,
            "mean_count": r.mean_count,
            "sigma": r.sigma,
            "ls_rmse": r.ls_rmse,
            "predicted_rmse": r.post_processed_rmse,
            "dense_predicted_rmse": dense_rmse,
            "measured_rmse": measured,
            "measured_rel_se": se,
            "ratio": ratio,
            "dense_ratio": dense_ratio,
            "no_root_term_predicted_rmse": no_root_rmse,
            "no_root_term_ratio": no_root_ratio,
            "in_range": in_range,
            "within_target": bool(LOW <= ratio <= HIGH),
        }
        rows.append(row)
        if measured <= 0:  # held exactly (e.g. an only child of an invariant total)
            continue
        sigma = f"{r.sigma:8.2f}" if r.sigma is not None else f"{'—':>8s}"
        sig_ratio = f"{r.sigma / measured:7.2f}" if r.sigma is not None else f"{'—':>7s}"
        flag = "" if in_range else "  (out of range)"
        if in_range and not row["within_target"]:
            flag = "  MISS"
        print(
            f"{r.geolevel:12s} {r.query:27s} {r.units:6d} {r.mean_count or 0:9.2f} {sigma} "
            f"{r.ls_rmse:8.3f} {r.post_processed_rmse:9.3f} {measured:9.3f} {se:6.1%} "
            f"{sig_ratio} {r.ls_rmse / measured:7.2f} {dense_ratio:10.3f} {no_root_ratio:12.3f} "
            f"{ratio:9.3f}{flag}"
        )
    inside = [x for x in rows if x["in_range"]]
    hits = sum(x["within_target"] for x in inside)
    dense_hits = sum(LOW <= float(x["dense_ratio"]) <= HIGH for x in inside)  # type: ignore[arg-type]
    no_root_hits = sum(LOW <= float(x["no_root_term_ratio"]) <= HIGH for x in inside)  # type: ignore[arg-type]
    print(
        f"within {LOW}–{HIGH}: {hits} of {len(inside)} rows with mean count ≥ 1 "
        f"(dense model: {dense_hits}; without the root's lifted empty cells: {no_root_hits})"
    )
    return rows


def _share_edit(alloc: TopDownAllocation, level: str, i: int) -> TopDownAllocation:
    """``alloc`` with (i + 1) tenths of ``level``'s first non-DETAILED query share moved to
    DETAILED (new shares: nothing of the support model's cache applies to that level)."""
    shares = alloc.to_dict()
    level_shares = {q: Fraction(v) for q, v in shares["query_shares"][level].items()}
    source = next(q for q in level_shares if q != "DETAILED")
    moved = level_shares[source] * (i + 1) / 10
    level_shares[source] -= moved
    level_shares["DETAILED"] += moved
    shares["query_shares"][level] = {q: str(v) for q, v in level_shares.items()}
    return TopDownAllocation.from_dict(shares, name=f"{alloc.name} edit {level} {i}")


def planner_timing(repeats: int) -> list[dict[str, object]]:
    """Median time of one planner recompute (new ρ each time): CPU time of this process (the fair
    measure on a shared machine) and wall-clock time. On the 2,016-cell profile the support
    model's family covariances are cached per level and shares (a new ρ rescales them; an edit
    of one level's shares recomputes that level and those below it); the first evaluation of new
    shares is timed separately for an edit of the bottom level and of the top level (every level
    recomputed). Baseline in the same run: the top-level edit through ``predict_topdown``
    without its one-BLAS-thread limit (``__wrapped__``: OpenBLAS's default threads, as before
    the limit) — on the planner's sample only (on all families it takes tens of seconds)."""
    print(f"\n## Planner recompute (shipped profiles), median of {repeats} new ρ, 3 share edits")
    out = []
    for preset in ("ri2010-production-like", "topdown-2020-production"):
        alloc = load_topdown_preset(preset)["persons"]
        profile = shipped_profile_for(alloc)
        for label, units, families in (
            ("planner", PLANNER_MAX_UNITS, PLANNER_MAX_FAMILIES),
            ("full profile", None, SUPPORT_MAX_FAMILIES),
        ):

            def edits(
                level: str,
                first: int = 0,
                run=predict_topdown,
                alloc=alloc,
                profile=profile,
                units=units,
                families=families,
                **options: object,
            ) -> float:
                """Median CPU ms of the first evaluation of 3 share edits of ``level`` (moving
                ``first`` + 1 to ``first`` + 3 tenths)."""
                times = []
                for i in range(first, first + 3):
                    edited = _share_edit(alloc, level, i)
                    c0 = time.process_time()
                    run(edited, profile, max_units=units, max_families=families, **options)
                    times.append(time.process_time() - c0)
                return 1000 * statistics.median(times)

            predict_topdown(alloc, profile, max_units=units, max_families=families)  # warm
            bottom = edits(alloc.geolevels[-1])
            top = edits(alloc.geolevels[0])
            # the root term (root_clipping: the root's lifted empty cells) is recomputed when
            # the root's shares change; the top-level edit without it, where it exists
            no_root = (
                edits(alloc.geolevels[0], 6, root_empty_cells=False)
                if "root_empty_cells" in inspect.signature(predict_topdown).parameters
                else math.nan
            )
            baseline = (
                edits(alloc.geolevels[0], 3, predict_topdown.__wrapped__)  # type: ignore[attr-defined]
                if label == "planner"
                else math.nan
            )
            predict_topdown(alloc, profile, max_units=units, max_families=families)  # warm
            cpu, wall = [], []
            for i in range(repeats):
                c0, t0 = time.process_time(), time.perf_counter()
                predict_topdown(
                    alloc.with_rho(0.5 + 0.37 * i),
                    profile,
                    max_units=units,
                    max_families=families,
                )
                cpu.append(time.process_time() - c0)
                wall.append(time.perf_counter() - t0)
            row = {
                "preset": preset,
                "profile": profile.name,
                "mode": label,
                "median_cpu_ms": 1000 * statistics.median(cpu),
                "median_wall_ms": 1000 * statistics.median(wall),
                "new_shares_cpu_ms": bottom,
                "new_top_shares_cpu_ms": top,
                "new_top_shares_no_root_term_cpu_ms": no_root,
                "baseline_new_top_shares_cpu_ms": baseline,
            }
            out.append(row)
            print(
                f"{preset:26s} {profile.name:18s} {label:13s} new ρ: CPU "
                f"{row['median_cpu_ms']:7.1f} ms (wall {row['median_wall_ms']:7.1f}); new shares, "
                f"CPU: bottom level {bottom:7.1f} ms, top level {top:7.1f} ms (without the root "
                f"term {no_root:7.1f} ms; baseline, default BLAS threads: {baseline:7.1f} ms)"
            )
    return out


def baseline_timing(tree: str, repeats: int) -> list[dict[str, object]]:
    """The planner timing of the code in ``tree`` (its own benchmarks/prediction.py, in a child
    process with that tree first on the path), printed as the baseline of this run."""
    root = Path(tree).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "baseline.json"
        command = [
            sys.executable,
            str(root / "benchmarks" / "prediction.py"),
            "--rhos",
            "",
            "--skip-population",
            "--timing-repeats",
            str(repeats),
            "--out",
            str(out),
        ]
        env = {**os.environ, "PYTHONPATH": str(root)}
        print(f"\n## Baseline: the planner timing of {root}")
        subprocess.run(command, cwd=root, env=env, check=True)
        return list(json.loads(out.read_text(encoding="utf-8")).get("planner", []))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rhos", default="0.25,1,4", help="total ρ values on RI")
    parser.add_argument("--seeds", type=int, default=8, help="runs per ρ on RI")
    parser.add_argument("--population", type=int, default=30_000, help="persons generated")
    parser.add_argument("--population-seed", type=int, default=11, help="generator seed")
    parser.add_argument("--population-seeds", type=int, default=3, help="runs per ρ")
    parser.add_argument(
        "--population-rhos", default="", help="total ρ values (default: the preset's 2.556)"
    )
    parser.add_argument("--skip-population", action="store_true")
    parser.add_argument("--timing-repeats", type=int, default=7)
    parser.add_argument("--skip-timing", action="store_true", help="no planner timing section")
    parser.add_argument(
        "--baseline-tree",
        default=None,
        help="a checkout of older code (e.g. `git worktree add /tmp/base 2b5abce`): its own "
        "planner timing is run first, in a child process, as the same-run baseline",
    )
    parser.add_argument("--out", default=None, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    results: dict[str, object] = {"rows": []}
    rows: list[dict[str, object]] = []
    hist = load_topdown_sample("ri2010")
    base = load_topdown_preset("ri2010-production-like")["persons"]
    for rho in (float(x) for x in args.rhos.split(",") if x.strip()):
        rows += validate("ri2010", hist, base.with_rho(rho), args.seeds)
    if not args.skip_population:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "population"
            generate_population(
                args.population, seed=args.population_seed, out_dir=folder, states=["RI"]
            )
            population = load_topdown_input(str(folder))
            production = load_topdown_preset("topdown-2020-production")["persons"]
            label = (
                f"generated RI population ({args.population:,} persons, seed "
                f"{args.population_seed}, production schema)"
            )
            pop_rhos = [float(x) for x in args.population_rhos.split(",") if x.strip()]
            for alloc in [production.with_rho(r) for r in pop_rhos] or [production]:
                rows += validate(label, population, alloc, args.population_seeds)
    results["rows"] = rows
    if not args.skip_timing and args.baseline_tree:
        results["baseline_planner"] = baseline_timing(args.baseline_tree, args.timing_repeats)
    if not args.skip_timing:
        results["planner"] = planner_timing(args.timing_repeats)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
