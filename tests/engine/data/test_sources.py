"""The stream every delimited file is read through: text as given, blank lines noted wherever the
pieces Arrow asks for happen to cut, bad bytes located, limits kept."""

from __future__ import annotations

import gzip

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.errors import DataValidationError
from engine.data.sources import TextStream, read_source

LINES = st.lists(st.sampled_from([b"a", b"", b"b,c", b"\r", b"  "]), max_size=25)


def _blank_lines(data: bytes) -> list[int]:
    """The 1-based numbers of the empty lines (``""`` or a lone ``"\\r"``) of ``data``."""
    if not data:
        return []
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines = lines[:-1]
    ended = data.endswith(b"\n")
    return [
        i + 1
        for i, line in enumerate(lines)
        if line in (b"", b"\r") and (i < len(lines) - 1 or ended)
    ]


@settings(max_examples=300, deadline=None)
@given(lines=LINES, end=st.booleans(), sizes=st.lists(st.integers(1, 7), min_size=1, max_size=4))
def test_blank_lines_are_found_whatever_the_pieces(lines, end, sizes) -> None:
    data = b"\n".join(lines) + (b"\n" if end and lines else b"")
    stream = TextStream(data, "x.csv", 1 << 20)
    out, k = b"", 0
    while piece := stream.read(sizes[k % len(sizes)]):
        out += piece
        k += 1
    assert out == data
    assert stream.blank_lines == _blank_lines(data)


def test_header_is_consumed_and_lines_count_after_it() -> None:
    stream = TextStream(b"\xef\xbb\xbfa,b\n\n1,2\n", "x.csv", 100)
    assert stream.first_line() == b"a,b"
    stream.skip_first_line()
    assert stream.read(100) == b"\n1,2\n" and stream.blank_lines == [1]


def test_a_bad_byte_is_located_across_pieces() -> None:
    data = b"a,b\n" + b"1,2\n" * 300_000 + b"3,\xc3\n"  # a character cut short by the line end
    with pytest.raises(DataValidationError) as caught:
        stream = TextStream(data, "x.csv", 1 << 30)
        while stream.read(1 << 16):
            pass
    (problem,) = caught.value.problems
    assert problem.row == 300_001 and "byte 0xc3" in problem.message


def test_latin1_is_transcoded_and_utf8_refused_naming_the_byte() -> None:
    data = b"name\nS\xe3o Paulo\n"
    stream = TextStream(data, "x.csv", 100, encoding="latin-1")
    assert stream.read(100) == "name\nSão Paulo\n".encode()
    with pytest.raises(DataValidationError, match="byte 0xe3 at offset 6"):
        TextStream(data, "x.csv", 100)


def test_limits_of_raw_and_decompressed_bytes() -> None:
    packed = gzip.compress(b"a\n" * 1000)
    with pytest.raises(DataValidationError, match="the decompressed file is"):
        stream = TextStream(packed, "x.csv.gz", 500)
        while stream.read(64):
            pass
    with pytest.raises(DataValidationError, match="over the size limit of 10 bytes"):
        TextStream(b"a\n" * 100, "x.csv", 10)
    assert read_source(packed, max_bytes=5000, name="x") == b"a\n" * 1000
    with pytest.raises(DataValidationError, match="the file is empty"):
        read_source(b"  \n", max_bytes=10, name="x")
