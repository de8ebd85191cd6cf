"""Throughput of the integer-noise samplers of :mod:`engine.noise` (docs/noise.md), printed as a table.

Draws per second of N_Z(0, σ²) (docs/science.md §1) at each size and σ for:

- ``fast``   — ``discrete_gaussian(σ², n, rng)``, the seeded NumPy rejection sampler;
- ``exact``  — ``discrete_gaussian(σ², n, None, method="exact")`` (OpenDP underneath, plus our
  list/array conversion);
- ``opendp`` — OpenDP's ``make_gaussian`` on an ``i64`` vector domain, called directly;
- ``normal`` — ``numpy.random.Generator.normal`` (continuous, the ceiling).

The exact samplers run at ≈ 10⁵ draws/s, so above ``--exact-max`` draws they are timed on a
sample of that size and the rate is extrapolated (marked ``*`` in the table). Timings are the best
of ``--repeats`` runs, fast and normal timed in alternation; on a shared machine absolute rates are
noisy. Usage::

    python benchmarks/noise.py [--sizes 1000000 10000000] [--sigmas 1 10 100] [--exact-max 1000000]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

import numpy as np

from engine.noise import discrete_gaussian, two_sided_geometric


def best_rate(draw: Callable[[int], object], n: int, repeats: int) -> float:
    """Draws per second: n divided by the fastest of ``repeats`` timed calls."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        draw(n)
        best = min(best, time.perf_counter() - start)
    return n / best


def interleaved_rates(
    draws: Sequence[Callable[[int], object]], n: int, repeats: int
) -> list[float]:
    """Best-of-``repeats`` rates of several samplers, timed in alternation so that a busy machine
    slows them alike (their ratios are then meaningful even when absolute rates are not)."""
    best = [float("inf")] * len(draws)
    for _ in range(repeats):
        for i, draw in enumerate(draws):
            start = time.perf_counter()
            draw(n)
            best[i] = min(best[i], time.perf_counter() - start)
    return [n / t for t in best]


def opendp_sampler(sigma: float) -> Callable[[int], object] | None:
    """OpenDP's discrete Gaussian on integer vectors, or None if OpenDP is not installed."""
    try:
        import opendp.prelude as dp
    except ImportError:
        return None
    dp.enable_features("contrib")
    measurement = dp.m.make_gaussian(
        dp.vector_domain(dp.atom_domain(T="i64")), dp.l2_distance(T="i64"), scale=sigma
    )
    return lambda n: measurement([0] * n)


def measure(
    sizes: Sequence[int], sigmas: Sequence[float], exact_max: int, repeats: int, seed: int
) -> list[dict[str, object]]:
    rng = np.random.default_rng(seed)
    rows: list[dict[str, object]] = []
    exact_rates: dict[tuple[float, int], tuple[float | None, float | None]] = {}
    for n in sizes:
        for sigma in sigmas:
            s2 = sigma * sigma
            row: dict[str, object] = {"n": n, "sigma": sigma}
            row["fast"], row["normal"] = interleaved_rates(
                [
                    lambda m, s2=s2: discrete_gaussian(s2, m, rng),
                    lambda m, s=sigma: rng.normal(0.0, s, m),
                ],
                n,
                repeats,
            )
            timed = min(n, exact_max)
            row["extrapolated"] = timed < n
            if (sigma, timed) not in exact_rates:  # one timing serves every n it extrapolates to
                opendp = opendp_sampler(sigma)
                exact_rates[sigma, timed] = (
                    (None, None)
                    if opendp is None
                    else (
                        best_rate(
                            lambda m, s2=s2: discrete_gaussian(s2, m, None, method="exact"),
                            timed,
                            1,
                        ),
                        best_rate(opendp, timed, 1),
                    )
                )
            row["exact"], row["opendp"] = exact_rates[sigma, timed]
            rows.append(row)
    return rows


def geometric_rows(sizes: Sequence[int], repeats: int, seed: int) -> list[tuple[int, float, float]]:
    rng = np.random.default_rng(seed)
    out = []
    for n in sizes:
        for z in (0.1, 1.0):
            out.append((n, z, best_rate(lambda m, z=z: two_sided_geometric(z, m, rng), n, repeats)))
    return out


def _rate(value: object, star: bool) -> str:
    if value is None:
        return "n/a"
    return f"{float(value) / 1e6:9.3f}{'*' if star else ' '}"  # type: ignore[arg-type]


def print_table(rows: list[dict[str, object]]) -> None:
    print("Discrete Gaussian N_Z(0, σ²): million draws per second (best of --repeats runs)")
    print()
    head = "| n | σ | fast | exact | OpenDP make_gaussian | NumPy normal | fast / OpenDP | fast / normal |"
    print(head)
    print("|" + "---|" * 8)
    for r in rows:
        star = bool(r["extrapolated"])
        ratio = "n/a" if r["opendp"] is None else f"{r['fast'] / r['opendp']:.0f}×"  # type: ignore[operator]
        print(
            f"| {r['n']:.0e} | {r['sigma']:g} | {_rate(r['fast'], False)} | "
            f"{_rate(r['exact'], star)} | {_rate(r['opendp'], star)} | "
            f"{_rate(r['normal'], False)} | {ratio} | "
            f"{r['fast'] / r['normal']:.2f}× |"  # type: ignore[operator]
        )
    if any(r["extrapolated"] for r in rows):
        print()
        print("* timed on a smaller sample (--exact-max draws) and extrapolated linearly")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--sigmas", type=float, nargs="+", default=[1.0, 10.0, 100.0])
    parser.add_argument("--exact-max", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=20261122)
    args = parser.parse_args(argv)
    rows = measure(args.sizes, args.sigmas, args.exact_max, args.repeats, args.seed)
    print_table(rows)
    print()
    print("Two-sided geometric G(z): million draws per second (fast method)")
    print()
    print("| n | z | fast |")
    print("|---|---|---|")
    for n, z, rate in geometric_rows(args.sizes, args.repeats, args.seed):
        print(f"| {n:.0e} | {z:g} | {rate / 1e6:.3f} |")


if __name__ == "__main__":
    main()
