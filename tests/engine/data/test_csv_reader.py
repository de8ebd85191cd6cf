"""The one reader of delimited inputs: sources, delimiters, encodings, typed columns, located rows.

Every case reads through :class:`engine.data.csv_reader.CsvReader` (directly or through a loader);
files are also read in many small batches (``BLOCK_BYTES`` lowered) to show that a batch boundary
changes neither the numbers nor a problem's row.
"""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import numpy as np
import pytest

import engine.data.csv_reader as csv_reader
from engine.core.errors import DataValidationError
from engine.data.block_csv import load_block_csv
from engine.data.columns import Codes, Integers
from engine.data.csv_layout import detect_delimiter
from engine.data.csv_reader import CsvReader, read_csv_table
from engine.data.pl94171 import read_pl94171
from engine.data.ppmf import load_ppmf
from engine.data.ri2010 import COLUMNS, load_ri2010
from engine.data.samples import samples_dir

ROW = ["440010301001000", "1", "0", "1", *["0"] * 6, "1", "0", "1", *["0"] * 6]
SAMPLES = samples_dir()
RI = SAMPLES / "ri2010" / "ri2010_blocks.csv"
PERRY = SAMPLES / "ppmf_perry_al" / "ppmf_perry_al_persons.csv"


def _small_batches(monkeypatch: pytest.MonkeyPatch, size: int = 16 * 1024) -> None:
    monkeypatch.setattr(csv_reader, "BLOCK_BYTES", size)


def _problems(fn) -> list[tuple[int | None, str | None, str]]:
    with pytest.raises(DataValidationError) as caught:
        fn()
    return [(p.row, p.column, p.message) for p in caught.value.problems]


@pytest.mark.parametrize("delimiter", [",", ";", "\t", "|"])
def test_bom_crlf_and_any_common_delimiter_load(delimiter):
    text = "\ufeff" + delimiter.join(COLUMNS) + "\r\n" + delimiter.join(ROW) + "\r\n"
    histogram = load_ri2010(text.encode())
    assert histogram.total == 1


def test_detect_delimiter_prefers_the_split_that_finds_the_columns():
    assert detect_delimiter("a;b|c;d", ["a", "b|c", "d"]) == ";"
    assert detect_delimiter('"GEOID"\t"pop"', ["GEOID", "pop"]) == "\t"


def test_named_file_like_and_text_stream_sources():
    upload = io.BytesIO((",".join(COLUMNS) + "\n" + ",".join(ROW) + "\n").encode())
    upload.name = "my_blocks.csv"
    assert load_ri2010(upload).total == 1
    text = io.StringIO(",".join(COLUMNS) + "\n" + ",".join(ROW) + "\n")
    assert load_ri2010(text).total == 1


def test_missing_path_and_directory(tmp_path):
    with pytest.raises(DataValidationError, match="no such file"):
        load_ri2010(tmp_path / "nope.csv")
    with pytest.raises(DataValidationError, match="is a folder, not a file"):
        load_ri2010(tmp_path)


def test_oversized_field_is_located_and_clipped():
    data = (",".join(COLUMNS) + "\n" + "1" * 200_000 + "," + ",".join(ROW[1:]) + "\n").encode()
    with pytest.raises(DataValidationError) as caught:
        load_ri2010(data)
    (problem,) = caught.value.problems
    assert problem.row == 1 and problem.column == "GEOID"
    assert len(problem.message) < 200  # the offending value is quoted clipped


def test_integers_bounds_and_unicode_digits():
    table = read_csv_table(
        b"n\n5\n\xd9\xa3\n-2\n200\n +7 \n",
        ["n"],
        kinds={"n": Integers(minimum=0, maximum=100, what="age")},
    )
    assert table.values["n"].tolist() == [5, 0, 0, 0, 7]
    assert table.ok("n").tolist() == [True, False, False, False, True]
    assert [(p.row, p.message) for p in table.problems] == [
        (2, "'\u0663' is not a whole number (it has digits that are not ASCII 0-9)"),
        (3, "negative age -2"),
        (4, "age 200 is above 100"),
    ]


def test_codes_restore_dropped_leading_zeros_and_name_unknown_ones():
    table = read_csv_table(
        b"r\n01\n1\n 7 \n64\n001\n",
        ["r"],
        kinds={"r": Codes(tuple(f"{i:02d}" for i in range(1, 64)), width=2, keep_text=True)},
    )
    assert table.values["r"].tolist() == [0, 0, 6, 0, 0]
    assert table.text["r"].to_pylist() == ["01", "1", "7", "64", "001"]
    assert [(p.row, p.message.split(" (")[0]) for p in table.problems] == [
        (4, "unknown code '64'"),
        (5, "unknown code '001'"),
    ]


def test_an_upload_read_before_is_rewound():
    upload = io.BytesIO((",".join(COLUMNS) + "\n" + ",".join(ROW) + "\n").encode())
    upload.read()  # e.g. the app showed a preview first
    assert load_ri2010(upload).total == 1


def test_blank_lines_are_skipped_and_every_other_row_keeps_its_number():
    data = RI.read_bytes()
    lines = data.split(b"\n")
    irregular = b"\n".join([*lines[:100], b"", b"  ", b"\r", *lines[100:]])
    plain, spaced = load_ri2010(data), load_ri2010(irregular)
    assert (plain.counts == spaced.counts).all()
    assert plain.geography.equals(spaced.geography)
    fields = lines[150].split(b",")
    fields[3] = b"x"
    lines[150] = b",".join(fields)
    bad = b"\n".join([*lines[:100], b"", b"  ", *lines[100:]])
    ((row, column, message),) = _problems(lambda: load_ri2010(bad))
    name = lines[0].split(b",")[3].decode()
    assert (row, column) == (152, name) and "'x' is not a whole number" in message


def test_padded_values_are_stripped():
    text = ",".join(COLUMNS) + "\n" + ",".join(f" {v}\t" for v in ROW) + "\n"
    assert load_ri2010(text.encode()).total == 1
    assert load_ri2010((text + "\n\n").encode()).total == 1


def test_gzip_is_read_as_a_stream_and_a_truncated_one_refused():
    data = RI.read_bytes()
    packed = gzip.compress(data[: len(data) // 2]) + gzip.compress(data[len(data) // 2 :])
    assert load_ri2010(packed).total == load_ri2010(data).total  # two gzip members
    assert "damaged or truncated gzip" in _problems(lambda: load_ri2010(packed[:-30]))[0][2]
    limit = _problems(lambda: load_ri2010(packed, max_bytes=len(data) - 1))[0][2]
    assert "the decompressed file is" in limit and "size limit" in limit


@pytest.mark.parametrize(("loader", "path"), [(load_ri2010, RI), (load_ppmf, PERRY)])
def test_batch_boundaries_change_nothing(loader, path: Path, monkeypatch) -> None:
    whole = loader(path)
    _small_batches(monkeypatch)
    batched = loader(path)
    assert (whole.sparse_counts != batched.sparse_counts).nnz == 0
    assert whole.geography.equals(batched.geography)
    assert whole.extra.keys() == batched.extra.keys()


def test_problems_in_many_batches_keep_their_rows_and_cap(tmp_path: Path, monkeypatch) -> None:
    lines = RI.read_text().splitlines()
    header = lines[0].split(",")
    column = header.index("pop_other")
    for k in range(30):
        row = 200 + 700 * k
        fields = lines[row].split(",")
        fields[column] = f"{k}x"
        lines[row] = ",".join(fields)
    lines.insert(5000, lines[4999] + ",9")  # a ragged row: the rows after it keep their numbers
    path = tmp_path / "blocks.csv"
    path.write_text("\n".join(lines) + "\n")
    outcomes = []
    for small in (False, True):
        if small:
            _small_batches(monkeypatch, 8 * 1024)
        outcomes.append(_problems(lambda: load_ri2010(path)))
    whole, batched = outcomes
    assert whole == batched
    ragged = [p for p in whole if "fields but the header has 19" in p[2]]
    assert [p[0] for p in ragged] == [5000]
    values = [p for p in whole if p[1] == "pop_other"]
    expected = [200 + 700 * k + (1 if 200 + 700 * k >= 5000 else 0) for k in range(10)]
    assert [p[0] for p in values[:10]] == expected
    assert values[10][0] is None and "… and 20 more row(s)" in values[10][2]


def test_the_header_again_is_found_in_a_later_batch_and_left_out(tmp_path, monkeypatch):
    lines = PERRY.read_text().splitlines()
    lines.insert(7000, lines[0])
    path = tmp_path / "two.csv"
    path.write_text("\n".join(lines) + "\n")
    _small_batches(monkeypatch)
    problems = _problems(lambda: load_ppmf(path))
    assert problems == [
        (
            7000,
            None,
            "the header line appears again in the data; were two exports concatenated? Keep "
            "one header and check for repeated records",
        )
    ]


def test_text_columns_only_find_the_header_again():
    data = b"GEOID,entity\n440010301001000,a\n440010301001001,b\nGEOID,Entity\n440010301001002,c\n"
    table = read_csv_table(data, ["GEOID", "entity"])
    assert table.rows.tolist() == [1, 2, 4]
    assert [p.row for p in table.problems] == [3]


def test_a_byte_that_is_not_utf8_is_located_in_any_batch(tmp_path, monkeypatch):
    lines = RI.read_bytes().split(b"\n")
    lines[3000] = lines[3000].replace(b",", b",\xe9", 1)
    path = tmp_path / "latin.csv"
    path.write_bytes(b"\n".join(lines))
    _small_batches(monkeypatch)
    ((row, _, message),) = _problems(lambda: load_ri2010(path))
    assert row == 3000 and "not valid UTF-8 text: byte 0xe9" in message


def test_latin1_geographic_header_is_transcoded(monkeypatch):
    pl = SAMPLES / "pl94171_ri2018"
    names = ["rigeo2018_2020Style.pl", *(f"ri0000{k}2018_2020Style.pl" for k in (1, 2, 3))]
    files = [(pl / n).read_bytes() for n in names]
    plain = read_pl94171(*files)
    geo = files[0].replace(b"Providence", b"Provid\xe9nce")  # a Latin-1 e-acute
    assert geo != files[0]
    accented = read_pl94171(geo, *files[1:])
    assert accented.geography.equals(plain.geography)
    for name in plain.tables:
        assert plain.tables[name].equals(accented.tables[name])


def test_a_line_longer_than_a_batch_is_a_located_problem(monkeypatch):
    _small_batches(monkeypatch, 4 * 1024)
    data = ",".join(COLUMNS) + "\n" + ",".join(ROW) + "\n" + "4" * 20_000 + "\n"
    problems = _problems(lambda: load_ri2010(data.encode()))
    assert problems[0][0] == 2 and "longer than" in problems[0][2]


def test_headerless_layout_refuses_another_delimiter():
    reader_error = _problems(
        lambda: CsvReader(b"a,b,c\n", ["A"], field_names=["A", "B", "C"], delimiter="|")
    )
    assert reader_error[0][0] == 1 and "contains comma characters instead" in reader_error[0][2]


def test_block_csv_with_many_columns_to_one_cell_refuses_int64_overflow():
    mapping = {
        "schema": {"attributes": [{"name": "ALL", "levels": ["all"]}]},
        "geography": {"geoid": "GEOID"},
        "cells": {"a": {"ALL": "all"}, "b": {"ALL": "all"}},
    }
    big = "999999999999999999"
    data = f"GEOID,a,b\n440010301001000,{big},{big}\n" + "".join(
        f"4400103010010{k:02d},{big},{big}\n" for k in range(1, 10)
    )
    problems = _problems(lambda: load_block_csv(data.encode(), mapping))
    assert len(problems) == 1
    row, column, message = problems[0]
    assert row == 1 and column == "a" and "more than int64 can hold" in message


def test_values_beyond_int64_are_refused_not_wrapped():
    data = ",".join(COLUMNS) + "\n" + ",".join(["440010301001000", "9" * 19, *ROW[2:]]) + "\n"
    ((row, column, message),) = _problems(lambda: load_ri2010(data.encode()))
    assert (row, column) == (1, "pop") and "int64" in message
    streamed = CsvReader(data.encode(), ["pop"]).read({"pop": Integers()})
    assert streamed.values["pop"].tolist() == [0] and not streamed.ok("pop")[0]


def test_read_values_are_typed_arrays_not_python_objects():
    table = read_csv_table(RI, ["GEOID", "pop"], kinds={"pop": Integers()})
    assert table.values["pop"].dtype == np.int64
    assert table.text["GEOID"].type == "string"
    assert table.n_rows == 25_181
