"""Batched SPD inverses of the block-group interior point: LAPACK potrf/potri against LU.

:func:`engine.topdown.qp.batched_qp.spd_inverse` inverts the interior point's Newton matrices
M_c = H + diag(w_c) + Bᵀ W_c B (one per child) and Schur complements Σ_c M_c⁻¹ (one per family)
by per-matrix LAPACK Cholesky (``dpotrf`` + ``dpotri``). Named baselines, timed in the same
process: ``np.linalg.inv`` (batched LU) and the previous ``spd_inverse`` of commit bc76123
(``np.linalg.inv`` below 64 matrices, Cholesky with a power-of-two block doubling from 64),
copied below as :func:`previous_spd_inverse`.

Part 1 (always): a (K, n) grid of matrices shaped like the Newton matrices (a shared Hessian plus
per-child diagonal and band terms), CPU µs per matrix, one BLAS thread, median of ``--repeats``;
and the largest relative difference to ``np.linalg.inv``.

Part 2 (``--families PKL``): the group solves of recorded block-group families (a pickle of lists
of ``family_batch._Small``, e.g. the 205 families of a 1M-person RI run), previous and current
``spd_inverse`` alternating in one process: CPU ms per family, families verified, and the largest
relative objective difference between the two. ``--record PERSONS`` makes that recording first:
it runs ``topdown-2020-production`` on a generated state (``--state``, ``--seed``; reused from
``--cache DIR`` when there) and keeps, per block-group batch, its held pass reduced to the small
families (:func:`record_block_group_families`), written to ``--families`` when given.

    python benchmarks/spd_inverse.py [--repeats 5] [--families /tmp/bg-reduced.pkl]
    python benchmarks/spd_inverse.py --no-grid --record 1e6 --cache /tmp/populations \\
        --families /tmp/bg-reduced.pkl      # record once, then reuse with --families alone
"""

from __future__ import annotations

import argparse
import pickle
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.lib.stride_tricks import as_strided

from engine.core.blas_threads import single_blas_thread
from engine.topdown.qp import batched_qp, family_batch

GRID_K = (2, 8, 32, 128)
GRID_N = (13, 24, 37, 48, 64, 96, 133)


def _diagonal_blocks(a: np.ndarray, size: int) -> np.ndarray:
    k, n, _ = a.shape
    s0, s1, s2 = a.strides
    return as_strided(a, shape=(k, n // size, size, size), strides=(s0, size * (s1 + s2), s1, s2))


def previous_spd_inverse(a: np.ndarray) -> np.ndarray:
    """``spd_inverse`` as of commit bc76123 (the baseline)."""
    k, n, _ = a.shape
    if k < 64 or n == 0:
        return np.linalg.inv(a)
    try:
        low = np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        return np.linalg.inv(a)
    size = 1 << (n - 1).bit_length()
    if size != n:
        padded = np.zeros((k, size, size))
        padded[:, :n, :n] = low
        padded[:, np.arange(n, size), np.arange(n, size)] = 1.0
        low = padded
    x = np.zeros_like(low)
    diag = np.arange(size)
    x[:, diag, diag] = 1.0 / low[:, diag, diag]
    b = 1
    while b < size:
        lb, xb = _diagonal_blocks(low, 2 * b), _diagonal_blocks(x, 2 * b)
        xb[:, :, b:, :b] = -(xb[:, :, b:, b:] @ (lb[:, :, b:, :b] @ xb[:, :, :b, :b]))
        b *= 2
    x = x[:, :n, :n]
    return np.ascontiguousarray(x.transpose(0, 2, 1)) @ x


def newton_like(k: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """K matrices H + diag(w_c) + Bᵀ diag(u_c) B: one PSD Hessian shared by all children, barrier
    weights spread over decades, indicator band rows (groups of cells plus an all-ones row)."""
    q = rng.standard_normal((n, n))
    h = q @ q.T / n + np.eye(n)
    rows = np.zeros((4, n))
    for r, cells in enumerate(np.array_split(rng.permutation(n), 3)):
        rows[r, cells] = 1.0
    rows[3] = 1.0
    w = 10.0 ** rng.uniform(-4, 4, (k, n))
    u = 10.0 ** rng.uniform(-4, 4, (k, 4))
    a = h + (rows.T * u[:, None, :]) @ rows
    a[:, np.arange(n), np.arange(n)] += w
    return a


def _cpu(func: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.process_time()
        func()
        times.append(time.process_time() - start)
    return float(np.median(times))


def grid(repeats: int) -> None:
    rng = np.random.default_rng(0)
    methods = {
        "np.linalg.inv": np.linalg.inv,
        "previous": previous_spd_inverse,
        "potrf/potri": batched_qp.spd_inverse,
    }
    print("CPU µs per matrix (median of", repeats, "repeats, one BLAS thread)")
    print(f"{'K':>4} {'n':>4} " + " ".join(f"{m:>14}" for m in methods) + "  speed-up  rel.diff")
    for n in GRID_N:
        for k in GRID_K:
            a = newton_like(k, n, rng)
            a = 0.5 * (a + a.swapaxes(1, 2))
            calls = max(1, int(4e6 / (k * n**3)))
            times = [
                _cpu(lambda f=f, a=a, calls=calls: [f(a) for _ in range(calls)], repeats)
                / calls
                / k
                * 1e6
                for f in methods.values()
            ]
            ref = np.linalg.inv(a)
            diff = np.abs(batched_qp.spd_inverse(a) - ref).max() / np.abs(ref).max()
            cells = " ".join(f"{t:14.1f}" for t in times)
            print(f"{k:4d} {n:4d} {cells}  {times[1] / times[2]:7.2f}×  {diff:.1e}")


def _solve_groups(reduced: list) -> tuple[int, list[float]]:
    verified, objectives = 0, []
    for group in family_batch._groups(reduced):
        members = [reduced[i] for i in group]
        qp = family_batch._group_problem(members)
        values, ok = batched_qp.solve_verified(
            qp,
            tol=family_batch.IPM_TOLERANCE,
            polish_from=family_batch.POLISH_FROM,
            polish_steps=family_batch.POLISH_STEPS,
        )
        verified += int(ok.sum())
        start = 0
        for s in members:
            xs = values[start : start + s.rows.size, : s.cells.size]
            start += s.rows.size
            objectives.append(
                sum(
                    0.5 * xs[c] @ s.hess[c] @ xs[c] + s.grad[c] @ xs[c] + s.constant[c]
                    for c in range(s.rows.size)
                )
            )
    return verified, objectives


def record_block_group_families(
    persons: int, state: str, seed: int, cache: Path | None
) -> list[list[family_batch._Small]]:
    """Run ``topdown-2020-production`` on a generated state and return, per block-group batch,
    the small families of its held pass (the second: the rest of the queries with the TOTAL
    band) as :func:`engine.topdown.qp.family_batch._reduce` gives them to the interior point."""
    import sys
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import topdown_production as production
    from pipeline_run import topdown_result

    from engine.dp.presets import load_topdown_preset
    from engine.topdown import estimation

    batches = []
    original = estimation.estimate_batch

    def recording(batch, passes, chain):
        if batch.child_level == "Block_Group":
            batches.append((batch, passes))
        return original(batch, passes, chain)

    with tempfile.TemporaryDirectory() as tmp:
        folder = (cache or Path(tmp)) / f"{state}-{persons}-seed{seed}"
        hist, _, _ = production._population(persons, state, seed, folder)
        estimation.estimate_batch = recording
        try:
            allocation = load_topdown_preset("topdown-2020-production")["persons"]
            topdown_result(hist, allocation, seed=seed)
        finally:
            estimation.estimate_batch = original
    held = []
    solve = family_batch.solve_small_families

    def keep(batch, pass_queries, bands):
        if bands:
            held.append((batch, pass_queries, bands))
        return solve(batch, pass_queries, bands)

    family_batch.solve_small_families = keep
    try:
        for batch, passes in batches:
            production._engine_batch(batch, passes)
    finally:
        family_batch.solve_small_families = solve
    recorded = []
    for batch, pass_queries, bands in held:
        zero_cells = [bound.zero_cells() for bound in batch.bounds]
        reduced = (
            family_batch._reduce(batch, int(f), pass_queries, bands, zero_cells)
            for f in np.flatnonzero(family_batch.small_families(batch))
        )
        recorded.append([s for s in reduced if s is not None])
    return recorded


def families(recorded: list, label: str, repeats: int) -> None:
    n_families = sum(len(r) for r in recorded)
    current = batched_qp.spd_inverse
    variants = {"previous": previous_spd_inverse, "potrf/potri": current}
    times: dict[str, list[float]] = {v: [] for v in variants}
    results: dict[str, tuple[int, np.ndarray]] = {}
    try:
        for _ in range(repeats):
            for name, func in variants.items():
                batched_qp.spd_inverse = func
                start = time.process_time()
                solved = [_solve_groups(r) for r in recorded]
                times[name].append((time.process_time() - start) / n_families * 1e3)
                objectives = np.array([v for _, vals in solved for v in vals])
                results[name] = (sum(ok for ok, _ in solved), objectives)
    finally:
        batched_qp.spd_inverse = current
    before, after = results["previous"][1], results["potrf/potri"][1]
    rel = np.abs(after - before) / np.maximum(1.0, np.abs(before))
    print(f"\n{n_families} recorded families ({label}), group solves, CPU ms per family:")
    for name in variants:
        ms = np.round(times[name], 2)
        print(f"  {name:12s} median {np.median(ms):.2f}  all {ms}  verified {results[name][0]}")
    ratio = np.median(times["previous"]) / np.median(times["potrf/potri"])
    print(f"  speed-up {ratio:.2f}×; max rel. objective difference {rel.max():.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--families", type=Path, default=None, help="recorded families (pickle)")
    parser.add_argument("--no-grid", action="store_true")
    parser.add_argument(
        "--record", type=float, default=None, metavar="PERSONS", help="record them first (e.g. 1e6)"
    )
    parser.add_argument("--state", default="RI")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cache", type=Path, default=None, help="folder of generated populations")
    args = parser.parse_args()
    recorded, label = None, str(args.families)
    if args.record is not None:
        persons = int(args.record)
        recorded = record_block_group_families(persons, args.state, args.seed, args.cache)
        label = f"{args.state}, {persons:,} persons, seed {args.seed}"
        if args.families is not None:
            with args.families.open("wb") as handle:
                pickle.dump(recorded, handle)
    elif args.families is not None:
        with args.families.open("rb") as handle:
            recorded = pickle.load(handle)  # noqa: S301 (a local recording the user names)
    with single_blas_thread():
        if not args.no_grid:
            grid(args.repeats)
        if recorded is not None:
            families(recorded, label, args.repeats)


if __name__ == "__main__":
    main()
