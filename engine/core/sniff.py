"""What is this file? Shared checks every data loader runs before parsing a byte (docs/reliability.md, "Inputs").

One place for the questions a hostile or careless input raises before any CSV parsing:

* the path: missing, a folder, a symbolic-link loop, a broken link, unreadable (permissions), a pipe or
  device, over the size limit (:data:`engine.data.validate.DEFAULT_MAX_BYTES`, raised per loader with
  ``max_bytes`` and on the CLI with ``--max-bytes``);
* the content: gzip is decompressed transparently (bounded by the same limit); zip/xlsx, bzip2, xz,
  Parquet, PDF, UTF-16/32 text and other binary data are named and refused
  (:func:`engine.core.files.content_kind`);
* sets of files: a compressed extract beside a stale uncompressed copy (``persons.csv`` and
  ``persons.csv.gz``) is refused naming both; several uploads that could each be "the persons file"
  are refused rather than one being picked (:func:`assign_by_name`).

Every refusal is a :class:`~engine.core.errors.DataValidationError` naming the file.
"""

from __future__ import annotations

import errno
import gzip
import io
import os
import stat
import zlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.core.errors import DataValidationError, Problem
from engine.core.files import content_kind

GZIP_MAGIC = b"\x1f\x8b"


def _fail(label: str, message: str) -> DataValidationError:
    return DataValidationError([Problem(label, message)])


def _too_large(size: int, max_bytes: int, what: str = "the file") -> str:
    return (
        f"{what} is {size:,} bytes, over the size limit of {max_bytes:,} bytes; raise the limit "
        "(--max-bytes on the command line) or use a smaller extract"
    )


def check_path(path: Path, label: str, max_bytes: int) -> None:
    """Refuse a path that is not a readable regular file within ``max_bytes`` (see module doc)."""
    try:
        info = path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            raise _fail(label, f"{path} is a broken symbolic link") from None
        raise _fail(label, f"no such file: {path}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _fail(
                label, f"{path} is a symbolic-link loop (the link points back at itself)"
            ) from None
        raise _fail(label, f"cannot read {path} ({exc.strerror or exc})") from None
    if stat.S_ISDIR(info.st_mode):
        raise _fail(label, f"{path} is a folder, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise _fail(label, f"{path} is not a regular file (a pipe, socket or device)")
    if info.st_size > max_bytes:
        raise _fail(label, _too_large(info.st_size, max_bytes))
    if not os.access(path, os.R_OK):
        raise _fail(label, f"cannot read {path} (permission denied)")


def read_path(path: Path, label: str, max_bytes: int) -> bytes:
    """The bytes of a checked path (at most ``max_bytes + 1`` of them)."""
    check_path(path, label, max_bytes)
    try:
        # Never ask for more than the file holds: read(max_bytes + 1) would allocate max_bytes.
        want = min(max_bytes, path.stat().st_size) + 1
        with path.open("rb") as handle:
            return handle.read(want)
    except PermissionError:
        raise _fail(label, f"cannot read {path} (permission denied)") from None
    except OSError as exc:
        raise _fail(label, f"cannot read {path} ({exc.strerror or exc})") from None


def gunzip(data: bytes, label: str, max_bytes: int) -> bytes:
    """Decompress gzip ``data`` (several members allowed), refusing more than ``max_bytes`` out."""
    out = io.BytesIO()
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as handle:
            while chunk := handle.read(1 << 20):
                out.write(chunk)
                if out.tell() > max_bytes:
                    raise _fail(label, _too_large(out.tell(), max_bytes, "the decompressed file"))
    except (OSError, EOFError, zlib.error) as exc:
        raise _fail(label, f"a damaged or truncated gzip file ({exc})") from None
    return out.getvalue()


def check_content(data: bytes, label: str, *, expected: str = "delimited text (CSV)") -> None:
    """Refuse bytes that are not text, naming what they are (zip, Excel, UTF-16, binary …)."""
    if data.startswith(b"\xef\xbb\xbf"):
        return  # a UTF-8 byte-order mark: spreadsheets write it; the CSV readers drop it
    kind = content_kind(data[:8192])
    if kind is not None:
        hint = "; save it as UTF-8" if "UTF-" in kind else "; export it as CSV (UTF-8)"
        raise _fail(label, f"this is {kind}, not {expected}{hint}")


def file_bytes(data: bytes, label: str, max_bytes: int) -> bytes:
    """Checked text bytes of a file's raw ``data``: gzip decompressed, non-text refused."""
    if len(data) > max_bytes:
        raise _fail(label, _too_large(len(data), max_bytes))
    if data.startswith(GZIP_MAGIC):
        data = gunzip(data, label, max_bytes)
    check_content(data, label)
    return data


def compressed_pair(directory: Path, base: str) -> Path | None:
    """The one of ``base`` / ``base.gz`` in ``directory``; refuse when both exist (naming both)."""
    plain, packed = directory / base, directory / f"{base}.gz"
    have_plain = plain.exists() or plain.is_symlink()
    have_packed = packed.exists() or packed.is_symlink()
    if have_plain and have_packed:
        raise DataValidationError(
            [
                Problem(
                    str(directory),
                    f"both {plain.name} and {packed.name} are present; one is probably a stale "
                    "copy of the other — remove the one you do not mean",
                )
            ],
            summary="the extract is ambiguous",
        )
    if have_plain:
        return plain
    if have_packed:
        return packed
    return None


def _name(source: Any) -> str:
    return Path(str(getattr(source, "name", source))).name


def assign_by_name(
    files: Sequence[Any], kinds: Iterable[str], *, what: str = "extract"
) -> dict[str, Any]:
    """Assign each of ``files`` to the one kind its name contains; refuse any ambiguity.

    ``persons.csv``, ``my_units.csv.gz`` and ``geo.csv`` → ``{"persons", "units", "geo"}``. Refused: a
    name matching two kinds (``persons_units.csv``), two files for one kind (``persons.csv`` and
    ``persons_old.csv``), a file matching none, or a kind with no file.
    """
    wanted = list(kinds)
    found: dict[str, list[Any]] = {k: [] for k in wanted}
    problems: list[Problem] = []
    for f in files:
        name = _name(f)
        lower = name.lower()
        hits = [k for k in wanted if k in lower]
        if len(hits) > 1:
            problems.append(
                Problem(name, f"the name matches several files of the {what}: {', '.join(hits)}")
            )
        elif not hits:
            problems.append(
                Problem(name, f"the name says neither {', '.join(wanted)}; rename the file")
            )
        else:
            found[hits[0]].append(f)
    for kind, items in found.items():
        if len(items) > 1:
            names = ", ".join(_name(f) for f in items)
            problems.append(
                Problem(
                    what,
                    f"{len(items)} files could be the {kind} file ({names}); give exactly one",
                )
            )
        elif not items:
            problems.append(Problem(what, f"no {kind} file (its name must contain {kind!r})"))
    if problems:
        raise DataValidationError(
            problems, summary=f"cannot tell which file is which in the {what}"
        )
    return {k: v[0] for k, v in found.items()}


def repeated_header_rows(
    columns: Mapping[str, Any], found: Mapping[str, str], rows: Any, limit: int = 3
) -> list[int]:
    """Row numbers whose every requested value equals its header name (two exports concatenated)."""
    import numpy as np

    mask = None
    for key, values in columns.items():
        header = found.get(key, key).strip().lower()
        hit = np.char.lower(np.asarray(values, dtype=str)) == header
        mask = hit if mask is None else mask & hit
    if mask is None or not mask.any():
        return []
    return [int(r) for r in np.asarray(rows)[mask][:limit]]
