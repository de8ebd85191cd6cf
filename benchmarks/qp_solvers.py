"""Well-kept QP solvers against the engine's routes on the REAL families of TopDown runs (TDA eq. 7.5).

Reads recordings of :mod:`benchmarks.recorded_families` (every unit of work of a run, with its
noisy answers) and, level by level, solves every family's least-squares passes as the engine did
(pass 1, then pass 2 holding pass 1's answers within 0.1):

* **ours** — the engine's routing table (``engine.topdown.qp``), whole units as the engine solves
  them (batched routes solve many families per call): CPU seconds per family = the unit's CPU
  seconds ÷ its families;
* **well-kept solvers**, each on every sampled family alone (CPU seconds include building the
  model, which each of them needs), given the engine's general model of the pass (the centred sparse QP of ``engine.topdown.qp.general``: residual variables, diagonal
  P, the parent's populated cells only): Clarabel (the engine's tight settings), OSQP (ε 1e-7,
  polish on), PIQP (sparse, ε 1e-9), ProxSuite (sparse ProxQP, ε 1e-9), and, for families of at
  most ``--dense-max`` variables, ProxSuite dense and DAQP on the same QP with P and A dense;
  ProxSuite's dense ``BatchQP`` + ``solve_in_parallel`` (one thread) on all small families of a
  unit at once.

Objectives are evaluated the same way for every solver (the engine's ``family_objective`` of the
x it returns, after x = max(x0 + d, 0)) and compared with a tight reference solve (Clarabel, gap
1e-10); "fails" counts families a solver did not return, returned above 1e-6 relative of the
reference, or that violated a bound by more than 1e-6 (structural bounds, bands, the parent).
CPU seconds are ``time.process_time`` with one BLAS thread. Prints one table (markdown) and, with
``--json``, the raw rows.

Usage::

    .venv/bin/python benchmarks/recorded_families.py --data ri2010 --out /tmp/rec-ri2010.pkl
    .venv/bin/python benchmarks/qp_solvers.py /tmp/rec-ri2010.pkl /tmp/rec-ri1m.pkl --sample 40
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from recorded_families import load  # noqa: E402

from engine.core.blas_threads import single_blas_thread  # noqa: E402
from engine.topdown.qp import general  # noqa: E402
from engine.topdown.qp.problem import Band  # noqa: E402
from engine.topdown.qp.route import PASS_TOLERANCE, family_objective, solve_pass  # noqa: E402

TOL = 1e-6
"""Relative objective difference from the reference, and bound violation, counted as a failure."""


def _split(model: general.SparseModel) -> dict[str, object]:
    """The model's matrices in the forms the solvers take (lower bounds of the variables as rows,
    except for PIQP, which takes them as bounds, as the engine's route does)."""
    model = model.with_lower_rows()
    a = model.a.tocsr()
    n_eq = model.n_eq
    return {
        "P": sp.csc_matrix(model.p),
        "P_upper": sp.triu(model.p, format="csc"),
        "q": model.c,
        "A_eq": sp.csc_matrix(a[:n_eq]),
        "b_eq": model.b[:n_eq],
        "G": sp.csc_matrix(a[n_eq:]),
        "h": model.b[n_eq:],
        "A": sp.csc_matrix(a),
        "l": np.concatenate([model.b[:n_eq], np.full(a.shape[0] - n_eq, -np.inf)]),
        "u": model.b,
    }


def solve_clarabel(m: dict[str, object], model: general.SparseModel) -> np.ndarray | None:
    return general.solve_clarabel(model, strict=True, raise_on_failure=False)


def solve_osqp(m: dict[str, object], model: general.SparseModel) -> np.ndarray | None:
    import osqp

    solver = osqp.OSQP()
    solver.setup(
        m["P_upper"],
        m["q"],
        m["A"],
        m["l"],
        m["u"],
        verbose=False,
        eps_abs=1e-7,
        eps_rel=1e-7,
        polishing=True,
        max_iter=20_000,
        time_limit=60.0,
    )
    result = solver.solve()
    return np.asarray(result.x) if result.info.status_val in (1, 2) else None


def solve_piqp(m: dict[str, object], model: general.SparseModel) -> np.ndarray | None:
    return general.solve_piqp(model)


def _proxsuite_settings(qp) -> None:
    import proxsuite

    qp.settings.eps_abs = 1e-9
    qp.settings.eps_rel = 0.0
    qp.settings.verbose = False
    qp.settings.max_iter = 10_000
    qp.settings.initial_guess = proxsuite.proxqp.InitialGuess.EQUALITY_CONSTRAINED_INITIAL_GUESS


def solve_proxsuite_sparse(m: dict[str, object], model: general.SparseModel) -> np.ndarray | None:
    import proxsuite

    n = model.c.size
    qp = proxsuite.proxqp.sparse.QP(n, m["A_eq"].shape[0], m["G"].shape[0])
    _proxsuite_settings(qp)
    qp.init(m["P"], m["q"], m["A_eq"], m["b_eq"], m["G"], np.full(m["h"].size, -1e20), m["h"])
    qp.solve()
    ok = qp.results.info.status == proxsuite.proxqp.QPSolverOutput.PROXQP_SOLVED
    return np.asarray(qp.results.x) if ok else None


def _init_dense(qp, m: dict[str, object]) -> None:  # type: ignore[no-untyped-def]
    """Settings and data of a dense ProxSuite QP (one-sided inequalities G x ≤ h)."""
    _proxsuite_settings(qp)
    qp.init(
        m["P"].toarray(),
        m["q"],
        m["A_eq"].toarray(),
        m["b_eq"],
        m["G"].toarray(),
        np.full(m["h"].size, -1e20),
        m["h"],
    )


def solve_proxsuite_dense(m: dict[str, object], model: general.SparseModel) -> np.ndarray | None:
    import proxsuite

    n = model.c.size
    qp = proxsuite.proxqp.dense.QP(n, m["A_eq"].shape[0], m["G"].shape[0])
    _init_dense(qp, m)
    qp.solve()
    ok = qp.results.info.status == proxsuite.proxqp.QPSolverOutput.PROXQP_SOLVED
    return np.asarray(qp.results.x) if ok else None


def solve_daqp(m: dict[str, object], model: general.SparseModel) -> np.ndarray | None:
    import daqp

    a = m["A"].toarray()
    n_eq = m["A_eq"].shape[0]
    sense = np.zeros(a.shape[0], dtype=np.int32)
    sense[:n_eq] = 5
    lower = np.where(np.isfinite(m["l"]), m["l"], -1e30)
    x, _f, flag, _info = daqp.solve(
        m["P"].toarray(), m["q"].astype(np.float64), a, m["u"].astype(np.float64), lower, sense
    )
    return np.asarray(x) if flag in (1, 2) else None


SOLVERS: dict[str, Callable[..., np.ndarray | None]] = {
    "Clarabel": solve_clarabel,
    "OSQP (polish)": solve_osqp,
    "PIQP": solve_piqp,
    "ProxSuite sparse": solve_proxsuite_sparse,
    "ProxSuite dense": solve_proxsuite_dense,
    "DAQP": solve_daqp,
}
DENSE = ("ProxSuite dense", "DAQP")
SLOW = ("ProxSuite sparse", "OSQP (polish)")
"""Left out above ``--sparse-max`` variables: ProxSuite's sparse solver took 211 s and OSQP 0.5 s
(Clarabel 1 s, ours 0.03 s) on the 6,010-variable state→county family of a generated 1M RI."""


def _passes_of(batch, passes):
    """The engine's pass structure: (queries, bands) per pass, bands from the engine's pass 1."""
    measured = [[q for q in p if np.any(batch.weight[:, q] > 0)] for p in passes]
    measured = [p for p in measured if p]
    out = []
    bands: list[Band] = []
    for queries in measured:
        out.append((queries, list(bands)))
        solution = solve_pass(batch, queries, bands)
        bands = bands + [
            Band(q, batch.queries[q].answer(solution.x), np.full(batch.n_families, PASS_TOLERANCE))
            for q in queries
        ]
    return out


def _violation(batch, x: np.ndarray, bands) -> float:
    """Largest violation of the parent sum, x ≥ 0, structural bounds and bands (persons)."""
    worst = float(max(0.0, -x.min(initial=0.0)))
    if batch.parent is not None:
        sums = np.add.reduceat(x, batch.child_ptr[:-1], axis=0)
        worst = max(worst, float(np.abs(sums - batch.parent).max(initial=0.0)))
    for bound in batch.bounds:
        ans = bound.spec.answer(x)
        worst = max(worst, float(np.nan_to_num(np.maximum(ans - bound.upper, 0.0)).max()))
        worst = max(worst, float(np.nan_to_num(np.maximum(bound.lower - ans, 0.0)).max()))
    for band in bands:
        ans = batch.queries[band.query].answer(x)
        excess = np.abs(ans - band.target) - band.tol[batch.child_family][:, None]
        worst = max(worst, float(excess.max(initial=0.0)))
    return worst


def _level_rows(
    units, sample: int, dense_max: int, rng, report=None, sparse_max: int = 5_000
) -> dict[str, dict[str, object]]:
    by_level: dict[str, list[int]] = {}
    for i, u in enumerate(units):
        by_level.setdefault(u["batch"].child_level, []).append(i)
    out: dict[str, dict[str, object]] = {}
    for level, unit_ids in by_level.items():
        families = [(i, f) for i in unit_ids for f in range(units[i]["batch"].n_families)]
        pick = rng.choice(len(families), size=min(sample, len(families)), replace=False)
        chosen = sorted(families[int(k)] for k in pick)
        stats: dict[str, dict[str, float]] = {}
        sizes: list[int] = []
        routes: dict[str, int] = {}

        def add(name: str, cpu: float, ok: bool, diff: float, stats=stats) -> None:
            s = stats.setdefault(name, {"cpu": 0.0, "n": 0, "fails": 0, "max_diff": 0.0})
            s["cpu"] += cpu
            s["n"] += 1
            s["fails"] += int(not ok)
            if ok:
                s["max_diff"] = max(s["max_diff"], diff)

        for i in sorted({i for i, _ in chosen}):
            unit = units[i]
            batch = unit["batch"]
            pass_list = _passes_of(batch, unit["passes"])
            # ours: whole unit, as the engine solves it (every pass)
            c0 = time.process_time()
            ours_x = []
            for queries, bands in pass_list:
                solution = solve_pass(batch, queries, bands, routes=routes)
                ours_x.append(solution.x)
            ours_cpu = (time.process_time() - c0) / batch.n_families
            mine = [f for j, f in chosen if j == i]
            batch_small = []
            for f in mine:
                one = batch.subset([f])
                rows = np.arange(batch.child_ptr[f], batch.child_ptr[f + 1])
                ours_obj, ref_obj = [], []
                per_solver: dict[str, list[tuple[float, bool, float]]] = {}
                for k, (queries, bands) in enumerate(pass_list):
                    one_bands = [Band(b.query, b.target[rows], b.tol[[f]]) for b in bands]
                    c0 = time.process_time()
                    model = general.build(one, queries, one_bands)
                    build = time.process_time() - c0  # every well-kept solver pays it
                    m = _split(model)
                    sizes.append(model.c.size)
                    ref_raw = general.solve_clarabel(
                        model, strict=True, raise_on_failure=False, reference=True
                    )
                    ref = family_objective(one, model.to_x(ref_raw), queries)[0]
                    ours = family_objective(one, ours_x[k][rows], queries)[0]
                    ours_obj.append(ours)
                    ref_obj.append(ref)
                    ours_diff = abs(ours - ref) / max(abs(ref), 1e-9)
                    per_solver.setdefault("ours", []).append(
                        (
                            0.0,
                            ours_diff <= TOL and _violation(one, ours_x[k][rows], one_bands) <= TOL,
                            ours_diff,
                        )
                    )
                    for name, fn in SOLVERS.items():
                        too_big = (name in DENSE and model.c.size > dense_max) or (
                            name in SLOW and model.c.size > sparse_max
                        )
                        if too_big:  # left out for the whole family (not one pass of it)
                            per_solver.setdefault(name, []).append((np.nan, False, np.inf))
                            continue
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            c0 = time.process_time()
                            try:
                                raw = fn(m, model)
                            except Exception:  # noqa: BLE001 - a solver error is a failure
                                raw = None
                            cpu = time.process_time() - c0 + build
                        if raw is None or not np.all(np.isfinite(raw)):
                            per_solver.setdefault(name, []).append((cpu, False, np.inf))
                            continue
                        x = model.to_x(raw)
                        value = family_objective(one, x, queries)[0]
                        diff = abs(value - ref) / max(abs(ref), 1e-9)
                        ok = diff <= TOL and _violation(one, x, one_bands) <= TOL
                        per_solver.setdefault(name, []).append((cpu, ok, diff))
                    if model.c.size <= dense_max:
                        batch_small.append((k, m, model))
                for name, results in per_solver.items():
                    if any(np.isnan(r[0]) for r in results):
                        continue
                    cpu = ours_cpu if name == "ours" else sum(r[0] for r in results)
                    add(name, cpu, all(r[1] for r in results), max(r[2] for r in results))
            if batch_small:
                cpu, ok = _batch_qp(batch_small)
                s = stats.setdefault(
                    "ProxSuite BatchQP", {"cpu": 0.0, "n": 0, "fails": 0, "max_diff": 0.0}
                )
                s["cpu"] += cpu
                s["n"] += len(mine)
                s["fails"] += ok
        out[level] = {
            "families": len(chosen),
            "variables_median": float(np.median(sizes)) if sizes else 0.0,
            "variables_max": int(max(sizes)) if sizes else 0,
            "routes": routes,
            "solvers": stats,
        }
        if report is not None:
            report(level, out[level])
    return out


def _batch_qp(items) -> tuple[float, int]:
    """ProxSuite's dense BatchQP on every small family-pass of a unit, ``solve_in_parallel`` on
    one thread: (CPU seconds, families whose solve did not report success)."""
    import proxsuite

    batch = proxsuite.proxqp.dense.BatchQP()
    c0 = time.process_time()
    for _k, m, model in items:
        n = model.c.size
        _init_dense(batch.init_qp_in_place(n, m["A_eq"].shape[0], m["G"].shape[0]), m)
    proxsuite.proxqp.dense.solve_in_parallel(batch, 1)
    cpu = time.process_time() - c0
    failed = sum(
        batch.get(j).results.info.status != proxsuite.proxqp.QPSolverOutput.PROXQP_SOLVED
        for j in range(batch.size())
    )
    return cpu, int(failed)


def table(results: dict[str, dict[str, dict[str, object]]]) -> str:
    names = ["ours", *SOLVERS, "ProxSuite BatchQP"]
    head = "| run | level | families (median / max variables) | " + " | ".join(names) + " |"
    lines = [head, "|" + "---|" * (3 + len(names))]
    for run, levels in results.items():
        for level, row in levels.items():
            cells = []
            for name in names:
                s = row["solvers"].get(name)
                if not s or not s["n"]:
                    cells.append("—")
                    continue
                ms = 1e3 * s["cpu"] / s["n"]
                fails = f", {s['fails']} fail" if s["fails"] else ""
                cells.append(f"{ms:.1f} ms ({s['max_diff']:.0e}{fails})")
            lines.append(
                f"| {run} | {level} | {row['families']} ({row['variables_median']:.0f} / "
                f"{row['variables_max']}) | " + " | ".join(cells) + " |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recordings", nargs="+", help="pickles of benchmarks/recorded_families.py")
    parser.add_argument("--sample", type=int, default=40, help="families per level (random)")
    parser.add_argument("--dense-max", type=int, default=1_500, help="largest dense QP")
    parser.add_argument(
        "--sparse-max", type=int, default=5_000, help="largest QP for ProxSuite sparse and OSQP"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the raw rows to this file")
    args = parser.parse_args(argv)
    results = {}
    with single_blas_thread():
        for path in args.recordings:
            rec = load(path)
            rng = np.random.default_rng(args.seed)
            name = Path(path).stem
            results[name] = _level_rows(
                rec["units"],
                args.sample,
                args.dense_max,
                rng,
                sparse_max=args.sparse_max,
                report=lambda level, row, name=name: print(
                    table({name: {level: row}}).splitlines()[-1], file=sys.stderr, flush=True
                ),
            )
            print(f"done {path}", file=sys.stderr)
    print(
        "CPU ms per family (both passes; ours = the engine's routes on whole units ÷ families), "
        "(max relative objective difference from the tight reference, failures)"
    )
    print(table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
