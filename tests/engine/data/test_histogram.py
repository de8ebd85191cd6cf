"""BlockHistogram holds its counts dense or sparse; the two forms answer alike."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from engine.core.errors import ValidationError
from engine.data import histogram as histogram_module
from engine.data.histogram import BlockHistogram, keep_blocks
from engine.schema.attributes import Attribute, Schema

SCHEMA = Schema("toy", (Attribute("A", ("a0", "a1")), Attribute("B", ("b0", "b1", "b2"))))


def _pair() -> tuple[BlockHistogram, BlockHistogram]:
    rng = np.random.default_rng(3)
    dense = rng.integers(0, 3, size=(9, SCHEMA.size)) * (rng.random((9, SCHEMA.size)) < 0.4)
    dense[4] = 0
    geography = pd.DataFrame(
        {"County": [f"c{i // 3}" for i in range(9)], "Block": [f"b{i}" for i in range(9)]}
    )
    levels = ("County", "Block")
    extra = {"housing_units": np.arange(9)}
    return (
        BlockHistogram(SCHEMA, levels, geography, dense, extra=dict(extra)),
        BlockHistogram(SCHEMA, levels, geography, sp.coo_matrix(dense), extra=dict(extra)),
    )


def test_dense_and_sparse_forms_answer_alike():
    dense, sparse = _pair()
    assert not dense.is_sparse and sparse.is_sparse
    assert sparse.shape == dense.shape == (9, SCHEMA.size)
    assert sparse.n_blocks == dense.n_blocks and sparse.total == dense.total
    assert sparse.nnz == dense.nnz == np.count_nonzero(dense.counts)
    np.testing.assert_array_equal(sparse.block_totals, dense.block_totals)
    assert sparse.sparse_counts.dtype == np.int64 and sparse.sparse_counts.has_sorted_indices
    np.testing.assert_array_equal(sparse.sparse_counts.toarray(), dense.sparse_counts.toarray())
    assert b"".join(c.tobytes() for c in sparse.dense_row_chunks(2)) == (
        np.ascontiguousarray(dense.counts, dtype=np.int64).tobytes()
    )
    np.testing.assert_array_equal(sparse.counts, dense.counts)  # small: densified on request
    assert "sparse" in repr(sparse)


def test_subsets_keep_the_form_and_the_unit_frame():
    dense, sparse = _pair()
    keep = np.array([True, False, True] * 3)
    a, b = keep_blocks(dense, keep), keep_blocks(sparse, keep)
    assert b.is_sparse and not a.is_sparse
    np.testing.assert_array_equal(a.counts, b.sparse_counts.toarray())
    np.testing.assert_array_equal(b.extra["housing_units"], np.flatnonzero(keep))
    again = sparse.replace(extra={})
    assert again.is_sparse and again.extra == {} and again.total == sparse.total


def test_negative_counts_are_found_in_either_form():
    dense, sparse = _pair()
    assert dense.first_negative_block() is None and sparse.first_negative_block() is None
    counts = dense.counts.copy()
    counts[6, 2] = -1
    counts[7, 0] = -2
    assert BlockHistogram(SCHEMA, dense.levels, dense.geography, counts).first_negative_block() == 6
    broken = BlockHistogram(SCHEMA, dense.levels, dense.geography, sp.csr_matrix(counts))
    assert broken.first_negative_block() == 6


def test_large_sparse_histograms_refuse_to_densify(monkeypatch):
    _, sparse = _pair()
    monkeypatch.setattr(histogram_module, "MAX_DENSE_BLOCK_CELLS", 10)
    with pytest.raises(ValidationError, match=r"9 blocks × 6 cells = 54 cells, too many"):
        _ = sparse.counts
    assert sparse.total > 0  # the sparse answers still work


def test_read_only_in_either_form():
    dense, sparse = _pair()
    dense.set_read_only()
    sparse.set_read_only()
    with pytest.raises(ValueError, match="read-only"):
        dense.counts[0, 0] = 5
    with pytest.raises(ValueError, match="read-only"):
        sparse.sparse_counts.data[0] = 5


def test_shape_mismatches_are_refused():
    dense, _ = _pair()
    with pytest.raises(ValueError, match="counts must have shape"):
        BlockHistogram(SCHEMA, dense.levels, dense.geography, sp.csr_matrix((9, 5)))
    with pytest.raises(ValueError, match="geography has 8 rows"):
        BlockHistogram(SCHEMA, dense.levels, dense.geography[:8], sp.csr_matrix((9, 6)))
