"""The variance of a child's empty cell were it alone freed: what the non-negativity correction
clips it at (docs/prediction.md §2b; docs/science.md §7).

A child's cells of its parent's support P that the child does not populate are held at 0 by the
support model (:mod:`engine.prediction.support`). They are not errorless: noise lifts some of
them. Each is taken as freed alone, its least-squares variance the inverse of the Schur
complement of the child's information on its own cells, shared in the family as the dense formula
shares a cell; :mod:`engine.prediction.correction` clips it (water filling).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import scipy.linalg
import scipy.sparse

from engine.prediction.least_squares import LevelDesign


def freed_cell_variances(
    support: np.ndarray,
    child_supports: Sequence[np.ndarray],
    design: LevelDesign,
    answer_index: Mapping[str, np.ndarray],
    parent_diag: np.ndarray | None,
) -> list[np.ndarray]:
    """Per child, over the cells ``support`` (P), the least-squares variance of each cell of P
    outside the child's support were that cell alone freed, the child's other empty cells held
    at 0: 1 / (H_ii − H_iS H_S⁻¹ H_Si) with H = Σ_q w_q G_q,P over the level's measured queries
    (the Schur complement of the child's information), shared in the family as the dense
    formula shares a cell — (1 − 1/n)·that + Var(parent cell)/n². Cells of the child's support
    get 0."""
    return finish_freed_cells(
        freed_cell_parts(support, child_supports, design, answer_index),
        parent_diag,
        1.0,
        support.size,
    )


def freed_cell_parts(
    support: np.ndarray,
    child_supports: Sequence[np.ndarray],
    design: LevelDesign,
    answer_index: Mapping[str, np.ndarray],
) -> tuple[tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]], ...]:
    """What :func:`freed_cell_variances` computes before it uses the parent's variances: per
    child, its empty cells of P, their (1 − 1/n)·(freed-alone variance) and, per query of
    ``answer_index``, how much of those variances reaches each answer (:func:`_pinned`) — none
    of it depends on the parent, so an edit of the level above reuses it."""
    n = len(child_supports)
    hess = np.zeros((support.size, support.size))
    for q, w in design.weight.items():
        idx = answer_index[q][support]
        hess += w * (idx[:, None] == idx[None, :])
    diag = np.diag(hess)
    top = max(float(diag.max(initial=0.0)), 1e-300)
    # one result per support pattern (children of one pattern share it); patterns with as many
    # cells have as many empty ones (P is the family's): their Schur complements at once
    patterns: dict[bytes, np.ndarray] = {}
    for kid in child_supports:
        patterns.setdefault(kid.tobytes(), kid)
    schurs: dict[bytes, np.ndarray] = {}
    moves: dict[bytes, np.ndarray | None] = {}
    groups: dict[int, list[tuple[bytes, np.ndarray, np.ndarray]]] = {}
    empty_of: dict[bytes, np.ndarray] = {}
    for key, kid in patterns.items():
        at = np.minimum(np.searchsorted(support, kid), max(support.size - 1, 0))
        if support.size and np.array_equal(support[at], kid):  # a child's cells are its parent's
            inside = np.zeros(support.size, dtype=bool)
            inside[at] = True
        else:
            inside = np.isin(support, kid)
        zero, sc = np.flatnonzero(~inside), np.flatnonzero(inside)
        empty_of[key] = zero
        groups.setdefault(sc.size, []).append((key, zero, sc))
    for size, members in groups.items():
        zero = np.array([m[1] for m in members]).reshape(len(members), -1)
        sc = np.array([m[2] for m in members]).reshape(len(members), size)
        schur = diag[zero]
        if size and zero.shape[1]:
            h_ss = hess[sc[:, :, None], sc[:, None, :]]
            h_sz = hess[sc[:, :, None], zero[:, None, :]]
            try:
                # H_iS H_S⁻¹ H_Si = |L⁻¹ H_Si|² with H_S = L Lᵀ
                lower = np.linalg.cholesky(h_ss)
                half = np.stack(
                    [
                        scipy.linalg.solve_triangular(low, rhs, lower=True, check_finite=False)
                        for low, rhs in zip(lower, h_sz, strict=True)
                    ]
                )
                schur = schur - (half**2).sum(axis=1)
                # M = H_S⁻¹ H_SZ: how the populated cells move when an empty one is lifted
                move = np.stack(
                    [
                        scipy.linalg.solve_triangular(
                            low, rhs, trans="T", lower=True, check_finite=False
                        )
                        for low, rhs in zip(lower, half, strict=True)
                    ]
                )
            except np.linalg.LinAlgError:  # the level does not determine every cell
                schur = np.array(
                    [
                        diag[z]
                        - np.einsum(
                            "ij,ji->i",
                            hess[np.ix_(z, c)],
                            _solve_or_lstsq(hess[np.ix_(c, c)], hess[np.ix_(c, z)]),
                        )
                        for z, c in zip(zero, sc, strict=True)
                    ]
                ).reshape(zero.shape)
                move = None
        else:
            move = None
        for m, ((key, _, _), row) in enumerate(zip(members, schur, strict=True)):
            schurs[key] = row
            moves[key] = None if move is None else move[m]
    out = []
    done: dict[bytes, tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]] = {}
    for kid in child_supports:
        key = kid.tobytes()
        if key not in done:
            zero = empty_of[key]
            value = np.zeros(zero.size)
            if zero.size and n > 1:
                schur = schurs[key]
                own = np.where(schur > 1e-9 * top, 1.0 / np.maximum(schur, 1e-300), np.inf)
                value = (1.0 - 1.0 / n) * own
            inside = np.setdiff1d(np.arange(support.size), zero, assume_unique=True)
            pins = _pinned(support, inside, zero, value, moves.get(key), answer_index)
            done[key] = (zero, value, pins)
        out.append(done[key])
    return tuple(out)


def _pinned(
    support: np.ndarray,
    inside: np.ndarray,
    zero: np.ndarray,
    value: np.ndarray,
    move: np.ndarray | None,
    answer_index: Mapping[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """Per query, per answer: Σ_i T_ai² v_i over the child's empty cells i of P (v_i: their
    freed variance), with T_ai = 1[i ∈ a] − Σ_{j populated, j ∈ a} M_ji the share of a lift of
    cell i that stays in answer a once the populated cells re-adjust (M = H_S⁻¹ H_SZ): a lift
    in an answer its own measurements pin is taken back from the answer's populated cells, one
    whose answer holds no populated cell stays, and what is taken back from other answers
    moves them. Without ``move`` (a level that does not determine every cell) T is the
    indicator."""
    finite = np.where(np.isfinite(value), value, 0.0)
    out = {}
    for q, index in answer_index.items():
        size = int(index.max()) + 1
        idx = index[support]
        answers, compact = np.unique(idx, return_inverse=True)
        shares = np.zeros((answers.size, zero.size))
        shares[compact[zero], np.arange(zero.size)] = 1.0
        if move is not None and inside.size:
            rows = scipy.sparse.csr_matrix(
                (np.ones(inside.size), (compact[inside], np.arange(inside.size))),
                shape=(answers.size, inside.size),
            )
            shares -= rows @ move
        weights = np.zeros(size)
        weights[answers] = (shares**2) @ finite
        out[q] = weights
    return out


def finish_freed_cells(
    parts: Sequence[tuple[np.ndarray, np.ndarray]],
    parent_diag: np.ndarray | None,
    scale: float,
    size: int,
) -> list[np.ndarray]:
    """:func:`freed_cell_variances` over P (``size`` cells) from :func:`freed_cell_parts` of
    the design with every weight divided by ``scale`` (the freed variances scale by
    1/``scale``) and the parent's variances ``parent_diag``."""
    n = len(parts)
    out = []
    for zero, value, _ in parts:
        free = np.zeros(size)
        if zero.size:
            term = value if scale == 1.0 else value / scale
            if parent_diag is not None:
                term = term + parent_diag[zero] / (n * n)
            free[zero] = term
        out.append(free)
    return out


def _solve_or_lstsq(matrix: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """matrix⁻¹ rhs for a positive definite matrix, by least squares where it is singular."""
    try:
        return scipy.linalg.solve(matrix, rhs, assume_a="pos", check_finite=False)
    except np.linalg.LinAlgError:
        return scipy.linalg.lstsq(matrix, rhs, check_finite=False)[0]
