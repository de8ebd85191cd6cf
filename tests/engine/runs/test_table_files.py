"""Run tables written chunk by chunk as CSV or Parquet and read back with checks (docs/topdown.md "Outputs")."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from engine.core.errors import OutputError, ValidationError
from engine.runs.output_options import AUTO_CSV_MAX_ROWS
from engine.runs.table_files import (
    check_table,
    iter_table,
    read_table,
    resolve_format,
    table_description,
    write_table,
)


def _frame(start: int, n: int) -> pd.DataFrame:
    rows = np.arange(start, start + n)
    return pd.DataFrame(
        {
            "geolevel": "Block",
            "geounit": [f"{r:015d}" for r in rows],
            "query": "TOTAL",
            "cell": "total",
            "true": rows.astype(np.int64),
            "estimate": (rows * 2).astype(np.int64),
        }
    )


def test_auto_is_csv_up_to_the_threshold_then_parquet():
    assert resolve_format("auto", AUTO_CSV_MAX_ROWS) == "csv"
    assert resolve_format("auto", AUTO_CSV_MAX_ROWS + 1) == "parquet"
    assert resolve_format("csv", 10**9) == "csv" and resolve_format("parquet", 1) == "parquet"
    with pytest.raises(ValidationError, match="expected one of auto, csv, parquet; got 'xlsx'"):
        resolve_format("xlsx", 1)


def test_csv_and_parquet_hold_the_same_table(tmp_path):
    chunks = [_frame(0, 30), _frame(30, 25), _frame(55, 1)]
    whole = pd.concat(chunks, ignore_index=True)
    csv = write_table(iter(chunks), tmp_path, "estimates", "csv")
    par = write_table(iter(chunks), tmp_path, "estimates", "parquet", description={"x": 1})
    assert (csv.file, par.file) == ("estimates.csv", "estimates.parquet")
    assert csv.rows == par.rows == 56 and csv.chunks == par.chunks == 3
    a, b = read_table(tmp_path / csv.file), read_table(tmp_path / par.file)
    pd.testing.assert_frame_equal(a, b)
    assert a["geounit"].tolist() == whole["geounit"].tolist()  # leading zeros kept
    assert a["true"].tolist() == whole["true"].tolist()
    assert table_description(tmp_path / par.file) == {"table": "estimates", "x": 1}
    streamed = pd.concat(iter_table(tmp_path / par.file, chunk_rows=10), ignore_index=True)
    pd.testing.assert_frame_equal(streamed, b)
    assert max(len(f) for f in iter_table(tmp_path / csv.file, chunk_rows=10)) == 10


def test_one_row_group_per_chunk_and_no_chunk_is_kept(tmp_path):
    """The writer lets each chunk go before it asks for the next (checked with weak references)."""
    alive: list[weakref.ref] = []

    def chunks():
        for i in range(6):
            gc.collect()
            assert all(ref() is None for ref in alive), "the writer kept an earlier chunk"
            frame = _frame(100 * i, 100 if i < 5 else 37)
            alive.append(weakref.ref(frame))
            yield frame
            del frame  # this generator holds no chunk either

    for fmt in ("csv", "parquet"):
        alive.clear()
        table = write_table(chunks(), tmp_path, f"t_{fmt}", fmt)
        assert table.rows == 537 and table.chunks == 6 and table.max_chunk_rows == 100
    handle = pq.ParquetFile(tmp_path / "t_parquet.parquet")
    sizes = [handle.metadata.row_group(i).num_rows for i in range(handle.num_row_groups)]
    assert sizes == [100, 100, 100, 100, 100, 37]


def test_an_empty_table_keeps_its_columns(tmp_path):
    import pyarrow as pa

    schema = pa.schema([("geolevel", pa.string()), ("true", pa.int64())])
    for fmt in ("csv", "parquet"):
        table = write_table(iter(()), tmp_path, f"e_{fmt}", fmt, schema=schema)
        back = read_table(tmp_path / table.file)
        assert table.rows == 0 and list(back.columns) == ["geolevel", "true"] and back.empty


def test_a_truncated_or_foreign_parquet_file_is_refused_by_name(tmp_path):
    table = write_table(iter([_frame(0, 5000)]), tmp_path, "estimates", "parquet")
    path = tmp_path / table.file
    assert check_table(path, rows=5000) == 5000
    with pytest.raises(OutputError, match="holds 5,000 rows but 4,999 were written"):
        check_table(path, rows=4999)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    for reader in (check_table, read_table, table_description):
        with pytest.raises(OutputError, match=r"estimates\.parquet: not a complete Parquet file"):
            reader(path)
    with pytest.raises(OutputError, match="not a complete Parquet file"):
        list(iter_table(path))
    foreign = tmp_path / "foreign.parquet"
    _frame(0, 3).to_parquet(foreign)
    with pytest.raises(OutputError, match="without PHExplore's table description"):
        check_table(foreign)
    with pytest.raises(OutputError, match="missing; the run folder is incomplete"):
        check_table(tmp_path / "nothing.parquet")
    csv = write_table(iter([_frame(0, 4)]), tmp_path, "m", "csv")
    assert check_table(tmp_path / csv.file, rows=4) == 4
    with pytest.raises(OutputError, match="holds 4 rows but 5 were written"):
        check_table(tmp_path / csv.file, rows=5)


def test_write_table_refuses_an_unknown_format(tmp_path):
    with pytest.raises(ValidationError, match="csv or parquet"):
        write_table(iter([]), tmp_path, "x", "auto")
