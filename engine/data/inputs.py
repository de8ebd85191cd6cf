"""One entry point for TopDown inputs: a shipped sample, a file of a known format, or uploads.

The CLI (``phexplore run topdown --data``) and the app's Run page both resolve their data here, so
they accept the same formats with the same validation (formats in docs/data.md):

* ``ri2010``   — block CSV in the ALARM/RI 2010 layout (``GEOID, pop, pop_<group>…, vap…``);
* ``block_csv`` — any one-row-per-block CSV plus a mapping JSON (:mod:`engine.data.block_csv`);
* ``ppmf``     — PPMF / MDF person records (:mod:`engine.data.ppmf`);
* ``pl94171``  — the P.L. 94-171 2020-style file set: geographic header + segments 1–3;
* a folder written by ``phexplore generate population`` (PPMF persons + block frame).

Every loader raises :class:`~engine.core.errors.DataValidationError` with located problems.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.core.errors import DataValidationError, Problem
from engine.core.sniff import check_path
from engine.data.block_csv import load_block_csv
from engine.data.csv_layout import detect_delimiter, split_fields
from engine.data.folders import is_data_file
from engine.data.generated import is_generated_population, load_generated_population
from engine.data.histogram import BlockHistogram
from engine.data.pl94171 import file_set, load_pl94171_histogram
from engine.data.ppmf import load_ppmf
from engine.data.ri2010 import load_ri2010
from engine.data.samples import list_samples, load_topdown_sample
from engine.data.sources import DEFAULT_MAX_BYTES, TextStream

FORMATS: dict[str, str] = {
    "ri2010": "Block CSV, ALARM/RI 2010 layout (GEOID, pop, pop_<group>…, vap…)",
    "block_csv": "Any block CSV + a mapping JSON (which schema cell each column counts)",
    "ppmf": "PPMF / MDF person records (CSV)",
    "pl94171": "P.L. 94-171 2020-style file set (geo header + 3 segments)",
}


def _name(source: Any) -> str:
    return Path(getattr(source, "name", source)).name


def _error(message: str, where: str = "input") -> DataValidationError:
    return DataValidationError([Problem(where, message)])


def _one(kind: str, files: Sequence[Any]) -> Any:
    """The single file of a one-file format; several are refused rather than one picked."""
    if len(files) != 1:
        names = ", ".join(_name(f) for f in files)
        raise _error(
            f"the {kind} format takes exactly one file; got {len(files)} ({names}). Which one is "
            "the data is ambiguous: give only that one"
        )
    return files[0]


def load_topdown_files(
    kind: str, files: Sequence[Any], *, max_bytes: int = DEFAULT_MAX_BYTES
) -> BlockHistogram:
    """Validate and load TopDown data of format ``kind`` from paths or named uploads.

    ``max_bytes`` is the size limit of each file (the CLI's ``--max-bytes``).
    """
    if not files:
        raise _error("no file given; choose the file(s) to load first")
    if kind == "ri2010":
        one = _one(kind, files)
        return load_ri2010(one, name=_name(one), max_bytes=max_bytes)
    if kind == "block_csv":
        data, mapping = block_csv_pair(files)
        return load_block_csv_files(data, mapping, max_bytes=max_bytes)
    if kind == "ppmf":
        one = _one(kind, files)
        return load_ppmf(one, name=_name(one), max_bytes=max_bytes)
    if kind == "pl94171":
        folders = {str(Path(f).parent) for f in files if isinstance(f, str | os.PathLike)}
        where = folders.pop() if len(folders) == 1 else "uploaded files"
        geo, part1, part2, part3 = file_set(files, max_bytes=max_bytes, where=where)
        return load_pl94171_histogram(geo, part1, part2, part3, max_bytes=max_bytes)
    raise _error(f"unknown input format {kind!r}; formats: {', '.join(FORMATS)}")


def block_csv_pair(files: Sequence[Any]) -> tuple[Any, Any]:
    """``(data, mapping)`` of a block CSV's two files: the mapping is the ``.json`` one, the data
    a data file (``.csv``, ``.csv.gz``, ``.txt`` …); anything else is refused, never guessed."""
    mappings = [f for f in files if _name(f).lower().endswith(".json")]
    data = [f for f in files if is_data_file(_name(f)) and f not in mappings]
    others = [f for f in files if f not in mappings and f not in data]
    problems = [
        Problem(
            _name(f),
            "neither a data file (.csv, .csv.gz, .txt) nor a mapping (.json): a block CSV is "
            "read only from a CSV and its mapping JSON; rename the file to say which it is",
        )
        for f in others
    ]
    if len(mappings) != 1 or len(data) != 1:
        given = ", ".join(_name(f) for f in files) or "none"
        problems.append(
            Problem(
                "input",
                f"a block CSV needs two files, the CSV (one row per block) and its mapping JSON "
                f"(see docs/data.md); got {given}",
            )
        )
    if problems:
        raise DataValidationError(problems, summary="cannot tell the data from the mapping")
    return data[0], mappings[0]


def load_block_csv_files(
    data: Any, mapping: Any, *, max_bytes: int = DEFAULT_MAX_BYTES
) -> BlockHistogram:
    """A block CSV and its mapping, each given as what it is (``--data``, ``--mapping``): a
    mapping that is not ``.json`` or data that is ``.json`` is refused (swapped by mistake?)."""
    problems: list[Problem] = []
    if not _name(mapping).lower().endswith(".json"):
        problems.append(
            Problem(
                _name(mapping),
                "a mapping is a JSON file (.json), but this one is named otherwise; rename it to "
                ".json if it is the mapping, or check that --data and --mapping are not swapped",
            )
        )
    if _name(data).lower().endswith(".json"):
        problems.append(
            Problem(
                _name(data),
                "the data of a block CSV is a CSV, but this is a .json file; check that --data "
                "and --mapping are not swapped",
            )
        )
    if problems:
        raise DataValidationError(problems, summary="the block CSV and its mapping are unclear")
    return load_block_csv(data, mapping, name=_name(data), max_bytes=max_bytes)


def sniff_format(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """Guess the format of one CSV file (plain or gzip) from its header line."""
    stream = TextStream(path, str(path), max_bytes)
    try:
        line = stream.first_line()
    finally:
        stream.close()
    header = line.decode("utf-8", errors="replace")
    names = ["TABBLKST", "CENRACE", "GEOID", "POP", "VAP"]
    fields = split_fields(line, detect_delimiter(header, names)) or []
    columns = {f.strip('"').upper() for f in fields}
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
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> BlockHistogram:
    """A sample name, a file (format sniffed or given), a CSV + ``mapping``, a generated population
    folder (:mod:`engine.data.generated`) or a P.L. 94-171 folder.

    ``max_bytes`` is the size limit of each file (the CLI's ``--max-bytes``; a generated population
    is our own output and is read in columns without that limit).
    """

    path = Path(spec)
    if mapping is not None:
        return load_block_csv_files(path, Path(mapping), max_bytes=max_bytes)

    if is_generated_population(path):
        return load_generated_population(path)
    if path.is_dir():
        return load_topdown_files(kind or "pl94171", pl94171_files(path), max_bytes=max_bytes)
    if path.is_file():
        return load_topdown_files(
            kind or sniff_format(path, max_bytes), [path], max_bytes=max_bytes
        )
    if os.path.lexists(path):  # a broken link, a link loop, a pipe …: say which
        check_path(path, str(path), max_bytes)
    known = [s.name for s in list_samples() if s.kind == "topdown"]
    if str(spec) in known:
        return load_topdown_sample(str(spec))
    raise _error(
        f"{spec!r} is neither a file, a folder nor a TopDown sample; samples: {', '.join(known)}",
        "--data",
    )


def pl94171_files(folder: Path) -> list[Path]:
    """The P.L. 94-171 files (``*.pl``) of a folder; a folder without any is refused."""
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() == ".pl")
    if not files:
        raise _error(
            f"{folder} is a folder without P.L. 94-171 files (*.pl); give a file or a sample",
            "--data",
        )
    return files


def person_records_input(
    spec: str | os.PathLike[str],
    *,
    kind: str | None = None,
    mapping: str | os.PathLike[str] | None = None,
) -> tuple[str, Path, dict[str, object]] | None:
    """``(format, path, extra)`` when ``spec`` names person records — a PPMF/MDF file or sample
    (``"ppmf"``: the file) or a generated population folder (``"generated"``: the folder) — as
    :func:`load_topdown_input` would resolve it; ``extra`` is what that loader adds to
    ``BlockHistogram.extra`` (the sample's name). None for every other input (block CSVs,
    P.L. 94-171, …) and for anything it cannot resolve (the loader then says why).

    A file is sniffed without the size limit: the Spark backend reads it in parallel."""

    if mapping is not None:
        return None
    path = Path(spec)
    if is_generated_population(path):
        return "generated", path, {}
    if path.is_dir():
        return None
    if path.is_file():
        if kind is None:
            try:
                kind = sniff_format(path, max_bytes=1 << 62)
            except DataValidationError:
                return None
        return ("ppmf", path, {}) if kind == "ppmf" else None
    if os.path.lexists(path):
        return None
    for sample in list_samples():
        if sample.name == str(spec) and sample.kind == "topdown" and sample.loader == "ppmf":
            return "ppmf", sample.file_paths()[0], {"sample": sample.name}
    return None
