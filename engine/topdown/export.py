"""The PPMF-like microdata of a TopDown run's estimated blocks (TDA §6.3).

:func:`microdata_frame` gives one row per person of the estimated block histograms, in the layout
of the Census Bureau's Privacy-Protected Microdata File: ``TABBLKST, TABBLKCOU, TABTRACTCE,
TABBLKGRPCE, TABBLK`` from 15-digit block GEOIDs, then the person attributes. For the 2,016-cell
redistricting schema these are the PPMF columns ``RTYPE`` (3 household, 5 group quarters),
``GQTYPE_PL`` (0 or the GQ major type 1–7), ``VOTING_AGE`` (1 under 18, 2 18+), ``CENHISP``
(1 not Hispanic, 2 Hispanic) and ``CENRACE`` (01–63); for other schemas one column per attribute
holding its level label (``VOTING_AGE`` is coded 1/2 whenever the schema has VOTINGAGE).

The tidy tables of a run come in chunks, so a production-scale run is written in bounded memory
(docs/topdown.md, "Production scale"): :func:`iter_estimate_frames` (geolevel, geounit, query,
cell, true, estimate; with ``sparse`` the rows whose true and estimated counts are both 0 are left
out),
:func:`iter_measurement_frames` (geolevel, geounit, query, cell, noisy, variance: the noisy
measurements of TDA §6.1, every measured cell) and :func:`iter_microdata_frames` (persons, a chunk
of whole blocks at a time). Each yields frames of at most ``chunk_rows`` rows (or one geounit's
cells of one query, or one block's persons, when that alone is more) whose concatenation is exactly
:meth:`TopDownResult.to_tidy`, :attr:`TopDownResult.measurements` and :func:`microdata_frame`, in
the same row order. :func:`estimate_rows` and :func:`measurement_rows` count the rows without
building them.

The run pipeline's write stage (:mod:`engine.runs.writers`) writes them as ``estimates``,
``measurements`` and ``microdata`` tables (CSV or Parquet) beside metrics.json; metrics come from
:mod:`engine.runs.topdown` (engines compute no metrics).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from engine.core.errors import ValidationError
from engine.topdown.queries import query_group

if TYPE_CHECKING:
    from engine.topdown.result import TopDownResult

PPMF_GEOGRAPHY = ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLKGRPCE", "TABBLK")
_PPMF_SLICES = ((0, 2), (2, 5), (5, 11), (11, 12), (11, 15))
DEFAULT_CHUNK_ROWS = 500_000
"""Rows per chunk (and per Parquet row group) of the tidy tables unless the caller says otherwise."""
ESTIMATE_COLUMNS = ("geolevel", "geounit", "query", "cell", "true", "estimate")
MEASUREMENT_COLUMNS = ("geolevel", "geounit", "query", "cell", "noisy", "variance")


def _text(codes: np.ndarray, values: np.ndarray) -> pd.Categorical:
    """Text column ``values[codes]`` as a categorical (no Python string per row; values may repeat)."""
    categories, inverse = np.unique(
        np.asarray(values, dtype=object).astype(str), return_inverse=True
    )
    return pd.Categorical.from_codes(
        inverse.reshape(-1)[codes], categories=pd.Index(categories, dtype=object)
    )


def _attribute_columns(result: TopDownResult, cells: np.ndarray) -> dict[str, pd.Categorical]:
    """Person attribute columns for histogram cell indices ``cells`` (PPMF codes when known)."""
    schema = result.schema
    coords = np.unravel_index(cells, schema.shape)
    out: dict[str, pd.Categorical] = {}
    for attr, level_index in zip(schema.attributes, coords, strict=True):
        labels = np.asarray(attr.levels, dtype=object)
        if attr.name == "HHGQ":
            household = labels == "household"
            out["RTYPE"] = _text(level_index, np.where(household, "3", "5"))
            out["GQTYPE_PL"] = _text(level_index, np.where(household, "0", labels))
        elif attr.name == "VOTINGAGE":
            out["VOTING_AGE"] = _text(level_index, np.where(labels == "18_plus", "2", "1"))
        elif attr.name == "HISPANIC":
            out["CENHISP"] = _text(level_index, np.where(labels == "hispanic", "2", "1"))
        else:
            out[attr.name] = _text(level_index, labels)
    return out


def _key_columns(
    result: TopDownResult, nodes: np.ndarray, query: str, labels: Sequence[object]
) -> dict[str, pd.Categorical]:
    """geolevel, geounit, query, cell of ``nodes`` × ``labels`` (node-major) as categoricals."""
    size = len(labels)
    tree = result.tree
    level_codes = np.asarray(tree.level, dtype=np.int64)[nodes]
    ids = np.asarray(tree.node_id, dtype=object)[nodes]
    return {
        "geolevel": _text(np.repeat(level_codes, size), np.asarray(tree.levels, dtype=object)),
        "geounit": _text(np.repeat(np.arange(nodes.size), size), ids),
        "query": _text(
            np.zeros(nodes.size * size, dtype=np.int64), np.array([query], dtype=object)
        ),
        "cell": _text(np.tile(np.arange(size), nodes.size), np.asarray(labels, dtype=object)),
    }


def _check_chunk_rows(chunk_rows: int) -> int:
    if (
        isinstance(chunk_rows, bool)
        or not isinstance(chunk_rows, int | np.integer)
        or chunk_rows < 1
    ):
        raise ValidationError(f"chunk_rows must be a whole number ≥ 1; got {chunk_rows!r}")
    return int(chunk_rows)


def _node_steps(n_nodes: int, cells: int, chunk_rows: int) -> Iterator[slice]:
    """Consecutive node slices of at most ``chunk_rows // cells`` nodes (at least one)."""
    step = max(1, chunk_rows // max(1, cells))
    for start in range(0, n_nodes, step):
        yield slice(start, min(start + step, n_nodes))


def estimate_rows(result: TopDownResult, queries: Sequence[str] | None = None) -> int:
    """Rows of the dense tidy estimates table (every geounit × every cell of every query)."""
    names = result.query_names if queries is None else tuple(queries)
    cells = sum(query_group(result.schema, name).size for name in names)
    return int(result.tree.n_nodes) * int(cells)


def measurement_rows(result: TopDownResult) -> int:
    """Rows of the measurements table: every measured (geounit, query) times the query's cells."""
    variance = result.measured.variance  # finite where measured or invariant
    return int(
        sum(
            int(np.isfinite(variance[:, j]).sum()) * group.size
            for j, group in enumerate(result.queries)
        )
    )


def iter_estimate_frames(
    result: TopDownResult,
    queries: Sequence[str] | None = None,
    *,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    sparse: bool = False,
) -> Iterator[pd.DataFrame]:
    """The tidy estimates (``ESTIMATE_COLUMNS``) in chunks, query by query, geounits in tree order.

    Concatenated, the chunks hold the rows of :meth:`TopDownResult.to_tidy` (``sparse=False``) or
    its rows whose ``true`` or ``estimate`` is non-zero (``sparse=True``), in the same order; the
    text columns are categoricals (cheap to build, written as text). Each chunk is built from a slice
    of at most ``chunk_rows // cells`` geounits, so no table larger than a chunk is held. The
    sparse table is built from the non-zero cells of the sparse histograms: its cost
    grows with the non-zero cells, not with geounits × cells.
    """
    chunk_rows = _check_chunk_rows(chunk_rows)
    names = result.query_names if queries is None else tuple(queries)
    if sparse:
        yield from _iter_sparse_estimates(result, names, chunk_rows)
        return
    for name in names:
        group = query_group(result.schema, name)
        matrix = answer_matrix(group)
        for part in _node_steps(result.tree.n_nodes, group.size, chunk_rows):
            # answers of the slice from its non-zero cells: never a dense (nodes × cells) block
            true = (result.truth_sparse[part] @ matrix).toarray().reshape(-1)
            estimate = (result.estimates_sparse[part] @ matrix).toarray().reshape(-1)
            nodes = np.arange(part.start, part.stop)
            yield pd.DataFrame(
                {
                    **_key_columns(result, nodes, name, group.labels),
                    "true": true,
                    "estimate": estimate,
                },
                columns=list(ESTIMATE_COLUMNS),
            )


def answer_matrix(group: Any) -> sp.csr_matrix:
    """CSR ``(n_cells, size)`` mapping each histogram cell to its answer cell of ``group``."""
    index = group.cell_index
    return sp.csr_matrix(
        (np.ones(index.size, dtype=np.int64), (np.arange(index.size), index)),
        shape=(index.size, group.size),
    )


def _iter_sparse_estimates(
    result: TopDownResult, names: Sequence[str], chunk_rows: int
) -> Iterator[pd.DataFrame]:
    """The rows of the tidy estimates whose ``true`` or ``estimate`` is non-zero, from the sparse
    histograms: per query, the answers as CSR ``(n_nodes, size)``, their union pattern in node
    then cell order (the order of the dense table), cut into chunks of ``chunk_rows`` rows."""
    levels = np.asarray(result.tree.level, dtype=np.int64)
    ids = np.asarray(result.tree.node_id, dtype=object)
    for name in names:
        group = query_group(result.schema, name)
        labels = np.asarray(group.labels, dtype=object)
        matrix = answer_matrix(group)
        true = sp.csr_matrix(result.truth_sparse @ matrix)
        estimate = sp.csr_matrix(result.estimates_sparse @ matrix)
        union = sp.csr_matrix(abs(true) + abs(estimate))
        union.eliminate_zeros()
        union.sort_indices()
        rows = np.repeat(np.arange(union.shape[0]), np.diff(union.indptr))
        cols = union.indices.astype(np.int64)
        for start in range(0, rows.size, chunk_rows):
            r, c = rows[start : start + chunk_rows], cols[start : start + chunk_rows]
            local, inverse = np.unique(r, return_inverse=True)  # this chunk's geounits
            yield pd.DataFrame(
                {
                    "geolevel": _text(levels[r], np.asarray(result.tree.levels, dtype=object)),
                    "geounit": _text(inverse.reshape(-1), ids[local]),
                    "query": _text(
                        np.zeros(r.size, dtype=np.int64), np.array([name], dtype=object)
                    ),
                    "cell": _text(c, labels),
                    "true": np.asarray(true[r, c], dtype=np.int64).reshape(-1),
                    "estimate": np.asarray(estimate[r, c], dtype=np.int64).reshape(-1),
                },
                columns=list(ESTIMATE_COLUMNS),
            )


def iter_measurement_frames(
    result: TopDownResult,
    *,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    queries: Collection[str] | None = None,
) -> Iterator[pd.DataFrame]:
    """The noisy measurements (``MEASUREMENT_COLUMNS``) in chunks of at most ``chunk_rows`` rows.

    Concatenated, the chunks hold the rows of :attr:`TopDownResult.measurements` in the same
    order (text columns as categoricals): query by query, the measured geounits in tree order;
    variance 0 marks an invariant. ``queries``: only the measured query groups of these names
    (their rows as they are among all; keyed noise of the others is not drawn).
    """
    chunk_rows = _check_chunk_rows(chunk_rows)
    measured = result.measured
    block = max(1, chunk_rows // max(1, result.schema.size))
    for j, group in enumerate(result.queries):
        if queries is not None and group.name not in queries:
            continue
        nodes = np.flatnonzero(np.isfinite(measured.variance[:, j]))
        for part in _node_steps(nodes.size, group.size, chunk_rows):
            chunk = nodes[part]
            # keyed noise is drawn again, chunk by chunk; answers() reads the true histograms of
            # the nodes it is given densely, so give it at most chunk_rows cells at a time
            values = (
                np.concatenate(
                    [measured.answers(j, chunk[a : a + block]) for a in range(0, chunk.size, block)]
                )
                if chunk.size
                else np.zeros((0, group.size))
            )
            yield pd.DataFrame(
                {
                    **_key_columns(result, chunk, group.name, group.labels),
                    "noisy": values.reshape(-1),
                    "variance": np.repeat(measured.variance[chunk, j], group.size),
                },
                columns=list(MEASUREMENT_COLUMNS),
            )


def _block_rows(result: TopDownResult) -> np.ndarray:
    """The estimate rows of the blocks, in the input's block order (spine must end at blocks)."""
    tree = result.tree
    counts = np.bincount(tree.block_node, minlength=tree.n_nodes)
    if np.any(counts[tree.block_node] != 1):
        raise ValidationError(
            "this run's spine stops above the block level, so it has no block estimates; "
            f"use level_histogram({tree.levels[-1]!r})"
        )
    return np.asarray(tree.block_node, dtype=np.int64)


def _microdata_chunk(
    result: TopDownResult, rows: np.ndarray, leaf_ids: np.ndarray, ppmf: bool
) -> pd.DataFrame:
    """Persons of the blocks whose estimate rows are ``rows`` (PPMF-like columns, categoricals)."""
    blocks = result.estimates_sparse[rows].tocoo()  # non-zero cells only
    order = np.lexsort((blocks.col, blocks.row))  # block by block, cells in order
    counts = blocks.data[order]
    if np.any(counts < 0):
        raise ValidationError("estimated counts must be non-negative to export microdata")
    block_of_person = np.repeat(blocks.row[order].astype(np.int64), counts)
    cell_of_person = np.repeat(blocks.col[order].astype(np.int64), counts)
    geoids = np.asarray(leaf_ids, dtype=object).astype(str)
    frame: dict[str, Any] = {"GEOID": _text(block_of_person, geoids)}
    if ppmf:
        for name, (a, b) in zip(PPMF_GEOGRAPHY, _PPMF_SLICES, strict=True):
            frame[name] = _text(block_of_person, np.array([g[a:b] for g in geoids], dtype=object))
    frame.update(_attribute_columns(result, cell_of_person))
    return pd.DataFrame(frame)


def iter_microdata_frames(
    result: TopDownResult, *, chunk_rows: int = DEFAULT_CHUNK_ROWS
) -> Iterator[pd.DataFrame]:
    """One row per person of the estimated blocks, whole blocks at a time (PPMF-like layout).

    A chunk holds consecutive blocks (input order) with at most ``chunk_rows`` persons, or one
    block when it alone has more. Concatenated, the chunks equal :func:`microdata_frame`. At least
    one frame is yielded (an empty one when no person was estimated), so the columns are known.
    """
    chunk_rows = _check_chunk_rows(chunk_rows)
    rows = _block_rows(result)
    all_ids = np.asarray(result.tree.node_id, dtype=object)
    ppmf = bool(rows.size) and all(len(str(g)) == 15 and str(g).isdigit() for g in all_ids[rows])
    totals = np.asarray(result.estimates_sparse.sum(axis=1), dtype=np.int64).reshape(-1)[rows]
    cumulative = np.cumsum(totals)
    start, n = 0, rows.size
    yielded = False
    while start < n:
        before = int(cumulative[start - 1]) if start else 0
        reach = int(np.searchsorted(cumulative, before + chunk_rows, side="right"))
        stop = max(start + 1, reach)
        part = rows[start:stop]
        yield _microdata_chunk(result, part, all_ids[part], ppmf)
        yielded = True
        start = stop
    if not yielded:
        yield _microdata_chunk(result, rows, all_ids[rows], ppmf)


def microdata_frame(result: TopDownResult) -> pd.DataFrame:
    """One row per person of the estimated block histograms (PPMF-like layout)."""
    rows = _block_rows(result)
    all_ids = np.asarray(result.tree.node_id, dtype=object)
    ppmf = bool(rows.size) and all(len(str(g)) == 15 and str(g).isdigit() for g in all_ids[rows])
    return _microdata_chunk(result, rows, all_ids[rows], ppmf)
