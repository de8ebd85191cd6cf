"""Cached generated populations and TopDown runs for the prediction's validation (docs/prediction.md §3).

The validation of the published-count prediction compares it with the RMSE measured over repeated
engine runs on generated populations of 1,000,000 persons (~20–60 s per run). Populations and the
runs' measured errors are cached under a folder (``out/`` of the worktree, git-ignored by default)
so that a change of the *prediction* is re-validated without running the engines again:

* ``<cache>/pop/<states>_<persons>_s<seed>/`` — ``phexplore generate population`` output;
* ``<cache>/runs/<data>/<allocation key>/seed<k>.json`` — per (geolevel, query) the sum of
  squared errors, the sum of errors and the number of answer cells of one run (seed k); the
  allocation key is its name and a hash of its shares and ρ, so an edited allocation never reuses
  another's runs.

Used by ``benchmarks/prediction.py`` (``--data``/``--population-states``); importable on its own.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from engine.data.histogram import BlockHistogram
from engine.data.population import generate_population
from engine.dp.budget import TopDownAllocation
from engine.runs.data_source import DataSource
from engine.runs.options import TopDownRunOptions
from engine.runs.pipeline import execute
from engine.runs.spec import RunSpec
from engine.runs.topdown_metrics import sparse_residuals
from engine.topdown.feasibility import TopDownInfeasible

DEFAULT_CACHE = Path(__file__).resolve().parents[1] / "out"


def population_folder(
    persons: int, seed: int, states: list[str] | None, cache: Path = DEFAULT_CACHE
) -> Path:
    """The folder of a generated population (generated on first use, then reused)."""
    label = "-".join(states) if states else "US"
    folder = cache / "pop" / f"{label}_{persons}_s{seed}"
    if not (folder / "population.json").is_file():
        generate_population(persons, seed=seed, out_dir=folder, states=states)
    return folder


MEASURED_KEYS = (
    "universe",
    "mechanism",
    "rho",
    "geolevels",
    "level_shares",
    "query_shares",
    "schema",
)
"""What an allocation's runs depend on (its name, citation and notes do not)."""


def allocation_key(alloc: TopDownAllocation) -> str:
    """A folder name for an allocation: its name and a hash of everything it measures."""
    data = alloc.to_dict()
    body = json.dumps({k: data.get(k) for k in MEASURED_KEYS}, sort_keys=True)
    digest = hashlib.sha256(body.encode("utf-8")).hexdigest()[:12]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in alloc.name)
    return f"{safe}-{float(alloc.rho):g}-{digest}"


def run_errors(
    hist: BlockHistogram,
    label: str,
    alloc: TopDownAllocation,
    seed: int,
    queries: list[str],
    cache: Path = DEFAULT_CACHE,
) -> dict[str, Any]:
    """Per ``"geolevel|query"``: ``sse`` (Σ squared error), ``se`` (Σ error), ``n`` (answer cells)
    of one run of ``alloc`` on ``hist`` (the data named ``label``) with ``seed``; cached."""
    path = cache / "runs" / label / allocation_key(alloc) / f"seed{seed}.json"
    if path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
        if set(queries) <= set(data["queries"]):
            return data
    t0 = time.perf_counter()
    # the conventional spine, always: the prediction covers it alone (production's own spine is
    # the optimized one where the data carry places)
    spec = RunSpec(
        engine="topdown",
        data=DataSource(source=label),
        config=alloc.to_dict(),
        seed=seed,
        options=TopDownRunOptions(spine="conventional"),
    )
    result = execute(spec, data=hist, outputs="result").result
    seconds = time.perf_counter() - t0
    rows: dict[str, dict[str, float]] = {}
    for (level, query), part in sparse_residuals(result, queries).items():
        rows[f"{level}|{query}"] = {
            "sse": float((part.values**2) @ part.counts),
            "se": float(part.values @ part.counts),
            "n": float(part.n),
        }
    data = {"queries": list(queries), "seconds": seconds, "rows": rows}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    tmp.replace(path)
    return data


def measured(
    label: str,
    load: Callable[[], BlockHistogram],
    alloc: TopDownAllocation,
    seeds: int,
    queries: list[str],
    cache: Path = DEFAULT_CACHE,
) -> tuple[
    dict[tuple[str, str], list[float]],
    dict[tuple[str, str], list[float]],
    list[float],
    list[str],
]:
    """Per (geolevel, query) the per-run MSE and mean error over ``seeds`` runs, the runs'
    seconds (0 for cached runs) and the failures. Seeds 0, 1, … are used in order; a run the
    engine refuses (:class:`engine.topdown.feasibility.TopDownInfeasible`) is recorded
    (``seed<k>.failed.txt``) and the next seed taken, at most ``seeds`` extra. ``load`` gives
    the data (called only when a run is not cached)."""
    hist: BlockHistogram | None = None
    mse: dict[tuple[str, str], list[float]] = {}
    bias: dict[tuple[str, str], list[float]] = {}
    seconds: list[float] = []
    failures: list[str] = []
    seed, done = 0, 0
    while done < seeds and seed < 2 * seeds:
        base = cache / "runs" / label / allocation_key(alloc)
        failed = base / f"seed{seed}.failed.txt"
        if failed.is_file():
            failures.append(f"seed {seed}: {failed.read_text(encoding='utf-8')}")
            seed += 1
            continue
        cached = (base / f"seed{seed}.json").is_file()
        if not cached and hist is None:
            hist = load()
        try:
            data = run_errors(hist, label, alloc, seed, queries, cache)  # type: ignore[arg-type]
        except TopDownInfeasible as exc:
            base.mkdir(parents=True, exist_ok=True)
            failed.write_text(str(exc), encoding="utf-8")
            failures.append(f"seed {seed}: {exc}")
            seed += 1
            continue
        seconds.append(0.0 if cached else float(data["seconds"]))
        for key, row in data["rows"].items():
            level, query = key.split("|")
            n = max(row["n"], 1.0)
            mse.setdefault((level, query), []).append(row["sse"] / n)
            bias.setdefault((level, query), []).append(row["se"] / n)
        seed += 1
        done += 1
    return mse, bias, seconds, failures


def rmse_and_se(values: list[float]) -> tuple[float, float]:
    """RMSE over runs (√ of the mean per-run MSE) and its *relative* standard error across runs
    (delta method: SE(√m)/√m = SE(m)/(2m); NaN with one run)."""
    m = float(np.mean(values))
    if len(values) < 2 or m <= 0:
        return float(np.sqrt(max(m, 0.0))), float("nan")
    se_mean = float(np.std(values, ddof=1)) / np.sqrt(len(values))
    return float(np.sqrt(m)), 0.5 * se_mean / m
