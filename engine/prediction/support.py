"""Least-squares error covariance on the cells a family can populate: the walk down the spine
and its cache (docs/science.md §7; docs/prediction.md §2b; TDA §7.1–7.2).

The engine builds each family's least squares only on the cells the parent can populate: a cell
that is 0 in the parent's estimate (or a structural zero) has no variable in any child
(``engine/topdown/qp/general._fixed_cells``), and the non-negativity constraint holds most of a
child's own empty cells at 0 too (they are the active set). Those zero cells act like structural
zeros, so the marginals are re-estimated from far fewer cells than the dense (all-cells) model of
:mod:`engine.prediction.least_squares` says: on the 2,016-cell production schema a generated
county of 30,000 persons populates 188 cells, a tract 46, a block 4.

:func:`family_covariances` walks the spine root first — the root on its own non-zero cells —
feeding each parent's covariance to its children (one family:
:func:`engine.prediction.support_family.child_support_covariances`), on a sample of families per
level and their ancestors. Which cells are non-zero comes from the count profile (the true counts:
the published parent is 0 where its count is 0 unless noise lifts it, and a small count can be
clipped; docs/prediction.md). A child's empty cells of its parent's support are not errorless: the
non-negativity correction (:mod:`engine.prediction.correction`) clips each at the variance it
would have if it alone were freed (:mod:`engine.prediction.support_freed`).

Dense linear algebra of the size of each child's non-zero cells and of the family's constraint
rows; a new total ρ with the same shares reuses the cached result, and an edit of one level's
shares recomputes only that level and those below it (:class:`SupportCache`);
:func:`engine.core.blas_threads.one_blas_thread` keeps BLAS to one thread for these small matrices.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.prediction.least_squares import LevelDesign
from engine.prediction.support_family import FamilyTooLarge, prepare_child_covariances
from engine.prediction.support_freed import finish_freed_cells, freed_cell_parts
from engine.schema.marginals import cell_index, parse_marginal

if TYPE_CHECKING:  # type only: the spine imports this module's cache lazily
    from engine.prediction.spine import SpineProfile

__all__ = ["FamilyTooLarge"]


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
        spine: SpineProfile,
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
            result = family_covariances(spine, normalised, families, self, known)
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
    ) -> tuple[list[np.ndarray], list[dict[str, np.ndarray]]]:
        """:func:`engine.prediction.support_freed.freed_cell_variances` and, per child and
        query, how much of them reaches each answer once the populated cells re-adjust; their
        parent-independent part (:func:`engine.prediction.support_freed.freed_cell_parts` of
        the normalised design) cached per design and supports with :attr:`prepared`."""
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
            size = sum(
                z.nbytes + v.nbytes + sum(w.nbytes for w in pins.values()) for z, v, pins in parts
            )
            self._keep(parts_key, parts, size)
        pins = [{q: w / t for q, w in child[2].items()} for child in parts]
        return finish_freed_cells(parts, parent_diag, t, support.size), pins

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
    ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
        """:func:`child_support_covariances` of the normalised design, rescaled (the parent's
        covariance is scaled by the same t, so the result is exactly the design's), with its
        parts from held answers and from the parent (:meth:`PreparedFamily.finish_parts`)."""
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
        parts = prepared.finish_parts(None if parent_cov is None else parent_cov * t)
        total, held, share = ([c / t for c in part] for part in parts)
        return total, held, share


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
            tuple(c * factor for c in fc.child_held),
            None if fc.parent_cov is None else fc.parent_cov * factor,
            tuple(c * factor for c in fc.child_share),
            tuple({q: w * factor for q, w in pins.items()} for pins in fc.child_pins),
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
    (:func:`engine.prediction.support_family.child_support_covariances`), and over P the variance of each of its empty cells were
    that cell alone freed (:func:`engine.prediction.support_freed.freed_cell_variances`; the
    non-negativity correction clips it); the part of each child's covariance from answers held
    from an earlier pass (a conserved error, :meth:`PreparedFamily.finish_parts`); and the
    parent's covariance on P (``None`` at the root)."""

    family: int
    support: np.ndarray
    child_supports: tuple[np.ndarray, ...]
    child_covs: tuple[np.ndarray, ...]
    child_free: tuple[np.ndarray, ...]
    child_held: tuple[np.ndarray, ...] = ()
    parent_cov: np.ndarray | None = None
    child_share: tuple[np.ndarray, ...] = ()
    """Per child, the part of its covariance carrying the parent's error (on its own cells)."""
    child_pins: tuple[dict[str, np.ndarray], ...] = ()
    """Per child and query, per answer: Σ_i T_ai² v_i over its empty cells of P (their freed
    variance reaching the answer, :func:`engine.prediction.support_freed.freed_cell_parts`)."""


def family_covariances(
    spine: SpineProfile,
    designs: Sequence[LevelDesign],
    families: Sequence[np.ndarray],
    cache: SupportCache,
    known: Sequence[dict[int, FamilyCovariance] | None] | None = None,
) -> list[dict[int, FamilyCovariance]]:
    """Per level k, the :class:`FamilyCovariance` of the families ``families[k]`` (units of
    level k−1) and of every ancestor family they need; level 0 holds the root as family 0.
    ``known[k]``: level k already computed for these designs and families (a prefix of the
    levels; reused as is). Which cells each unit populates comes from ``spine``'s counts."""
    fanouts = spine.fanouts
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
        root_support = spine.unit_cells(0, 0)
        root, root_held, root_share = cache.child_covariances(
            designs[0], (root_support,), None, None
        )
        out[0][0] = FamilyCovariance(
            0, root_support, (root_support,), tuple(root), (np.zeros(root_support.size),),
            tuple(root_held), None, tuple(root_share),
        )  # fmt: skip
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
            kids = tuple(spine.unit_cells(k, first + i) for i in range(n))
            covs, held, share = cache.child_covariances(designs[k], kids, support, parent_cov)
            free, pins = cache.freed_cell_variances(support, kids, designs[k], np.diag(parent_cov))
            out[k][f] = FamilyCovariance(
                f, support, kids, tuple(covs), tuple(free), tuple(held), parent_cov,
                tuple(share), tuple(pins),
            )  # fmt: skip
    return out
