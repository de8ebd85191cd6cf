"""TopDown's true histograms on Spark: sparse block cells, every level by ``groupBy`` (TDA §5, §6).

Every geounit's true histogram is the sum of the block histograms below it (TDA §5: the spine's
geounits nest, each in exactly one parent). On the Spark backend that sum is done by Spark, on a
*long sparse* DataFrame that holds only the non-zero cells (on the 2,016-cell schema almost every
cell is 0: a generated 1,000,000-person Rhode Island has 97,099 non-zero block cells of 46.6 M):

* :func:`block_cells` — the block histogram as rows ``(node, cell, count)``, non-zero only, where
  ``node`` is the block's leaf geounit in the spine (``GeoTree.block_node``); sent to Spark as Arrow
  batches, never as a dense array, and Parquet-friendly as it stands (:func:`write_block_cells`);
* :func:`level_truth` — the rows of every spine level at once: each block cell is joined to the
  list of its leaf's ancestors in the spine (``GeoTree.parent`` followed to the root; on the
  conventional spine these are the block's geocode prefixes: block group, tract, county, state),
  exploded, and summed by ``groupBy(node, cell)`` — one Spark job, one shuffle, that returns the
  non-zero cells of every geounit;
* :func:`spark_truth` — those rows as the engine's ``(n_nodes, n_cells)`` int64 CSR matrix, the
  numbers :meth:`engine.topdown.geography.GeoTree.aggregate` gives (integer sums, so any order of
  addition gives the same counts, and the runs' outputs are byte-identical).

Only the DataFrame API is used, so this also runs over Spark Connect.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from engine.core.errors import ValidationError
from engine.topdown.geography import GeoTree

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import DataFrame, SparkSession

CELLS_SCHEMA = pa.schema([("node", pa.int64()), ("cell", pa.int32()), ("count", pa.int64())])
"""A long sparse histogram: one row per non-zero (geounit, cell)."""
ROWS_PER_BATCH = 1_000_000
"""Non-zero cells per Arrow batch sent to Spark (≈ 20 MB)."""
BLOCKS_PER_SCAN = 65_536
"""Blocks scanned at a time for non-zero cells (bounds the temporary arrays of the scan)."""


def _nonzero_batches(tree: GeoTree, counts: np.ndarray | sp.spmatrix) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the non-zero block cells, each block as its leaf node of ``tree``."""
    if counts.shape[0] != tree.n_blocks:
        raise ValidationError(f"expected counts for {tree.n_blocks} blocks, got {counts.shape[0]}")
    leaf = np.asarray(tree.block_node, dtype=np.int64)
    if sp.issparse(counts):
        coo = sp.coo_matrix(counts)
        keep = coo.data != 0
        rows, cols, vals = coo.row[keep], coo.col[keep], coo.data[keep]
        pieces = [(rows, cols, vals)]
    else:
        pieces = []
        for start in range(0, counts.shape[0], BLOCKS_PER_SCAN):
            chunk = np.asarray(counts[start : start + BLOCKS_PER_SCAN])
            r, c = np.nonzero(chunk)
            pieces.append((r + start, c, chunk[r, c]))
    for rows, cols, vals in pieces:
        for a in range(0, rows.size, ROWS_PER_BATCH):
            b = a + ROWS_PER_BATCH
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array(leaf[rows[a:b]], type=pa.int64()),
                    pa.array(np.asarray(cols[a:b], dtype=np.int32), type=pa.int32()),
                    pa.array(np.asarray(vals[a:b], dtype=np.int64), type=pa.int64()),
                ],
                schema=CELLS_SCHEMA,
            )


def block_cells(spark: SparkSession, tree: GeoTree, counts: np.ndarray | sp.spmatrix) -> DataFrame:
    """The block histogram ``counts`` ``(n_blocks, n_cells)`` as a long sparse DataFrame
    ``(node, cell, count)`` of its non-zero cells, ``node`` the block's leaf geounit in ``tree``.

    Blocks that share a leaf (a coarser leaf level) give one row each; :func:`level_truth` sums
    them. Sent as Arrow batches (no pandas, no dense copy)."""
    table = pa.Table.from_batches(list(_nonzero_batches(tree, counts)), schema=CELLS_SCHEMA)
    return spark.createDataFrame(table)


def write_block_cells(frame: DataFrame, path: str) -> None:
    """Save a long sparse histogram as Parquet (``(node, cell, count)``, overwriting ``path``)."""
    frame.write.mode("overwrite").parquet(path)


def _ancestors(tree: GeoTree) -> np.ndarray:
    """``(n_nodes, max_depth + 1)`` int64: column ``d`` is each node's ancestor at depth ``d``
    (the node itself at its own depth), −1 below a node's depth."""
    depth = tree.depth
    out = np.full((tree.n_nodes, int(depth.max()) + 1), -1, dtype=np.int64)
    node = np.arange(tree.n_nodes, dtype=np.int64)
    out[node, depth] = node
    for d in range(int(depth.max()), 0, -1):  # fill each node's depth-(d−1) ancestor from depth d
        rows = np.flatnonzero(depth >= d)
        out[rows, d - 1] = tree.parent[out[rows, d]]
    return out


def _leaf_ancestors(spark: SparkSession, tree: GeoTree) -> DataFrame:
    """``(node, up)``: every leaf geounit of ``tree`` with the array of its ancestors, itself
    included (on the conventional spine: the geocode prefixes of a block — block group, tract,
    county, state — and the root)."""
    leaves = np.unique(np.asarray(tree.block_node, dtype=np.int64))
    ancestors = _ancestors(tree)[leaves]
    depth = tree.depth[leaves]
    width = ancestors.shape[1]
    offsets = np.concatenate([[0], np.cumsum(depth + 1)]).astype(np.int32)
    keep = np.arange(width)[None, :] <= depth[:, None]
    up = pa.ListArray.from_arrays(pa.array(offsets), pa.array(ancestors[keep], type=pa.int64()))
    return spark.createDataFrame(pa.table({"node": pa.array(leaves, type=pa.int64()), "up": up}))


def level_truth(spark: SparkSession, tree: GeoTree, cells: DataFrame) -> DataFrame:
    """Every geounit's non-zero true cells ``(node, cell, count)``, from the block cells.

    Each block cell is joined to its leaf's ancestors (the spine's geocode prefixes on the
    conventional spine) and counted once for each of them; ``groupBy(node, cell)`` sums them —
    one shuffle for all levels, whatever the spine (a bypassed level or a coarser leaf level
    only changes the ancestor lists)."""
    # optional dependency (the spark extra): imported where Spark runs
    from pyspark.sql import functions as F

    up = _leaf_ancestors(spark, tree)
    return (
        cells.join(F.broadcast(up), "node")
        .select(F.explode("up").alias("node"), "cell", "count")
        .groupBy("node", "cell")
        .agg(F.sum("count").alias("count"))
    )


def spark_truth(
    spark: SparkSession, tree: GeoTree, counts: np.ndarray | sp.spmatrix, n_cells: int
) -> sp.csr_matrix:
    """Every geounit's true histogram, summed by Spark, as an int64 CSR ``(n_nodes, n_cells)``.

    Same numbers as ``tree.aggregate(counts)``; only the non-zero cells come back to the driver."""
    return truth_of_cells(spark, tree, block_cells(spark, tree, counts), n_cells)


def truth_of_cells(
    spark: SparkSession, tree: GeoTree, cells: DataFrame, n_cells: int
) -> sp.csr_matrix:
    """Every geounit's true histogram, int64 CSR ``(n_nodes, n_cells)``, from long sparse leaf
    cells ``(node, cell, count)`` already in Spark (:func:`block_cells`, or the person records
    recoded on the executors, :func:`engine.spark.persons.block_node_cells`)."""
    table = level_truth(spark, tree, cells).toArrow()
    node = table.column("node").to_numpy()
    cell = table.column("cell").to_numpy().astype(np.int64)
    count = table.column("count").to_numpy()
    if node.size and (cell.min() < 0 or cell.max() >= n_cells):
        raise ValidationError(f"a histogram cell is outside 0…{n_cells - 1}")
    out = sp.csr_matrix((count, (node, cell)), shape=(tree.n_nodes, n_cells), dtype=np.int64)
    out.sum_duplicates()
    out.eliminate_zeros()
    out.sort_indices()
    return out
