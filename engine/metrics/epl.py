"""Empirical privacy loss (EPL) of a set of exchangeable residuals (Petti & Flaxman 2020, Methods).

Definition, to the letter of docs/science.md §5 (PF Methods "Empirical Privacy Loss" and their
published code):

1. ``e`` = residuals (estimate − true) over exchangeable queries, e.g. every county's total population;
2. ``bnd = m · max(|P(100−p)(e)|, |P(p)(e)|)`` with NumPy's default (linear) percentiles;
3. edges ``e_j = −bnd + j`` for ``j = 0, 1, …`` while ``e_j < bnd`` (``np.arange(-bnd, bnd, 1)``);
4. a Gaussian KDE of ``e`` whose bandwidth is 0.1 × the sample standard deviation (SciPy's
   ``gaussian_kde(e, bw_method=0.1)``: kernel variance = 0.01 · var(e, ddof=1)), evaluated at the
   midpoints ``x_j = (e_j + e_{j+1}) / 2``;
5. ``EPL(x) = ln(f(x) / f(x + 1))`` at consecutive midpoints, and
   ``EPL = max_x |EPL(x)|`` over the points where both densities are positive.

**Settings** (:class:`EPLSettings`): the percentile ``p`` and multiplier ``m`` of the density range.
The default is Petti & Flaxman's *published* setting, p = 95 and m = 1.0 (:data:`PF_PUBLISHED`):
every EPL they published (their notebooks 001–004 and 008, and so the files in
``data/reference/petti_flaxman_1940/``) was computed with ``est_range_percentile=95,
est_range_multiplier=1.0``. p = 99, m = 1.5 (:data:`PF_FUNCTION_DEFAULT`) are only the defaults of
their function's signature; on the same residuals they give EPLs up to ~10× larger, because the
grid then reaches into the KDE's tails, which few residuals estimate (RI 2010 Tract TOTAL at
ρ = 2.56, seed 1: 27.6 under 99/1.5, 0.33 under 95/1.0). Compare with PF's numbers only under PF's
settings (:attr:`EPLSettings.is_pf_published`).

EPL is undefined (NaN, with a reason) when every residual is zero (an invariant), when the residuals
have no spread, or when the grid is too short to hold two points. It is a noisy statistic — with a few
thousand residuals it can overshoot ε several-fold — so :func:`epl_details` also returns a bootstrap
interval and the number of residuals; the app shows them with every EPL.

**The interval** (:data:`INTERVAL_METHOD`) is the bootstrap percentile interval *shifted by the
bootstrap's median bias*: with θ̂ the EPL of all residuals, m the median of the resamples' EPLs and
q_lo, q_hi their (1 − level)/2 and (1 + level)/2 quantiles, it is
``[max(0, q_lo − (m − θ̂)), q_hi − (m − θ̂)]``. Resampling with replacement duplicates residuals
and so changes the KDE's tails, and EPL is a maximum over the grid: the resamples' EPLs need not
centre on θ̂, and with a few hundred residuals a plain percentile interval can lie entirely on one
side of its own estimate (an RI 2010 tract EPL of 0.35 with the percentile interval
[0.38, 0.76]). The shift removes the bootstrap's estimate of that bias (Efron & Tibshirani 1993,
§10.2: the resamples' centre minus the estimate; the median, because a maximum's resamples are
skewed), so the interval always contains θ̂ and is two-sided. What it covers: the spread of the EPL of this many residuals from the same mechanism
and data (which geounits' errors happen to be drawn), assuming that spread has the same shape around
the EPL as the resamples have around their median. It does not cover the EPL's own bias as an
estimate of the mechanism's privacy loss (:mod:`engine.metrics.epl_check`). EPL is never negative,
so the lower end is clipped at 0. ``benchmarks/epl_interval.py`` measures how often each interval
covers the centre of the EPL's sampling distribution.

With few, gappy residuals the grid can reach far into the KDE's tails, where the density is below
the smallest normal float64 (≈ 2e−308) and the log-ratio — and so EPL — is decided by floating-point
rounding (in SciPy as here). Such EPLs are huge and meaningless; the bootstrap interval and ``n``
expose them.

The KDE is evaluated here directly (sum of Gaussian kernels over the distinct residual values,
weighted by their multiplicities), which equals SciPy's one-dimensional ``gaussian_kde`` and lets the
bootstrap resample multiplicities instead of raw residuals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from engine.core.errors import ValidationError
from engine.metrics.epl_settings import (
    BANDWIDTH_FACTOR,
    EPL_TABLE_COLUMNS,
    EPLSettings,
    settings_of,
)
from engine.metrics.error_tables import check_tidy

_KERNEL_BLOCK = 4_000_000  # grid points × distinct values evaluated per chunk

INTERVAL_METHOD = "bootstrap percentile shifted by the median bias"
"""How :func:`epl_details` builds its interval (module docstring, "The interval"); written with every
EPL of ``metrics.json`` (``interval``). Files without it hold the plain percentile interval."""


@dataclass(frozen=True)
class EPLResult:
    """EPL of one residual set with its uncertainty and the curves the app plots.

    ``value`` is NaN when EPL is undefined and ``reason`` then says why. ``low``/``high`` bound the
    ``level`` bootstrap interval over ``n_boot`` resamples, shifted by the bootstrap's median bias
    so it contains ``value`` (:data:`INTERVAL_METHOD`; NaN if ``n_boot`` is 0 or no resample is
    defined); ``boot_median`` is the median of the resamples' EPLs (its distance from ``value`` is
    the bias removed) and ``boot_low``/``boot_high`` their unshifted percentile interval. ``x`` holds the KDE evaluation points, ``density`` the KDE there, and
    ``epl_curve[j] = ln(density[j] / density[j + 1])`` (NaN where a density is 0), so ``epl_curve``
    is one shorter than ``x``.
    """

    value: float
    n: int
    reason: str | None = None
    low: float = math.nan
    high: float = math.nan
    level: float = 0.95
    n_boot: int = 0
    boot_median: float = math.nan
    boot_low: float = math.nan
    boot_high: float = math.nan
    bandwidth: float = math.nan
    bound: float = math.nan
    settings: EPLSettings = field(default_factory=EPLSettings)
    x: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    density: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    epl_curve: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)

    def summary(self) -> dict[str, float | int | str | None]:
        """The scalar fields (for metrics.json and tables); NaN stays NaN."""
        return {
            "epl": self.value,
            "epl_low": self.low,
            "epl_high": self.high,
            "level": self.level,
            "n_residuals": self.n,
            "n_boot": self.n_boot,
            "epl_boot_median": self.boot_median,
            "epl_percentile_low": self.boot_low,
            "epl_percentile_high": self.boot_high,
            "interval": INTERVAL_METHOD,
            "reason": self.reason,
            "percentile": self.settings.percentile,
            "multiplier": self.settings.multiplier,
        }


@dataclass(frozen=True)
class _Core:
    value: float
    reason: str | None
    bandwidth: float
    bound: float
    x: np.ndarray
    density: np.ndarray
    curve: np.ndarray


def _as_residuals(residuals: ArrayLike) -> np.ndarray:
    try:
        e = np.asarray(residuals, dtype=np.float64).ravel()
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"residuals must be numbers; got {type(residuals).__name__}") from exc
    bad = ~np.isfinite(e)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValidationError(
            f"residuals must be finite; element {i} is {e[i]!r} "
            f"({int(bad.sum())} non-finite value(s)); drop undefined cells before computing EPL"
        )
    return e


def _kde(x: np.ndarray, values: np.ndarray, weights: np.ndarray, h: float) -> np.ndarray:
    """Σ_u w_u φ((x − u)/h) / h: a Gaussian KDE with probability weights ``weights``."""
    out = np.empty(x.size, dtype=np.float64)
    step = max(1, _KERNEL_BLOCK // max(1, values.size))
    norm = 1.0 / (h * math.sqrt(2.0 * math.pi))
    for start in range(0, x.size, step):
        d = (x[start : start + step, None] - values[None, :]) / h
        out[start : start + step] = np.exp(-0.5 * d * d) @ weights * norm
    return out


def _counted_percentiles(values: np.ndarray, counts: np.ndarray, q: np.ndarray) -> np.ndarray:
    """NumPy's linear percentiles of the sample holding ``counts[i]`` copies of sorted ``values[i]``."""
    n = int(counts.sum())
    position = np.asarray(q, dtype=np.float64) / 100.0 * (n - 1)
    below = np.floor(position)
    ends = np.cumsum(counts)  # rank r (0-based) holds values[searchsorted(ends, r, 'right')]
    lo = values[np.searchsorted(ends, below, side="right")]
    hi = values[np.searchsorted(ends, np.minimum(below + 1, n - 1), side="right")]
    return lo + (hi - lo) * (position - below)


def _numpy_counted_percentiles(
    values: np.ndarray, counts: np.ndarray, q: np.ndarray
) -> tuple[float, ...]:
    """``np.percentile`` (linear) of the sample holding ``counts[i]`` copies of sorted ``values[i]``,
    to the bit: the same virtual index ``(n − 1) · q/100`` and NumPy's two-sided interpolation
    (``b − (b − a)(1 − t)`` for ``t ≥ 0.5``), so counted residuals give the dense path's grid."""
    n = int(counts.sum())
    position = (n - 1) * (np.asarray(q, dtype=np.float64) / 100.0)
    below = np.floor(position)
    ends = np.cumsum(counts)
    a = values[np.searchsorted(ends, below, side="right")]
    b = values[np.searchsorted(ends, np.minimum(below + 1, n - 1), side="right")]
    t = position - below
    diff = b - a
    out = np.where(t >= 0.5, b - diff * (1 - t), a + diff * t)
    return tuple(float(v) for v in out)


def _core(
    values: np.ndarray,
    counts: np.ndarray,
    settings: EPLSettings,
    percentiles: tuple[float, float] | None = None,
) -> _Core:
    """EPL of the residuals given as sorted distinct ``values`` with multiplicities ``counts``.

    ``percentiles`` are (P(100−p), P(p)) when already known (NumPy's, on the raw residuals);
    otherwise they are computed from the counts with the same linear rule.
    """
    empty = np.zeros(0)
    n = int(counts.sum())
    if n == 0:
        return _Core(math.nan, "no residuals", math.nan, math.nan, empty, empty, empty)
    if not values.any():
        return _Core(
            math.nan,
            f"all {n} residuals are zero (an invariant): EPL is undefined",
            math.nan,
            math.nan,
            empty,
            empty,
            empty,
        )
    if values.size == 1 or n < 2:
        return _Core(
            math.nan,
            f"the residuals have no spread (all equal {values[0]:g}): the KDE is undefined",
            math.nan,
            math.nan,
            empty,
            empty,
            empty,
        )
    mean = float(counts @ values) / n
    var = float(counts @ (values - mean) ** 2) / (n - 1)
    h = BANDWIDTH_FACTOR * math.sqrt(var)
    if percentiles is None:
        lo_p, hi_p = _counted_percentiles(
            values, counts, np.array([settings.low_percentile, settings.percentile])
        )
    else:
        lo_p, hi_p = percentiles
    bnd = settings.multiplier * max(abs(float(lo_p)), abs(float(hi_p)))
    edges = np.arange(-bnd, bnd, 1)
    if edges.size < 3:
        return _Core(
            math.nan,
            f"the grid from {settings.label()} = ±{bnd:g} has fewer than two points: the "
            f"{settings.low_percentile:g}th and {settings.percentile:g}th percentiles lie within "
            f"±{1 / settings.multiplier:.3g} of zero, too concentrated for EPL",
            h,
            bnd,
            empty,
            empty,
            empty,
        )
    x = (edges[:-1] + edges[1:]) / 2.0
    density = _kde(x, values, counts / n, h)
    with np.errstate(divide="ignore", invalid="ignore"):
        curve = np.log(density[:-1] / density[1:])
    ok = (density[:-1] > 0) & (density[1:] > 0)
    curve = np.where(ok, curve, np.nan)
    if not ok.any():
        return _Core(
            math.nan,
            "the KDE is zero at every pair of neighbouring grid points",
            h,
            bnd,
            x,
            density,
            curve,
        )
    return _Core(float(np.max(np.abs(curve[ok]))), None, h, bnd, x, density, curve)


def _distinct(e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    values, counts = np.unique(e, return_counts=True)
    return values, counts.astype(np.float64)


def _percentiles(e: np.ndarray, settings: EPLSettings) -> tuple[float, float] | None:
    if e.size == 0:
        return None
    lo, hi = np.percentile(e, [settings.low_percentile, settings.percentile])
    return float(lo), float(hi)


def empirical_privacy_loss(residuals: ArrayLike, *, settings: EPLSettings | None = None) -> float:
    """EPL of ``residuals`` exactly as docs/science.md §5 defines it; NaN when undefined (see
    :func:`epl_details`).

    ``settings`` default: :data:`PF_PUBLISHED` (p = 95, m = 1.0).
    """
    chosen = settings_of(settings)
    e = _as_residuals(residuals)
    return _core(*_distinct(e), chosen, _percentiles(e, chosen)).value


def bootstrap_generator(rng: np.random.Generator | int) -> np.random.Generator:
    """The bootstrap's generator from a Generator or a non-negative integer seed.

    ``None`` is refused: it would draw OS entropy, and the interval could not be reproduced.
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, bool) or not isinstance(rng, int | np.integer) or rng < 0:
        raise ValidationError(
            "the EPL bootstrap needs a seed (non-negative integer) or a numpy Generator, so its "
            f"interval can be reproduced; got {rng!r}"
        )
    return np.random.default_rng(int(rng))


def epl_details(
    residuals: ArrayLike,
    *,
    n_boot: int = 200,
    rng: np.random.Generator | int = 0,
    level: float = 0.95,
    settings: EPLSettings | None = None,
) -> EPLResult:
    """EPL with its bootstrap interval, the number of residuals and the curves for plotting.

    The interval is the ``level`` percentile interval of the EPL of ``n_boot`` resamples of the
    residuals with replacement (undefined resamples are skipped), shifted by the resamples' median
    bias so that it contains the EPL (:func:`shifted_interval`). ``rng`` is a Generator or a seed;
    ``settings`` the density range (default :data:`PF_PUBLISHED`).
    """
    chosen = settings_of(settings)
    _check_boot(n_boot, level)
    generator = bootstrap_generator(rng)
    e = _as_residuals(residuals)
    values, counts = _distinct(e)
    return _details(
        values, counts, _percentiles(e, chosen), chosen, int(n_boot), generator, float(level)
    )


def epl_details_counted(
    values: ArrayLike,
    counts: ArrayLike,
    *,
    n_boot: int = 200,
    rng: np.random.Generator | int = 0,
    level: float = 0.95,
    settings: EPLSettings | None = None,
) -> EPLResult:
    """:func:`epl_details` of the residuals given as sorted distinct ``values`` with their
    multiplicities ``counts`` (e.g. the zeros of a sparse residual matrix counted, not stored).

    The same numbers as :func:`epl_details` on the expanded residuals, bootstrap included (it
    resamples multiplicities either way), for the same ``rng``."""
    chosen = settings_of(settings)
    _check_boot(n_boot, level)
    generator = bootstrap_generator(rng)
    v = _as_residuals(values)
    c = np.asarray(counts, dtype=np.float64).ravel()
    if c.shape != v.shape or (c <= 0).any() or (v.size > 1 and (np.diff(v) <= 0).any()):
        raise ValidationError(
            "counted residuals need sorted distinct values and one positive count per value; "
            f"got {v.size} values and {c.size} counts"
        )
    percentiles = None
    if c.size:
        q = np.array([chosen.low_percentile, chosen.percentile])
        percentiles = _numpy_counted_percentiles(v, c, q)
    return _details(v, c, percentiles, chosen, int(n_boot), generator, float(level))


def _check_boot(n_boot: object, level: object) -> None:
    if isinstance(n_boot, bool) or not isinstance(n_boot, int | np.integer) or n_boot < 0:
        raise ValidationError(f"n_boot must be a non-negative integer; got {n_boot!r}")
    if not (isinstance(level, float | int) and 0.0 < float(level) < 1.0):
        raise ValidationError(f"level must lie strictly between 0 and 1; got {level!r}")


def _details(
    values: np.ndarray,
    counts: np.ndarray,
    percentiles: tuple[float, float] | None,
    chosen: EPLSettings,
    n_boot: int,
    generator: np.random.Generator,
    level: float,
) -> EPLResult:
    """EPL, bootstrap interval and curves of counted residuals (shared by both entry points)."""
    n = int(counts.sum())
    core = _core(values, counts, chosen, percentiles)
    low = high = centre = q_low = q_high = math.nan
    if core.reason is None and n_boot > 0:
        boots = np.full(n_boot, np.nan)
        p = counts / counts.sum()
        for b in range(n_boot):
            c = generator.multinomial(n, p)
            keep = c > 0
            vb, cb = values[keep], c[keep]
            boots[b] = _core(vb, cb.astype(np.float64), chosen).value
        finite = boots[np.isfinite(boots)]
        if finite.size:
            alpha = (1.0 - level) / 2.0
            q_low, centre, q_high = (
                float(v) for v in np.quantile(finite, [alpha, 0.5, 1.0 - alpha])
            )
            low, high = shifted_interval(core.value, q_low, centre, q_high)
    return EPLResult(
        value=core.value,
        n=n,
        reason=core.reason,
        low=low,
        high=high,
        level=level,
        n_boot=n_boot if core.reason is None else 0,
        boot_median=centre,
        boot_low=q_low,
        boot_high=q_high,
        bandwidth=core.bandwidth,
        bound=core.bound,
        settings=chosen,
        x=core.x,
        density=core.density,
        epl_curve=core.curve,
    )


def shifted_interval(
    estimate: float, q_low: float, median: float, q_high: float
) -> tuple[float, float]:
    """The percentile interval ``[q_low, q_high]`` of bootstrap values shifted by their median bias
    ``median − estimate`` (module docstring, "The interval").

    The result contains ``estimate`` whenever ``q_low ≤ median ≤ q_high`` (always, for quantiles of
    one sample) and its low end is clipped at 0, since EPL is never negative.
    """
    bias = median - estimate
    return max(0.0, q_low - bias), q_high - bias


def epl_table(
    tidy: pd.DataFrame,
    *,
    by: Sequence[str] = ("geolevel", "query"),
    n_boot: int = 200,
    rng: np.random.Generator | int = 0,
    true_col: str = "true",
    estimate_col: str = "estimate",
    settings: EPLSettings | None = None,
) -> pd.DataFrame:
    """EPL per group of a tidy error table (residuals = estimate − true of every cell in the group).

    Returns one row per group: the ``by`` columns, ``epl``, ``epl_low``, ``epl_high``,
    ``n_residuals`` and ``reason`` (``None`` when EPL is defined). ``settings`` (default
    :data:`PF_PUBLISHED`) is kept in the table's ``attrs["epl_settings"]``.
    """
    chosen = settings_of(settings)
    check_tidy(tidy, by=by, true_col=true_col, estimate_col=estimate_col)
    generator = bootstrap_generator(rng)
    residual = tidy[estimate_col].to_numpy(np.float64) - tidy[true_col].to_numpy(np.float64)
    frame = tidy[list(by)].assign(_residual=residual)
    rows = []
    for key, group in frame.groupby(list(by), sort=True, observed=True):
        keys = key if isinstance(key, tuple) else (key,)
        result = epl_details(
            group["_residual"].to_numpy(), n_boot=n_boot, rng=generator, settings=chosen
        )
        rows.append(
            {
                **dict(zip(by, keys, strict=True)),
                "epl": result.value,
                "epl_low": result.low,
                "epl_high": result.high,
                "epl_percentile_low": result.boot_low,
                "epl_percentile_high": result.boot_high,
                "n_residuals": result.n,
                "reason": result.reason,
            }
        )
    columns = [*by, *EPL_TABLE_COLUMNS]
    table = pd.DataFrame(rows, columns=columns)
    table["reason"] = pd.Series([row["reason"] for row in rows], index=table.index, dtype=object)
    table.attrs["epl_settings"] = chosen.as_dict()
    return table
