"""The root's clipped empty cells: the mass its non-negative least squares lifts into them
(docs/science.md §7; TDA §7.1 eq. 7.1–7.2, §5.2 invariants; validated in docs/prediction.md §2b,
"The root's empty cells").

The support model (:mod:`engine.prediction.support`) holds the root's empty cells at 0. They
are not held: the root has no parent, so every cell that is not a structural zero of the unit
frame is a variable of its non-negative least squares (``engine/topdown/qp/route``), and on
the 2,016-cell production schema most of them are empty. Noise lifts some of them; the mass they
take comes from the populated cells through the invariant TOTAL and the measured marginals, so
each marginal's answers are biased, several times more than predicted without this term
(docs/prediction.md §2b).

Derivation. Let S be the root's populated cells, E its other variables (true count 0), H = Σ_q
w_q A_qᵀA_q the information of its single pass and C x = c its invariants. With the cells of E
fixed at δ ≥ 0, the least squares on S (the support model's solution x_S⁰, error e_S⁰) moves
linearly:

    x_S(δ) = x_S⁰ − M δ,    [M; ·] = K⁻¹ [H_SE; C_E],    K = [[H_SS, C_Sᵀ], [C_S, 0]],

and profiling S out leaves, for δ, the quadratic ½ δᵀΣδ − rᵀδ with the Schur complement
Σ = H_EE − [H_ES, C_Eᵀ] K⁻¹ [H_SE; C_E] and r = g_E − [H_ES, C_Eᵀ] K⁻¹ [g_S; 0] (g = Σ_q w_q A_qᵀ
m̃_q): Gaussian with mean 0 (the true cells of E are 0) and independent of e_S⁰ (the efficient
estimator under the true restriction x_E = 0 is uncorrelated with its difference from any other
unbiased estimator; exactly so when v_q = 1/w_q, the covariance below is the actual noise's). The
non-negative least squares takes δ = argmin_{δ≥0} ½ δᵀΣδ − rᵀδ, whose conditions are

    δ_i = max(0, r_i − Σ_{j≠i} Σ_ij δ_j) / Σ_ii.

We solve them in *mean field* — the same step as the correction's water filling λ
(:mod:`engine.prediction.correction`), where the other cells' pull is replaced by its mean:
h_i = Σ_{j≠i} Σ_ij E δ_j, and with s_i² = Var r_i, a = h_i / s_i,

    E δ_i = (s_i φ(a) − h_i Φ(−a)) / Σ_ii,     E δ_i² = ((h_i² + s_i²) Φ(−a) − h_i s_i φ(a)) / Σ_ii²,

iterated (damped) to a fixed point; with no coupling this is each cell freed alone and clipped
(E δ = s/(Σ√(2π))), which counts each lift once per cell and over-states the mass many-fold when
hundreds of empty cells share a measured marginal. The published error of an answer a of query q
is then A_q,S e_S⁰ + (T_q δ)_a with T_q = A_q,E − A_q,S M: its mean squared error adds
(T_q E δ)_a² + 2 b_a (T_q E δ)_a (b_a: the support model's own bias of that answer) and
Σ_i T_q,ai² Var δ_i (the lifts taken as independent, as the correction takes clipped cells).
The root's rounding (TDA eq. 7.7) is then that of the engine's controlled rounding along its
chain of marginals (:func:`chain_rounding`), lifted cells non-integral with p_i = Φ(−a), the
probability they are lifted, in place of the correction's p_i/6 per cell
(``RootClipping.rounding`` keeps the cell-by-cell value of the lifted cells for comparison).
Every quantity scales with the design: Σ by t, E δ by 1/√t, Var δ by 1/t, p not at all, so a new
total ρ is a rescale (:meth:`RootClipping.scaled`).

An only child copies its parent, so the term applies to each level whose every ancestor down from
the root has a single child (a one-county state's County). The mass the root lifts also flows to
the levels below it; that is not modelled (docs/prediction.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
import scipy.sparse
from scipy.special import ndtr

from engine.prediction.least_squares import LevelDesign
from engine.schema.marginals import answer_cells, cell_index, parse_marginal

MEAN_FIELD_ITERATIONS = 500
"""Cap on the damped fixed-point iterations of the mean-field conditions (they converge in tens)."""

MEAN_FIELD_TOLERANCE = 1e-9
"""Stop when no E δ_i moves by more than this times the largest."""

NEAREST_ROUNDING_VARIANCE = 1.0 / 12.0
"""Variance of rounding a uniform fraction f to its nearest integer: ∫₀¹ min(f, 1 − f)² df."""

_SQRT_2PI = math.sqrt(2.0 * math.pi)


@dataclass(frozen=True)
class RootClipping:
    """What the root's lifted empty cells add, per query and answer cell: the mean error
    ``bias`` (T_q E δ), the variance of the lifts ``variance`` (Σ_i T_ai² Var δ_i) and the
    rounding variance ``rounding`` (Σ_{i ∈ a} p_i / 6), for a design of scale t = ``scale``."""

    bias: Mapping[str, np.ndarray]
    variance: Mapping[str, np.ndarray]
    rounding: Mapping[str, np.ndarray]
    lifted_mass: float
    """E Σ_i δ_i: persons the root's least squares is expected to move into its empty cells."""
    empty_cells: int
    """Empty variables of the root (non-zero-able cells with a true count of 0)."""
    scale: float = 1.0
    empty: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """The empty variables' cells."""
    lifted: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """P(δ_i > 0) of each empty variable (scale-free)."""

    def scaled(self, factor: float) -> RootClipping:
        """The same term for the design with every weight times ``factor`` (E δ ∝ 1/√t)."""
        if factor == 1.0:
            return self
        root = 1.0 / math.sqrt(factor)
        return RootClipping(
            {q: b * root for q, b in self.bias.items()},
            {q: v / factor for q, v in self.variance.items()},
            self.rounding,
            self.lifted_mass * root,
            self.empty_cells,
            self.scale * factor,
            self.empty,
            self.lifted,
        )

    def added_mse(
        self,
        query: str,
        support_bias: np.ndarray | None,
        rounding: np.ndarray | None = None,
    ) -> float:
        """Mean over the answers of ``query`` of what the term adds to the squared error:
        (T E δ)² + 2 b (T E δ) + Σ T² Var δ + rounding (``support_bias``: b per answer, the
        support model's own mean error, or None; ``rounding``: per answer, the rounding variance
        to add instead of the lifted cells' cell-by-cell p_i/6, e.g. the change
        :func:`chain_rounding` makes)."""
        bias = self.bias[query]
        cross = 0.0 if support_bias is None else 2.0 * np.ravel(support_bias) * bias
        extra = self.rounding[query] if rounding is None else rounding
        total = bias * bias + cross + self.variance[query] + extra
        return float(np.mean(total))


def root_clipping(
    design: LevelDesign,
    answer_index: Mapping[str, np.ndarray],
    counts: np.ndarray,
    structural_zero: np.ndarray | None,
    sizes: Mapping[str, int],
) -> RootClipping:
    """The term of the module docstring for the root with true ``counts`` (n_cells), its single
    pass ``design`` (every measured query; invariants exact), structural zeros (no variable:
    never lifted) and the queries ``sizes`` (query → answer cells) to report.

    Σ is never formed: its products with a vector are H_EE v (per query, sums over answer cells)
    minus [H_ES, C_Eᵀ] K⁻¹ [H_SE; C_E] v. [H_SE; C_E] = L R exactly (:func:`_coupling_factors`:
    H_SE reaches E only through the answers a populated and an empty cell share), so K (the
    populated cells and the invariants) is solved against L's few hundred columns (~370 on the
    production schema) rather than the |E| ≈ 1,500 of [H_SE; C_E], and the mean-field products
    use the small Lᵀ K⁻¹ L."""
    n_cells = counts.size
    zero = np.zeros(n_cells, dtype=bool) if structural_zero is None else structural_zero
    populated = np.flatnonzero(counts > 0)
    empty = np.flatnonzero((counts <= 0) & ~zero)
    # an invariant answer with no populated cell holds its empty cells at 0 (their sum is 0)
    for q in design.invariants:
        idx = answer_index[q]
        pinned = np.bincount(idx[populated], minlength=int(idx.max()) + 1) == 0
        empty = empty[~pinned[idx[empty]]]
    nothing = {q: np.zeros(int(v)) for q, v in sizes.items()}
    if empty.size == 0 or populated.size == 0:
        return RootClipping(nothing, nothing, nothing, 0.0, int(empty.size))
    measured = list(dict.fromkeys(q for p in design.passes for q in p))
    weight = {q: float(design.weight[q]) for q in measured}
    noise = {q: weight[q] ** 2 * float(design.noise_variance[q]) for q in measured}
    # v_q = 1/w_q up to the discrete Gaussian's e^(−2π²σ²) (≤ 3e-9 relative at σ ≥ 1): Var r = Σ
    exact_noise = all(abs(weight[q] - noise[q]) <= 1e-6 * weight[q] for q in measured)
    parts = {q: _indicators(answer_index[q], populated, empty) for q in measured}
    h_ss = _populated_gram([answer_index[q][populated] for q in measured], weight.values())
    cons_s, cons_e = _constraint_rows(design.invariants, answer_index, populated, empty)
    n_s, n_c = populated.size, cons_s.shape[0]
    kkt = np.block([[h_ss, cons_s.T], [cons_s, np.zeros((n_c, n_c))]])
    # [H_SE; C_E] = L R with L sparse ((S + invariants) × the answers both S and E meet, and the
    # invariant rows) and R their indicator rows over E: K⁻¹ [H_SE; C_E] = (K⁻¹ L) R, a few
    # hundred columns solved instead of |E|, and Σ v = H_EE v − Rᵀ (Lᵀ K⁻¹ L) R v
    left, right = _coupling_factors(parts, weight, cons_e, answer_index, populated, empty)
    left_t = left.T.toarray()
    right_t = right.T.tocsr()
    # the E × (populated + invariants) transposes, row-major: products with the sparse R stay
    # fast and nothing large is transposed
    couple_t = right_t @ left_t  # [H_SE; C_E]ᵀ
    k_left = _kkt_solve(h_ss, cons_s, kkt, left_t.T)  # K⁻¹ L
    solved_t = right_t @ np.ascontiguousarray(k_left.T)  # (K⁻¹ [H_SE; C_E])ᵀ
    gram_small = np.asarray(left.T @ k_left)  # Lᵀ K⁻¹ L
    move_t = solved_t[:, :n_s]  # Mᵀ: E × S
    h_diag = sum(weight.values())  # every cell is in one answer of each query: (A_qᵀA_q)_ii = 1
    diag = h_diag - np.einsum("ij,ij->i", couple_t, solved_t)
    # Σ v = H_EE v − Rᵀ (Lᵀ K⁻¹ L) R v = Qᵀ D Q v with Q = [A_E (every query); R]
    stacked = scipy.sparse.vstack([parts[q][1] for q in measured] + [right], format="csr")
    stacked_t = stacked.T.tocsr()
    n_h = stacked.shape[0] - right.shape[0]
    stacked_w = np.concatenate([np.full(parts[q][3], weight[q]) for q in measured])

    def schur_times(v: np.ndarray) -> np.ndarray:
        y = stacked @ v
        return stacked_t @ np.concatenate([stacked_w * y[:n_h], -(gram_small @ y[n_h:])])

    if exact_noise:
        var_r = np.maximum(diag, 0.0)
    else:  # r = g_E − Mᵀ g_S: Var r_i from the noise's own covariance
        n_se = _gram(parts, noise, "SE")
        n_ss = _gram(parts, noise, "SS")
        move = move_t.T
        cross = np.einsum("ji,ji->i", move, n_se)
        quad = np.einsum("ji,ji->i", move, n_ss @ move)
        var_r = np.maximum(sum(noise.values()) - 2.0 * cross + quad, 0.0)
    top = max(float(diag.max(initial=0.0)), 1e-300)
    live = diag > 1e-9 * top  # a cell the root does not determine is not modelled
    mean, second, lifted = _mean_field(schur_times, diag, var_r, live)
    var = np.maximum(second - mean * mean, 0.0)
    shift = mean @ move_t  # the populated cells' mean move
    k_populated = np.ascontiguousarray(k_left[:n_s])
    bias: dict[str, np.ndarray] = {}
    variance: dict[str, np.ndarray] = {}
    rounding: dict[str, np.ndarray] = {}
    for q, size in sizes.items():
        idx = answer_index[q]
        idx_s, idx_e = idx[populated], idx[empty]
        n_ans = int(size)
        # T_q = A_q,E − A_q,S M; bias T E δ; variance Σ_i T_ai² Var δ_i
        bias[q] = np.bincount(idx_e, weights=mean, minlength=n_ans) - np.bincount(
            idx_s, weights=shift, minlength=n_ans
        )
        touched, local = np.unique(idx_s, return_inverse=True)
        gather = scipy.sparse.csr_matrix(
            (np.ones(populated.size), (local, np.arange(populated.size))),
            shape=(touched.size, populated.size),
        )
        # (A_q,S M)ᵀ = Rᵀ (A_q,S K⁻¹ L)ᵀ on the answers S touches
        am_t = right_t @ np.ascontiguousarray((gather @ k_populated).T)
        var_q = np.bincount(idx_e, weights=var, minlength=n_ans)
        var_q[touched] += var @ (am_t * am_t)
        pos = np.searchsorted(touched, idx_e)
        hit = (pos < touched.size) & (touched[np.minimum(pos, touched.size - 1)] == idx_e)
        cols = np.flatnonzero(hit)
        np.add.at(var_q, idx_e[cols], -2.0 * am_t[cols, pos[cols]] * var[cols])
        variance[q] = np.maximum(var_q, 0.0)
        rounding[q] = np.bincount(idx_e, weights=lifted / 6.0, minlength=n_ans)
    return RootClipping(
        bias, variance, rounding, float(mean.sum()), int(empty.size), 1.0, empty, lifted
    )


def chain_rounding(
    attributes: Sequence[tuple[str, Sequence[str]]],
    chain: Sequence[str],
    p_cells: np.ndarray,
    queries: Sequence[str],
    exact: Sequence[str] = (),
) -> dict[str, np.ndarray]:
    """Rounding variance of every answer of ``queries`` under the engine's controlled rounding
    (TDA §7.3, eq. 7.7) of one geounit whose cells are non-integral with probability
    ``p_cells`` (n_cells; 0 where a cell is held at an integer).

    The rounder fixes the answers of each marginal of its nested ``chain`` in turn, minimising
    their L1 distance to the least squares' given the coarser answers already fixed: each answer
    is rounded to a nearest integer unless the fixed coarser sum forces the other one. So an
    answer of a query that coarsens a chain marginal c (every answer of c inside one of its
    answers) carries only the rounding of c's answers inside it, not of its cells one by one: we
    take the coarsest such c (DETAILED — the cells — when no other is) and give each of its
    answers b the variance of nearest rounding of a uniform fraction, ∫₀¹ min(f, 1 − f)² df =
    1/12 (:data:`NEAREST_ROUNDING_VARIANCE`), times P(b non-integral) = 1 − Π_{i∈b}(1 − p_i)
    (the answers of c taken as independent). A query that coarsens one of the ``exact`` queries
    (the geounit's invariants, e.g. TOTAL: integers already) has no rounding error. The
    correction's cell-by-cell rule (p_i/6 per cell, a fraction rounded up with probability equal
    to itself) over-states the engine's rounder there; both against Monte Carlo of the engine's
    rounder (tests/engine/prediction/test_root_clipping.py): docs/prediction.md §2b, "The root's
    rounding"."""
    attrs = tuple((str(a), tuple(str(x) for x in lv)) for a, lv in attributes)
    pieces = [cell_index(parse_marginal(c, attrs), attrs) for c in chain]
    pinned = [cell_index(parse_marginal(c, attrs), attrs) for c in exact]
    log_integral = np.log1p(-np.clip(p_cells, 0.0, 1.0 - 1e-15))
    out: dict[str, np.ndarray] = {}
    for q in queries:
        parse = parse_marginal(q, attrs)
        idx = cell_index(parse, attrs)
        size = answer_cells(parse, attrs)
        if any(_coarsens(idx, c) for c in pinned):
            out[q] = np.zeros(size)
            continue
        piece = np.arange(idx.size)  # DETAILED: the cells themselves
        for c in pieces:
            if _coarsens(idx, c):
                piece = c
                break
        n_pieces = int(piece.max()) + 1
        integral = np.exp(np.bincount(piece, weights=log_integral, minlength=n_pieces))
        owner = np.zeros(n_pieces, dtype=np.int64)
        owner[piece] = idx
        present = np.bincount(piece, minlength=n_pieces) > 0
        out[q] = NEAREST_ROUNDING_VARIANCE * np.bincount(
            owner[present], weights=(1.0 - integral)[present], minlength=size
        )
    return out


def _coarsens(index: np.ndarray, finer: np.ndarray) -> bool:
    """Whether the query with cell → answer ``index`` coarsens the one with ``finer`` (every
    answer of the finer query lies inside one of its answers)."""
    owner = np.full(int(finer.max()) + 1, -1)
    owner[finer] = index
    return bool(np.array_equal(owner[finer], index))


def _indicators(
    index: np.ndarray, populated: np.ndarray, empty: np.ndarray
) -> tuple[scipy.sparse.csr_matrix, scipy.sparse.csr_matrix, np.ndarray, int]:
    """A_q on the populated cells and on the empty ones (answers × cells, sparse), the empty
    cells' answers and the number of answers."""
    n_ans = int(index.max()) + 1

    def rows(cells: np.ndarray) -> scipy.sparse.csr_matrix:
        return scipy.sparse.csr_matrix(
            (np.ones(cells.size), (index[cells], np.arange(cells.size))), shape=(n_ans, cells.size)
        )

    return rows(populated), rows(empty), index[empty], n_ans


def _gram(
    parts: Mapping[str, tuple[scipy.sparse.csr_matrix, scipy.sparse.csr_matrix, np.ndarray, int]],
    scale: Mapping[str, float],
    block: str,
) -> np.ndarray:
    """Σ_q scale_q A_q,Sᵀ A_q,X (X = S or E) as a dense matrix."""
    out = None
    for q, (a_s, a_e, _, _) in parts.items():
        other = a_s if block == "SS" else a_e
        term = (a_s.T @ other).toarray() * scale[q]
        out = term if out is None else out + term
    assert out is not None
    return out


def _coupling_factors(
    parts: Mapping[str, tuple[scipy.sparse.csr_matrix, scipy.sparse.csr_matrix, np.ndarray, int]],
    weight: Mapping[str, float],
    cons_e: np.ndarray,
    answer_index: Mapping[str, np.ndarray],
    populated: np.ndarray,
    empty: np.ndarray,
) -> tuple[scipy.sparse.csr_matrix, scipy.sparse.csr_matrix]:
    """L and R with [H_SE; C_E] = L R exactly: H_SE = Σ_q w_q A_q,Sᵀ A_q,E only through the
    answers of q that a populated and an empty cell both fall in, so L holds w_q A_q,Sᵀ on those
    answers (and the identity on the invariant rows) and R the answers' rows of A_q,E (and
    C_E)."""
    n_s, n_c = populated.size, cons_e.shape[0]
    l_rows, l_cols, l_vals, r_rows, r_cols = [], [], [], [], []
    offset = 0
    for q in parts:
        idx = answer_index[q]
        idx_s, idx_e = idx[populated], idx[empty]
        both = np.intersect1d(idx_s, idx_e)
        if both.size == 0:
            continue
        pos_s = np.searchsorted(both, idx_s)
        in_s = (pos_s < both.size) & (both[np.minimum(pos_s, both.size - 1)] == idx_s)
        pos_e = np.searchsorted(both, idx_e)
        in_e = (pos_e < both.size) & (both[np.minimum(pos_e, both.size - 1)] == idx_e)
        l_rows.append(np.flatnonzero(in_s))
        l_cols.append(offset + pos_s[in_s])
        l_vals.append(np.full(int(in_s.sum()), weight[q]))
        r_rows.append(offset + pos_e[in_e])
        r_cols.append(np.flatnonzero(in_e))
        offset += both.size
    l_rows.append(n_s + np.arange(n_c))
    l_cols.append(offset + np.arange(n_c))
    l_vals.append(np.ones(n_c))
    rows_c, cols_c = np.nonzero(cons_e)
    r_rows.append(offset + rows_c)
    r_cols.append(cols_c)
    width = offset + n_c
    left = scipy.sparse.csr_matrix(
        (np.concatenate(l_vals), (np.concatenate(l_rows), np.concatenate(l_cols))),
        shape=(n_s + n_c, width),
    )
    r_r = np.concatenate(r_rows)
    right = scipy.sparse.csr_matrix(
        (np.ones(r_r.size), (r_r, np.concatenate(r_cols))), shape=(width, empty.size)
    )
    return left, right


def _populated_gram(answers: Sequence[np.ndarray], scale: Iterable[float]) -> np.ndarray:
    """Σ_q scale_q A_q,Sᵀ A_q,S as a dense matrix from each query's answers of the populated
    cells (entry i, j: the sum of scale_q over the queries where i and j share an answer)."""
    out = None
    for idx, w in zip(answers, scale, strict=True):
        term = (idx[:, None] == idx[None, :]) * w
        out = term if out is None else out + term
    assert out is not None
    return out


def _constraint_rows(
    invariants: Sequence[str],
    answer_index: Mapping[str, np.ndarray],
    populated: np.ndarray,
    empty: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Rows C of the invariant answers over the populated and the empty cells (answers no
    populated cell hits left out: their empty cells were dropped as pinned)."""
    rows_s, rows_e = [], []
    for q in invariants:
        idx = answer_index[q]
        answers, local = np.unique(idx[populated], return_inverse=True)
        block_s = np.zeros((answers.size, populated.size))
        block_s[local, np.arange(populated.size)] = 1.0
        block_e = np.zeros((answers.size, empty.size))
        where = np.searchsorted(answers, idx[empty])
        block_e[where, np.arange(empty.size)] = 1.0
        rows_s.append(block_s)
        rows_e.append(block_e)
    if not rows_s:
        return np.zeros((0, populated.size)), np.zeros((0, empty.size))
    return np.vstack(rows_s), np.vstack(rows_e)


def _kkt_solve(hess: np.ndarray, cons: np.ndarray, kkt: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """K⁻¹ rhs for K = [[H, Cᵀ], [C, 0]] (``kkt``) through Cholesky factors when H and C H⁻¹ Cᵀ
    are well-conditioned positive definite (x = Y − Z λ, λ = (C Z)⁻¹ (C Y − rhs_C) with
    Y = H⁻¹ rhs_H and Z = H⁻¹ Cᵀ), else :func:`_solve` (LDLᵀ; least squares when singular)."""
    n, width = hess.shape[0], rhs.shape[1]
    try:
        factor = _well_conditioned_cholesky(hess)
        both = scipy.linalg.cho_solve(factor, np.hstack([rhs[:n], cons.T]), check_finite=False)
        y, z = both[:, :width], both[:, width:]
        if cons.shape[0] == 0:
            out = y
        else:
            schur = _well_conditioned_cholesky(cons @ z)
            lam = scipy.linalg.cho_solve(schur, cons @ y - rhs[n:], check_finite=False)
            out = np.vstack([y - z @ lam, lam])
        if np.all(np.isfinite(out)):
            return out
    except (np.linalg.LinAlgError, ValueError):
        pass
    return _solve(kkt, rhs)


def _well_conditioned_cholesky(matrix: np.ndarray) -> tuple[np.ndarray, bool]:
    """``scipy.linalg.cho_factor`` of a positive definite matrix; LinAlgError when it is not or
    its condition number (bounded below by the squared ratio of the factor's diagonal) passes
    1e10 (the caller then solves the system otherwise)."""
    factor = scipy.linalg.cho_factor(matrix, check_finite=False)
    pivots = np.abs(np.diag(factor[0]))
    if pivots.size and (pivots.min() <= 0 or (pivots.max() / pivots.min()) ** 2 > 1e10):
        raise np.linalg.LinAlgError("ill-conditioned")
    return factor


def _solve(kkt: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """K⁻¹ rhs for the symmetric KKT matrix, by least squares where it is singular (the pass
    does not determine every populated cell, or redundant invariants)."""
    try:
        out = scipy.linalg.solve(kkt, rhs, assume_a="sym", check_finite=False)
        if np.all(np.isfinite(out)):
            return out
    except (np.linalg.LinAlgError, ValueError):
        pass
    return scipy.linalg.lstsq(kkt, rhs, check_finite=False)[0]


def _mean_field(
    schur_times: Callable[[np.ndarray], np.ndarray],
    diag: np.ndarray,
    var_r: np.ndarray,
    live: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """E δ, E δ² and P(δ > 0) of every empty cell at the mean-field fixed point (module doc);
    ``schur_times(v)`` is Σ v."""
    sd = np.sqrt(np.where(live, var_r, 0.0))
    safe = np.where(live, diag, 1.0)

    def pull(v: np.ndarray) -> np.ndarray:  # Σ_{j≠i} Σ_ij v_j (cells not modelled carry 0)
        return np.where(live, schur_times(v) - diag * v, 0.0)

    mean = np.where(live, sd / _SQRT_2PI / safe, 0.0)
    shift = pull(mean)
    for _ in range(MEAN_FIELD_ITERATIONS):
        new = _lift_mean(shift, sd, safe, live)
        step = float(np.max(np.abs(new - mean), initial=0.0))
        mean = 0.5 * mean + 0.5 * new
        shift = pull(mean)
        if step <= MEAN_FIELD_TOLERANCE * max(float(mean.max(initial=0.0)), 1e-300):
            break
    mean = _lift_mean(shift, sd, safe, live)
    a = np.divide(shift, sd, out=np.zeros_like(shift), where=sd > 0)
    p = np.where(live & (sd > 0), ndtr(-a), 0.0)
    second = np.where(
        live, ((shift * shift + sd * sd) * p - shift * sd * _phi(a)) / (safe * safe), 0.0
    )
    return mean, np.maximum(second, mean * mean), p


def _lift_mean(shift: np.ndarray, sd: np.ndarray, diag: np.ndarray, live: np.ndarray) -> np.ndarray:
    """E max(0, r − h) / Σ_ii with r ~ N(0, sd²): (sd φ(h/sd) − h Φ(−h/sd)) / Σ_ii."""
    a = np.divide(shift, sd, out=np.zeros_like(shift), where=sd > 0)
    out = (sd * _phi(a) - shift * ndtr(-a)) / diag
    return np.where(live & (sd > 0), np.maximum(out, 0.0), 0.0)


def _phi(x: np.ndarray) -> np.ndarray:
    return np.exp(-0.5 * x * x) / _SQRT_2PI
