"""Correction of the predicted error for non-negativity and rounding, from a count profile
(docs/science.md §7; TDA §7.1 eq. 7.2–7.4, §7.2, Table 13).

The least-squares error d of a cell is Gaussian with the variance of
:mod:`engine.prediction.least_squares`; the published count is non-negative. We model the
non-negative least squares of a family cell by cell as *water filling* — the exact solution when the
cells decouple (detailed cells measured far more precisely than the margins, as at blocks):

    x_c = max(0, y_c + d_c − λ),   λ ≥ 0 such that Σ_c E[x_c] = Σ_c y_c

(children still sum to the parent; λ is the mean-field shift that pays for the clipped mass, one per
family and cell). With α = (λ − y)/s the cell error e = x − y has, in closed form,

    P(e > −y) = p = 1 − Φ(α),    E e = −yΦ(α) − λ p + s φ(α),
    E e² = y² Φ(α) + s²(α φ(α) + p) − 2 s λ φ(α) + λ² p.

This is applied to the error a unit's cells *own*. What a unit inherits through an exact
constraint — its share of the parent's published error (the children sum to the parent, cell by
cell) and the error of an answer held from an earlier pass (the unit's TOTAL estimated alone first)
— non-negativity only moves between cells and children; it is added unclipped (``conserved``, with
a held TOTAL's deficit taken from the cells by water filling on their counts, ``held_total`` and
:func:`deficit_shares`; the split is in :mod:`engine.prediction.level_rows`).

A query answer sums cells: its mean squared error is Σ Var(e_i) + Σ_{i≠j} p_i p_j C_ij + (Σ E e_i)²,
the first-order (Price) expansion of the covariance of two clipped Gaussians, with the linear
off-diagonal covariance C_ij of the answer cell spread evenly over its pairs of cells — capped by the
answer's linear variance: least squares that knew which cells are 0 (exact constraints) could only
be more precise, and an answer pinned by its own measurement keeps it. A unit's empty cells of its
family's support (support model) are lifted by noise: their clipped error reaches an answer only
as far as the populated cells do not take it back (``pinned_outside``,
:mod:`engine.prediction.support_freed`). Rounding (TDA eq. 7.3, 7.7) follows the engine's chain of
rounded marginals (:mod:`engine.prediction.rounding`): per answer, the non-integral answers of the
coarsest chain marginal inside it, 1/6 each below the root (the children's rounded answers must sum
to the parent's: a fraction rounded up with probability equal to itself), 1/12 at the root.

Homogeneous (small) counts are biased up and large ones down, as TDA Table 13 shows. Whether a
prediction's row lies in the range where this was validated against runs is
:mod:`engine.prediction.validity`'s (docs/prediction.md §3–§4).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import scipy.sparse
from scipy.special import ndtr

from engine.prediction.rounding import ROUNDING_VARIANCE, RoundingPieces
from engine.schema.marginals import answer_cells, cell_index, parse_marginal

__all__ = ["ROUNDING_VARIANCE"]


MIN_MEAN_COUNT = 1.0
"""Below this mean count per answer cell a level correction reports ``model_holds`` False; a
prediction's rows take their flag from :mod:`engine.prediction.validity` instead."""

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
    populated_ratio: float | None = None
    """Published over least-squares mean squared error on the answer cells with a positive
    count: what the share of this level's error its children inherit is scaled by."""


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


@dataclass(frozen=True, eq=False)
class AnswerSums:
    """Sums of ``(units, columns)`` arrays into the answer cells of several queries at once.

    Only the answer cells some column is counted in (*present*) are formed: an answer cell no
    column reaches has no count, no clipped cell and no rounded cell, so every term of the
    correction is 0 there and it enters the query's means as zeros (they divide by every answer
    cell). ``matrix`` is the ``(present answers, columns)`` indicator, the queries' present
    answers stacked in order (``offsets``); ``present[i]`` names query i's present answer cells.
    Budget-independent: built once per schema, queries and columns (:func:`answer_sums`).
    """

    queries: tuple[str, ...]
    sizes: tuple[int, ...]
    n_columns: int
    matrix: scipy.sparse.csr_matrix
    present: tuple[np.ndarray, ...]
    offsets: np.ndarray
    cells_per_answer: np.ndarray
    """``(present answers,)`` columns counted in each present answer cell."""

    def __call__(self, columns_first: np.ndarray) -> np.ndarray:
        """``(columns, n)`` → ``(present answers, n)`` sums (the arrays transposed, so that
        each answer adds contiguous rows)."""
        return np.asarray(self.matrix @ columns_first)

    def span(self, i: int) -> slice:
        """Rows of query i's present answers."""
        return slice(int(self.offsets[i]), int(self.offsets[i + 1]))


def answer_sums(
    attributes: Sequence[tuple[str, Sequence[str]]],
    queries: Sequence[str],
    cells: np.ndarray | None = None,
) -> AnswerSums:
    """:class:`AnswerSums` of ``queries`` over the schema cells ``cells`` (default all; cached)."""
    attrs = tuple((str(a), tuple(str(x) for x in lv)) for a, lv in attributes)
    key = None if cells is None else np.asarray(cells, dtype=np.int64).tobytes()
    return _answer_sums(attrs, tuple(queries), key)


@lru_cache(maxsize=64)
def _answer_sums(
    attributes: tuple[tuple[str, tuple[str, ...]], ...],
    queries: tuple[str, ...],
    cells_key: bytes | None,
) -> AnswerSums:
    cells = None if cells_key is None else np.frombuffer(cells_key, dtype=np.int64)
    n_columns = int(np.prod([len(levels) for _, levels in attributes]))
    if cells is not None:
        n_columns = int(cells.size)
    rows, present, sizes, per_answer = [], [], [], []
    offsets = [0]
    for q in queries:
        parse = parse_marginal(q, attributes)
        index = cell_index(parse, attributes)
        if cells is not None:
            index = index[cells]
        sizes.append(answer_cells(parse, attributes))
        hit, local, count = np.unique(index, return_inverse=True, return_counts=True)
        rows.append(local.reshape(-1) + offsets[-1])
        present.append(hit)
        per_answer.append(count.astype(np.float64))
        offsets.append(offsets[-1] + hit.size)
    row = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    col = np.tile(np.arange(n_columns), len(queries))
    matrix = scipy.sparse.csr_matrix(
        (np.ones(row.size), (row, col)), shape=(offsets[-1], n_columns)
    )
    return AnswerSums(
        queries=queries,
        sizes=tuple(sizes),
        n_columns=n_columns,
        matrix=matrix,
        present=tuple(present),
        offsets=np.array(offsets, dtype=np.int64),
        cells_per_answer=np.concatenate(per_answer) if per_answer else np.zeros(0),
    )


CHUNK_ELEMENTS = 1_000_000
"""Units × columns per chunk of :func:`level_corrections`: its stacked arrays (the ~9 unit × cell
arrays and their sums into answer cells) stay below ~200 MB."""


def level_corrections(
    moments: CellMoments,
    counts: np.ndarray,
    linear_vars: Mapping[str, np.ndarray],
    cell_var: np.ndarray,
    attributes: Sequence[tuple[str, Sequence[str]]],
    support: np.ndarray | None = None,
    cells: np.ndarray | None = None,
    *,
    unit_bias: bool = True,
    linear_divisor: float = 1.0,
    conserved: Mapping[str, np.ndarray] | None = None,
    rounding: RoundingPieces | None = None,
    linear_total: Mapping[str, np.ndarray] | None = None,
    held_total: np.ndarray | None = None,
    pinned_outside: Mapping[str, np.ndarray] | None = None,
) -> dict[str, LevelCorrection]:
    """The correction of every query of ``linear_vars`` at once (one query: a dict of one).

    The unit × cell arrays every query sums (clipping probabilities and moments, variances,
    counts) are stacked and summed into all queries' present answer cells by one sparse
    product (:class:`AnswerSums`), in chunks of units; each query's means then divide by all its
    answer cells. ``unit_bias``: also return each query's per unit × answer-cell mean error
    (all answer cells; ``False``: ``None``, when only the summary is needed).
    ``linear_divisor``: the linear variances are ``linear_vars`` divided by it (divided only
    where used: the answer cells some column reaches). ``conserved``: per query, per unit (×
    answer cell) the variance of the error the unit inherits through an exact constraint (its
    share of the parent's published error, the error of an answer held from an earlier pass):
    added as is — non-negativity only moves it between cells and children — while
    ``linear_vars``, ``cell_var`` and ``moments`` describe the rest of the error, which the
    cells' clipping changes (the module docstring). ``rounding``: the engine's chain of rounded
    marginals (:class:`RoundingPieces`); without it each cell is rounded on its own (p_i/6).
    ``linear_total``: per query the least-squares variance of every answer (all its parts), for
    each query's ``populated_ratio``. ``held_total``: per unit the variance of the published error
    of a TOTAL held from an earlier pass; half of it (a deficit) is taken from the cells by
    water filling on their counts — each populated cell gives min(y_i, μ), Σ_i min(y_i, μ) = the
    error's standard deviation — and split among the answers as those cells are (the other half,
    an excess, spreads as the least squares splits it: ``conserved`` carries it).
    ``pinned_outside``: per query, per unit × answer, the freed variance of the unit's empty
    cells that reaches the answer once its populated cells re-adjust (support model); without
    it each empty cell's clipped error counts in full in its own answer."""
    queries = tuple(linear_vars)
    sums = answer_sums(attributes, queries, cells)
    n_units, n_columns = counts.shape
    if n_columns != sums.n_columns:
        raise ValueError(
            f"counts have {n_columns} columns; the queries' cells are {sums.n_columns}"
        )
    totals = {
        name: np.zeros(len(queries)) for name in ("mse", "true", "bias", "pop_mse", "pop_lin")
    }
    biases = [np.zeros((n_units, size)) if unit_bias else None for size in sums.sizes]
    step = max(1, CHUNK_ELEMENTS // max(n_columns, 1))
    two_d = cell_var.ndim == 2
    for a in range(0, n_units, step):
        b = min(n_units, a + step)
        part = slice(a, b)
        p = moments.p[part]
        inside = None if support is None else support[part]
        p_in = p if inside is None else np.where(inside, p, 0.0)
        var = moments.var[part]
        arrays = [
            p_in,
            p_in * p_in,
            var if inside is None else np.where(inside, var, 0.0),
            moments.mean[part],
            moments.p_rounded[part],
            counts[part],
        ]
        if two_d:
            arrays.append(
                cell_var[part] if inside is None else np.where(inside, cell_var[part], 0.0)
            )
        if inside is not None:
            arrays.append(inside)
            arrays.append(np.where(inside, 0.0, var))
        if held_total is not None:
            arrays.append(deficit_shares(counts[part], np.sqrt(held_total[part])))
        width = b - a
        stacked = np.empty((n_columns, len(arrays), width))
        for j, x in enumerate(arrays):
            stacked[:, j, :] = np.broadcast_to(x, (width, n_columns)).T
        summed = sums(stacked.reshape(n_columns, -1)).reshape(-1, len(arrays), width)
        sum_p, sum_p2, var_in, mean, rounded, true = (summed[:, j] for j in range(6))
        rest = 6
        if two_d:
            diag_lin = summed[:, rest]
            rest += 1
        else:
            diag_lin = sums.cells_per_answer[:, None] * cell_var[part][None, :]
        if inside is None:
            per_answer = sums.cells_per_answer[:, None]
            outside: np.ndarray | float = 0.0
        else:
            per_answer, outside = summed[:, rest], summed[:, rest + 1]
            outside = np.array(outside)
            rest += 2
        if held_total is not None:
            given = summed[:, rest]
        lin = np.empty(sum_p.shape)
        for i, q in enumerate(queries):
            v = linear_vars[q][part]
            v = v[None, :] if v.ndim == 1 else v[:, sums.present[i]].T
            lin[sums.span(i)] = v if linear_divisor == 1.0 else v / linear_divisor
        off_lin = lin - diag_lin  # negative when cells are negatively correlated
        pairs = per_answer * (per_answer - 1.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            pair_weight = np.where(
                pairs > 0, (sum_p**2 - sum_p2) / np.where(pairs > 0, pairs, 1), 0
            )
        spread = np.maximum(var_in + pair_weight * off_lin, 0.0)
        # Knowing which cells are 0 can only lower the least-squares variance of an answer
        # (exact constraints added); where the answer is pinned by its own measurements rather
        # than by its cells, the frozen-cell sum above overstates it, so the linear variance
        # caps it.
        if pinned_outside is not None and inside is not None:
            # A lifted empty cell moves an answer only as far as the populated cells do not
            # take it back (pinned_outside: the freed variance reaching each answer); what of
            # it survives the clipping is the unit's clipped / freed variance of its empty
            # cells.
            freed = np.where(inside, 0.0, cell_var[part]).sum(axis=1)
            kept_var = np.where(inside, 0.0, var).sum(axis=1)
            survives = np.where(freed > 0, kept_var / np.maximum(freed, 1e-300), 0.0)
            for i, q in enumerate(queries):
                w = pinned_outside[q][part][:, sums.present[i]].T
                outside_q = w * survives[None, :]
                if isinstance(outside, np.ndarray):
                    outside[sums.span(i)] = outside_q
        clipped = np.minimum(spread + mean**2, lin) + outside
        if rounding is not None:
            p_round = moments.p_rounded[part]
            for i, q in enumerate(queries):
                rounded[sums.span(i)] = rounding.nonintegral(q, p_round)[:, sums.present[i]].T
        mse = clipped + (rounding.variance if rounding is not None else ROUNDING_VARIANCE) * rounded
        for i, q in enumerate(queries):
            span = sums.span(i)
            shape = (sums.present[i].size, b - a)
            kept = 0.0
            if conserved is not None and q in conserved:
                # answers no column reaches carry no conserved error either (no cell there)
                kept = _answers_first(conserved[q][part], sums.present[i], shape)
                totals["mse"][i] += float(kept.sum())
            totals["mse"][i] += float(mse[span].sum())
            if held_total is not None:
                by_count = 0.5 * held_total[part][None, :] * given[span] ** 2
                kept = kept + by_count
                totals["mse"][i] += float(by_count.sum())
            if linear_total is not None and q in linear_total:
                populated = true[span] > 0
                total_lin = _answers_first(linear_total[q][part], sums.present[i], shape)
                totals["pop_mse"][i] += float((mse[span] + kept)[populated].sum())
                totals["pop_lin"][i] += float(total_lin[populated].sum())
            totals["true"][i] += float(true[span].sum())
            totals["bias"][i] += float(mean[span].sum())
            if biases[i] is not None:
                biases[i][part, sums.present[i]] = mean[span].T
    out = {}
    for i, q in enumerate(queries):
        n = float(n_units * sums.sizes[i])
        mean_count = totals["true"][i] / n
        pop_lin = totals["pop_lin"][i]
        out[q] = LevelCorrection(
            rmse=math.sqrt(totals["mse"][i] / n),
            mean_count=mean_count,
            model_holds=mean_count >= MIN_MEAN_COUNT,
            bias=totals["bias"][i] / n,
            unit_bias=biases[i],
            populated_ratio=totals["pop_mse"][i] / pop_lin if pop_lin > 0 else None,
        )
    return out


def deficit_shares(counts: np.ndarray, deficit: np.ndarray, iterations: int = 48) -> np.ndarray:
    """``(units, cells)``: the share of a deficit of ``deficit`` persons (per unit) each cell
    gives when it is taken by water filling on the counts — every cell gives min(y_i, μ) with μ
    such that the cells give the deficit (all of a unit's count when it is smaller) — the
    non-negative least squares' way to lower a held total (equal weights, cells stop at 0)."""
    y = np.maximum(np.asarray(counts, dtype=np.float64), 0.0)
    d = np.minimum(np.asarray(deficit, dtype=np.float64), y.sum(axis=1))
    lo = np.zeros(y.shape[0])
    hi = np.maximum(y.max(axis=1, initial=0.0), 1e-12)
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        short = np.minimum(y, mid[:, None]).sum(axis=1) < d
        lo = np.where(short, mid, lo)
        hi = np.where(short, hi, mid)
    given = np.minimum(y, hi[:, None])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(d[:, None] > 0, given / np.maximum(d, 1e-300)[:, None], 0.0)


def _answers_first(values: np.ndarray, present: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Per unit (or unit × answer) values as ``(present answers, units)``."""
    if values.ndim == 1:
        return np.broadcast_to(values[None, :], shape)
    return values[:, present].T


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
    conserved: np.ndarray | None = None,
    linear_total: np.ndarray | None = None,
) -> LevelCorrection:
    """Correction of a query estimated in an earlier least-squares pass (e.g. TOTAL in pass 1,
    TDA §7.2) and held in the later ones: water filling on the query's own answers, which is the
    exact solution of a TOTAL-only pass (``engine/topdown/qp/closed_form.water_fill_families``).

    ``counts`` are the units' detailed counts (rows ``units`` of the level), ``linear_var`` the
    least-squares variance of an answer cell of each unit (or unit × answer cell); ``cells`` as
    in :func:`level_corrections`; ``conserved`` (per unit or unit × answer cell) as in
    :func:`level_corrections`, added as is (``linear_var`` is then the rest)."""
    sums = answer_sums(attributes, (query,), cells)
    answers = np.zeros((counts.shape[0], sums.sizes[0]))
    answers[:, sums.present[0]] = sums(np.ascontiguousarray(counts.T, dtype=np.float64)).T
    moments, _ = level_moments(answers, linear_var, fanouts, units, root=root)
    mse = moments.var + moments.mean**2 + ROUNDING_VARIANCE * moments.p_rounded
    if conserved is not None:
        mse = mse + (conserved[:, None] if conserved.ndim == 1 else conserved)
    ratio = None
    if linear_total is not None:
        lin = np.broadcast_to(
            linear_total[:, None] if linear_total.ndim == 1 else linear_total, answers.shape
        )
        populated = answers > 0
        ratio = (
            float(mse[populated].sum() / lin[populated].sum()) if lin[populated].sum() > 0 else None
        )
    mean_count = float(answers.mean())
    return LevelCorrection(
        rmse=math.sqrt(float(mse.mean())),
        mean_count=mean_count,
        model_holds=mean_count >= MIN_MEAN_COUNT,
        bias=float(moments.mean.mean()),
        unit_bias=moments.mean,
        populated_ratio=ratio,
    )
