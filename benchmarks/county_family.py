"""A state's county family at production scale: projected CG with ADMM refinement against the
first polish alone (then Clarabel, the route before) — the largest single least-squares family of a
TopDown run, and the one that set the run's cost exponent (docs/topdown.md "The least-squares
routes").

It runs TopDown (``topdown-2020-production``, seed 1, one process) on a generated population until
the first unit of work with a parent — the state's counties — and keeps that batch; every other
unit is skipped. Then, ``--repeats`` times in alternating order, both passes of the family are
solved by the routing table with

* ``cg_admm_max_work`` = the production setting (:data:`~engine.topdown.qp.settings.SETTINGS`);
* ``cg_admm_max_work`` = ``--before`` (2e7, the setting before: at 10M persons the county family
  is above it, so projected CG gets its first polish only and Clarabel takes the family when that
  polish does not verify).

CPU seconds (``time.process_time``) per solve, medians; the routes each setting took; the pass-2
objective of each and its difference relative to the other; the largest coupling residual
(children's sum against the parent's cell) and the smallest value of x.

Usage (a generated population: ``phexplore generate population --persons 10000000 --seed 1
--states OH --out DIR``)::

    .venv/bin/python benchmarks/county_family.py /tmp/qp-pop/OH-10000000-seed1 --repeats 3
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline_run import topdown_result  # noqa: E402

from engine.data.generated import load_generated_population  # noqa: E402
from engine.dp.presets import load_topdown_preset  # noqa: E402
from engine.topdown import estimation as estimation_module  # noqa: E402
from engine.topdown.qp import route  # noqa: E402
from engine.topdown.qp.settings import SETTINGS  # noqa: E402


class _Recorded(Exception):
    """Raised by the recording hook once the county batch is kept (ends the run)."""


def county_batch(data: str, seed: int = 1) -> tuple[object, list[list[int]]]:
    """The state's county family of a TopDown run on the generated population ``data``."""
    kept: list[tuple[object, list[list[int]]]] = []
    original = estimation_module.estimate_batch

    def recording(batch, passes, chain, *rest):  # type: ignore[no-untyped-def]
        if batch.parent is not None:
            kept.append((batch, [list(p) for p in passes]))
            raise _Recorded
        return original(batch, passes, chain, *rest)

    estimation_module.estimate_batch = recording
    try:
        topdown_result(
            load_generated_population(data),
            load_topdown_preset("topdown-2020-production")["persons"],
            seed=seed,
        )
    except _Recorded:
        pass
    finally:
        estimation_module.estimate_batch = original
    if not kept:
        raise SystemExit(f"{data}: the run solved no family with a parent")
    return kept[0]


def solve(batch, passes, max_work: float) -> tuple[float, dict[str, int], np.ndarray, float]:  # type: ignore[no-untyped-def]
    """(CPU s, routes, x, pass-2 objective) of both passes with ``cg_admm_max_work = max_work``."""
    settings = dataclasses.replace(SETTINGS, cg_admm_max_work=max_work)
    routes: dict[str, int] = {}
    t0 = time.process_time()
    x, objectives = route.multipass_least_squares(batch, passes, settings=settings, routes=routes)
    return time.process_time() - t0, routes, x, float(objectives[-1].sum())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="a generated population folder")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--before", type=float, default=2e7, help="the earlier cg_admm_max_work")
    args = parser.parse_args(argv)
    batch, passes = county_batch(args.data)
    cells = int(np.count_nonzero(batch.parent > 0))
    children = int(batch.n_children)
    print(
        f"{args.data}: {children} counties × {cells} populated cells (children × cells² = "
        f"{children * cells**2:.2g}); passes of {[len(p) for p in passes]} queries"
    )
    settings = {"now": SETTINGS.cg_admm_max_work, "before": args.before}
    times: dict[str, list[float]] = {name: [] for name in settings}
    found: dict[str, tuple[dict[str, int], np.ndarray, float]] = {}
    for repeat in range(args.repeats):
        order = list(settings) if repeat % 2 == 0 else list(settings)[::-1]
        for name in order:
            cpu, routes, x, objective = solve(batch, passes, settings[name])
            times[name].append(cpu)
            found[name] = (routes, x, objective)
    reference = found["before"][2]
    print()
    print("| cg_admm_max_work | routes | median CPU s (runs) | pass-2 objective | rel. to before |")
    print("| --- | --- | --- | --- | --- |")
    for name, value in settings.items():
        routes, x, objective = found[name]
        runs = ", ".join(f"{t:.2f}" for t in times[name])
        print(
            f"| {value:.0e} ({name}) | {routes} | {statistics.median(times[name]):.2f} ({runs}) "
            f"| {objective:.6f} | {(objective - reference) / reference:+.1e} |"
        )
    ratio = statistics.median(times["before"]) / statistics.median(times["now"])
    print(f"\nbefore ÷ now (medians, same run): {ratio:.1f}×")
    for name in settings:
        x = found[name][1]
        coupling = np.abs(x.sum(axis=0) - batch.parent[0]).max()
        print(f"{name}: largest coupling residual {coupling:.2e} persons, smallest x {x.min():.2e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
