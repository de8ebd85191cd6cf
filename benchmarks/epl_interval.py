"""How often the EPL interval contains its own estimate and the centre of EPL's sampling distribution.

The claim checked (docs/metrics.md, "The interval"): the bootstrap percentile interval shifted by
the bootstrap's median bias (:func:`engine.metrics.epl.shifted_interval`, the engine's interval)
always contains its EPL, and covers the centre of the EPL's sampling distribution at least as often
as the plain percentile interval it replaces (the named baseline, computed from the same resamples:
``EPLResult.boot_low``/``boot_high``).

For two-sided geometric noise P(k) ∝ e^{−ε|k|} (PF's 2018 E2E noise) and each number of residuals,
draws ``--sets`` independent residual sets; the centre is the median EPL over those sets (the EPL's
sampling distribution, estimated by brute force). Per interval: the share of sets whose interval
contains its own EPL, the share containing the centre, and the median width. Usage::

    python benchmarks/epl_interval.py [--eps 0.5 1] [--sizes 244 815 5000] [--sets 100] [--boot 200]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import pandas as pd

from engine.metrics.epl import epl_details


def geometric_residuals(eps: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """n draws of the two-sided geometric distribution: the difference of two geometric variables."""
    p = 1.0 - math.exp(-eps)
    return rng.geometric(p, n) - rng.geometric(p, n)


def coverage(eps: float, n: int, sets: int, n_boot: int, seed: int = 2024) -> list[dict]:
    """One row per interval kind: containment of the own EPL and of the across-set median EPL."""
    rng = np.random.default_rng([seed, int(eps * 1000), n])
    results = [
        epl_details(geometric_residuals(eps, n, rng), n_boot=n_boot, rng=seed + k)
        for k in range(sets)
    ]
    defined = [r for r in results if math.isfinite(r.value) and math.isfinite(r.low)]
    centre = float(np.median([r.value for r in defined]))
    rows = []
    for kind, bounds in (
        ("percentile (before)", [(r.boot_low, r.boot_high) for r in defined]),
        ("shifted by median bias (now)", [(r.low, r.high) for r in defined]),
    ):
        own = np.mean([lo <= r.value <= hi for r, (lo, hi) in zip(defined, bounds, strict=True)])
        covers = np.mean([lo <= centre <= hi for lo, hi in bounds])
        width = float(np.median([hi - lo for lo, hi in bounds]))
        rows.append(
            {
                "ε": eps,
                "residuals": n,
                "sets": len(defined),
                "interval": kind,
                "contains its EPL": f"{own:.0%}",
                "covers the centre": f"{covers:.0%}",
                "centre (median EPL)": round(centre, 4),
                "median width": round(width, 4),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--eps", type=float, nargs="+", default=[0.5, 1.0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[244, 815, 5000])
    parser.add_argument("--sets", type=int, default=100)
    parser.add_argument("--boot", type=int, default=200)
    args = parser.parse_args()
    rows = [
        row
        for eps in args.eps
        for n in args.sizes
        for row in coverage(eps, n, args.sets, args.boot)
    ]
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
