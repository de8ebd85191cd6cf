"""How close EPL gets to ε, and how fast it is (docs/science.md §5; PF Methods), printed as a table.

For two-sided geometric noise P(k) ∝ e^{−ε|k|} — the noise of PF's 2018 E2E TopDown runs — draws
``--sets`` independent residual sets of each size, computes :func:`engine.metrics.epl.epl_details`
on each, and prints the mean and range of EPL, the 95% bootstrap interval of one set and the time
per EPL, under Petti & Flaxman's published settings (p = 95, m = 1.0, the default) and, as the
named baseline, their function's defaults (p = 99, m = 1.5). Then PF's appendix check (Supplementary
Appendix Table SA1): PF's geometric noise on 2,663 counts, mean and 2.5–97.5% range of EPL over
``--sa1-seeds`` seeds, beside PF's printed values. These are the numbers quoted in
``docs/metrics.md``. Usage::

    python benchmarks/metrics_epl.py [--eps 0.5 1 2] [--sizes 2000 20000 200000] [--sets 10]
                                     [--sa1-seeds 10]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import pandas as pd

from engine.metrics.epl import epl_details
from engine.metrics.epl_check import geometric_epl_check
from engine.metrics.epl_settings import PF_FUNCTION_DEFAULT, PF_PUBLISHED, EPLSettings
from engine.metrics.reference import PF_TABLE_SA1


def geometric_residuals(eps: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """n draws of the two-sided geometric distribution: the difference of two geometric variables."""
    p = 1.0 - math.exp(-eps)
    return rng.geometric(p, n) - rng.geometric(p, n)


def epl_accuracy(
    eps_values: list[float],
    sizes: list[int],
    sets: int,
    n_boot: int,
    settings: EPLSettings = PF_PUBLISHED,
) -> pd.DataFrame:
    """One row per (ε, n): mean, min and max EPL over ``sets`` residual sets, one bootstrap interval."""
    rows = []
    for eps in eps_values:
        for n in sizes:
            values = []
            started = time.perf_counter()
            for s in range(sets):
                rng = np.random.default_rng([s, n, round(eps * 1000)])
                residuals = geometric_residuals(eps, n, rng)
                values.append(epl_details(residuals, n_boot=0, settings=settings).value)
            per_epl = (time.perf_counter() - started) / sets
            one = epl_details(
                geometric_residuals(eps, n, np.random.default_rng([sets, n])),
                n_boot=n_boot,
                rng=0,
                settings=settings,
            )
            rows.append(
                {
                    "settings": f"{settings.percentile:g}/{settings.multiplier:g}",
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
    parser.add_argument(
        "--sa1-seeds", type=int, default=10, help="seeds per ε of the SA1 check (PF used 10)"
    )
    args = parser.parse_args()
    tables = [
        epl_accuracy(args.eps, args.sizes, args.sets, args.n_boot, settings)
        for settings in (PF_PUBLISHED, PF_FUNCTION_DEFAULT)
    ]
    with pd.option_context("display.width", 200):
        print(
            "EPL of P(k) ∝ exp(−ε|k|) noise; settings p/m (95/1 = PF published, 99/1.5 = baseline)"
        )
        print(pd.concat(tables).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        print()
        print(sa1_table(args.sa1_seeds).to_string(index=False, float_format=lambda v: f"{v:.4f}"))


def sa1_table(seeds: int) -> pd.DataFrame:
    """PF Table SA1 reproduced: ours (PF settings and the 99/1.5 baseline) beside PF's print."""
    rows = []
    for eps, pf_mean, pf_low, pf_high in PF_TABLE_SA1:
        ours = geometric_epl_check(eps, seeds=range(seeds))
        base = geometric_epl_check(eps, seeds=range(seeds), settings=PF_FUNCTION_DEFAULT)
        rows.append(
            {
                "epsilon": eps,
                "PF mean": pf_mean,
                "PF 2.5%": pf_low,
                "PF 97.5%": pf_high,
                "ours mean": ours.mean,
                "ours 2.5%": ours.low,
                "ours 97.5%": ours.high,
                "99/1.5 mean": base.mean,
            }
        )
    return pd.DataFrame(rows)


if __name__ == "__main__":
    main()
