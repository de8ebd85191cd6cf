"""Least-squares error covariance on the cells a family can populate (SPEC §7; TDA §7.1–7.2).

The engine builds each family's least squares only on the cells the parent can populate: a cell
that is 0 in the parent's estimate (or a structural zero) has no variable in any child
(``engine/topdown/qp/general._fixed_cells``), and the non-negativity constraint holds most of a
child's own empty cells at 0 too (they are the active set). Those zero cells act like structural
zeros, so the marginals are re-estimated from far fewer cells than the dense (all-cells) model of
:mod:`engine.prediction.least_squares` says: on the 2,016-cell production schema a generated
county of 30,000 persons populates 188 cells, a tract 46, a block 4.

:func:`child_support_covariances` derives, exactly and for one family, the least-squares error
covariance of every child on its own non-zero cells S_c (the others held at 0), with children
summing to the parent on its non-zero cells P and the engine's passes (earlier answers held,
invariants exact); :func:`family_covariances` walks the spine root first — the root on its own
non-zero cells — feeding each parent's covariance to its children, on a sample of families per
level and their ancestors. Which cells are non-zero comes from the count profile (the true counts:
the published parent is 0 where its count is 0 unless noise lifts it, and a small count can be
clipped; docs/prediction.md). A child's empty cells of P are not errorless: the non-negativity
correction (:mod:`engine.prediction.correction`) clips each at the variance it would have if
it alone were freed (:func:`freed_cell_variances`).

Dense linear algebra of the size of a family's non-zero cells (a few hundred) per family; a new
total ρ with the same shares reuses the cached result, and an edit of one level's shares
recomputes only that level and those below it (:class:`SupportCache`);
:func:`engine.core.blas_threads.one_blas_thread` keeps BLAS to one thread for these small matrices.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.linalg

from engine.prediction.least_squares import LevelDesign
from engine.schema.marginals import cell_index, parse_marginal


@dataclass(frozen=True, eq=False)
class SupportAlgebra:
    """Answer cells of the queries on the cells ``support`` of a schema."""

    support: np.ndarray
    answer_index: Mapping[str, np.ndarray]
    """Per query, the answer cell of every schema cell (:func:`engine.schema.marginals.cell_index`)."""
    _stacked: dict[tuple[tuple[str, int], ...], tuple[np.ndarray, np.ndarray]] = field(
        default_factory=dict, repr=False
    )

    def index(self, query: str) -> np.ndarray:
        """Answer cell of every support cell for ``query``."""
        return self.answer_index[query][self.support]

    def answer_variances(self, cov: np.ndarray, query: str, size: int) -> np.ndarray:
        """Var of every answer cell of ``query`` (``size`` answer cells; 0 where no support cell
        is counted) for an error with covariance ``cov`` on the support: diag(A_q,P C A_q,Pᵀ)."""
        idx = self.index(query)
        out = np.zeros(size)
        if idx.size == 0:
            return out
        order = np.argsort(idx, kind="stable")
        sorted_idx = idx[order]
        starts = np.flatnonzero(np.r_[True, sorted_idx[1:] != sorted_idx[:-1]])
        c = cov[np.ix_(order, order)]
        rows = np.add.reduceat(c, starts, axis=0)
        block = np.add.reduceat(rows, starts, axis=1)
        out[sorted_idx[starts]] = np.diag(block)
        return out

    def stacked_index(self, sizes: Mapping[str, int]) -> tuple[np.ndarray, np.ndarray]:
        """For the queries ``sizes`` (query → answer cells), ``(Q, |support|)`` answer cells of
        every support cell, offset so that the queries' answers are numbered consecutively,
        and the offsets (Q + 1). Depends only on the support: computed once per algebra."""
        key = tuple(sizes.items())
        cached = self._stacked.get(key)
        if cached is None:
            offsets = np.concatenate([[0], np.cumsum([int(v) for v in sizes.values()])])
            rows = [self.index(q) + offsets[i] for i, q in enumerate(sizes)]
            flat = np.array(rows, dtype=np.int64).reshape(len(rows), self.support.size)
            cached = (flat, offsets.astype(np.int64))
            self._stacked[key] = cached
        return cached

    def stacked_answer_variances(
        self, cov: np.ndarray, sizes: Mapping[str, int]
    ) -> dict[str, np.ndarray]:
        """:meth:`answer_variances` of every query of ``sizes`` at once: Var of answer a is
        Σ_{i,j: idx_i = idx_j = a} C_ij, the sum over cells i of r_i = Σ_{j: idx_j = idx_i} C_ij
        (one masked product for all queries and one bincount)."""
        flat, offsets = self.stacked_index(sizes)
        if self.support.size == 0:
            return {q: np.zeros(int(v)) for q, v in sizes.items()}
        same = flat[:, :, None] == flat[:, None, :]
        r = np.einsum("qij,ij->qi", same, cov)
        total = np.bincount(flat.ravel(), weights=r.ravel(), minlength=int(offsets[-1]))
        return {q: total[offsets[i] : offsets[i + 1]] for i, q in enumerate(sizes)}


def answer_indices(
    attributes: Sequence[tuple[str, Sequence[str]]], queries: Sequence[str]
) -> dict[str, np.ndarray]:
    """Per query, the answer cell of every schema cell."""
    return {q: cell_index(parse_marginal(q, attributes), attributes) for q in queries}


PREPARED_CACHE_BYTES = 256 * 2**20
"""Memory the support cache keeps for :class:`PreparedFamily` entries (cleared when full): an
edit of a level's shares reuses those of every level below it."""


@dataclass
class SupportCache:
    """Budget-independent structure of one profile (answer indices, per-support algebras) and the
    last few :func:`family_covariances` results, keyed by the designs up to one common scale."""

    answer_index: dict[str, np.ndarray]
    algebras: dict[bytes, SupportAlgebra] = field(default_factory=dict)
    families: dict[tuple[object, ...], list[dict[int, FamilyCovariance]]] = field(
        default_factory=dict
    )
    derived: dict[tuple[object, ...], Any] = field(default_factory=dict)
    levels: dict[tuple[object, ...], dict[int, FamilyCovariance]] = field(default_factory=dict)
    """Per :meth:`level_keys` key, one level's families normalised by that level's t_k."""
    prepared: dict[tuple[object, ...], Any] = field(default_factory=dict)
    """Per family (design up to scale, supports), what its covariances and freed-cell variances
    need besides the parent's covariance (:func:`prepare_child_covariances`,
    :func:`freed_cell_parts`), at most PREPARED_CACHE_BYTES."""
    prepared_bytes: int = 0

    def algebra(self, support: np.ndarray) -> SupportAlgebra:
        key = support.tobytes()
        if key not in self.algebras:
            self.algebras[key] = SupportAlgebra(support, self.answer_index)
        return self.algebras[key]

    def level_keys(
        self, designs: Sequence[LevelDesign], families: Sequence[np.ndarray]
    ) -> list[tuple[tuple[object, ...], float]]:
        """Per level k, the identity of what its families' covariances depend on — the designs
        of levels 0..k up to one common scale t_k (their largest weight) and the sampled
        families — and t_k. An edit of one level's shares leaves every level above it with the
        same key, so their covariances are reused (:meth:`family_covariances`)."""
        sampled = tuple(f.tobytes() for f in families)
        out = []
        for k in range(len(designs)):
            t_k = max((float(w) for d in designs[: k + 1] for w in d.weight.values()), default=1.0)
            t_k = t_k or 1.0
            key = tuple(_rounded(_scaled(d, t_k)) for d in designs[: k + 1])
            out.append(((key, sampled), t_k))
        return out

    def family_covariances(
        self,
        counts: Sequence[np.ndarray],
        fanouts: Sequence[np.ndarray],
        designs: Sequence[LevelDesign],
        families: Sequence[np.ndarray],
    ) -> tuple[tuple[object, ...], float, list[dict[int, FamilyCovariance]]]:
        """:func:`family_covariances` of the designs divided by one common scale t (the largest
        weight of any level), cached: every variance of the designs is the result's divided by
        t, so a new total ρ with the same shares reuses it. Each level is also cached on its own
        (:meth:`level_keys`, normalised by its t_k and rescaled by t / t_k): after an edit of one
        level's shares only that level and those below it are recomputed. Returns (key, t,
        result)."""
        t = max((float(w) for d in designs for w in d.weight.values()), default=1.0) or 1.0
        normalised = [_scaled(d, t) for d in designs]
        key = (
            tuple(_rounded(d) for d in normalised),
            tuple(f.tobytes() for f in families),
        )
        if key not in self.families:
            if len(self.families) >= 8:
                self.families.clear()
            if len(self.levels) >= 8 * max(len(designs), 1):
                self.levels.clear()
                self.derived.clear()
            keys = self.level_keys(designs, families)
            known = [
                _rescaled(self.levels[lk], t / t_k) if lk in self.levels else None
                for lk, t_k in keys
            ]
            result = family_covariances(counts, fanouts, normalised, families, self, known)
            for (lk, t_k), level in zip(keys, result, strict=True):
                if lk not in self.levels:
                    self.levels[lk] = _rescaled(level, t_k / t)
            self.families[key] = result
        return key, t, self.families[key]

    def derived_value(self, key: tuple[object, ...], compute: Any) -> Any:
        """A value derived from a cached :meth:`family_covariances` result (computed once)."""
        if key not in self.derived:
            self.derived[key] = compute()
        return self.derived[key]

    def freed_cell_variances(
        self,
        support: np.ndarray,
        child_supports: Sequence[np.ndarray],
        design: LevelDesign,
        parent_diag: np.ndarray | None,
    ) -> list[np.ndarray]:
        """:func:`freed_cell_variances`, its parent-independent part (:func:`freed_cell_parts`
        of the normalised design) cached per design and supports with :attr:`prepared`."""
        key, normalised, t = design_key(design)
        parts_key = (
            "freed",
            key,
            support.tobytes(),
            tuple(c.tobytes() for c in child_supports),
        )
        parts = self.prepared.get(parts_key)
        if parts is None:
            parts = freed_cell_parts(support, child_supports, normalised, self.answer_index)
            self._keep(parts_key, parts, sum(z.nbytes + v.nbytes for z, v in parts))
        return finish_freed_cells(parts, parent_diag, t, support.size)

    def _keep(self, key: tuple[object, ...], value: Any, size: int) -> None:
        """Keep ``value`` in :attr:`prepared` within PREPARED_CACHE_BYTES (cleared when full)."""
        if size > PREPARED_CACHE_BYTES:
            return
        if self.prepared_bytes + size > PREPARED_CACHE_BYTES:
            self.prepared.clear()
            self.prepared_bytes = 0
        self.prepared[key] = value
        self.prepared_bytes += size

    def child_covariances(
        self,
        design: LevelDesign,
        supports: Sequence[np.ndarray],
        parent_support: np.ndarray | None,
        parent_cov: np.ndarray | None,
    ) -> list[np.ndarray]:
        """:func:`child_support_covariances` of the normalised design, rescaled (the parent's
        covariance is scaled by the same t, so the result is exactly the design's)."""
        key, normalised, t = design_key(design)
        prepared_key = (
            key,
            None if parent_support is None else parent_support.tobytes(),
            tuple(s.tobytes() for s in supports),
            parent_cov is not None,
        )
        prepared = self.prepared.get(prepared_key)
        if prepared is None:
            prepared = prepare_child_covariances(
                supports, parent_support, parent_cov is not None, normalised, self.answer_index
            )
            self._keep(prepared_key, prepared, prepared.nbytes)
        covs = prepared.finish(None if parent_cov is None else parent_cov * t)
        return [c / t for c in covs]


def _scaled(design: LevelDesign, t: float) -> LevelDesign:
    """The design with every weight divided by t and every noise variance multiplied by it."""
    return LevelDesign(
        {q: float(w) / t for q, w in design.weight.items()},
        {q: float(v) * t for q, v in design.noise_variance.items()},
        design.invariants,
        design.passes,
    )


def _rescaled(level: dict[int, FamilyCovariance], factor: float) -> dict[int, FamilyCovariance]:
    """One level's families with every covariance and freed-cell variance times ``factor``
    (the same level under another common scale; unchanged when the factor is 1)."""
    if factor == 1.0:
        return level
    return {
        f: FamilyCovariance(
            fc.family,
            fc.support,
            fc.child_supports,
            tuple(c * factor for c in fc.child_covs),
            tuple(v * factor for v in fc.child_free),
        )
        for f, fc in level.items()
    }


def _rounded(design: LevelDesign) -> tuple[object, ...]:
    """A hashable identity of a design (weights and variances to 9 significant digits)."""
    return (
        tuple(sorted((q, float(f"{w:.9g}")) for q, w in design.weight.items())),
        tuple(sorted((q, float(f"{v:.9g}")) for q, v in design.noise_variance.items())),
        tuple(design.invariants),
        tuple(tuple(p) for p in design.passes),
    )


def design_key(design: LevelDesign) -> tuple[tuple[object, ...], LevelDesign, float]:
    """A hashable identity of a level design up to scale, the normalised design and the scale t.

    With every weight w_q divided by t = max w_q and every noise variance v_q multiplied by it,
    the least-squares operators scale by t and the projections are unchanged, so every error
    covariance of the design is that of the normalised design divided by t.
    """
    t = max((float(w) for w in design.weight.values()), default=1.0) or 1.0
    weight = {q: float(w) / t for q, w in design.weight.items()}
    variance = {q: float(v) * t for q, v in design.noise_variance.items()}
    normalised = LevelDesign(weight, variance, design.invariants, design.passes)
    return _rounded(normalised), normalised, t


@dataclass(frozen=True)
class FamilyCovariance:
    """One family (children of unit ``family`` of the level above; the root is family 0 of
    level 0). ``support``: the parent's non-zero cells P. Per child: its non-zero cells, its
    least-squares covariance there with its other cells held at 0
    (:func:`child_support_covariances`), and over P the variance of each of its empty cells were
    that cell alone freed (:func:`freed_cell_variances`; the non-negativity correction clips it)."""

    family: int
    support: np.ndarray
    child_supports: tuple[np.ndarray, ...]
    child_covs: tuple[np.ndarray, ...]
    child_free: tuple[np.ndarray, ...]


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
) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """What :func:`freed_cell_variances` computes before it uses the parent's variances: per
    child, its empty cells of P and their (1 − 1/n)·(freed-alone variance) (none of it depends
    on the parent, so an edit of the level above reuses it)."""
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
                schur = schur - (np.linalg.solve(lower, h_sz) ** 2).sum(axis=1)
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
        for (key, _, _), row in zip(members, schur, strict=True):
            schurs[key] = row
    out = []
    done: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
    for kid in child_supports:
        key = kid.tobytes()
        if key not in done:
            zero = empty_of[key]
            value = np.zeros(zero.size)
            if zero.size and n > 1:
                schur = schurs[key]
                own = np.where(schur > 1e-9 * top, 1.0 / np.maximum(schur, 1e-300), np.inf)
                value = (1.0 - 1.0 / n) * own
            done[key] = (zero, value)
        out.append(done[key])
    return tuple(out)


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
    for zero, value in parts:
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


def family_covariances(
    counts: Sequence[np.ndarray],
    fanouts: Sequence[np.ndarray],
    designs: Sequence[LevelDesign],
    families: Sequence[np.ndarray],
    cache: SupportCache,
    known: Sequence[dict[int, FamilyCovariance] | None] | None = None,
) -> list[dict[int, FamilyCovariance]]:
    """Per level k, the :class:`FamilyCovariance` of the families ``families[k]`` (units of
    level k−1) and of every ancestor family they need; level 0 holds the root as family 0.
    ``known[k]``: level k already computed for these designs and families (a prefix of the
    levels; reused as is)."""
    n_levels = len(fanouts)
    parent_of: list[np.ndarray] = [np.zeros(1, dtype=np.int64)]
    starts: list[np.ndarray] = [np.zeros(1, dtype=np.int64)]
    for k in range(1, n_levels):
        parent_of.append(np.repeat(np.arange(fanouts[k].size), fanouts[k]))
        starts.append(np.concatenate([[0], np.cumsum(fanouts[k])[:-1]]).astype(np.int64))
    needed: list[set[int]] = [set() for _ in range(n_levels)]
    needed[0].add(0)
    for k in range(n_levels - 1, 0, -1):
        needed[k] |= {int(f) for f in families[k]}
        if k > 1:
            needed[k - 1] |= {int(parent_of[k - 1][f]) for f in needed[k]}
    out: list[dict[int, FamilyCovariance]] = [{} for _ in range(n_levels)]
    have = list(known) if known is not None else [None] * n_levels
    if have[0] is not None:
        out[0] = have[0]
    else:
        root_support = np.flatnonzero(counts[0][0] > 0)
        root = cache.child_covariances(designs[0], (root_support,), None, None)
        out[0][0] = FamilyCovariance(
            0, root_support, (root_support,), tuple(root), (np.zeros(root_support.size),)
        )
    for k in range(1, n_levels):
        level = have[k]
        if level is not None and needed[k] <= level.keys():
            out[k] = level
            continue
        for f in sorted(needed[k]):
            if k == 1:
                above, slot = out[0][0], 0
            else:
                g = int(parent_of[k - 1][f])
                above, slot = out[k - 1][g], f - int(starts[k - 1][g])
            support = above.child_supports[slot]
            parent_cov = above.child_covs[slot]
            n = int(fanouts[k][f])
            first = int(starts[k][f])
            kids = tuple(np.flatnonzero(counts[k][first + i] > 0) for i in range(n))
            child_covs = cache.child_covariances(designs[k], kids, support, parent_cov)
            free = tuple(cache.freed_cell_variances(support, kids, designs[k], np.diag(parent_cov)))
            out[k][f] = FamilyCovariance(f, support, kids, tuple(child_covs), free)
    return out


def _child_query_rows(
    supports: Sequence[np.ndarray], index: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of kron-like block-diagonal A_q over the family's variables: for every variable its
    row (child-local answer cell, numbered across children) and the number of rows."""
    rows = []
    offset = 0
    for s in supports:
        _, inverse = np.unique(index[s], return_inverse=True)
        rows.append(inverse + offset)
        offset += int(inverse.max(initial=-1)) + 1
    return (np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)), np.int64(offset)


def _indicator(rows: np.ndarray, n_rows: int) -> np.ndarray:
    out = np.zeros((int(n_rows), rows.size))
    out[rows, np.arange(rows.size)] = 1.0
    return out


def child_support_covariances(
    supports: Sequence[np.ndarray],
    parent_support: np.ndarray | None,
    parent_cov: np.ndarray | None,
    design: LevelDesign,
    answer_index: Mapping[str, np.ndarray],
) -> list[np.ndarray]:
    """Exact least-squares error covariance of every child of one family on its own support.

    The engine's non-negative least squares leaves the cells a child does not populate at (or
    near) 0: taking them as exact zeros (the active set of the non-negativity constraint), pass k
    of the family is the equality-constrained least squares over the variables (child c, cell
    i ∈ S_c) with Hessian H_k = ⊕_c Σ_{q∈k} w_q G_q,S_c, children summing to the parent on
    ``parent_support`` (error D_p, covariance ``parent_cov``; none at the root), invariant queries
    exact and earlier passes' answers held (rows E, right-hand side errors r). Its error is
    e = F g + R r with g = Σ_q w_q A_qᵀν_q (covariance Σ_q w_q² v_q G_q), F = H⁻¹ − H⁻¹EᵀW⁺EH⁻¹,
    R = H⁻¹EᵀW⁺ and W = EH⁻¹Eᵀ (H block-diagonal by child). A TOTAL-only pass has the closed form
    t_c = ν_c − ν̄ + 1ᵀD_p/n of its answers (the engine's water filling without the bound). A pass
    whose Hessian is singular otherwise is solved from the full KKT system (pseudo-inverse).
    Errors are tracked as linear maps of the independent sources (each pass's noise, D_p).
    Returns, per child, the covariance on its support."""
    prepared = prepare_child_covariances(
        supports, parent_support, parent_cov is not None, design, answer_index
    )
    return prepared.finish(parent_cov)


@dataclass(frozen=True)
class PreparedFamily:
    """What :func:`child_support_covariances` computes before it uses the parent's covariance
    (the maps of every error source depend only on the family's supports and design; the
    parent's covariance enters only as the covariance of one source, D_p): an edit of a level's
    shares changes its children's parent covariances, not these, so
    :meth:`SupportCache.child_covariances` keeps them and :meth:`finish` gives the same
    numbers as the whole computation."""

    kind: str
    """"empty" (no variables), "copy" (an only child on its parent's cells), "last" (the
    last pass's blocks, :func:`_last_pass_blocks`) or "general" (:func:`_child_blocks`)."""
    n_children: int
    spans: tuple[tuple[int, int], ...] = ()
    inv_blocks: tuple[np.ndarray, ...] = ()
    e_blocks: tuple[np.ndarray, ...] = ()
    touched: tuple[np.ndarray, ...] = ()
    w_plus: np.ndarray | None = None
    terms: tuple[tuple[str, np.ndarray | None], ...] = ()
    """"last": per source, in order, Z_s C_s Z_sᵀ (None for the parent: Z_p, below)."""
    parent_map: np.ndarray | None = None
    maps: Mapping[str, np.ndarray] = field(default_factory=dict)
    source_cov: Mapping[str, np.ndarray] = field(default_factory=dict)
    source_blocks: Mapping[str, Sequence[np.ndarray]] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        arrays = [*self.inv_blocks, *self.e_blocks, *self.touched, *self.maps.values()]
        arrays += [a for _, a in self.terms if a is not None]
        arrays += [a for a in (self.w_plus, self.parent_map) if a is not None]
        return int(sum(a.nbytes for a in arrays))

    def finish(self, parent_cov: np.ndarray | None) -> list[np.ndarray]:
        """Per child, the covariance on its support given the parent's ``parent_cov``."""
        if self.kind == "empty":
            return [np.zeros((0, 0)) for _ in range(self.n_children)]
        if self.kind == "copy":
            assert parent_cov is not None
            return [np.array(parent_cov, dtype=np.float64)]
        if self.kind == "general":
            source_cov = dict(self.source_cov)
            if "parent" in self.maps:
                assert parent_cov is not None
                source_cov["parent"] = parent_cov
            return _child_blocks(self.maps, source_cov, self.source_blocks, self.spans, None)
        assert self.w_plus is not None
        middle = -self.w_plus
        for _, term in self.terms:
            if term is None:
                assert parent_cov is not None and self.parent_map is not None
                z = self.parent_map
                term = (z @ parent_cov) @ z.T
            middle = middle + term
        return [
            blk + e_c.T @ middle[np.ix_(rows_c, rows_c)] @ e_c
            for blk, e_c, rows_c in zip(self.inv_blocks, self.e_blocks, self.touched, strict=True)
        ]


def prepare_child_covariances(
    supports: Sequence[np.ndarray],
    parent_support: np.ndarray | None,
    has_parent_cov: bool,
    design: LevelDesign,
    answer_index: Mapping[str, np.ndarray],
) -> PreparedFamily:
    """Everything of :func:`child_support_covariances` that does not use the parent's
    covariance (only whether there is one)."""
    sizes = [int(x.size) for x in supports]
    n = int(sum(sizes))
    if n == 0:
        return PreparedFamily("empty", len(supports))
    if (
        len(supports) == 1
        and parent_support is not None
        and has_parent_cov
        and np.array_equal(supports[0], parent_support)
    ):
        # an only child populating its parent's cells: summing to the parent fixes every one
        # of its variables, whatever the passes — it copies the parent, error and all
        return PreparedFamily("copy", 1)
    cells = np.concatenate(supports)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    rows_cache: dict[str, np.ndarray] = {}

    def rows(q: str) -> np.ndarray:
        """A_q over the family's variables (child-local answer rows, answers no cell hits left
        out)."""
        if q not in rows_cache:
            local, n_rows = _child_query_rows(supports, answer_index[q])
            rows_cache[q] = _indicator(local, n_rows)
        return rows_cache[q]

    spans = list(zip(bounds[:-1], bounds[1:], strict=True))

    def gram_blocks(q: str) -> list[np.ndarray]:
        """G_q,S_c of every child (the Hessian is block-diagonal by child)."""
        idx = answer_index[q][cells]
        return [(idx[a:b, None] == idx[None, a:b]).astype(np.float64) for a, b in spans]

    parent_rows = None
    if parent_support is not None:
        parent_rows = np.zeros((parent_support.size, n))
        parent_rows[np.searchsorted(parent_support, cells), np.arange(n)] = 1.0
    source_cov: dict[str, np.ndarray] = {}
    source_blocks: dict[str, list[np.ndarray]] = {}  # block-diagonal sources (a pass's noise)
    has_parent = parent_rows is not None and has_parent_cov
    # per earlier pass: the held queries' answer rows and their error maps (source -> matrix)
    held: list[tuple[np.ndarray, dict[str, np.ndarray]]] = []
    final: dict[str, np.ndarray] = {}
    for k, queries in enumerate(design.passes):
        name = f"pass{k}"
        if tuple(queries) == ("TOTAL",) and "TOTAL" not in design.invariants:
            total_rows = rows("TOTAL")
            keep = total_rows.sum(axis=1) > 0  # children with a non-empty support
            m = int(keep.sum())
            centre = np.eye(m) - np.full((m, m), 1.0 / max(m, 1))
            maps = {name: centre}
            source_cov[name] = np.eye(m) * design.noise_variance["TOTAL"]
            if has_parent and parent_rows is not None:
                maps["parent"] = np.full((m, parent_rows.shape[0]), 1.0 / max(m, 1))
            if parent_rows is not None and m > 1:
                # Σ_c t_c is the parent's total, which the parent rows hold already: drop one
                # child's row so the constraints stay independent (same solution)
                kept_rows = np.flatnonzero(keep)[:-1]
                maps = {s: mat[:-1] for s, mat in maps.items()}
                held.append((total_rows[kept_rows], maps))
                final = {}
                continue
            held.append((total_rows[keep], maps))
            final = {}
            continue
        hess_blocks = [np.zeros((b - a, b - a)) for a, b in spans]
        noise_blocks = [np.zeros((b - a, b - a)) for a, b in spans]
        for q in queries:
            w, v = design.weight[q], design.noise_variance[q]
            for i, g in enumerate(gram_blocks(q)):
                hess_blocks[i] += w * g
                noise_blocks[i] += w * w * v * g
        blocks: list[np.ndarray] = []
        rhs: list[dict[str, np.ndarray]] = []
        if parent_rows is not None:
            blocks.append(parent_rows)
            # the parent's rows carry its error as is (None: the identity map)
            rhs.append({"parent": None} if has_parent else {})
        for q in design.invariants:
            blocks.append(rows(q))
            rhs.append({})
        for held_rows, held_maps in held:
            blocks.append(held_rows)
            rhs.append(held_maps)
        cons = np.vstack(blocks) if blocks else np.zeros((0, n))
        inv_blocks = _block_inverses(hess_blocks)
        last = k + 1 == len(design.passes)
        # The noise of the pass has covariance H − Δ with Δ = Σ_q (w_q − w_q² v_q) G_q (0 when
        # v_q = 1/w_q, as for the Gaussian; the discrete Gaussian's variance is smaller by
        # ~e^(−2π²σ²)). F H Fᵀ = F for the constrained inverse F, so in the last pass only F's
        # diagonal blocks are needed when Δ is negligible.
        excess = max(
            (
                abs(design.weight[q] - design.weight[q] ** 2 * design.noise_variance[q])
                / design.weight[q]
                for q in queries
            ),
            default=0.0,
        )
        if inv_blocks is not None and last and excess < 1e-10:
            return _last_pass_blocks(
                cons, inv_blocks, spans, blocks, rhs, source_cov, source_blocks
            )
        if inv_blocks is not None:
            inv = np.zeros((n, n))
            e_hinv = np.zeros_like(cons)
            for (a, b), blk in zip(spans, inv_blocks, strict=True):
                inv[a:b, a:b] = blk
                e_hinv[:, a:b] = cons[:, a:b] @ blk
            w_plus = _psd_inverse(e_hinv @ cons.T)
            r = e_hinv.T @ w_plus
            f = inv - r @ e_hinv
        else:
            size = cons.shape[0]
            hess = scipy.linalg.block_diag(*hess_blocks)
            kkt = np.block([[hess, cons.T], [cons, np.zeros((size, size))]])
            solve = scipy.linalg.pinvh(kkt)[:n]
            f, r = solve[:, :n], solve[:, n:]
        source_blocks[name] = noise_blocks
        maps = _add_source_maps({name: f}, r, blocks, rhs)
        if k + 1 < len(design.passes):  # held by the later passes
            pass_rows = np.vstack([rows(q) for q in queries])
            held.append((pass_rows, {src: pass_rows @ mat for src, mat in maps.items()}))
        final = maps
    return PreparedFamily(
        "general",
        len(supports),
        spans=tuple((int(a), int(b)) for a, b in spans),
        maps=final,
        source_cov=source_cov,
        source_blocks=source_blocks,
    )


def _add_source_maps(
    maps: dict[str, np.ndarray],
    r: np.ndarray,
    blocks: Sequence[np.ndarray],
    rhs: Sequence[Mapping[str, np.ndarray | None]],
) -> dict[str, np.ndarray]:
    """Add to ``maps`` each noise source's contribution through the constraint rows: the columns
    of ``r`` that belong to each block of held rows times that block's map from the source
    (``None``: the identity)."""
    at = 0
    for block, rh in zip(blocks, rhs, strict=True):
        part = r[:, at : at + block.shape[0]]
        for src, mat in rh.items():
            term = part if mat is None else part @ mat
            maps[src] = maps[src] + term if src in maps else term
        at += block.shape[0]
    return maps


def _last_pass_blocks(
    cons: np.ndarray,
    inv_blocks: Sequence[np.ndarray],
    spans: Sequence[tuple[int, int]],
    blocks: Sequence[np.ndarray],
    rhs: Sequence[Mapping[str, np.ndarray | None]],
    source_cov: Mapping[str, np.ndarray],
    source_blocks: Mapping[str, Sequence[np.ndarray]],
) -> PreparedFamily:
    """Per child, the covariance after the last pass when its noise has covariance H (F H Fᵀ =
    F): with E_c the constraint rows child c enters (``cons`` is 0/1: a child's cells meet its
    parent cells, its own held answers and the invariants only) and e_c = E_c H_c⁻¹,

        W = Σ_c E_c H_c⁻¹ E_cᵀ,   R_c = e_cᵀ W⁺ (rows of R = H⁻¹EᵀW⁺),
        Cov_c = H_c⁻¹ − e_cᵀ W⁺ e_c + Σ_s e_cᵀ (Z_s C_s Z_sᵀ) e_c,

    where Z_s = Σ_blocks W⁺[:, block] M_block,s maps source s (covariance C_s) through the
    held right-hand sides. The same numbers as forming R and every source's full map
    (:func:`_add_source_maps`, :func:`_child_blocks`), in the products of the constraint rows a
    child meets: the cost no longer grows with (children × all constraint rows)."""
    m = cons.shape[0]
    touched = []
    e_blocks = []
    w = np.zeros((m, m))
    for (a, b), blk in zip(spans, inv_blocks, strict=True):
        rows_c = np.flatnonzero(np.any(cons[:, a:b] != 0, axis=1))
        e_c = cons[rows_c, a:b] @ blk
        w[np.ix_(rows_c, rows_c)] += e_c @ cons[rows_c, a:b].T
        touched.append(rows_c)
        e_blocks.append(e_c)
    w_plus = _psd_inverse(w)
    maps = _add_source_maps({}, w_plus, blocks, rhs)
    terms: list[tuple[str, np.ndarray | None]] = []
    parent_map = None
    for src, z in maps.items():
        if src == "parent":  # the parent's covariance: PreparedFamily.finish
            terms.append((src, None))
            parent_map = z
            continue
        left = _times_source_cov(z, src, spans, source_cov, source_blocks)
        terms.append((src, left @ z.T))
    return PreparedFamily(
        "last",
        len(inv_blocks),
        spans=tuple((int(a), int(b)) for a, b in spans),
        inv_blocks=tuple(inv_blocks),
        e_blocks=tuple(e_blocks),
        touched=tuple(touched),
        w_plus=w_plus,
        terms=tuple(terms),
        parent_map=parent_map,
    )


def _times_source_cov(
    z: np.ndarray,
    src: str,
    spans: Sequence[tuple[int, int]],
    source_cov: Mapping[str, np.ndarray],
    source_blocks: Mapping[str, Sequence[np.ndarray]],
) -> np.ndarray:
    """``z`` times source ``src``'s covariance: block by block over ``spans`` when the source is
    block diagonal (``source_blocks``), else one product with ``source_cov[src]``."""
    if src not in source_blocks:
        return z @ source_cov[src]
    left = np.empty_like(z)
    for (a, b), blk in zip(spans, source_blocks[src], strict=True):
        left[:, a:b] = z[:, a:b] @ blk
    return left


def _child_blocks(
    maps: Mapping[str, np.ndarray],
    source_cov: Mapping[str, np.ndarray],
    source_blocks: Mapping[str, Sequence[np.ndarray]],
    spans: Sequence[tuple[int, int]],
    diagonal: Sequence[np.ndarray] | None,
) -> list[np.ndarray]:
    """Per child, Σ_sources M C Mᵀ restricted to its rows (plus ``diagonal`` blocks)."""
    out = (
        [np.array(d, dtype=np.float64) for d in diagonal]
        if diagonal is not None
        else [np.zeros((b - a, b - a)) for a, b in spans]
    )
    for src, mat in maps.items():
        left = _times_source_cov(mat, src, spans, source_cov, source_blocks)
        for i, (a, b) in enumerate(spans):
            out[i] += left[a:b] @ mat[a:b].T
    return out


def _block_inverses(blocks: Sequence[np.ndarray]) -> list[np.ndarray] | None:
    """Inverses of positive definite blocks (a block-diagonal Hessian), or ``None`` when a block
    is singular (the pass does not determine every cell of a child)."""
    out = []
    for block in blocks:
        if block.size == 0:
            out.append(block)
            continue
        try:
            factor = scipy.linalg.cho_factor(block)
        except np.linalg.LinAlgError:
            return None
        inv = scipy.linalg.cho_solve(factor, np.eye(block.shape[0]))
        if not np.all(np.isfinite(inv)) or np.abs(inv).max() * np.abs(block).max() > 1e10:
            return None
        out.append(inv)
    return out


def _psd_inverse(w: np.ndarray) -> np.ndarray:
    """Inverse of a positive definite matrix by Cholesky, or its pseudo-inverse when singular
    (redundant constraints: the solution is the same)."""
    if w.shape[0] == 0:
        return np.zeros((0, 0))
    try:
        factor = scipy.linalg.cho_factor(w)
        inv = scipy.linalg.cho_solve(factor, np.eye(w.shape[0]))
        if np.all(np.isfinite(inv)) and np.abs(inv).max() * np.abs(w).max() < 1e10:
            return inv
    except np.linalg.LinAlgError:
        pass
    return scipy.linalg.pinvh(w)


def largest_family(counts: Sequence[np.ndarray], fanouts: Sequence[np.ndarray]) -> int:
    """The most variables (children's non-zero cells) of any family of the spine — the size of
    the dense algebra :func:`child_support_covariances` would need for it."""
    largest = int((counts[0] > 0).sum())
    for k in range(1, len(fanouts)):
        nnz = (counts[k] > 0).sum(axis=1)
        if nnz.size == 0:
            continue
        per_family = np.bincount(np.repeat(np.arange(fanouts[k].size), fanouts[k]), weights=nnz)
        largest = max(largest, int(per_family.max(initial=0)))
    return largest
