"""What is this file? Shared checks every data loader runs before parsing a byte (docs/reliability.md,
"Inputs").

One place for the questions a hostile or careless input raises before any CSV parsing:

* the path: missing, a folder, a symbolic-link loop, a broken link, unreadable (permissions), a pipe or
  device, over the size limit (:data:`engine.data.sources.DEFAULT_MAX_BYTES`, raised per loader with
  ``max_bytes`` and on the CLI with ``--max-bytes``): :func:`check_path`;
* the content: zip/xlsx, bzip2, xz, Parquet, PDF, UTF-16/32 text and other binary data are named and
  refused (:func:`check_content`, :func:`engine.core.files.content_kind`); gzip is decompressed by
  the stream that reads a file (:mod:`engine.data.sources`);
* sets of uploads: several files that could each be "the persons file" are refused rather than one
  being picked (:func:`assign_by_name`; a folder's files: :mod:`engine.data.folders`).

Every refusal is a :class:`~engine.core.errors.DataValidationError` naming the file.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from engine.core.errors import DataValidationError, Problem
from engine.core.files import content_kind

GZIP_MAGIC = b"\x1f\x8b"


def _fail(label: str, message: str) -> DataValidationError:
    return DataValidationError([Problem(label, message)])


def too_large(size: int, max_bytes: int, what: str = "the file") -> str:
    """The message of a file over the size limit."""
    return (
        f"{what} is {size:,} bytes, over the size limit of {max_bytes:,} bytes; raise the limit "
        "(--max-bytes on the command line, max_bytes in Python) or use a smaller extract"
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
        raise _fail(label, too_large(info.st_size, max_bytes))
    if not os.access(path, os.R_OK):
        raise _fail(label, f"cannot read {path} (permission denied)")


def check_content(data: bytes, label: str, *, expected: str = "delimited text (CSV)") -> None:
    """Refuse bytes that are not text, naming what they are (zip, Excel, UTF-16, binary …)."""
    if data.startswith(b"\xef\xbb\xbf"):
        return  # a UTF-8 byte-order mark: spreadsheets write it; the CSV readers drop it
    kind = content_kind(data[:8192])
    if kind is not None:
        hint = "; save it as UTF-8" if "UTF-" in kind else "; export it as CSV (UTF-8)"
        raise _fail(label, f"this is {kind}, not {expected}{hint}")


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
