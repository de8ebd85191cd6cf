"""Exact error covariance of TopDown's least-squares stage, level by level (docs/science.md §7; TDA
§7.1–7.2).

Without the non-negativity constraint the least-squares estimate is linear in the noise. For a
family — a parent with estimate error D_p and n children measured with the same query matrices and
weights (one level's allocation) — pass k of TDA eq. 7.5 solves

    min Σ_c Σ_{q∈k} w_q ‖A_q x_c − m̃_{c,q}‖²   s.t.  Σ_c x_c = x̂_p,  B x_c = (held answers),

where B stacks the level's invariant queries and the queries of every earlier pass. With
S_k = (Σ_{q∈k} w_q A_qᵀA_q)⁺, the child's own estimate has error η_c^k with covariance
C_k = S_k (Σ_q w_q² v_q A_qᵀA_q) S_k (= S_k when the noise variance v_q is 1/w_q), and the
Lagrange conditions give (derivation in docs/prediction.md)

    d_c^(k) = (I − Π_k)(η_c^k − η̄^k + D_p/n) + Π_k d_c^(k−1),    Π_k = S_k Bᵀ(B S_k Bᵀ)⁺B,

with d_c^(0) = D_p/n. Unrolled, d_c = D_p/n + Σ_k L_k (η_c^k − η̄^k) with L_K = I − Π_K and
L_k = Π_K ⋯ Π_{k+1}(I − Π_k): the parent's error is shared equally and the children's own errors
are centred within the family. Siblings' own errors are independent, so

    Cov(d_c) = Cov(D_p)/n² + (1 − 1/n) K_level,    K_level = Σ_k L_k C_k L_kᵀ,

and the root (no parent, eq. 7.1) has Cov = K_root. K_level depends only on the level's
allocation, passes and invariants, so it is computed once per level in the block algebra of
:mod:`engine.prediction.algebra`; a node's covariance is Σ_j c_j K_j with scalar coefficients
c_j from the fan-outs on its path to the root (:func:`path_coefficients`).

The engine's passes (``engine/topdown/plan.py``, ``engine/topdown/qp/route.py``): one
pass of every query at the root and where the children are blocks; elsewhere TOTAL first, then
every other measured query, earlier answers held within τ̂ + 0.1 (we hold them exactly).
Invariant queries (TDA §5.2) are exact: they are constraints in every pass and contribute no
noise. A pass must determine the answers of every earlier pass
(passes of increasing detail, TDA §7.2) for the formula to be exact.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from engine.prediction.algebra import (
    CellAlgebra,
    Operator,
    add,
    matmul,
    oblique_projection,
    pinv_psd,
    scale,
    transpose,
)
from engine.schema.marginals import TOTAL


@dataclass(frozen=True)
class LevelDesign:
    """What one level's least squares sees: weights w_q = 1/σ_q² (the estimator's, TDA §7.1), the
    actual noise variances v_q, the invariant (exact) queries and the passes (query names)."""

    weight: Mapping[str, float]
    noise_variance: Mapping[str, float]
    invariants: tuple[str, ...]
    passes: tuple[tuple[str, ...], ...]


def engine_passes(
    measured: Sequence[str], *, single: bool, custom: Sequence[Sequence[str]] | None = None
) -> tuple[tuple[str, ...], ...]:
    """The engine's least-squares passes over the ``measured`` queries of a level.

    ``single``: one pass of every query (root and block level, TDA §8.1). Otherwise TOTAL alone,
    then the rest (production), or ``custom`` (the run's ``ls_passes``) restricted to ``measured``.
    Passes without a measured query are skipped, as the engine does.
    """
    if single:
        spec: Sequence[Sequence[str]] = [list(measured)]
    elif custom is not None:
        spec = custom
    else:
        spec = [[TOTAL] if TOTAL in measured else [], [q for q in measured if q != TOTAL]]
    out = tuple(tuple(q for q in p if q in measured) for p in spec)
    return tuple(p for p in out if p)


def level_covariance(algebra: CellAlgebra, design: LevelDesign) -> Operator:
    """K_level = Σ_k L_k C_k L_kᵀ of the module docstring (block by block)."""
    return level_covariance_parts(algebra, design)[0]


def level_covariance_parts(algebra: CellAlgebra, design: LevelDesign) -> tuple[Operator, Operator]:
    """K_level and its part from the passes before the last, Σ_{k<K} L_k C_k L_kᵀ: the error of
    the answers those passes fixed and the last pass holds (a TOTAL estimated alone first), which
    non-negativity cannot change (the held answers are published as estimated)."""
    held: list[str] = list(design.invariants)
    identity = algebra.identity()
    ls: list[Operator] = []  # L_k of the passes so far
    covs: list[Operator] = []  # C_k
    for pass_queries in design.passes:
        hess = add(
            algebra.zero(), *[scale(algebra.gram(q), design.weight[q]) for q in pass_queries]
        )
        s = pinv_psd(hess)
        noise = add(
            algebra.zero(),
            *[
                scale(algebra.gram(q), design.weight[q] ** 2 * design.noise_variance[q])
                for q in pass_queries
            ],
        )
        cov = matmul(s, noise, s)
        proj = oblique_projection(s, algebra.row_space(held)) if held else algebra.zero()
        ls = [matmul(proj, lk) for lk in ls]
        ls.append(add(identity, scale(proj, -1.0)))
        covs.append(cov)
        held.extend(pass_queries)
    out = algebra.zero()
    earlier = algebra.zero()
    for k, (lk, ck) in enumerate(zip(ls, covs, strict=True)):
        term = matmul(lk, ck, transpose(lk))
        out = add(out, term)
        if k + 1 < len(ls):
            earlier = add(earlier, term)
    return out, earlier


def path_coefficients(fanouts: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Per level, ``(n_nodes, depth+1)`` coefficients c_j with Cov(node) = Σ_j c_j K_j.

    ``fanouts[k]`` (k ≥ 1) holds, for each node of level k−1 in order, its number of children at
    level k (children of one parent are consecutive); ``fanouts[0]`` is ignored (one root).
    Root: c = [1]. Child of a parent with n children: c = [c_parent / n², 1 − 1/n].
    """
    coefs = [np.ones((1, 1))]
    for k in range(1, len(fanouts)):
        n = np.asarray(fanouts[k], dtype=np.int64)
        parent = coefs[-1]
        if n.size != parent.shape[0]:
            raise ValueError(f"level {k}: {n.size} fan-outs for {parent.shape[0]} parent geounits")
        kids = np.repeat(np.arange(n.size), n)
        nn = n[kids].astype(np.float64)
        coefs.append(np.column_stack([parent[kids] / nn[:, None] ** 2, 1.0 - 1.0 / nn]))
    return coefs
