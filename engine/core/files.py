"""Reading a user's file safely: what its first bytes say it is, its bytes with located refusals, UTF-8 text.

:func:`read_input_bytes` refuses, in words, a missing file, a folder, a broken or looping link, a
file without read permission, a pipe or device and a file over a size limit; :func:`content_kind`
names compressed files, archives, spreadsheets, UTF-16/32 and other binary data from their magic
bytes, so a user who uploads the wrong thing is told what it is (docs/reliability.md).
"""

from __future__ import annotations

import errno
import os
import stat as _stat
from pathlib import Path

from engine.core.errors import ValidationError

# ------------------------------------------------------------------ what is this file?

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "a gzip-compressed file"),
    (b"PK\x03\x04", "a zip archive (or an Excel .xlsx workbook)"),
    (b"BZh", "a bzip2-compressed file"),
    (b"\xfd7zXZ\x00", "an xz-compressed file"),
    (b"(\xb5/\xfd", "a zstd-compressed file"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-zip archive"),
    (b"\xd0\xcf\x11\xe0", "an old Excel/Office (.xls) file"),
    (b"PAR1", "a Parquet file"),
    (b"%PDF", "a PDF document"),
    (b"\xff\xfe\x00\x00", "UTF-32 text"),
    (b"\x00\x00\xfe\xff", "UTF-32 text"),
    (b"\xff\xfe", "UTF-16 text"),
    (b"\xfe\xff", "UTF-16 text"),
)


def content_kind(head: bytes) -> str | None:
    """What the first bytes of a file say it is, when it is not plain text (None for plain text).

    Recognises compressed files and archives, spreadsheets, UTF-16/32 text (with or without a
    byte-order mark) and other binary data.
    """
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if len(head) >= 4 and head[1:4:2] == b"\x00\x00" and head[0:1] != b"\x00":
        return "UTF-16 text (little-endian, no byte-order mark)"
    if len(head) >= 4 and head[0:4:2] == b"\x00\x00" and head[1:2] != b"\x00":
        return "UTF-16 text (big-endian, no byte-order mark)"
    if b"\x00" in head:
        return "a binary file"
    return None


def read_input_bytes(
    source: str | os.PathLike[str], *, label: str | None = None, max_bytes: int | None = None
) -> bytes:
    """The bytes of a user's file, or a ValidationError saying why not (in words).

    Covers: not found, a folder, a symbolic-link loop, no permission, not a regular file (a FIFO or
    device), larger than ``max_bytes``.
    """
    path = Path(source)
    name = label or str(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            raise ValidationError(f"{name}: a broken symbolic link") from None
        raise ValidationError(f"{name}: file not found") from None
    except OSError as exc:
        raise ValidationError(f"{name}: {_os_reason(exc)}") from None

    if _stat.S_ISDIR(info.st_mode):
        raise ValidationError(f"{name}: is a folder, not a file")
    if not _stat.S_ISREG(info.st_mode):
        raise ValidationError(f"{name}: not a regular file (a pipe, socket or device)")
    if max_bytes is not None and info.st_size > max_bytes:
        raise ValidationError(
            f"{name}: {info.st_size:,} bytes, over the limit of {max_bytes:,} bytes"
        )
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ValidationError(f"{name}: {_os_reason(exc)}") from None


def _os_reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "a symbolic-link loop (the link points back at itself)"
    if exc.errno == errno.EACCES or isinstance(exc, PermissionError):
        return "cannot read it (permission denied)"
    if exc.errno == errno.ENAMETOOLONG:
        return "the path is too long"
    return f"cannot read it ({exc.strerror or exc})"


def decode_text(data: bytes, *, label: str, what: str = "UTF-8 text") -> str:
    """``data`` as UTF-8 text, refusing a byte-order mark, UTF-16, compressed or binary data."""
    if data.startswith(b"\xef\xbb\xbf"):
        raise ValidationError(
            f"{label}: starts with a byte-order mark (BOM); save it as UTF-8 without BOM"
        )
    kind = content_kind(data[:64])
    if kind is not None:
        raise ValidationError(f"{label}: is {kind}, not {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ValidationError(
            f"{label}: not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}); save it as "
            "UTF-8"
        ) from None
