"""TopDown's least squares beside a per-family cvxpy model of TDA eq. 7.5 (Clarabel through cvxpy),
on the family batches a run recorded: single families, whole batches, or every batch of a level.

Used by ``benchmarks/topdown_production.py`` (``--sample``, ``--every-batch``), which records the
batches of a run and reports these comparisons beside its scale table.
"""

from __future__ import annotations

import resource
import time

import numpy as np


def cvxpy_family(batch, f: int, queries, bands) -> tuple[float, float]:
    """TDA eq. 7.5 for family ``f`` as a plain cvxpy model (Clarabel): (objective, seconds).

    One vector of the children's cells that the parent can populate (cells empty in the parent or
    structurally zero are 0 in every feasible point; a model over all 2,016 cells made cvxpy ask
    for a 7 GB dense matrix on a 30-block family), the stacked query matrices kron(I_K, A_q) as
    SciPy sparse matrices restricted to those cells.
    """
    import cvxpy as cp
    import scipy.sparse as sp

    t0 = time.perf_counter()
    lo, hi = batch.child_ptr[f], batch.child_ptr[f + 1]
    k, n = hi - lo, batch.n_cells
    fixed = np.zeros((k, n), dtype=bool)
    if batch.parent is not None:
        fixed |= (batch.parent[f] <= 0)[None, :]
    zero = batch.structural_zero_cells()
    if zero is not None:
        fixed |= zero[lo:hi]
    free = np.flatnonzero(~fixed.reshape(-1))
    x = cp.Variable(free.size, nonneg=True)
    eye = sp.identity(k, format="csr")

    def stacked(spec):
        return sp.kron(eye, spec.matrix(), format="csc")[:, free].tocsr()

    terms = []
    for q in queries:
        w = batch.weight[lo:hi, q]
        if not np.any(w > 0):
            continue
        spec = batch.queries[q]
        root_w = np.sqrt(np.repeat(w, spec.size))
        resid = stacked(spec) @ x - batch.noisy[q][lo:hi].reshape(-1)
        terms.append(cp.sum_squares(cp.multiply(root_w, resid)))
    constraints = []
    if batch.parent is not None:
        total = sp.kron(np.ones((1, k)), sp.identity(n), format="csc")[:, free].tocsr()
        used = np.diff(total.indptr) > 0
        constraints.append(total[used] @ x == batch.parent[f][used])
    for q, target in enumerate(batch.invariant):
        if target is None:
            continue
        flat = target[lo:hi].reshape(-1)
        rows = np.flatnonzero(np.isfinite(flat))
        if rows.size:
            constraints.append(stacked(batch.queries[q])[rows] @ x == flat[rows])
    for bound in batch.bounds:
        m = stacked(bound.spec)
        upper, lower = bound.upper[lo:hi].reshape(-1), bound.lower[lo:hi].reshape(-1)
        live = np.diff(m.indptr) > 0
        up = np.flatnonzero(np.isfinite(upper) & live)
        low = np.flatnonzero(np.isfinite(lower) & live)
        if up.size:
            constraints.append(m[up] @ x <= upper[up])
        if low.size:
            constraints.append(m[low] @ x >= lower[low])
    for band in bands:
        m = stacked(batch.queries[band.query])
        target = band.target[lo:hi].reshape(-1)
        constraints.append(cp.abs(m @ x - target) <= band.tol[f])
    problem = cp.Problem(cp.Minimize(sum(terms)), constraints)
    problem.solve(
        solver=cp.CLARABEL, tol_gap_abs=1e-9, tol_gap_rel=1e-10, tol_feas=1e-10, max_iter=400
    )
    return float(problem.value), time.perf_counter() - t0


def _engine_family(one, passes, solver: str):
    """The engine's passes for one family alone (``solver`` of ``solve_pass``): (objectives of
    every pass, bands of the last pass, seconds)."""
    from engine.topdown.qp.problem import Band
    from engine.topdown.qp.route import PASS_TOLERANCE, solve_pass

    t0 = time.perf_counter()
    first = solve_pass(one, passes[0], solver=solver) if len(passes) > 1 else None
    bands = (
        [Band(q, one.queries[q].answer(first.x), np.full(1, PASS_TOLERANCE)) for q in passes[0]]
        if first is not None
        else []
    )
    last = solve_pass(one, passes[-1], bands, solver=solver)
    seconds = time.perf_counter() - t0
    objectives = ([first.objective[0]] if first is not None else []) + [last.objective[0]]
    return objectives, bands, seconds


def _engine_batch(batch, passes):
    """The production path (``auto``) on a whole recorded batch, as the engine solves it (small
    families together, :mod:`engine.topdown.qp.route`): (objectives ``(passes, F)``, bands of
    the last pass, seconds for the whole batch)."""
    from engine.topdown.qp.problem import Band
    from engine.topdown.qp.route import PASS_TOLERANCE, solve_pass

    n = batch.n_families
    t0 = time.perf_counter()
    first = solve_pass(batch, passes[0]) if len(passes) > 1 else None
    bands = (
        [Band(q, batch.queries[q].answer(first.x), np.full(n, PASS_TOLERANCE)) for q in passes[0]]
        if first is not None
        else []
    )
    last = solve_pass(batch, passes[-1], bands)
    seconds = time.perf_counter() - t0
    objectives = ([first.objective] if first is not None else []) + [last.objective]
    return np.array(objectives), bands, seconds


def _cvxpy_every_family(batch, passes, bands, objectives, memory_gb: float = 4.0):
    """The per-family cvxpy model on every family of ``batch`` (both production passes, the
    engine's bands of the last one): (wall seconds, CPU seconds, relative objective differences
    against ``objectives`` ``(passes, F)``), or ``None`` when cvxpy runs out of memory."""
    from engine.topdown.qp.problem import Band

    wall = cpu = 0.0
    diffs = []
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    used = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    resource.setrlimit(resource.RLIMIT_AS, (int(used + memory_gb * 1024**3) * 4, hard))
    try:
        for f in range(batch.n_families):
            one = batch.subset([f])
            rows_f = np.arange(batch.child_ptr[f], batch.child_ptr[f + 1])
            one_bands = [Band(b.query, b.target[rows_f], b.tol[[f]]) for b in bands]
            # The production passes: TOTAL then the rest (non-leaf), or one pass.
            pass_bands = ([[]] if len(passes) > 1 else []) + [one_bands]
            for k, (queries, held) in enumerate(
                zip((passes[0], passes[-1])[-len(pass_bands) :], pass_bands, strict=True)
            ):
                c0 = time.process_time()
                value, sec = cvxpy_family(one, 0, queries, held)
                cpu += time.process_time() - c0
                wall += sec
                ours = float(objectives[k][f])
                diffs.append(abs(value - ours) / max(abs(value), 1e-9))
    except MemoryError:
        return None
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    return wall, cpu, diffs


def compare_every_batch(batches, level: str, repeats: int = 3) -> dict[str, object]:
    """EVERY recorded batch of ``level`` solved by the production path ``repeats`` times (median
    CPU and wall seconds per batch) and every family of it once by the per-family cvxpy model, in
    CPU seconds as well as wall-clock (CPU time is what a shared 2-core machine measures most
    steadily): totals per family and the ratios."""
    rows = []
    for batch, passes, _chain in batches:
        if batch.child_level != level or batch.parent is None:
            continue
        times = []
        for _ in range(repeats):
            c0 = time.process_time()
            objectives, bands, seconds = _engine_batch(batch, passes)
            times.append((seconds, time.process_time() - c0))
        cvx = _cvxpy_every_family(batch, passes, bands, objectives)
        if cvx is None:
            continue
        rows.append(
            {
                "families": batch.n_families,
                "children": batch.n_children,
                "ours_s": float(np.median([t[0] for t in times])),
                "ours_cpu_s": float(np.median([t[1] for t in times])),
                "cvxpy_s": cvx[0],
                "cvxpy_cpu_s": cvx[1],
                "rel_objective_diff": max(cvx[2]),
            }
        )
    families = sum(r["families"] for r in rows)
    total = {k: sum(r[k] for r in rows) for k in ("ours_s", "ours_cpu_s", "cvxpy_s", "cvxpy_cpu_s")}
    return {
        "level": level,
        "repeats": repeats,
        "batches": len(rows),
        "families": families,
        "children": sum(r["children"] for r in rows),
        "ours_cpu_per_family_s": total["ours_cpu_s"] / families if families else None,
        "cvxpy_cpu_per_family_s": total["cvxpy_cpu_s"] / families if families else None,
        "cvxpy_cpu_ratio": total["cvxpy_cpu_s"] / total["ours_cpu_s"] if rows else None,
        "ours_per_family_s": total["ours_s"] / families if families else None,
        "cvxpy_per_family_s": total["cvxpy_s"] / families if families else None,
        "cvxpy_ratio": total["cvxpy_s"] / total["ours_s"] if rows else None,
        "max_rel_objective_diff": max((r["rel_objective_diff"] for r in rows), default=None),
    }


def compare_batches(
    batches, per_level: int, seed: int, max_families: int = 16, memory_gb: float = 4.0
) -> dict[str, object]:
    """Whole batches as the engine solves them: for ``per_level`` random families of each level,
    the batch (unit of work) that holds it is solved by the production path at once (timed for
    the whole batch), and EVERY family of that batch (at most ``max_families``; batches with more
    are skipped) by the per-family cvxpy model. Per level: production seconds per family (batch
    seconds ÷ families in the batch) beside cvxpy's seconds per family on the same families."""

    rng = np.random.default_rng(seed + 1)
    by_level: dict[str, list[int]] = {}
    for i, (batch, _passes, _chain) in enumerate(batches):
        if batch.parent is not None and batch.n_families <= max_families:
            by_level.setdefault(batch.child_level, []).extend([i] * batch.n_families)
    rows = []
    for level, items in sorted(by_level.items()):
        chosen: list[int] = []
        for i in rng.permutation(items):
            if int(i) not in chosen:
                chosen.append(int(i))
            if len(chosen) >= per_level:
                break
        for i in chosen:
            batch, passes, _chain = batches[i]
            objectives, bands, ours_s = _engine_batch(batch, passes)
            cvx = _cvxpy_every_family(batch, passes, bands, objectives, memory_gb)
            if cvx is None:
                continue
            cvxpy_s, _cpu, diffs = cvx
            rows.append(
                {
                    "level": level,
                    "families": batch.n_families,
                    "children": batch.n_children,
                    "ours_batch_s": ours_s,
                    "cvxpy_s": cvxpy_s,
                    "rel_objective_diff": max(diffs),
                }
            )
    per_level = {}
    for level in sorted({r["level"] for r in rows}):
        mine = [r for r in rows if r["level"] == level]
        families = sum(r["families"] for r in mine)
        ours = sum(r["ours_batch_s"] for r in mine)
        cvx = sum(r["cvxpy_s"] for r in mine)
        per_level[level] = {
            "batches": len(mine),
            "families": families,
            "children": sum(r["children"] for r in mine),
            "ours_per_family_s": ours / families,
            "cvxpy_per_family_s": cvx / families,
            "cvxpy_ratio": cvx / ours if ours else None,
            "max_rel_objective_diff": max(r["rel_objective_diff"] for r in mine),
        }
    return {"batches": rows, "per_level": per_level}


def compare_families(
    batches, per_level: int, seed: int, max_children: int | None = None, memory_gb: float = 4.0
) -> dict[str, object]:
    """Whole families: the engine (``auto``: ADMM + polish where it applies), the previous path
    (every pass by the centred Clarabel model) and a per-family cvxpy model, on ``per_level``
    random families of each level (all sizes unless ``max_children``); cvxpy may use
    ``memory_gb`` more than the process holds (address-space limit)."""

    rng = np.random.default_rng(seed)
    by_level: dict[str, list[tuple[object, int, list[list[int]]]]] = {}
    for batch, passes, _chain in batches:
        if batch.parent is None:
            continue
        sizes = np.diff(batch.child_ptr)
        for f in range(batch.n_families):
            if max_children is None or sizes[f] <= max_children:
                by_level.setdefault(batch.child_level, []).append((batch, f, passes))
    rows = []
    for level, items in by_level.items():
        pick = rng.choice(len(items), size=min(per_level, len(items)), replace=False)
        for i in pick:
            batch, f, passes = items[int(i)]
            one = batch.subset([f])
            ours, bands, ours_s = _engine_family(one, passes, "auto")
            previous, _bands, previous_s = _engine_family(one, passes, "clarabel")
            base_s = 0.0
            diffs = [abs(a - b) / max(abs(b), 1e-9) for a, b in zip(ours, previous, strict=True)]
            soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            used = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            resource.setrlimit(resource.RLIMIT_AS, (int(used + memory_gb * 1024**3) * 4, hard))
            try:
                if len(passes) > 1:
                    value, sec = cvxpy_family(one, 0, passes[0], [])
                    base_s += sec
                    diffs.append(abs(value - ours[0]) / max(abs(value), 1e-9))
                value, sec = cvxpy_family(one, 0, passes[-1], bands)
                base_s += sec
                diffs.append(abs(value - ours[-1]) / max(abs(value), 1e-9))
            except MemoryError:
                rows.append({"level": level, "children": one.n_children, "cvxpy": "out of memory"})
                continue
            finally:
                resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
            rows.append(
                {
                    "level": level,
                    "children": one.n_children,
                    "free_cells": int(np.count_nonzero(one.parent)),
                    "ours_s": ours_s,
                    "previous_s": previous_s,
                    "cvxpy_s": base_s,
                    "rel_objective_diff": max(diffs),
                }
            )
    solved = [r for r in rows if "cvxpy_s" in r]
    per_level = {}
    for level in sorted({r["level"] for r in solved}):
        mine = [r for r in solved if r["level"] == level]
        ours_sum = sum(r["ours_s"] for r in mine)
        per_level[level] = {
            "families": len(mine),
            "children": [r["children"] for r in mine],
            "ours_s": ours_sum,
            "previous_s": sum(r["previous_s"] for r in mine),
            "cvxpy_s": sum(r["cvxpy_s"] for r in mine),
            "cvxpy_ratio": sum(r["cvxpy_s"] for r in mine) / ours_sum if ours_sum else None,
            "previous_ratio": sum(r["previous_s"] for r in mine) / ours_sum if ours_sum else None,
            "max_rel_objective_diff": max(r["rel_objective_diff"] for r in mine),
        }
    ours = sum(r["ours_s"] for r in solved)
    base = sum(r["cvxpy_s"] for r in solved)
    return {
        "families": rows,
        "per_level": per_level,
        "speedup": base / ours if ours > 0 else float("nan"),
        "max_rel_objective_diff": max((r["rel_objective_diff"] for r in solved), default=0.0),
    }
