"""Validation of the published-count prediction (docs/science.md §7, docs/prediction.md §3)
against repeated TopDown runs, and the planner's recompute time.

For each validated configuration — data (generated populations of 1,000,000 persons, the Rhode
Island 2010 blocks) × allocation × total ρ — the prediction of
:func:`engine.prediction.predict_topdown`, made before any run on the data's spine and counts, is
set against the RMSE of the published counts measured over ``--seeds`` engine runs (the run
pipeline, ``benchmarks/pipeline_run.py``; cached under ``--cache``, ``benchmarks/prediction_runs.py``),
per geolevel × query. Printed per row: mean true count per answer cell, the noisy-measurement σ
(the baseline the planner showed before the prediction existed), the least-squares-only
prediction, the published-count prediction, the measured RMSE with its relative standard error
across runs, the ratio predicted / measured and, with ``--baseline-tree``, the same ratio of the
prediction of an older checkout (same runs). The target is 0.8–1.25 on at least 90% of the rows
below the root (a root is one geounit: its rows scatter widely between runs).

``--write-validity PATH`` writes what was measured as the prediction's validated range
(``engine/prediction/validation.json``, read by :mod:`engine.prediction.validity`).

A final section times the planner's recompute on the shipped profiles (``PLANNER_MAX_UNITS``
geounits, ``PLANNER_MAX_FAMILIES`` families per level) against the CLI's, medians of several
edits; CPU time of this process (the fair measure on a shared machine).

Usage::

    .venv/bin/python benchmarks/prediction.py [--configs NAME,...] [--seeds 3] [--cache out]
        [--baseline-tree DIR] [--write-validity engine/prediction/validation.json]
        [--skip-timing] [--timing-only] [--out results.json]

``--list`` prints the configurations. Runs take ~20–60 s each on 1,000,000 persons (3–4 min on
a loaded 2-core machine); cached runs are reused, so a changed prediction re-validates in
minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from prediction_runs import (  # noqa: E402
    DEFAULT_CACHE,
    measured,
    population_folder,
    rmse_and_se,
)

from engine.data.histogram import BlockHistogram  # noqa: E402
from engine.data.inputs import load_topdown_input  # noqa: E402
from engine.data.samples import load_topdown_sample  # noqa: E402
from engine.dp.budget import TopDownAllocation  # noqa: E402
from engine.dp.presets import load_topdown_preset, topdown_from_dict  # noqa: E402
from engine.prediction import (  # noqa: E402
    DEFAULT_INVARIANTS,
    PLANNER_MAX_FAMILIES,
    PLANNER_MAX_UNITS,
    predict_topdown,
    shipped_profile_for,
)
from engine.prediction.predict import SUPPORT_MAX_FAMILIES  # noqa: E402
from engine.prediction.validity import allocation_shares  # noqa: E402
from engine.topdown.profile import spine_profile  # noqa: E402

LOW, HIGH = 0.8, 1.25
ALLOCATIONS = Path(__file__).resolve().parent / "allocations"


@dataclass(frozen=True)
class Config:
    """One validated configuration: the data, the allocation and its family name."""

    name: str
    data: str
    """``ri2010`` or a generated population ``STATES_PERSONS_sSEED`` (generated on demand)."""
    allocation: Callable[[], TopDownAllocation]
    family: str
    seeds: int = 3


def _preset(name: str, rho: float | None = None) -> Callable[[], TopDownAllocation]:
    def load() -> TopDownAllocation:
        alloc = load_topdown_preset(name)["persons"]
        return alloc if rho is None else alloc.with_rho(Fraction(str(rho)))

    return load


def _file(name: str) -> Callable[[], TopDownAllocation]:
    def load() -> TopDownAllocation:
        data = json.loads((ALLOCATIONS / f"{name}.json").read_text(encoding="utf-8"))
        return topdown_from_dict(data)["persons"]

    return load


RI = "RI_1000000_s1"
MT = "MT_1000000_s1"
NE = "VT-NH-ME_1000000_s1"
CONFIGS = [
    *(
        Config(
            f"ri2010-{r:g}",
            "ri2010",
            _preset("ri2010-production-like", r),
            "ri2010-production-like",
            4,
        )
        for r in (0.25, 1.0, 4.0)
    ),
    Config("prod-0.64", RI, _preset("topdown-2020-production", 0.64), "topdown-2020-production"),
    Config("prod-2.556", RI, _preset("topdown-2020-production"), "topdown-2020-production"),
    Config("prod-10", RI, _preset("topdown-2020-production", 10), "topdown-2020-production"),
    Config("2021-0.185", RI, _preset("topdown-2021-04", 0.185), "topdown-2021-04"),
    Config("2021-1.05", RI, _preset("topdown-2021-04"), "topdown-2021-04"),
    Config("equal-1", RI, _file("equal-shares"), "equal-shares"),
    Config("tract-detailed-4", RI, _file("tract-detailed"), "tract-detailed"),
    Config("mt-prod-2.556", MT, _preset("topdown-2020-production"), "topdown-2020-production"),
    Config("mt-2021-1.05", MT, _preset("topdown-2021-04"), "topdown-2021-04"),
    Config("ne-prod-2.556", NE, _preset("topdown-2020-production"), "topdown-2020-production"),
]
"""The validation of docs/prediction.md §3: the Rhode Island 2010 blocks (folded schema, dense
model), a generated Rhode Island of 1,000,000 persons (5 counties), a generated Montana of
1,000,000 (56 counties) and a generated Vermont + New Hampshire + Maine of 1,000,000 (3 states
under a US root, 12 counties)."""


def _loader(data: str, cache: Path) -> Callable[[], BlockHistogram]:
    """The data's loader; the data are read once per process (the configurations share them)."""
    return lambda: _load(data, cache)


@lru_cache(maxsize=1)
def _load(data: str, cache: Path) -> BlockHistogram:
    if data == "ri2010":
        return load_topdown_sample("ri2010")
    states, persons, seed = data.rsplit("_", 2)
    folder = population_folder(int(persons), int(seed[1:]), states.split("-"), cache)
    return load_topdown_input(str(folder))


def validate(
    config: Config, cache: Path, baseline: dict[tuple[str, str], float] | None = None
) -> list[dict[str, object]]:
    """Predicted vs measured RMSE per geolevel × query of one configuration."""
    alloc = config.allocation()
    load = _loader(config.data, cache)
    queries = list(dict.fromkeys(["TOTAL", *alloc.all_queries()]))
    mse, _, seconds, failures = measured(config.data, load, alloc, config.seeds, queries, cache)
    hist = load()
    profile = spine_profile(hist, alloc, name=config.data)
    t0 = time.process_time()
    pred = predict_topdown(alloc, profile)
    predict_s = time.process_time() - t0
    baseline = baseline or {}
    runs = len(next(iter(mse.values()), []))
    print(
        f"\n## {config.name}: {alloc.name} at ρ = {float(alloc.rho):g} on {config.data}, {runs} "
        f"runs (prediction {predict_s:.1f} s CPU; runs run now: {sum(1 for s in seconds if s)})"
    )
    for failure in failures:
        print(f"   engine run refused, next seed taken — {failure[:160]}")
    print(
        f"{'geolevel':12s} {'query':27s} {'mean cnt':>9s} {'σ meas.':>8s} {'LS only':>8s} "
        f"{'predicted':>9s} {'measured':>9s} {'±SE':>6s} {'pred/meas':>9s} {'before':>7s}"
    )
    rows = []
    for r in pred.rows:
        values = mse.get((r.geolevel, r.query))
        if values is None or r.invariant:
            continue
        measured_rmse, rel_se = rmse_and_se(values)
        if measured_rmse <= 0:  # held exactly (e.g. an only child of an invariant total)
            continue
        ratio = r.post_processed_rmse / measured_rmse
        root = r.geolevel == pred.levels[0]
        before = baseline.get((r.geolevel, r.query))
        row = {
            "config": config.name,
            "family": config.family,
            "data": config.data,
            "rho": float(alloc.rho),
            "role": "root" if root else "level",
            "geolevel": r.geolevel,
            "query": r.query,
            "units": r.units,
            "mean_count": r.mean_count,
            "sigma": r.sigma,
            "ls_rmse": r.ls_rmse,
            "predicted_rmse": r.post_processed_rmse,
            "measured_rmse": measured_rmse,
            "measured_rel_se": rel_se,
            "ratio": ratio,
            "within_target": bool(LOW <= ratio <= HIGH),
            "model": pred.model,
            "schema": [a for a, _ in profile.attributes],
            "before_ratio": None if before is None else before / measured_rmse,
        }
        rows.append(row)
        sigma = f"{r.sigma:8.2f}" if r.sigma is not None else f"{'—':>8s}"
        flag = "" if row["within_target"] else "  MISS"
        b = f"{row['before_ratio']:7.2f}" if row["before_ratio"] is not None else f"{'':7s}"
        print(
            f"{r.geolevel:12s} {r.query:27s} {r.mean_count or 0:9.2f} {sigma} {r.ls_rmse:8.3f} "
            f"{r.post_processed_rmse:9.3f} {measured_rmse:9.3f} {rel_se:6.1%} {ratio:9.3f} "
            f"{b}{flag}{' (root)' if root else ''}"
        )
    below = [x for x in rows if x["role"] == "level"]
    hits = sum(bool(x["within_target"]) for x in below)
    line = f"within {LOW}–{HIGH} below the root: {hits} of {len(below)}"
    if baseline:
        old = sum(
            x["before_ratio"] is not None and LOW <= float(x["before_ratio"]) <= HIGH  # type: ignore[arg-type]
            for x in below
        )
        line += f" (before: {old})"
    print(line)
    return rows


def _tree_predictions(
    tree: Path, configs: list[Config], cache: Path
) -> dict[str, dict[tuple[str, str], float]]:
    """Per configuration, the published-count predictions of the code in ``tree`` (an older
    checkout, in a child process with that tree first on the path), per (geolevel, query): one
    child per data set (read once), each configuration's answer cached under
    ``<cache>/baseline/<tree folder name>/`` (a tree is a fixed snapshot)."""
    out: dict[str, dict[tuple[str, str], float]] = {}
    todo: dict[str, list[Config]] = {}
    for config in configs:
        path = cache / "baseline" / tree.name / f"{config.name}.json"
        if path.is_file():
            out[config.name] = {(g, q): v for g, q, v in json.loads(path.read_text("utf-8"))}
        else:
            todo.setdefault(config.data, []).append(config)
    script = textwrap.dedent(
        """
        import json, sys
        from engine.data.inputs import load_topdown_input
        from engine.data.samples import load_topdown_sample
        from engine.dp.budget import TopDownAllocation
        from engine.prediction import predict_topdown
        from engine.topdown.profile import spine_profile
        data = sys.argv[1]
        hist = load_topdown_sample(data) if data == "ri2010" else load_topdown_input(data)
        for line in sys.argv[2:]:
            alloc = TopDownAllocation.from_dict(json.loads(line))
            pred = predict_topdown(alloc, spine_profile(hist, alloc))
            rows = [[r.geolevel, r.query, r.post_processed_rmse] for r in pred.rows]
            print("ROWS " + json.dumps(rows), flush=True)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(tree)}
    for label, group in todo.items():
        if label == "ri2010":
            data = "ri2010"
        else:
            states, persons, seed = label.rsplit("_", 2)
            data = str(population_folder(int(persons), int(seed[1:]), states.split("-"), cache))
        allocations = [json.dumps(c.allocation().to_dict()) for c in group]
        done = subprocess.run(
            [sys.executable, "-c", script, data, *allocations],
            cwd=tree,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        answers = [x[5:] for x in done.stdout.splitlines() if x.startswith("ROWS ")]
        for config, answer in zip(group, answers, strict=True):
            path = cache / "baseline" / tree.name / f"{config.name}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(answer, encoding="utf-8")
            out[config.name] = {(g, q): float(v) for g, q, v in json.loads(answer)}
    return out


def validity_table(rows: list[dict[str, object]], configs: list[Config]) -> dict[str, Any]:
    """The validated range (``engine/prediction/validation.json``): per family its shares of ρ,
    model and measured rows."""
    families: dict[str, dict[str, Any]] = {}
    for config in configs:
        alloc = config.allocation()
        fam = families.setdefault(
            config.family,
            {
                "name": config.family,
                "schema": [],
                "model": "",
                "mechanism": alloc.mechanism,
                "shares": allocation_shares(alloc, DEFAULT_INVARIANTS),
                "rows": [],
                "configurations": [],
            },
        )
        mine = [r for r in rows if r["config"] == config.name]
        if mine:  # the schema and model the configuration's prediction used (validate)
            fam["schema"] = mine[0]["schema"]
            fam["model"] = mine[0]["model"]
        fam["configurations"].append(f"{config.name}: {config.data}, {config.seeds} runs")
    for row in rows:
        families[str(row["family"])]["rows"].append(
            {
                k: row[k]
                for k in (
                    "config",
                    "rho",
                    "role",
                    "geolevel",
                    "query",
                    "ratio",
                    "mean_count",
                    "ls_rmse",
                )
            }
            | {"level": row["geolevel"]}
        )
    return {
        "what": (
            "Where the published-count prediction was validated: per allocation family, the "
            "ratio predicted / measured RMSE of every (level, query) at each ρ, measured over "
            "repeated engine runs (benchmarks/prediction.py; docs/prediction.md §3)."
        ),
        "command": "benchmarks/prediction.py --write-validity engine/prediction/validation.json",
        "target": [LOW, HIGH],
        "families": list(families.values()),
    }


def planner_timing(repeats: int) -> list[dict[str, object]]:
    """Median CPU time of one planner recompute (a new total ρ each time), and of the first
    evaluation of new shares of the bottom and of the top level, on the shipped profile of each
    preset's schema (the planner's sample and the CLI's families)."""
    print(f"\n## Planner recompute (shipped profiles), median of {repeats} new ρ, 3 share edits")
    out = []
    for preset in ("ri2010-production-like", "topdown-2020-production"):
        alloc = load_topdown_preset(preset)["persons"]
        profile = shipped_profile_for(alloc)
        for label, units, families in (
            ("planner", PLANNER_MAX_UNITS, PLANNER_MAX_FAMILIES),
            ("CLI", None, SUPPORT_MAX_FAMILIES),
        ):
            c0 = time.process_time()
            predict_topdown(alloc, profile, max_units=units, max_families=families)
            first = 1000 * (time.process_time() - c0)
            bottom = _edits(alloc, profile, alloc.geolevels[-1], units, families)
            top = _edits(alloc, profile, alloc.geolevels[0], units, families)
            cpu = []
            for i in range(repeats):
                c0 = time.process_time()
                predict_topdown(
                    alloc.with_rho(0.5 + 0.37 * i), profile, max_units=units, max_families=families
                )
                cpu.append(time.process_time() - c0)
            row = {
                "preset": preset,
                "profile": profile.name,
                "mode": label,
                "first_cpu_ms": first,
                "new_rho_cpu_ms": 1000 * statistics.median(cpu),
                "new_bottom_shares_cpu_ms": bottom,
                "new_top_shares_cpu_ms": top,
            }
            out.append(row)
            print(
                f"{preset:26s} {profile.name:18s} {label:8s} first {first:8.0f} ms; new ρ "
                f"{row['new_rho_cpu_ms']:7.0f} ms; new shares: bottom level {bottom:7.0f} ms, "
                f"top level {top:7.0f} ms (CPU)"
            )
    return out


def _edits(
    alloc: TopDownAllocation, profile: Any, level: str, units: int | None, families: int
) -> float:
    """Median CPU ms of the first evaluation of 3 share edits of ``level``."""
    times = []
    for i in range(3):
        shares = alloc.to_dict()
        level_shares = {q: Fraction(v) for q, v in shares["query_shares"][level].items()}
        source = next(q for q in level_shares if q != "DETAILED")
        moved = level_shares[source] * (i + 1) / 10
        level_shares[source] -= moved
        level_shares["DETAILED"] += moved
        shares["query_shares"][level] = {q: str(v) for q, v in level_shares.items()}
        edited = TopDownAllocation.from_dict(shares, name=f"{alloc.name} edit {level} {i}")
        c0 = time.process_time()
        predict_topdown(edited, profile, max_units=units, max_families=families)
        times.append(time.process_time() - c0)
    return 1000 * statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="", help="comma-separated names (default: all)")
    parser.add_argument("--list", action="store_true", help="list the configurations")
    parser.add_argument("--seeds", type=int, default=None, help="runs per configuration")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="populations, runs")
    parser.add_argument("--baseline-tree", type=Path, default=None, help="older checkout")
    parser.add_argument("--write-validity", type=Path, default=None)
    parser.add_argument("--timing-repeats", type=int, default=5)
    parser.add_argument("--skip-timing", action="store_true")
    parser.add_argument("--timing-only", action="store_true")
    parser.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    if args.list:
        for c in CONFIGS:
            print(f"{c.name:18s} {c.family:26s} {c.data}")
        return 0
    wanted = [x for x in args.configs.split(",") if x.strip()]
    configs = [c for c in CONFIGS if not wanted or c.name in wanted]
    if args.seeds is not None:
        configs = [Config(c.name, c.data, c.allocation, c.family, args.seeds) for c in configs]
    results: dict[str, object] = {}
    rows: list[dict[str, object]] = []
    if not args.timing_only:
        baselines = (
            _tree_predictions(args.baseline_tree, configs, args.cache) if args.baseline_tree else {}
        )
        for config in configs:
            rows += validate(config, args.cache, baselines.get(config.name))
        results["rows"] = rows
        print("\n## Summary: rows below the root within 0.8–1.25 (all of them: with the root)")
        for config in configs:
            mine = [r for r in rows if r["config"] == config.name]
            below = [r for r in mine if r["role"] == "level"]
            hits = sum(bool(r["within_target"]) for r in below)
            before = [r["before_ratio"] for r in below if r["before_ratio"] is not None]
            was = sum(LOW <= float(b) <= HIGH for b in before)  # type: ignore[arg-type]
            print(
                f"{config.name:18s} {hits:3d} of {len(below):3d} "
                f"({sum(bool(r['within_target']) for r in mine)} of {len(mine)})"
                + (f"; before: {was} of {len(before)}" if before else "")
            )
    if args.write_validity:
        table = validity_table(rows, configs)
        args.write_validity.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
        print(f"\nwrote {args.write_validity}")
    if not args.skip_timing:
        results["planner"] = planner_timing(args.timing_repeats)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
