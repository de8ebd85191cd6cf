"""The chunk iterators of a TopDown result: same rows as the whole tables, bounded chunks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from engine.core.errors import ValidationError
from engine.topdown import export as E
from tests.engine.topdown.helpers import engine_run, ri_subset, tiny_allocation, tiny_histogram


def _plain(chunks, like: pd.DataFrame) -> pd.DataFrame:
    """The chunks concatenated, their text columns in the reference's dtype."""
    frame = pd.concat(list(chunks), ignore_index=True)
    for column in frame.columns:
        if frame[column].dtype != like[column].dtype:  # categoricals (or their union: object)
            frame[column] = frame[column].astype(like[column].dtype)
    return frame


@pytest.fixture(scope="module")
def ri_result():
    from engine.dp.presets import load_topdown_preset

    hist = ri_subset(n_tracts_per_county=1, counties=2)
    alloc = load_topdown_preset("ri2010-production-like")["persons"].with_rho(2)
    return engine_run(hist, alloc, seed=3)


@pytest.mark.parametrize("chunk_rows", [1, 7, 100, 10**9])
def test_estimate_chunks_concatenate_to_the_tidy_table(ri_result, chunk_rows):
    chunks = list(E.iter_estimate_frames(ri_result, chunk_rows=chunk_rows))
    pd.testing.assert_frame_equal(_plain(chunks, ri_result.to_tidy()), ri_result.to_tidy())
    biggest_query = max(q.size for q in ri_result.queries)
    assert max(len(c) for c in chunks) <= max(chunk_rows, biggest_query)
    assert E.estimate_rows(ri_result) == len(ri_result.to_tidy())
    if chunk_rows == 100:
        assert len(chunks) > len(ri_result.queries)  # really split, not one frame per query


def test_sparse_estimates_are_the_rows_with_a_non_zero_count(ri_result):
    tidy = ri_result.to_tidy()
    sparse = _plain(E.iter_estimate_frames(ri_result, sparse=True, chunk_rows=50), tidy)
    expected = tidy[(tidy["true"] != 0) | (tidy["estimate"] != 0)].reset_index(drop=True)
    pd.testing.assert_frame_equal(sparse, expected)
    assert 0 < len(sparse) < len(tidy)


def test_level_histograms_are_the_level_rows_of_the_estimates(ri_result):
    """The dense reader the "spine stops above the block level" error points to."""
    for level in ri_result.tree.levels:
        nodes = ri_result.tree.nodes_at_level(level)
        ids = ri_result.level_ids(level)
        assert ids == tuple(ri_result.tree.node_id[i] for i in nodes) and len(ids) == len(nodes)
        np.testing.assert_array_equal(ri_result.level_histogram(level), ri_result.estimates[nodes])
    blocks = ri_result.level_histogram(ri_result.tree.levels[-1])
    assert blocks.sum() == ri_result.estimates[0].sum()


def test_other_queries_and_measurement_chunks(ri_result):
    total = ri_result.to_tidy(["TOTAL"])
    part = _plain(E.iter_estimate_frames(ri_result, ["TOTAL"], chunk_rows=5), total)
    pd.testing.assert_frame_equal(part, total)
    chunks = list(E.iter_measurement_frames(ri_result, chunk_rows=40))
    measurements = ri_result.measurements
    pd.testing.assert_frame_equal(_plain(chunks, measurements), measurements)
    assert max(len(c) for c in chunks) <= 40
    assert E.measurement_rows(ri_result) == len(ri_result.measurements)


def test_microdata_chunks_hold_whole_blocks(ri_result):
    whole = E.microdata_frame(ri_result)
    assert len(whole) == int(ri_result.block_histogram().sum())
    chunks = list(E.iter_microdata_frames(ri_result, chunk_rows=500))
    plain = {c: "object" for c in whole.columns}
    pd.testing.assert_frame_equal(
        pd.concat(chunks, ignore_index=True).astype(plain), whole.astype(plain)
    )
    largest_block = int(ri_result.block_histogram().sum(axis=1).max())
    assert all(len(c) <= max(500, largest_block) for c in chunks) and len(chunks) > 2
    seen: set[str] = set()
    for chunk in chunks:  # a block never straddles two chunks
        blocks = set(chunk["GEOID"])
        assert not blocks & seen
        seen |= blocks
    # one row per person: the per-block counts match the estimated block totals
    per_block = whole.groupby("GEOID").size()
    ids = [ri_result.tree.node_id[i] for i in ri_result.tree.block_node]
    totals = pd.Series(ri_result.block_histogram().sum(axis=1), index=ids)
    assert per_block.reindex(totals.index, fill_value=0).to_numpy().tolist() == totals.tolist()


def test_microdata_of_an_empty_run_has_its_columns():
    hist = tiny_histogram()
    hist = type(hist)(hist.schema, hist.levels, hist.geography, np.zeros_like(hist.counts))
    result = engine_run(hist, tiny_allocation("1e6"), seed=0)
    chunks = list(E.iter_microdata_frames(result))
    assert len(chunks) == 1 and chunks[0].empty and "GEOID" in chunks[0].columns


@pytest.mark.parametrize("bad", [0, -5, True, 2.5])
def test_chunk_rows_must_be_a_positive_whole_number(ri_result, bad):
    with pytest.raises(ValidationError, match="chunk_rows"):
        next(E.iter_estimate_frames(ri_result, chunk_rows=bad))


def test_estimate_rows_hold_the_answers_of_every_geounit(ri_result):
    """Independent of to_tidy: each query's rows are its answers on the histograms, node-major."""
    from engine.topdown.queries import query_group

    tidy = pd.concat(E.iter_estimate_frames(ri_result, chunk_rows=64), ignore_index=True)
    start = 0
    for name in ri_result.query_names:
        group = query_group(ri_result.schema, name)
        n = ri_result.tree.n_nodes * group.size
        part = tidy.iloc[start : start + n]
        start += n
        assert (part["query"].astype(str) == name).all()
        assert part["estimate"].tolist() == group.answer(ri_result.estimates).reshape(-1).tolist()
        assert part["true"].tolist() == group.answer(ri_result.truth).reshape(-1).tolist()
        ids = np.repeat(np.asarray(ri_result.tree.node_id, dtype=object), group.size)
        assert part["geounit"].astype(str).tolist() == [str(i) for i in ids]
        assert part["cell"].astype(str).tolist()[: group.size] == [str(c) for c in group.labels]
    assert start == len(tidy)
