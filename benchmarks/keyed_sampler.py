"""The keyed discrete Gaussian (engine/noise/keyed.py, docs/science.md §8) against its definition
written array-wise, the sampler every run used until 2026-11-27: same numbers, time per value.

The baseline below is the module docstring's construction transcribed one NumPy expression per
step over the whole array (each key mixed again for each of the three uniforms, temporaries for
every step, all values at once) — what ``engine.noise.keyed.discrete_gaussian`` was. The engine's
sampler mixes each key once, mixes in place, draws in 65,536-value chunks and computes σ²'s
constants once when σ² is one value. For each σ² and size the script checks that both give the
same integers and prints the median of ``--repeats`` timings of each, in the same process,
alternating.

    python benchmarks/keyed_sampler.py [--repeats 5] [--blocks 3000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.noise import keyed  # noqa: E402
from engine.noise.dg_continuous import proposal_gap  # noqa: E402


def _mix(x: np.ndarray) -> np.ndarray:
    z = np.asarray(x, dtype=np.uint64).copy()
    with np.errstate(over="ignore"):
        z ^= z >> np.uint64(30)
        z *= keyed._M1
        z ^= z >> np.uint64(27)
        z *= keyed._M2
        z ^= z >> np.uint64(31)
    return z


def _uniforms(keys: np.ndarray, counters: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        x = _mix(keys) + (counters + np.uint64(1)) * keyed.GAMMA
    return (_mix(x) >> np.uint64(11)).astype(np.float64) * (1.0 / float(1 << 53))


def baseline(sigma2: float, keys: np.ndarray, index: np.ndarray) -> np.ndarray:
    """The definition array-wise (the sampler before 2026-11-27)."""
    shape = np.broadcast_shapes(keys.shape, index.shape)
    k = np.broadcast_to(keys, shape).reshape(-1)
    idx = np.broadcast_to(index, shape).reshape(-1)
    s2 = np.full(k.size, sigma2)
    out = np.empty(k.size, dtype=np.int64)
    pending = np.arange(k.size)
    attempt = np.uint64(0)
    while pending.size:
        kp, sp = k[pending], s2[pending]
        base = (attempt * np.uint64(1 << 32) + idx[pending]) * np.uint64(3)
        u1, u2 = _uniforms(kp, base), _uniforms(kp, base + np.uint64(1))
        z = np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(2.0 * np.pi * u2)
        e = -np.log1p(-_uniforms(kp, base + np.uint64(2)))
        d = proposal_gap(sp)
        kk = np.rint(z * np.sqrt(sp + d))
        accept = e >= kk * kk / (2.0 * sp) - 0.5 * z * z + 1.0 / (8.0 * d)
        out[pending[accept]] = kk[accept].astype(np.int64)
        pending = pending[~accept]
        attempt += np.uint64(1)
    return out.reshape(shape)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--blocks", type=int, default=3000, help="units of 2,016 cells each")
    args = parser.parse_args()
    keys = keyed.unit_keys(1, "DETAILED", np.arange(args.blocks, dtype=np.uint64))[:, None]
    cells = np.arange(2016, dtype=np.uint64)[None, :]
    n = args.blocks * 2016
    print(f"{n:,} values ({args.blocks:,} units × 2,016 cells), medians of {args.repeats}")
    print("| σ² | baseline ns/value | engine ns/value | baseline ÷ engine | same integers |")
    print("|---|---|---|---|---|")
    for sigma2 in (0.03, 0.5, 4.0, 100.0, 1e7):
        times: dict[str, list[float]] = {"baseline": [], "engine": []}
        same = True
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            a = baseline(sigma2, keys, cells)
            t1 = time.perf_counter()
            b = keyed.discrete_gaussian(sigma2, keys, cells)
            t2 = time.perf_counter()
            times["baseline"].append(t1 - t0)
            times["engine"].append(t2 - t1)
            same &= bool(np.array_equal(a, b))
        old, new = (statistics.median(times[k]) for k in ("baseline", "engine"))
        print(
            f"| {sigma2:g} | {old / n * 1e9:.0f} | {new / n * 1e9:.0f} | {old / new:.2f}× | "
            f"{'yes' if same else 'NO'} |"
        )


if __name__ == "__main__":
    main()
