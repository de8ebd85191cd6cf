"""Correction of the predicted error for non-negativity and rounding, from a count profile
(SPEC §7; TDA §7.1 eq. 7.2–7.4, §7.2, Table 13).

The least-squares error d of a cell is Gaussian with the variance of
:mod:`phexplore.prediction.least_squares`; the published count is non-negative. We model the
non-negative least squares of a family cell by cell as *water filling* — the exact solution when the
cells decouple (detailed cells measured far more precisely than the margins, as at blocks):

    x_c = max(0, y_c + d_c − λ),   λ ≥ 0 such that Σ_c E[x_c] = Σ_c y_c

(children still sum to the parent; λ is the mean-field shift that pays for the clipped mass, one per
family and cell). With α = (λ − y)/s the cell error e = x − y has, in closed form,

    P(e > −y) = p = 1 − Φ(α),    E e = −yΦ(α) − λ p + s φ(α),
    E e² = y² Φ(α) + s²(α φ(α) + p) − 2 s λ φ(α) + λ² p.

A query answer sums cells: its mean squared error is Σ Var(e_i) + Σ_{i≠j} p_i p_j C_ij + (Σ E e_i)²,
the first-order (Price) expansion of the covariance of two clipped Gaussians, with the linear
off-diagonal covariance C_ij of the answer cell spread evenly over its pairs of cells — capped by the
answer's linear variance: least squares that knew which cells are 0 (exact constraints) could only
be more precise, and an answer pinned by its own measurement keeps it (no re-estimation of the free
cells is modelled, so sparse marginals measured precisely are over-predicted). Rounding
(TDA eq. 7.7) adds at most one person to a cell that is not already integral: variance p_i/6 per cell
(a uniform fractional part rounded up or down with the probability that keeps the sum), summed over
the answer cell.

Homogeneous (small) counts are biased up and large ones down, as TDA Table 13 shows; where the
mean count per answer cell is below 1 the model is flagged as outside its validated range
(``model_holds``; docs/prediction.md lists the measured ratios).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse
from scipy.special import ndtr

from phexplore.marginals import answer_cells, cell_index, parse_marginal

ROUNDING_VARIANCE = 1.0 / 6.0
"""Variance added by rounding a non-integral cell (uniform fraction f rounded up w.p. f: E f(1−f))."""

MIN_MEAN_COUNT = 1.0
"""Below this mean count per answer cell the prediction is flagged (the issue's validated range)."""

_SQRT_2PI = math.sqrt(2.0 * math.pi)


@dataclass(frozen=True)
class LevelCorrection:
    """Predicted RMSE of the published counts of one query at one level."""

    rmse: float
    mean_count: float | None
    model_holds: bool | None
    bias: float = 0.0
    unit_bias: np.ndarray | None = None
    """Per unit × answer cell mean error (the units the correction was evaluated on)."""


@dataclass(frozen=True)
class CellMoments:
    """Per geounit × cell: P(cell positive), mean error, variance of the error, and P(cell
    positive) where the unit is rounded (0 for an only child, a copy of its integral parent)."""

    p: np.ndarray
    mean: np.ndarray
    var: np.ndarray
    rounded: np.ndarray | None = None

    @property
    def p_rounded(self) -> np.ndarray:
        return self.p if self.rounded is None else self.rounded


def _phi(x: np.ndarray) -> np.ndarray:
    return np.exp(-0.5 * x * x) / _SQRT_2PI


def water_fill_shift(
    y: np.ndarray,
    s: np.ndarray,
    family: np.ndarray,
    n_families: int,
    iterations: int = 20,
    tolerance: float = 1e-4,
) -> np.ndarray:
    """λ ≥ 0 per (family, cell) with Σ_c E max(0, y_c + d_c − λ) = Σ_c y_c, d_c ~ N(0, s_c²).

    ``y`` is ``(n_units, n_cells)``, ``s`` ``(n_units, 1)`` or the same shape; ``family`` maps
    units to families. Newton's method from λ = 0 (the function is convex and decreasing, so the
    iterates increase monotonically to the root). A family cell whose children are all 0 has no
    finite root (every child must be 0): λ = ∞ there, i.e. zero error.
    """
    s = np.broadcast_to(s, y.shape)
    if family.size and np.any(np.diff(family) < 0):
        raise ValueError("units of one family must be consecutive, families in order")
    starts = np.searchsorted(family, np.arange(n_families))
    target = np.add.reduceat(y, starts, axis=0)
    lam = np.zeros((n_families, y.shape[1]))
    scale = np.add.reduceat(s, starts, axis=0)
    empty = target <= 0
    for _ in range(iterations):
        t = (y - lam[family]) / s
        cdf = ndtr(t)
        ex = (y - lam[family]) * cdf + s * _phi(t)
        excess = np.add.reduceat(ex, starts, axis=0) - target
        excess[empty] = 0.0
        if float(np.max(excess / scale, initial=0.0)) < tolerance:
            break
        slope = np.add.reduceat(cdf, starts, axis=0)
        lam = np.maximum(lam + excess / np.maximum(slope, 1e-12), 0.0)
    lam[empty] = np.inf
    return lam


def clipped_moments(y: np.ndarray, s: np.ndarray, lam: np.ndarray) -> CellMoments:
    """Moments of e = max(−y, d − λ), d ~ N(0, s²) (closed form in the module docstring)."""
    s = np.broadcast_to(s, y.shape)
    lam = np.minimum(lam, y + 40.0 * s)  # λ = ∞: the cell is clipped to 0 (e = −y = 0)
    alpha = (lam - y) / s
    cdf = ndtr(alpha)
    pdf = _phi(alpha)
    p = 1.0 - cdf
    mean = -y * cdf - lam * p + s * pdf
    second = y * y * cdf + s * s * (alpha * pdf + p) - 2.0 * s * lam * pdf + lam * lam * p
    return CellMoments(p=p, mean=mean, var=np.maximum(second - mean * mean, 0.0))


def family_index(fanouts: np.ndarray) -> np.ndarray:
    """Family (parent) of every unit of a level from the parents' fan-outs."""
    return np.repeat(np.arange(fanouts.size), fanouts)


def sample_families(
    fanouts: np.ndarray, max_units: int | None, max_families: int | None = None
) -> np.ndarray:
    """Units of every k-th family (whole families, deterministic) so that at most about
    ``max_units`` units and at most ``max_families`` families are kept (``None``: no limit)."""
    n_units = int(fanouts.sum())
    step = 1
    if max_units is not None and n_units > max_units:
        step = math.ceil(n_units / max_units)
    if max_families is not None and fanouts.size > max_families:
        step = max(step, math.ceil(fanouts.size / max_families))
    if step == 1:
        return np.arange(n_units)
    family = family_index(fanouts)
    return np.flatnonzero(family % step == 0)


def level_moments(
    counts: np.ndarray,
    cell_var: np.ndarray,
    fanouts: np.ndarray,
    units: np.ndarray,
    *,
    root: bool = False,
) -> tuple[CellMoments, np.ndarray]:
    """Clipped-cell moments of the ``units`` (whole families) of a level and their family index.

    ``cell_var`` is given for the ``units`` only; ``counts`` for the level or for the units."""
    family_all = family_index(fanouts)
    family = family_all[units]
    _, family = np.unique(family, return_inverse=True)
    # ``counts`` may be the units' rows already (the sampled families) or the whole level's
    y = (counts if counts.shape[0] == units.size else counts[units]).astype(np.float64)
    s = np.sqrt(np.maximum(cell_var, 1e-12))
    if s.ndim == 1:
        s = s[:, None]
    lam = water_fill_shift(y, s, family, int(family.max(initial=-1)) + 1)
    moments = clipped_moments(y, s, lam[family])
    only_child = (fanouts[family_all[units]] == 1) & (not root)
    rounded = np.where(only_child[:, None], 0.0, moments.p)
    return CellMoments(moments.p, moments.mean, moments.var, rounded), family


def _summer(
    index: np.ndarray, size: int, shape: tuple[int, ...]
) -> Callable[[np.ndarray], np.ndarray]:
    """Sum ``(units, cells)`` arrays (or per-unit ``(units, 1)``) into the query's answer cells."""
    if size == index.size and np.array_equal(index, np.arange(size)):
        return lambda x: np.array(np.broadcast_to(x, shape), dtype=np.float64)
    if np.unique(index).size == size:
        order = np.argsort(index, kind="stable")
        starts = np.searchsorted(index[order], np.arange(size))

        def by_answer(x: np.ndarray) -> np.ndarray:
            full = np.broadcast_to(x, shape)
            return np.add.reduceat(full[:, order], starts, axis=1)

        return by_answer
    # some answer cells have no column (cells left out): sum with a sparse indicator matrix
    indicator = scipy.sparse.csr_matrix(
        (np.ones(index.size), (np.arange(index.size), index)), shape=(index.size, size)
    )

    def by_indicator(x: np.ndarray) -> np.ndarray:
        full = np.ascontiguousarray(np.broadcast_to(x, shape), dtype=np.float64)
        return np.asarray(full @ indicator)

    return by_indicator


def query_correction(
    moments: CellMoments,
    counts: np.ndarray,
    linear_var: np.ndarray,
    cell_var: np.ndarray,
    attributes: Sequence[tuple[str, Sequence[str]]],
    query: str,
    support: np.ndarray | None = None,
    cells: np.ndarray | None = None,
) -> LevelCorrection:
    """Predicted RMSE of ``query`` over the units of ``moments`` (rows of ``counts`` etc.).

    ``linear_var``: per unit (or unit × answer cell) the least-squares variance of an answer
    cell; ``cell_var``: per unit (or unit × cell) the least-squares variance of a detailed cell.
    ``support`` (unit × cell, optional): the cells the unit populates, where ``linear_var`` and
    ``cell_var`` are those of least squares with the other cells held at 0
    (:func:`phexplore.prediction.support.child_support_covariances`); the empty cells' own
    clipped errors (from their free-cell variance in ``cell_var``) are then added to the
    answer's, independently. ``cells``: the schema cells the arrays' columns are (default all;
    cells no unit can populate carry no error and may be left out).
    """
    parse = parse_marginal(query, attributes)
    index = cell_index(parse, attributes)
    if cells is not None:
        index = index[cells]
    size = answer_cells(parse, attributes)

    by_answer = _summer(index, size, counts.shape)
    cells_per_answer = np.bincount(index, minlength=size).astype(np.float64)
    inside = np.ones(counts.shape, dtype=bool) if support is None else support
    p_in = np.where(inside, moments.p, 0.0)
    sum_p = by_answer(p_in)
    sum_p2 = by_answer(p_in**2)
    if cell_var.ndim == 1:
        diag_lin = cell_var[:, None] * cells_per_answer[None, :]
    else:
        diag_lin = by_answer(np.where(inside, cell_var, 0.0))
    lin = linear_var[:, None] if linear_var.ndim == 1 else linear_var
    off_lin = lin - diag_lin  # negative when cells are negatively correlated
    per_answer = cells_per_answer if support is None else by_answer(inside.astype(np.float64))
    pairs = per_answer * (per_answer - 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        pair_weight = np.where(pairs > 0, (sum_p**2 - sum_p2) / np.where(pairs > 0, pairs, 1), 0)
    bias2 = by_answer(moments.mean) ** 2
    spread = np.maximum(by_answer(np.where(inside, moments.var, 0.0)) + pair_weight * off_lin, 0.0)
    outside = 0.0 if support is None else by_answer(np.where(inside, 0.0, moments.var))
    # Knowing which cells are 0 can only lower the least-squares variance of an answer (exact
    # constraints added); where the answer is pinned by its own measurements rather than by its
    # cells, the frozen-cell sum above overstates it, so the linear variance caps it.
    clipped = np.minimum(spread + bias2, np.broadcast_to(lin, spread.shape)) + outside
    mse = clipped + ROUNDING_VARIANCE * by_answer(moments.p_rounded)
    true = by_answer(counts.astype(np.float64))
    mean_count = float(true.mean())
    return LevelCorrection(
        rmse=math.sqrt(float(mse.mean())),
        mean_count=mean_count,
        model_holds=mean_count >= MIN_MEAN_COUNT,
        bias=float(by_answer(moments.mean).mean()),
        unit_bias=by_answer(moments.mean),
    )


def held_query_correction(
    counts: np.ndarray,
    linear_var: np.ndarray,
    fanouts: np.ndarray,
    units: np.ndarray,
    attributes: Sequence[tuple[str, Sequence[str]]],
    query: str,
    *,
    root: bool = False,
    cells: np.ndarray | None = None,
) -> LevelCorrection:
    """Correction of a query estimated in an earlier least-squares pass (e.g. TOTAL in pass 1,
    TDA §7.2) and held in the later ones: water filling on the query's own answers, which is the
    exact solution of a TOTAL-only pass (``engine/topdown/least_squares._water_fill_totals``).

    ``counts`` are the units' detailed counts (rows ``units`` of the level), ``linear_var`` the
    least-squares variance of an answer cell of each unit (or unit × answer cell); ``cells`` as
    in :func:`query_correction`."""
    parse = parse_marginal(query, attributes)
    index = cell_index(parse, attributes)
    if cells is not None:
        index = index[cells]
    size = answer_cells(parse, attributes)
    answers = _summer(index, size, counts.shape)(counts.astype(np.float64))
    moments, _ = level_moments(answers, linear_var, fanouts, units, root=root)
    mse = moments.var + moments.mean**2 + ROUNDING_VARIANCE * moments.p_rounded
    mean_count = float(answers.mean())
    return LevelCorrection(
        rmse=math.sqrt(float(mse.mean())),
        mean_count=mean_count,
        model_holds=mean_count >= MIN_MEAN_COUNT,
        bias=float(moments.mean.mean()),
        unit_bias=moments.mean,
    )
