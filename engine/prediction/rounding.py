"""The rounding the engine's controlled rounding adds to an answer (docs/science.md §4, §7; TDA
§7.3, eq. 7.7).

The engine rounds along a nested chain of marginals (``engine.schema.marginals.ROUNDER_CHAINS``),
each pass rounding one marginal's answers given the coarser ones fixed; :class:`RoundingPieces`
gives, per query, the chain marginal whose answers carry its rounding
(:func:`rounding_pieces`). The root's version with the lifted empty cells is
:func:`engine.prediction.root_clipping.chain_rounding`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import scipy.sparse

from engine.schema.marginals import answer_cells, cell_index, parse_marginal

ROUNDING_VARIANCE = 1.0 / 6.0
"""Variance added by rounding a fraction f up with probability f (as children's rounded answers
must sum to their parent's): E f(1−f) over a uniform fraction."""


@dataclass(frozen=True, eq=False)
class RoundingPieces:
    """The engine's controlled rounding along a nested chain of marginals
    (``engine.schema.marginals.ROUNDER_CHAINS``; TDA §7.3, eq. 7.7): each pass rounds one
    marginal's answers given the coarser ones fixed, so an answer of a query that coarsens a
    chain marginal carries the rounding of that marginal's answers inside it, not of its cells
    one by one. Per query, ``pieces[q]`` maps the columns (cells) to the answers of the coarsest
    chain marginal it coarsens (the cells themselves when none does) and ``owners[q]`` those
    pieces to the query's answers; a piece is non-integral with probability
    1 − Π_{i∈piece}(1 − p_i), and each adds ``variance`` (1/6 below the root, where the
    children's rounded answers must sum to the parent's: a fraction rounded up with probability
    equal to itself; 1/12, nearest rounding, at the root). Queries coarsening an invariant
    (``exact``) are integral: none."""

    pieces: Mapping[str, scipy.sparse.csr_matrix]
    owners: Mapping[str, scipy.sparse.csr_matrix]
    variance: float

    def nonintegral(self, query: str, p: np.ndarray) -> np.ndarray:
        """``(units, answers)``: per answer the expected number of its pieces not integral, for
        cells positive (non-integral) with probability ``p`` ``(units, columns)``."""
        logs = np.log1p(-np.clip(p, 0.0, 1.0 - 1e-15))
        piece_log = np.asarray(logs @ self.pieces[query])
        return np.asarray((1.0 - np.exp(piece_log)) @ self.owners[query])


def rounding_pieces(
    attributes: Sequence[tuple[str, Sequence[str]]],
    chain: Sequence[str],
    queries: Sequence[str],
    cells: np.ndarray | None = None,
    *,
    exact: Sequence[str] = (),
    variance: float = ROUNDING_VARIANCE,
) -> RoundingPieces:
    """:class:`RoundingPieces` of ``queries`` over the schema cells ``cells`` (default all;
    cached)."""
    attrs = tuple((str(a), tuple(str(x) for x in lv)) for a, lv in attributes)
    key = None if cells is None else np.asarray(cells, dtype=np.int64).tobytes()
    return _rounding_pieces(attrs, tuple(chain), tuple(queries), key, tuple(exact), variance)


@lru_cache(maxsize=64)
def _rounding_pieces(
    attrs: tuple[tuple[str, tuple[str, ...]], ...],
    chain: tuple[str, ...],
    queries: tuple[str, ...],
    cells_key: bytes | None,
    exact: tuple[str, ...],
    variance: float,
) -> RoundingPieces:
    n_cells = int(np.prod([len(lv) for _, lv in attrs]))
    columns = np.arange(n_cells) if cells_key is None else np.frombuffer(cells_key, dtype=np.int64)
    chain_idx = [cell_index(parse_marginal(c, attrs), attrs) for c in chain]
    pinned = [cell_index(parse_marginal(c, attrs), attrs) for c in exact]
    pieces, owners = {}, {}
    for q in queries:
        parse = parse_marginal(q, attrs)
        idx = cell_index(parse, attrs)
        size = answer_cells(parse, attrs)
        piece = next((c for c in chain_idx if _coarsens(idx, c)), np.arange(n_cells))
        n_pieces = int(piece.max()) + 1
        weight = 0.0 if any(_coarsens(idx, c) for c in pinned) else 1.0
        pieces[q] = scipy.sparse.csr_matrix(
            (np.ones(columns.size), (np.arange(columns.size), piece[columns])),
            shape=(columns.size, n_pieces),
        )
        owner = np.zeros(n_pieces, dtype=np.int64)
        owner[piece] = idx
        owners[q] = scipy.sparse.csr_matrix(
            (np.full(n_pieces, weight), (np.arange(n_pieces), owner)), shape=(n_pieces, size)
        )
    return RoundingPieces(pieces, owners, variance)


def _coarsens(index: np.ndarray, finer: np.ndarray) -> bool:
    """Whether the query with cell → answer ``index`` coarsens the one with ``finer`` (every
    answer of the finer query lies inside one of its answers)."""
    owner = np.full(int(finer.max()) + 1, -1)
    owner[finer] = index
    return bool(np.array_equal(owner[finer], index))
