"""The files a run reads: where its paths point, their content hashes, and whether they changed.

A run description names its inputs — ``data.source`` (a sample, a file or a folder),
``data.mapping``, and for TopDown the ``entities`` and ``special_areas`` of its spine. This module
decides which files those are (:func:`input_files`), records the SHA-256 of each in
``data.inputs`` when the run starts (:func:`with_inputs`), and compares them when the run is
replayed (:func:`changed_inputs`), so a replay never reports "same seed, same numbers" on data edited
since (docs/reliability.md "Replays").

Paths: a face records the paths a user typed as absolute paths (:func:`resolve_paths` against the
current folder); a relative path found in a file — an older metrics.json, a description written by
hand — is read from the folder of that file, never from wherever the replay happens to run.

The app's block histograms also carry a content hash of the histogram itself
(:func:`histogram_sha256`, ``data.sha256``), for data that exist only in the app (uploads).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator, Mapping
from pathlib import Path

from engine.core.manifest import sha256_file
from engine.data.cef_types import CEF_FILE_NAMES
from engine.data.folders import file_if_any
from engine.data.generated import is_generated_population
from engine.data.histogram import BlockHistogram
from engine.data.samples import get_sample, list_samples
from engine.runs.options import NO_SPECIAL_AREAS, PRESET_SPINE, TopDownRunOptions
from engine.runs.spec import RunSpec
from engine.topdown.spine.entities import SHIPPED_ENTITY_SAMPLES
from engine.topdown.spine.options import DATA_PLACES

GENERATED_TOPDOWN_FILES: tuple[str, ...] = ("ppmf", "blocks")
"""What TopDown reads of a generated population folder (:mod:`engine.data.generated`): the
person records and the block frame (each possibly gzipped), by role."""
GENERATED_PLACES_ROLE = "places"
"""The places of a generated population (``places.csv``, :mod:`engine.data.places`), by role: read
by a run whose spine may be built around them (``spine`` = ``preset``, or ``places`` among its
entity sources)."""


def histogram_sha256(hist: BlockHistogram) -> str:
    """SHA-256 of a histogram's block ids and counts: names data the app holds (``data.sha256``)."""
    digest = hashlib.sha256()
    digest.update("|".join(map(str, hist.geography.iloc[:, -1].astype(str))).encode("utf-8"))
    for chunk in hist.dense_row_chunks():  # the dense bytes, never the whole dense array
        digest.update(chunk.tobytes())
    return digest.hexdigest()


# ------------------------------------------------------------------ paths


def _sample_names(kind: str) -> set[str]:
    return {s.name for s in list_samples() if s.kind == kind}


def _resolve(value: str, base: Path, names: set[str]) -> str:
    """``value`` as an absolute path under ``base`` unless it is one of ``names`` (a shipped
    sample or entity set) and ``base`` holds no such path. Absolute paths stay as they are."""
    path = Path(value).expanduser()
    if path.is_absolute():
        return str(path)
    candidate = base / path
    if value in names and not (candidate.exists() or candidate.is_symlink()):
        return value
    return str(candidate.absolute())


def resolve_paths(spec: RunSpec, base: str | Path) -> RunSpec:
    """``spec`` with every relative input path resolved against the folder ``base``.

    The faces call it with the current folder (so a run records where it read its data) and the
    replay with the folder of the file that recorded the run (so a replay from elsewhere reads the
    same files). Sample and shipped entity names stay names."""
    folder = Path(base).absolute()
    data = spec.data
    if data.upload:
        return spec
    changes = {"source": _resolve(data.source, folder, _sample_names(spec.engine))}
    if data.mapping is not None:
        changes["mapping"] = _resolve(data.mapping, folder, set())
    spec = spec.replace(data=dataclasses.replace(data, **changes))
    options = spec.options
    if isinstance(options, TopDownRunOptions):
        shipped = {*SHIPPED_ENTITY_SAMPLES, DATA_PLACES}  # names, not paths
        entities = tuple(_resolve(e, folder, shipped) for e in options.entities)
        special = options.special_areas
        if special is not None:
            special = _resolve(special, folder, {*shipped, NO_SPECIAL_AREAS})
        spec = spec.with_option(entities=entities, special_areas=special)
    return spec


# ------------------------------------------------------------------ files and hashes


def _data_files(spec: RunSpec) -> Iterator[tuple[str, Path]]:
    """``(key, path)`` of the data files: ``data/<name>`` for the source, ``mapping/<name>``."""
    data = spec.data
    path = Path(data.source)
    if spec.engine == "phsafe":  # the three CEF files (the configuration is in the spec)
        folder = path if path.is_absolute() else _sample_folder(data.source, "phsafe")
        if folder is not None and folder.is_dir():
            for role in CEF_FILE_NAMES:
                found = file_if_any(folder, role)
                if found is not None:
                    yield f"data/{found.name}", found
        return
    if not path.is_absolute():  # a sample name; a relative path is not resolved here (see above)
        if _sample_folder(data.source, "topdown") is not None:
            for found in get_sample(data.source).file_paths():
                yield f"data/{found.name}", found
        return
    if data.mapping is not None:
        yield f"data/{path.name}", path
        if Path(data.mapping).is_absolute():
            yield f"mapping/{Path(data.mapping).name}", Path(data.mapping)
    elif path.is_dir() and is_generated_population(path):
        places = (GENERATED_PLACES_ROLE,) if reads_places(spec) else ()
        for role in (*GENERATED_TOPDOWN_FILES, *places):
            found = file_if_any(path, role)
            if found is not None:
                yield f"data/{found.name}", found
    elif path.is_dir():
        for found in sorted(p for p in path.iterdir() if p.suffix.lower() == ".pl"):
            yield f"data/{found.name}", found
    elif path.exists():
        yield f"data/{path.name}", path


def reads_places(spec: RunSpec) -> bool:
    """Whether a TopDown run may build its spine around the data's places: ``spine`` = ``preset``
    (:func:`engine.runs.spine_choice.resolve_spine`) or ``places`` among its entity sources."""
    options = spec.options
    if not isinstance(options, TopDownRunOptions):
        return False
    return options.spine == PRESET_SPINE or DATA_PLACES in (
        *options.entities,
        options.special_areas,
    )


def _sample_folder(name: str, kind: str) -> Path | None:
    """The folder of the shipped sample ``name`` of engine ``kind``, or None."""
    return get_sample(name).path if name in _sample_names(kind) else None


def _entity_files(role: str, source: str) -> Iterator[tuple[str, Path]]:
    if source == DATA_PLACES:  # the data's own places.csv, listed with the data's files
        return
    if source in SHIPPED_ENTITY_SAMPLES:
        for found in get_sample(SHIPPED_ENTITY_SAMPLES[source]).file_paths():
            yield f"{role}/{found.name}", found
    elif Path(source).is_absolute():
        yield f"{role}/{Path(source).name}", Path(source)


def input_files(spec: RunSpec) -> dict[str, Path]:
    """``{key: path}`` of every file ``spec`` reads that exists here (keys ``data/…``,
    ``mapping/…``, ``entities/…``, ``special_areas/…``); none for uploads.

    Only samples and absolute paths are followed: the faces record absolute paths, and a relative
    path means nothing until :func:`resolve_paths` has said relative to what."""
    if spec.data.upload:
        return {}
    pairs = list(_data_files(spec))
    options = spec.options
    if isinstance(options, TopDownRunOptions):
        for source in options.entities:
            pairs.extend(_entity_files("entities", source))
        if options.special_areas is not None:
            pairs.extend(_entity_files("special_areas", options.special_areas))
    out: dict[str, Path] = {}
    for key, path in pairs:
        if not path.is_file():
            continue  # the loader says what is missing
        name, n = key, 2
        while name in out and out[name] != path:
            name, n = f"{key}#{n}", n + 1
        out[name] = path
    return out


def hash_inputs(spec: RunSpec) -> dict[str, str]:
    """``{key: SHA-256}`` of :func:`input_files`."""
    return {key: sha256_file(path) for key, path in sorted(input_files(spec).items())}


def with_inputs(spec: RunSpec) -> RunSpec:
    """``spec`` with ``data.inputs`` recorded (unchanged when already recorded)."""
    if spec.data.inputs or spec.data.upload:
        return spec
    hashes = hash_inputs(spec)
    if not hashes:
        return spec
    return spec.replace(data=dataclasses.replace(spec.data, inputs=hashes))


def changed_inputs(recorded: Mapping[str, str], current: Mapping[str, str]) -> list[str]:
    """What differs between the recorded and the current input hashes, one phrase per file."""
    out = []
    for key in sorted(set(recorded) | set(current)):
        if key not in current:
            out.append(f"{key} (missing now)")
        elif key not in recorded:
            out.append(f"{key} (not read by the recorded run)")
        elif recorded[key] != current[key]:
            out.append(f"{key} (content differs)")
    return out
