"""One entry point for TopDown inputs: a shipped sample, a file of a known format, or uploads.

The CLI (``phexplore run topdown --data``) and the app's Run page both resolve their data here, so
they accept the same formats with the same validation (issue 4; formats in docs/data.md):

* ``ri2010``   — block CSV in the ALARM/RI 2010 layout (``GEOID, pop, pop_<group>…, vap…``);
* ``block_csv`` — any one-row-per-block CSV plus a mapping JSON (:mod:`engine.data.block_csv`);
* ``ppmf``     — PPMF / MDF person records (:mod:`engine.data.ppmf`);
* ``pl94171``  — the P.L. 94-171 2020-style file set: geographic header + segments 1–3.

Every loader raises :class:`~engine.data.errors.DataValidationError` with located problems.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from engine.data.errors import DataValidationError, Problem
from engine.data.histogram import BlockHistogram

FORMATS: dict[str, str] = {
    "ri2010": "Block CSV, ALARM/RI 2010 layout (GEOID, pop, pop_<group>…, vap…)",
    "block_csv": "Any block CSV + a mapping JSON (which schema cell each column counts)",
    "ppmf": "PPMF / MDF person records (CSV)",
    "pl94171": "P.L. 94-171 2020-style file set (geo header + 3 segments)",
}


class NamedSource(Protocol):
    """A file-like upload with a ``name`` (e.g. Streamlit's ``UploadedFile``)."""

    name: str

    def read(self, size: int = -1) -> bytes: ...


def _name(source: Any) -> str:
    return Path(getattr(source, "name", source)).name


def _error(message: str, where: str = "input") -> DataValidationError:
    return DataValidationError([Problem(where, message)])


def load_topdown_files(kind: str, files: Sequence[Any]) -> BlockHistogram:
    """Validate and load TopDown data of format ``kind`` from paths or named uploads."""
    if not files:
        raise _error("no file given; choose the file(s) to load first")
    if kind == "ri2010":
        from engine.data.ri2010 import load_ri2010

        return load_ri2010(files[0], name=_name(files[0]))
    if kind == "block_csv":
        from engine.data.block_csv import load_block_csv

        mappings = [f for f in files if _name(f).lower().endswith(".json")]
        data = [f for f in files if not _name(f).lower().endswith(".json")]
        if len(mappings) != 1 or len(data) != 1:
            raise _error(
                "a block CSV needs two files: the CSV (one row per block) and its mapping JSON "
                "(see docs/data.md)"
            )
        return load_block_csv(data[0], mappings[0], name=_name(data[0]))
    if kind == "ppmf":
        from engine.data.ppmf import load_ppmf

        return load_ppmf(files[0], name=_name(files[0]))
    if kind == "pl94171":
        from engine.data.pl94171 import load_pl94171_histogram

        named = {_name(f).lower(): f for f in files}
        geo = [f for n, f in named.items() if "geo" in n]
        parts = [f for _, f in sorted((n, f) for n, f in named.items() if "geo" not in n)]
        if len(geo) != 1 or len(parts) != 3:
            raise _error(
                "a P.L. 94-171 file set needs four files: the geographic header (name containing "
                "'geo') and segments 1, 2 and 3"
            )
        return load_pl94171_histogram(geo[0], parts[0], parts[1], parts[2])
    raise _error(f"unknown input format {kind!r}; formats: {', '.join(FORMATS)}")


def sniff_format(path: Path) -> str:
    """Guess the format of one CSV file from its header line."""
    try:
        with path.open("rb") as handle:
            head = handle.readline(64_000).decode("utf-8-sig", errors="replace").upper()
    except OSError as exc:
        raise _error(f"cannot read the file: {exc.strerror}", str(path)) from None
    columns = {c.strip().strip('"') for c in head.replace("|", ",").split(",")}
    if {"TABBLKST", "CENRACE"} <= columns:
        return "ppmf"
    if {"GEOID", "POP", "VAP"} <= columns:
        return "ri2010"
    raise _error(
        "cannot tell the file's format from its header; pass --data-format (ri2010, ppmf) or "
        "--mapping for a block CSV",
        str(path),
    )


def load_topdown_input(
    spec: str | os.PathLike[str],
    *,
    kind: str | None = None,
    mapping: str | os.PathLike[str] | None = None,
) -> BlockHistogram:
    """A sample name, a file (format sniffed or given), a CSV + ``mapping``, or a P.L. 94-171 folder."""
    from engine.data.samples import list_samples, load_topdown_sample

    path = Path(spec)
    if mapping is not None:
        return load_topdown_files("block_csv", [path, Path(mapping)])
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() == ".pl")
        return load_topdown_files(kind or "pl94171", files)
    if path.is_file():
        return load_topdown_files(kind or sniff_format(path), [path])
    known = [s.name for s in list_samples() if s.kind == "topdown"]
    if str(spec) in known:
        return load_topdown_sample(str(spec))
    raise _error(
        f"{spec!r} is neither a file, a folder nor a TopDown sample; samples: {', '.join(known)}",
        "--data",
    )
