"""A user's delimited file as checked UTF-8 text, streamed piece by piece (docs/data.md "What is checked").

Every loader accepts a path, the bytes of a file, or a binary file-like object (an upload). This
module turns any of them into a :class:`TextStream`: an object with ``read(n)`` that
:mod:`engine.data.csv_reader` hands to Arrow's streaming CSV reader, so a file is never held whole.
While the bytes go by, the stream

* refuses a path that is missing, a folder, a link loop or broken link, unreadable, a pipe or device
  or over the size limit (:func:`engine.core.sniff.check_path`), and a file-like source over it;
* decompresses gzip (several members allowed), refusing more than the size limit out and a damaged
  or truncated file;
* names and refuses what is not text (zip/xlsx, UTF-16/32, Parquet, PDF, binary data:
  :func:`engine.core.sniff.check_content`), drops a UTF-8 byte-order mark;
* checks the bytes are UTF-8 (ASCII pieces are skipped at memory speed), or transcodes Latin-1 for
  the formats that allow it, and locates the first byte that is not;
* notes the lines that are empty (which the reader skips, keeping every other row's number).

Problems raise :class:`~engine.core.errors.DataValidationError` naming the file (and the row of a
bad byte). Nothing is evaluated or unpickled.
"""

from __future__ import annotations

import codecs
import io
import os
import zlib
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

from engine.core.errors import DataValidationError, Problem
from engine.core.sniff import GZIP_MAGIC, check_content, check_path, too_large

DEFAULT_MAX_BYTES = 200 * 1024 * 1024
"""Default size limit of one input file (200 MB); every loader takes ``max_bytes`` to change it."""

DataSource = str | os.PathLike[str] | bytes | bytearray | memoryview | BinaryIO
"""A path, the bytes of a file, or a binary file-like object (e.g. a Streamlit upload)."""

PIECE = 1 << 20
"""Bytes asked of a file-like source at a time (never the whole limit at once)."""
_HEAD = 8192
"""Bytes whose magic numbers say what a file is (:func:`engine.core.sniff.check_content`)."""


def source_name(source: DataSource, name: str | None = None) -> str:
    """A readable name of ``source`` for problem messages."""
    if name:
        return name
    if isinstance(source, str | os.PathLike):
        return Path(source).name
    if isinstance(source, bytes | bytearray | memoryview):
        return "<uploaded data>"
    return Path(str(getattr(source, "name", "<uploaded file>"))).name


def _fail(label: str, message: str, row: int | None = None) -> NoReturn:
    raise DataValidationError([Problem(label, message, row)])


class _Raw:
    """The raw bytes of a source, at most ``max_bytes`` of them (refused beyond)."""

    def __init__(self, source: DataSource, label: str, max_bytes: int) -> None:
        self.label, self.max_bytes, self.total = label, max_bytes, 0
        self.handle: Any
        if isinstance(source, str | os.PathLike):
            path = Path(source)
            check_path(path, label, max_bytes)
            try:
                self.handle = path.open("rb")
            except PermissionError:
                _fail(label, f"cannot read {path} (permission denied)")
            except OSError as exc:
                _fail(label, f"cannot read {path} ({exc.strerror or exc})")
        elif isinstance(source, bytes | bytearray | memoryview):
            self.handle = io.BytesIO(bytes(source))
        else:
            if getattr(source, "seekable", lambda: False)():
                source.seek(0)  # an upload may have been read before (e.g. for a preview)
            self.handle = source

    def read(self, n: int) -> bytes:
        try:
            piece = self.handle.read(min(n, self.max_bytes + 1 - self.total))
        except OSError as exc:
            _fail(self.label, f"cannot read the file ({exc.strerror or exc})")
        if isinstance(piece, str):  # a text stream given by mistake: its UTF-8 bytes
            piece = piece.encode("utf-8")
        self.total += len(piece)
        if self.total > self.max_bytes:
            _fail(self.label, too_large(self.total, self.max_bytes))
        return bytes(piece)

    def close(self) -> None:
        close = getattr(self.handle, "close", None)
        if close is not None and isinstance(self.handle, io.BufferedReader):
            close()


class _Unzip:
    """Streaming gzip decompression of ``raw`` (several members), bounded by ``max_bytes`` out."""

    def __init__(self, raw: _Raw, first: bytes) -> None:
        self.raw, self.pending = raw, first
        self.inflate = zlib.decompressobj(wbits=31)
        self.out = 0
        self.done = False

    def read(self, n: int) -> bytes:
        label, limit = self.raw.label, self.raw.max_bytes
        while not self.done:
            data = self.pending or self.raw.read(PIECE)
            self.pending = b""
            try:
                if not data:
                    if not self.inflate.eof:
                        raise EOFError("the compressed data end before the end-of-stream marker")
                    self.done = True
                    break
                piece = self.inflate.decompress(data, max(n, 1))
                while self.inflate.eof and self.inflate.unused_data:  # the next gzip member
                    rest = self.inflate.unused_data
                    self.inflate = zlib.decompressobj(wbits=31)
                    piece += self.inflate.decompress(rest, max(n, 1))
                if self.inflate.unconsumed_tail:
                    self.pending = self.inflate.unconsumed_tail
            except (zlib.error, EOFError) as exc:
                _fail(label, f"a damaged or truncated gzip file ({exc})")
            if piece:
                self.out += len(piece)
                if self.out > limit:
                    _fail(label, too_large(self.out, limit, "the decompressed file"))
                return piece
        return b""

    def close(self) -> None:
        self.raw.close()


class TextStream(io.RawIOBase):
    """The checked UTF-8 text of a source (module docstring), for Arrow's CSV reader.

    ``encoding`` is ``"utf-8"`` (refused at the first byte that is not) or ``"latin-1"``
    (transcoded). :meth:`skip_first_line` consumes the first line (a header) so that line *n* of
    what is read next is data row *n*. After reading, ``blank_lines`` lists the 1-based numbers
    (in what was read) of the lines that are empty, and :attr:`has_content` says whether anything
    but blanks was read. ``spaces`` and ``tabs`` say whether any was handed out (no value read
    before needs its ends stripped when neither was).
    """

    def __init__(
        self, source: DataSource, label: str, max_bytes: int, *, encoding: str = "utf-8"
    ) -> None:
        super().__init__()
        if max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        self.label, self.encoding = label, encoding
        self.blank_lines: list[int] = []
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self._pieces: list[bytes] = []  # text received, not yet handed out
        self._held = 0  # their bytes
        self._eof = False
        self._offset = 0  # bytes of text handed out (or skipped), for the place of a bad byte
        self._file_lines = 0  # line ends among them
        self._lines = 0  # line ends handed out since the header
        self._tail = b"\n"  # last bytes handed out: the start counts as after a line end
        self._content = False
        self.spaces = False  # a space, vertical tab or form feed was handed out
        self.tabs = False  # a tab was handed out
        raw = _Raw(source, label, max_bytes)
        self._source: _Raw | _Unzip = raw
        head = raw.read(PIECE)
        if head.startswith(GZIP_MAGIC):
            self._source = _Unzip(raw, head)
            head = self._source.read(PIECE)
        check_content(head[:_HEAD], label)
        if head.startswith(b"\xef\xbb\xbf"):
            head = head[3:]  # spreadsheets write a byte-order mark; it is not data
        self._receive(head)
        if not head:
            self._receive(b"", final=True)

    # ------------------------------------------------------------------ what the reader asks

    def readable(self) -> bool:
        return True

    def first_line(self) -> bytes:
        """The first line not yet read (without its line end), read ahead but not consumed."""
        while not self._eof and self._held < 64 * PIECE:
            if any(b"\n" in p for p in self._pieces):
                break
            self._more()
        text = b"".join(self._pieces)
        self._pieces, self._held = ([text], len(text)) if text else ([], 0)
        return text.split(b"\n", 1)[0].rstrip(b"\r")

    def skip_first_line(self) -> None:
        """Consume the first line: what is read next starts at the second (data row 1)."""
        self.first_line()
        text = self._pieces[0] if self._pieces else b""
        end = text.find(b"\n")
        cut = len(text) if end < 0 else end + 1
        self._content = self._content or not text[:cut].isspace()
        self._offset += cut
        self._file_lines += 1 if end >= 0 else 0
        rest = text[cut:]
        self._pieces, self._held = ([rest], len(rest)) if rest else ([], 0)
        self._tail = b"\n"

    def read(self, size: int | None = -1) -> bytes:
        want = PIECE if size is None or size < 0 else max(size, 1)
        while self._held < want and not self._eof:
            self._more(want - self._held)
        if len(self._pieces) == 1 and self._held <= want:  # the usual case: no copy
            piece = self._pieces[0]
            self._pieces, self._held = [], 0
        else:
            text = b"".join(self._pieces)
            piece, rest = (text, b"") if len(text) <= want else (text[:want], text[want:])
            self._pieces, self._held = ([rest], len(rest)) if rest else ([], 0)
        self._scan(piece)
        return piece

    def readinto(self, b: Any) -> int:  # the io.RawIOBase protocol
        piece = self.read(len(b))
        b[: len(piece)] = piece
        return len(piece)

    @property
    def has_content(self) -> bool:
        """Whether anything but blanks was read (meaningful once read to the end)."""
        return self._content

    def close(self) -> None:
        self._source.close()
        super().close()

    # ------------------------------------------------------------------ internals

    def _more(self, size: int = PIECE) -> None:
        piece = self._source.read(max(size, PIECE))
        if not piece:
            self._eof = True
        self._receive(piece, final=not piece)

    def _receive(self, piece: bytes, *, final: bool = False) -> None:
        """Append ``piece`` to the text held: checked as UTF-8 or transcoded from Latin-1."""
        if self.encoding == "latin-1":
            if not piece.isascii():
                piece = piece.decode("latin-1").encode("utf-8")
        elif final or not piece.isascii() or self._decoder.getstate()[0]:
            try:
                self._decoder.decode(piece, final)
            except UnicodeDecodeError as exc:
                self._bad_byte(piece, exc)
        if piece:
            self._pieces.append(piece)
            self._held += len(piece)

    def _bad_byte(self, piece: bytes, exc: UnicodeDecodeError) -> NoReturn:
        held = b"".join(self._pieces)
        pending = len(exc.object) - len(piece)  # bytes of a character begun in the last piece
        at = exc.start
        offset = self._offset + len(held) - pending + at
        lines = self._file_lines + held.count(b"\n") + exc.object[pending:at].count(b"\n")
        raise UnicodeLocated(self.label, exc.object[at], offset, lines)

    def _scan(self, piece: bytes) -> None:
        """Note blank lines and content in ``piece``, the next bytes handed out."""
        if not piece:
            return
        if not self._content and not piece.isspace():
            self._content = True
        if not self.spaces:
            self.spaces = b" " in piece or b"\x0b" in piece or b"\x0c" in piece
        if not self.tabs:
            self.tabs = b"\t" in piece
        starts: list[int] = []  # where blank lines start, as positions in piece (≥ 0)
        edge = self._tail + piece[:2]  # a line end just before piece, then another
        shift = len(self._tail)
        for pattern in (b"\n\n", b"\n\r\n"):
            at = edge.find(pattern)
            while 0 <= at < shift:
                if at + len(pattern) > shift:  # it ends in piece: not seen with the last piece
                    starts.append(at + 1 - shift)
                at = edge.find(pattern, at + 1)
            at = piece.find(pattern)
            while at >= 0:
                starts.append(at + 1)
                at = piece.find(pattern, at + 1)
        if starts:
            before, counted = self._lines, 0
            for at in sorted(set(starts)):
                if at > counted:
                    before += piece.count(b"\n", counted, at)
                    counted = at
                self.blank_lines.append(before + 1)
        n = piece.count(b"\n")
        self._lines += n
        self._file_lines += n
        self._offset += len(piece)
        self._tail = (self._tail + piece[-2:])[-2:]


class UnicodeLocated(DataValidationError):
    """A byte that is not UTF-8, located (offset in the text, line index before it)."""

    def __init__(self, label: str, byte: int, offset: int, line: int) -> None:
        self.label, self.byte, self.offset, self.line = label, byte, offset, line
        super().__init__(
            [
                Problem(
                    label,
                    f"the file is not valid UTF-8 text: byte 0x{byte:02x} at offset {offset:,}; "
                    "save it as UTF-8 (e.g. 'CSV UTF-8' in a spreadsheet)",
                    row=line,
                )
            ]
        )


def read_source(source: DataSource, *, max_bytes: int, name: str | None = None) -> bytes:
    """The whole checked bytes of a small ``source`` (e.g. a mapping JSON): size limit, gzip and
    content checked as for any input, refused when empty."""
    label = source_name(source, name)
    if max_bytes <= 0:
        raise ValueError("max_bytes must be positive")
    raw = _Raw(source, label, max_bytes)
    try:
        head = raw.read(PIECE)
        reader: _Raw | _Unzip = _Unzip(raw, head) if head.startswith(GZIP_MAGIC) else raw
        parts = [reader.read(PIECE)] if isinstance(reader, _Unzip) else [head]
        while piece := reader.read(PIECE):
            parts.append(piece)
    finally:
        raw.close()
    data = b"".join(parts)
    check_content(data[:_HEAD], label)
    if not data.strip():
        _fail(label, "the file is empty")
    return data


def decode_lines(data: bytes, label: str) -> str:
    """``data`` as UTF-8 text (a byte-order mark dropped), or a located refusal of its first bad
    byte: the row is the index of its line (the first line is row 0, a header's)."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnicodeLocated(
            label, data[exc.start], exc.start, data.count(b"\n", 0, exc.start)
        ) from None
