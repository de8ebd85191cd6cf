"""The block-group route: the removed batched interior point against PIQP and the other well-kept
solvers, on EVERY family of one level of a recorded run, in one process, alternating.

The rule (docs/topdown.md "The least-squares routes"): a hand-written solver is kept only where it
is ≥ 1.5× faster than the best well-kept solver on the level it serves. This script settles it for
the level whose children are block groups (a tract's block groups: 2–8 children on the cells the
tract populates), where the earlier comparisons disagreed (1.1–1.3× in two head-to-heads, 1.77× in
one run of the whole least-squares phase).

It reads a recording of :mod:`benchmarks.recorded_families` and takes ALL units of work of
``--level``. For each unit the engine's pass 1 (TOTAL: the closed form) is solved once and its
answers are held within 0.1 in pass 2 (every other query), as in a run. Then, ``--repeats`` times,
every unit's pass 2 is solved by each contender, the contenders' order rotating from unit to unit
and from repeat to repeat (so the machine's load falls on all alike); CPU seconds
(``time.process_time``, one BLAS thread) summed over the level per repeat, medians reported:

* ``d98ca56 route`` — the route the interior point served in: ``least_squares.solve_pass`` of the
  commit before its removal (the batched interior point on the small families, ADMM on the rest,
  Clarabel on what neither verified);
* ``interior point + PIQP`` — the batched interior point of d98ca56 (``family_batch``) on the
  families it takes and verifies, the engine's PIQP route on the rest (what restoring it as a route
  would run);
* ``PIQP`` — the engine's route today (the general model of the whole unit, one PIQP solve);
* ``Clarabel``, ``OSQP (polish)``, ``ProxSuite sparse`` — the other well-kept solvers on the same
  general model of the whole unit (CPU includes building it, as for PIQP).

The d98ca56 modules are loaded from ``--baseline-tree`` (``git archive d98ca56 | tar -x -C DIR``)
under a private package name, outside the engine: nothing of them enters the package. Pass 1's
closed form is timed too, the engine's against d98ca56's (``total_pass`` and the water filling of
its ``least_squares``), since a whole-phase comparison includes it.

Every contender's pass-2 solution is checked on every family against a tight Clarabel solve of the
same model: the objective within 1e-6 relative and bound violations (x ≥ 0, the parent, structural
bounds, the bands) within 1e-6 persons; a contender that fails a family is reported, not hidden.

Usage::

    mkdir -p /tmp/qpw/base && git archive d98ca56 | tar -x -C /tmp/qpw/base
    .venv/bin/python benchmarks/recorded_families.py --data /tmp/pop/RI-1000000-seed1 \
        --out /tmp/rec-ri1m.pkl
    .venv/bin/python benchmarks/recorded_families.py --data ri2010 --out /tmp/rec-ri2010.pkl
    .venv/bin/python benchmarks/block_group_route.py /tmp/rec-ri1m.pkl /tmp/rec-ri2010.pkl \
        --baseline-tree /tmp/qpw/base --repeats 5

Measured (docs/topdown.md "Block groups: the last open route"): the interior point 1.41–1.44×
PIQP on the 1M state's 205 block-group families, 0.68–0.73× on RI 2010's 233 — under the 1.5×
line, so PIQP stays the route.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
import types
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from qp_solvers import _split, _violation, solve_osqp, solve_proxsuite_sparse  # noqa: E402
from recorded_families import load  # noqa: E402

from engine.core.blas_threads import single_blas_thread  # noqa: E402
from engine.topdown.qp import general  # noqa: E402
from engine.topdown.qp.problem import Band  # noqa: E402
from engine.topdown.qp.route import (  # noqa: E402
    PASS_TOLERANCE,
    Pass,
    _child_rows,
    _solve_closed_form,
    _solve_piqp,
    family_objective,
)
from engine.topdown.qp.settings import SETTINGS  # noqa: E402

TOL = 1e-6
PRIVATE = "qp_d98ca56"
MODULES = (
    "problem",
    "batched_qp",
    "family_admm",
    "family_projected_cg",
    "total_pass",
    "family_batch",
    "least_squares",
)


def load_baseline(tree: str) -> types.SimpleNamespace:
    """The least-squares modules of ``tree`` (a checkout of d98ca56) as the private package
    ``qp_d98ca56``: their ``engine.topdown.qp`` imports point at each other, every other import
    (the batch, feasibility, BLAS threads) at this engine, whose types they share."""
    folder = Path(tree) / "engine" / "topdown" / "qp"
    package = types.ModuleType(PRIVATE)
    package.__path__ = []  # a package for the import system; its modules are added below
    sys.modules[PRIVATE] = package
    loaded = {}
    for name in MODULES:
        source = (folder / f"{name}.py").read_text(encoding="utf-8")
        source = source.replace("from engine.topdown.qp import", f"from {PRIVATE} import")
        source = source.replace("engine.topdown.qp.", f"{PRIVATE}.")
        spec = importlib.util.spec_from_loader(f"{PRIVATE}.{name}", loader=None)
        module = importlib.util.module_from_spec(spec)
        module.__file__ = str(folder / f"{name}.py")
        sys.modules[spec.name] = module
        setattr(package, name, module)
        exec(compile(source, module.__file__, "exec"), module.__dict__)  # noqa: S102
        loaded[name] = module
    return types.SimpleNamespace(**loaded)


def _pass2(p: Pass) -> tuple[list[int], list[Band]]:
    return list(p.queries), list(p.bands)


def _general_solver(fn: Callable[..., np.ndarray | None]) -> Callable[[Pass, object], np.ndarray]:
    """A well-kept solver on the general model of the whole unit (model build included)."""

    def run(p: Pass, _old: object) -> np.ndarray:
        model = general.build(p.batch, p.queries, p.bands)
        raw = fn(_split(model), model)
        if raw is None or not np.all(np.isfinite(raw)):
            return np.full((p.batch.n_children, p.batch.n_cells), np.nan)
        return model.to_x(raw)

    return run


def _clarabel(p: Pass, _old: object) -> np.ndarray:
    return general.solve(p.batch, p.queries, p.bands, SETTINGS)


def _piqp(p: Pass, _old: object) -> np.ndarray:
    answer = _solve_piqp(p, SETTINGS)
    if not answer.solved.all():
        return np.full((p.batch.n_children, p.batch.n_cells), np.nan)
    return answer.x


def _old_route(p: Pass, old: types.SimpleNamespace) -> np.ndarray:
    queries, bands = _pass2(p)
    return old.least_squares.solve_pass(p.batch, queries, bands).x


COVERAGE: dict[str, list[int]] = {}
"""Families the interior point verified per repeat (``interior point + PIQP``)."""


def _ipm_then_piqp(p: Pass, old: types.SimpleNamespace) -> np.ndarray:
    queries, bands = _pass2(p)
    x, solved = old.family_batch.solve_small_families(p.batch, queries, bands)
    COVERAGE.setdefault("ipm", []).append(int(solved.sum()))
    rest = np.flatnonzero(~solved)
    if rest.size:
        answer = _solve_piqp(p.subset(rest), SETTINGS)
        x[_child_rows(p.batch, rest)] = answer.x
    return x


CONTENDERS: dict[str, Callable[[Pass, object], np.ndarray]] = {
    "d98ca56 route": _old_route,
    "interior point + PIQP": _ipm_then_piqp,
    "PIQP": _piqp,
    "Clarabel": _clarabel,
    "OSQP (polish)": _general_solver(solve_osqp),
    "ProxSuite sparse": _general_solver(solve_proxsuite_sparse),
}
HAND_WRITTEN = ("d98ca56 route", "interior point + PIQP")


def _pass1_new(unit, old) -> np.ndarray:
    return _solve_closed_form(unit["p1"], SETTINGS).x


def _pass1_old(unit, old) -> np.ndarray:
    p = unit["p1"]
    return old.least_squares.solve_pass(p.batch, list(p.queries), []).x


def prepare(units: list[dict], level: str) -> list[dict]:
    """Every unit of ``level`` with its pass 1 (the engine's) and pass 2 (bands held)."""
    out = []
    for u in units:
        batch = u["batch"]
        if batch.child_level != level:
            continue
        measured = [[q for q in p if np.any(batch.weight[:, q] > 0)] for p in u["passes"]]
        measured = [p for p in measured if p]
        if len(measured) != 2:
            raise SystemExit(f"{level}: expected two passes (TOTAL, then the rest), got {measured}")
        p1 = Pass(batch, tuple(measured[0]))
        first = _solve_closed_form(p1, SETTINGS)
        if not first.solved.all():
            raise SystemExit(f"{level}: the closed form did not take pass 1")
        bands = tuple(
            Band(q, batch.queries[q].answer(first.x), np.full(batch.n_families, PASS_TOLERANCE))
            for q in measured[0]
        )
        p2 = Pass(batch, tuple(measured[1]), bands)
        model = general.build(batch, p2.queries, bands)
        ref = model.to_x(
            general.solve_clarabel(model, strict=True, raise_on_failure=False, reference=True)
        )
        out.append({"p1": p1, "p2": p2, "reference": family_objective(batch, ref, p2.queries)})
    return out


def check(unit: dict, x: np.ndarray) -> tuple[int, float, float]:
    """(families failed, largest relative objective difference, largest violation) of ``x``."""
    p = unit["p2"]
    if not np.all(np.isfinite(x)):
        return p.batch.n_families, np.inf, np.inf
    value = family_objective(p.batch, x, p.queries)
    diff = np.abs(value - unit["reference"]) / np.maximum(np.abs(unit["reference"]), 1e-9)
    failed, worst_v = 0, 0.0
    for f in range(p.batch.n_families):
        one = p.subset(np.array([f]))
        v = _violation(one.batch, x[_child_rows(p.batch, np.array([f]))], one.bands)
        worst_v = max(worst_v, v)
        failed += int(diff[f] > TOL or v > TOL)
    return failed, float(diff.max(initial=0.0)), worst_v


def _load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def run(path: str, tree: str, level: str, repeats: int) -> dict[str, object]:
    old = load_baseline(tree)
    units = prepare(load(path)["units"], level)
    families = sum(u["p2"].batch.n_families for u in units)
    names = list(CONTENDERS)
    cpu = {name: [] for name in names}
    pass1 = {"closed form (engine)": [], "closed form (d98ca56)": []}
    quality = {name: [0, 0.0, 0.0] for name in names}
    loads = [_load()]
    with single_blas_thread(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for r in range(repeats):
            COVERAGE["ipm"] = []
            total = dict.fromkeys(names, 0.0)
            first = dict.fromkeys(pass1, 0.0)
            for i, unit in enumerate(units):
                shift = (r + i) % len(names)
                for name in names[shift:] + names[:shift]:
                    c0 = time.process_time()
                    x = CONTENDERS[name](unit["p2"], old)
                    total[name] += time.process_time() - c0
                    if r == 0:
                        failed, diff, viol = check(unit, x)
                        q = quality[name]
                        q[0] += failed
                        q[1] = max(q[1], diff)
                        q[2] = max(q[2], viol)
                for label, fn in [
                    ("closed form (engine)", _pass1_new),
                    ("closed form (d98ca56)", _pass1_old),
                ][:: 1 if (r + i) % 2 == 0 else -1]:
                    c0 = time.process_time()
                    fn(unit, old)
                    first[label] += time.process_time() - c0
            for name in names:
                cpu[name].append(total[name])
            for label in pass1:
                pass1[label].append(first[label])
            loads.append(_load())
            print(
                f"repeat {r + 1}: "
                + ", ".join(f"{n} {1e3 * total[n] / families:.2f}" for n in names)
                + f" ms/family; {loads[-1]}",
                file=sys.stderr,
                flush=True,
            )
    median = {name: float(np.median(v)) for name, v in cpu.items()}
    well_kept = [n for n in names if n not in HAND_WRITTEN and quality[n][0] == 0]
    best = min(well_kept, key=median.__getitem__)
    return {
        "recording": path,
        "level": level,
        "units": len(units),
        "families": families,
        "repeats": repeats,
        "cpu_s": cpu,
        "median_s": median,
        "pass1_s": pass1,
        "pass1_median_s": {k: float(np.median(v)) for k, v in pass1.items()},
        "quality": {
            n: dict(zip(("failed", "max_rel_diff", "max_violation"), q, strict=True))
            for n, q in quality.items()
        },
        "ipm_verified": COVERAGE.get("ipm", []),
        "best_well_kept": best,
        "ratios_to_best": {n: median[best] / median[n] for n in names},
        "loads": loads,
    }


def table(result: dict[str, object]) -> str:
    med, q, fam = result["median_s"], result["quality"], result["families"]
    best = result["best_well_kept"]
    lines = [
        f"{result['recording']} — level {result['level']}: {result['units']} units, {fam} "
        f"families, pass 2, {result['repeats']} repeats (CPU s summed over the level, median; "
        f"ms per family; best well-kept solver: {best})",
        "",
        "| contender | median CPU s | ms / family | best well-kept ÷ it | families failed | max rel. "
        "objective diff | max violation |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, seconds in med.items():
        lines.append(
            f"| {name} | {seconds:.3f} | {1e3 * seconds / fam:.2f} | "
            f"{med[best] / seconds:.2f}× | {q[name]['failed']} | {q[name]['max_rel_diff']:.1e} | "
            f"{q[name]['max_violation']:.1e} |"
        )
    p1 = result["pass1_median_s"]
    lines.append("")
    lines.append(
        "pass 1 (TOTAL), median CPU s: "
        + ", ".join(f"{k} {v:.3f} ({1e3 * v / fam:.2f} ms/family)" for k, v in p1.items())
    )
    ipm = result["ipm_verified"]
    if ipm:
        lines.append(f"families the interior point verified (last repeat): {sum(ipm)} of {fam}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recordings", nargs="+", help="pickles of benchmarks/recorded_families.py")
    parser.add_argument("--baseline-tree", required=True, help="a checkout of d98ca56")
    parser.add_argument("--level", default="Block_Group", help="the children's level")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", default=None, help="also write the raw results to this file")
    args = parser.parse_args(argv)
    results = [run(p, args.baseline_tree, args.level, args.repeats) for p in args.recordings]
    for result in results:
        print(table(result))
        print()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
