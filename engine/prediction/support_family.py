"""Exact least-squares error covariance of every child of one family on its own populated cells
(docs/prediction.md §2b; docs/science.md §7; TDA §7.1–7.2, eq. 7.5).

:func:`child_support_covariances` follows the engine's passes for one family: a TOTAL-only pass
in closed form, every later pass as the equality-constrained least squares over the children's
populated cells (children summing to the parent on its populated cells, invariants exact, earlier
passes' answers held). The last pass — the only pass besides a closed-form TOTAL pass in the
engine's default order — is computed child by child (:func:`_last_pass_blocks`): its cost grows
with each child's own cells and the family's constraint rows, so families of any size (a county
with a hundred tracts, a nation's states) are modelled exactly. Other passes (custom
``ls_passes`` of three or more, or a pass that does not determine every cell of a child) take the
general path, dense in all of the family's variables; a family of more than
:data:`GENERAL_PATH_MAX_VARIABLES` variables there raises :class:`FamilyTooLarge` (the prediction
then says per row that it does not hold).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from engine.prediction.least_squares import LevelDesign

GENERAL_PATH_MAX_VARIABLES = 4000
"""Above this many variables in one family (children's populated cells) the general path's dense
algebra (~2 s, 128 MB per matrix) is not attempted: :class:`FamilyTooLarge`."""


class FamilyTooLarge(Exception):
    """A family needs the general (dense) path and has more variables than it handles."""


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


def _indicator(rows: np.ndarray, n_rows: int) -> sp.csr_matrix:
    """The 0/1 matrix with a 1 at (rows[j], j) for every variable j."""
    return sp.csr_matrix(
        (np.ones(rows.size), (rows, np.arange(rows.size))), shape=(int(n_rows), rows.size)
    )


def _last_child_rows(supports: Sequence[np.ndarray], index: np.ndarray) -> int:
    """The number of answer rows of the last child with a non-empty support (its rows are the
    last of :func:`_child_query_rows`)."""
    for s in reversed(supports):
        if s.size:
            return int(np.unique(index[s]).size)
    return 0


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
    own_source: str = ""
    """"general": the last pass's own noise (the other sources are conserved errors)."""

    @property
    def nbytes(self) -> int:
        arrays = [*self.inv_blocks, *self.e_blocks, *self.touched, *self.maps.values()]
        arrays += [a for _, a in self.terms if a is not None]
        arrays += [a for a in (self.w_plus, self.parent_map) if a is not None]
        return int(sum(a.nbytes for a in arrays))

    def finish(self, parent_cov: np.ndarray | None) -> list[np.ndarray]:
        """Per child, the covariance on its support given the parent's ``parent_cov``."""
        return self.finish_parts(parent_cov)[0]

    def finish_parts(
        self, parent_cov: np.ndarray | None
    ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
        """Per child, the covariance on its support and two parts of it: the share of the
        parent's error it carries (through the children's sum, on its own cells) and the part
        from answers of earlier passes held in the last (a TOTAL estimated alone first) — errors
        non-negativity moves rather than removes (:mod:`engine.prediction.correction`)."""
        if self.kind == "empty":
            empty = [np.zeros((0, 0)) for _ in range(self.n_children)]
            return empty, empty, empty
        if self.kind == "copy":
            assert parent_cov is not None
            cov = np.array(parent_cov, dtype=np.float64)
            return [cov], [np.zeros_like(cov)], [cov]
        if self.kind == "general":
            source_cov = dict(self.source_cov)
            if "parent" in self.maps:
                assert parent_cov is not None
                source_cov["parent"] = parent_cov
            held_maps = {s: m for s, m in self.maps.items() if s not in ("parent", self.own_source)}
            parent_maps = {s: m for s, m in self.maps.items() if s == "parent"}
            total = _child_blocks(self.maps, source_cov, self.source_blocks, self.spans, None)
            held = _child_blocks(held_maps, source_cov, self.source_blocks, self.spans, None)
            share = _child_blocks(parent_maps, source_cov, self.source_blocks, self.spans, None)
            return total, held, share
        assert self.w_plus is not None
        middle = -self.w_plus
        held_terms = np.zeros_like(self.w_plus)
        parent_term = None
        for src, term in self.terms:
            if term is None:
                assert parent_cov is not None and self.parent_map is not None
                z = self.parent_map
                term = (z @ parent_cov) @ z.T
                parent_term = term
            elif src != "noise excess":
                held_terms = held_terms + term
            middle = middle + term
        any_held = any(src not in ("parent", "noise excess") for src, _ in self.terms)
        total, held, share = [], [], []
        for blk, e_c, rows_c in zip(self.inv_blocks, self.e_blocks, self.touched, strict=True):
            at = np.ix_(rows_c, rows_c)
            total.append(blk + e_c.T @ middle[at] @ e_c)
            held.append(e_c.T @ held_terms[at] @ e_c if any_held else np.zeros_like(blk))
            share.append(
                e_c.T @ parent_term[at] @ e_c if parent_term is not None else np.zeros_like(blk)
            )
        return total, held, share


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
    rows_cache: dict[str, sp.csr_matrix] = {}

    def rows(q: str) -> sp.csr_matrix:
        """A_q over the family's variables (child-local answer rows, answers no cell hits left
        out; sparse: a family of a nation's states has ~20,000 variables)."""
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
        parent_rows = sp.csr_matrix(
            (np.ones(n), (np.searchsorted(parent_support, cells), np.arange(n))),
            shape=(parent_support.size, n),
        )
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
            keep = np.asarray(total_rows.sum(axis=1)).ravel() > 0  # non-empty supports
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
            inv_rows = rows(q)
            if parent_rows is not None and len(supports) > 1:
                # Σ_c A_q x_c = A_q x_p is held by the parent rows already (the children's
                # cells are the parent's): drop the last child's rows so the constraints stay
                # independent (same solution, and W keeps a Cholesky factor)
                inv_rows = inv_rows[
                    : inv_rows.shape[0] - _last_child_rows(supports, answer_index[q])
                ]
            blocks.append(inv_rows)
            rhs.append({})
        for held_rows, held_maps in held:
            blocks.append(held_rows)
            rhs.append(held_maps)
        cons = sp.vstack(blocks).tocsc() if blocks else sp.csc_matrix((0, n))
        inv_blocks = _block_inverses(hess_blocks)
        last = k + 1 == len(design.passes)
        if inv_blocks is not None and last:
            # The noise of the pass has covariance H − Δ with Δ = Σ_q (w_q − w_q² v_q) G_q
            # (0 when v_q = 1/w_q, as for the Gaussian; the discrete Gaussian's variance is
            # smaller by ~e^(−2π²σ²), which matters at large ρ_q): per child, block by block.
            deltas = [h - v for h, v in zip(hess_blocks, noise_blocks, strict=True)]
            top = max((float(np.abs(h).max(initial=0.0)) for h in hess_blocks), default=0.0)
            if all(float(np.abs(d).max(initial=0.0)) <= 1e-10 * top for d in deltas):
                deltas = None
            return _last_pass_blocks(
                cons, inv_blocks, spans, blocks, rhs, source_cov, source_blocks, deltas
            )
        if n > GENERAL_PATH_MAX_VARIABLES:
            raise FamilyTooLarge(
                f"a family of {len(supports)} children populating {n:,} cells needs the dense "
                f"general path (pass {k + 1} of {len(design.passes)}: "
                f"{', '.join(queries)}{'' if last else ', not the last'}"
                f"{'' if inv_blocks is not None else ', not determining every cell'})"
            )
        cons = cons.toarray()
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
            pass_rows = sp.vstack([rows(q) for q in queries]).tocsr()
            held.append(
                (pass_rows, {src: np.asarray(pass_rows @ mat) for src, mat in maps.items()})
            )
        final = maps
    return PreparedFamily(
        "general",
        len(supports),
        spans=tuple((int(a), int(b)) for a, b in spans),
        maps=final,
        source_cov=source_cov,
        source_blocks=source_blocks,
        own_source=f"pass{len(design.passes) - 1}",
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
    deltas: Sequence[np.ndarray] | None = None,
) -> PreparedFamily:
    """Per child, the covariance after the last pass, child by child: with E_c the constraint
    rows child c enters (``cons`` is 0/1: a child's cells meet its parent cells, its own held
    answers and the invariants only) and e_c = E_c H_c⁻¹,

        W = Σ_c E_c H_c⁻¹ E_cᵀ,   R_c = e_cᵀ W⁺ (rows of R = H⁻¹EᵀW⁺),
        Cov_c = H_c⁻¹ − e_cᵀ W⁺ e_c + Σ_s e_cᵀ (Z_s C_s Z_sᵀ) e_c,

    where Z_s = Σ_blocks W⁺[:, block] M_block,s maps source s (covariance C_s) through the
    held right-hand sides. When the pass's noise has covariance H − Δ (``deltas``: Δ_c per
    child; the discrete Gaussian's variance is below 1/w_q at large ρ_q), F(H − Δ)Fᵀ adds

        − H_c⁻¹Δ_cH_c⁻¹ + H_c⁻¹Δ_c e_cᵀ W⁺ e_c + (its transpose) − e_cᵀ W⁺ΩW⁺ e_c,
        Ω = Σ_c e_c Δ_c e_cᵀ,

    all independent of the parent's covariance. The same numbers as forming R and every
    source's full map (:func:`_add_source_maps`, :func:`_child_blocks`), in the products of the
    constraint rows a child meets: the cost grows with the children's own cells and the
    constraint rows, never with (children × all variables)², so a family of any size (a county
    of a hundred tracts, a nation of states) is modelled exactly."""
    m = cons.shape[0]
    touched = []
    e_blocks = []
    w = np.zeros((m, m))
    for (a, b), blk in zip(spans, inv_blocks, strict=True):
        sub = cons[:, a:b].tocsr()
        rows_c = np.flatnonzero(np.diff(sub.indptr))
        cons_c = sub[rows_c].toarray()
        e_c = cons_c @ blk
        w[np.ix_(rows_c, rows_c)] += e_c @ cons_c.T
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
    base = tuple(inv_blocks)
    if deltas is not None:
        omega = np.zeros((m, m))
        adjusted = []
        for blk, e_c, rows_c, delta in zip(inv_blocks, e_blocks, touched, deltas, strict=True):
            omega[np.ix_(rows_c, rows_c)] += e_c @ delta @ e_c.T
            cross = (blk @ delta @ e_c.T) @ w_plus[np.ix_(rows_c, rows_c)] @ e_c
            adjusted.append(blk - blk @ delta @ blk + cross + cross.T)
        base = tuple(adjusted)
        terms.append(("noise excess", -(w_plus @ omega @ w_plus)))
    return PreparedFamily(
        "last",
        len(inv_blocks),
        spans=tuple((int(a), int(b)) for a, b in spans),
        inv_blocks=base,
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
