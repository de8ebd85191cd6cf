"""Tests of the shared input checks: sources, delimiters, encodings and located column checks."""

from __future__ import annotations

import io

import pytest

from engine.core.errors import DataValidationError
from engine.data.ri2010 import COLUMNS, load_ri2010
from engine.data.validate import detect_delimiter, int_column, read_csv_table

ROW = ["440010301001000", "1", "0", "1", *["0"] * 6, "1", "0", "1", *["0"] * 6]


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


def test_int_column_bounds_and_unicode_digits():
    table = read_csv_table(b"n\n5\n\xd9\xa3\n-2\n200\n", ["n"])
    values, problems = int_column(table, "n", minimum=0, maximum=100, what="age")
    assert values.tolist() == [5, 0, 0, 0]
    assert [(p.row, p.message) for p in problems] == [
        (2, "'\u0663' is not a whole number (it has digits that are not ASCII 0-9)"),
        (3, "negative age -2"),
        (4, "age 200 is above 100"),
    ]


def test_an_upload_read_before_is_rewound():
    upload = io.BytesIO((",".join(COLUMNS) + "\n" + ",".join(ROW) + "\n").encode())
    upload.read()  # e.g. the app showed a preview first
    assert load_ri2010(upload).total == 1


def test_row_by_row_fallback_gives_the_same_histogram_as_the_arrow_reader():
    from engine.data.samples import samples_dir

    data = (samples_dir() / "ri2010" / "ri2010_blocks.csv").read_bytes()
    lines = data.split(b"\n")
    irregular = b"\n".join([*lines[:100], b"", *lines[100:]])  # a blank line forces the fallback
    fast, slow = load_ri2010(data), load_ri2010(irregular)
    assert (fast.counts == slow.counts).all()
    assert fast.geography.equals(slow.geography)


def test_padded_values_are_stripped_alike_by_both_readers():
    text = ",".join(COLUMNS) + "\n" + ",".join(f" {v}\t" for v in ROW) + "\n"
    assert load_ri2010(text.encode()).total == 1
    assert load_ri2010((text + "\n\n").encode()).total == 1  # trailing blank lines: fallback
