"""How close EPL gets to ε, and how fast it is (SPEC §5; PF Methods), printed as a table.

For two-sided geometric noise P(k) ∝ e^{−ε|k|} — the noise of PF's 2018 E2E TopDown runs — draws
``--sets`` independent residual sets of each size, computes :func:`engine.metrics.epl_details`
on each, and prints the mean and range of EPL, the 95% bootstrap interval of one set and the time
per EPL. These are the numbers quoted in ``docs/metrics.md``. Usage::

    python benchmarks/metrics_epl.py [--eps 0.5 1 2] [--sizes 2000 20000 200000] [--sets 10]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import pandas as pd

from engine.metrics import epl_details


def geometric_residuals(eps: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """n draws of the two-sided geometric distribution: the difference of two geometric variables."""
    p = 1.0 - math.exp(-eps)
    return rng.geometric(p, n) - rng.geometric(p, n)


def epl_accuracy(eps_values: list[float], sizes: list[int], sets: int, n_boot: int) -> pd.DataFrame:
    """One row per (ε, n): mean, min and max EPL over ``sets`` residual sets, one bootstrap interval."""
    rows = []
    for eps in eps_values:
        for n in sizes:
            values = []
            started = time.perf_counter()
            for s in range(sets):
                rng = np.random.default_rng([s, n, round(eps * 1000)])
                values.append(epl_details(geometric_residuals(eps, n, rng), n_boot=0).value)
            per_epl = (time.perf_counter() - started) / sets
            one = epl_details(
                geometric_residuals(eps, n, np.random.default_rng([sets, n])), n_boot=n_boot, rng=0
            )
            rows.append(
                {
                    "epsilon": eps,
                    "n_residuals": n,
                    "epl_mean": float(np.mean(values)),
                    "epl_min": float(np.min(values)),
                    "epl_max": float(np.max(values)),
                    "one_set_epl": one.value,
                    "boot_low": one.low,
                    "boot_high": one.high,
                    "seconds_per_epl": per_epl,
                }
            )
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eps", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000, 200000])
    parser.add_argument("--sets", type=int, default=10)
    parser.add_argument("--n-boot", type=int, default=200)
    args = parser.parse_args()
    table = epl_accuracy(args.eps, args.sizes, args.sets, args.n_boot)
    with pd.option_context("display.width", 200):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))


if __name__ == "__main__":
    main()
