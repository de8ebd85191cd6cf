"""Registry of the shipped data samples, driven by their manifests ``data/samples/<name>/sample.json``.

A manifest (documented in ``docs/data.md``) is a JSON object with the fields of
:class:`SampleInfo`: ``name`` (the folder name), ``kind`` (``"topdown"``, ``"phsafe"`` or
``"entities"``), ``title``, ``description``, ``files`` (data files in the folder, in the order the
loader expects), ``rows``, ``persons`` (or ``null``), ``geography``, ``source``, ``licence``,
``licence_file`` (the licence/attribution file kept beside the data) and ``loader``; optionally
``scale`` (the fraction of a full population the sample represents, 0 < scale ≤ 1, e.g. 0.001 for
the 1/1000 synthetic US households), ``full_scale_persons`` and ``scale_note``. Every manifest
found is listed, whatever its kind; :func:`load_topdown_sample` loads the ``"topdown"`` ones with the
loader their manifest names (a fixed table of functions; nothing from the manifest is evaluated).
Sources and licences of the data are those of ``/work/shared/data/README.md``, copied into
``data/samples/README.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.core.errors import DataValidationError, Problem, ValidationError
from engine.core.files import read_input_bytes
from engine.core.strict_json import loads_strict_json
from engine.data.histogram import BlockHistogram
from engine.data.pl94171 import load_pl94171_histogram
from engine.data.ppmf import load_ppmf
from engine.data.ri2010 import load_ri2010

KINDS: tuple[str, ...] = ("topdown", "phsafe", "entities")
MANIFEST = "sample.json"
_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "name": str,
    "kind": str,
    "title": str,
    "description": str,
    "files": list,
    "rows": int,
    "geography": str,
    "source": str,
    "licence": str,
    "licence_file": str,
    "loader": str,
}


@dataclass(frozen=True)
class SampleInfo:
    """One shipped sample as described by its manifest; ``path`` is its folder."""

    name: str
    kind: str
    title: str
    description: str
    files: tuple[str, ...]
    rows: int
    persons: int | None
    geography: str
    source: str
    licence: str
    licence_file: str
    loader: str
    path: Path
    manifest: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    scale: float | None = None
    """Fraction of a full population the sample represents (None: the sample is the whole)."""
    full_scale_persons: int | None = None
    """Persons of that full population, when declared."""

    def file_paths(self) -> tuple[Path, ...]:
        """Absolute paths of the data files, in manifest order."""
        return tuple(self.path / f for f in self.files)

    def summary(self) -> dict[str, Any]:
        """The row ``phexplore samples list`` prints."""
        return {
            "name": self.name,
            "kind": self.kind,
            "rows": self.rows,
            "persons": self.persons,
            "scale": self.scale,
            "geography": self.geography,
            "licence": self.licence,
        }


def samples_dir() -> Path:
    """The ``data/samples`` folder of the repository."""
    return Path(__file__).resolve().parents[2] / "data" / "samples"


def read_manifest(path: Path) -> SampleInfo:
    """Parse and check one ``sample.json``; raise :class:`DataValidationError` naming bad fields."""
    label = str(path)
    try:
        raw = loads_strict_json(read_input_bytes(path, label=label), label=label)
    except ValidationError as exc:
        raise DataValidationError([Problem(label, f"cannot read the manifest: {exc}")]) from None
    if not isinstance(raw, dict):
        raise DataValidationError([Problem(label, "the manifest must be a JSON object")])
    problems = [
        Problem(label, f"field {key!r} must be a {kind.__name__}", column=key)
        for key, kind in _REQUIRED.items()
        if not isinstance(raw.get(key), kind) or isinstance(raw.get(key), bool)
    ]
    if "persons" in raw and raw["persons"] is not None and not isinstance(raw["persons"], int):
        problems.append(
            Problem(label, "field 'persons' must be an integer or null", column="persons")
        )
    scale = raw.get("scale")
    if scale is not None and (
        isinstance(scale, bool) or not isinstance(scale, int | float) or not 0 < scale <= 1
    ):
        problems.append(
            Problem(
                label,
                f"field 'scale' must be the fraction of the full population the sample holds, "
                f"0 < scale ≤ 1 (e.g. 0.001 for 1/1000); got {scale!r}",
                column="scale",
            )
        )
    full = raw.get("full_scale_persons")
    if full is not None and (isinstance(full, bool) or not isinstance(full, int) or full < 1):
        problems.append(
            Problem(label, "field 'full_scale_persons' must be a positive integer", column="scale")
        )
    if isinstance(raw.get("kind"), str) and raw["kind"] not in KINDS:
        problems.append(
            Problem(label, f"kind {raw['kind']!r} is not one of {', '.join(KINDS)}", column="kind")
        )
    if isinstance(raw.get("name"), str) and raw["name"] != path.parent.name:
        problems.append(
            Problem(
                label,
                f"name {raw['name']!r} differs from its folder {path.parent.name!r}",
                column="name",
            )
        )
    if isinstance(raw.get("files"), list) and not all(isinstance(f, str) for f in raw["files"]):
        problems.append(Problem(label, "field 'files' must list file names", column="files"))
    if problems:
        raise DataValidationError(problems, summary=f"invalid sample manifest {label}")
    return SampleInfo(
        name=raw["name"],
        kind=raw["kind"],
        title=raw["title"],
        description=raw["description"],
        files=tuple(raw["files"]),
        rows=raw["rows"],
        persons=raw.get("persons"),
        geography=raw["geography"],
        source=raw["source"],
        licence=raw["licence"],
        licence_file=raw["licence_file"],
        loader=raw["loader"],
        path=path.parent,
        manifest=raw,
        scale=None if scale is None else float(scale),
        full_scale_persons=full,
    )


def list_samples(root: Path | None = None) -> list[SampleInfo]:
    """Every sample with a manifest under ``root`` (default :func:`samples_dir`), sorted by name."""
    base = root or samples_dir()
    if not base.is_dir():
        return []
    return [read_manifest(p) for p in sorted(base.glob(f"*/{MANIFEST}"))]


def get_sample(name: str, root: Path | None = None) -> SampleInfo:
    """The sample called ``name``; an unknown name raises an error listing the known ones."""
    samples = list_samples(root)
    for info in samples:
        if info.name == name:
            return info
    known = ", ".join(s.name for s in samples) or "(none)"
    raise DataValidationError(
        [Problem("data/samples", f"unknown sample {name!r}; known samples: {known}")],
        summary="unknown sample",
    )


def _load_ri2010(info: SampleInfo) -> BlockHistogram:
    return load_ri2010(info.file_paths()[0])


def _load_ppmf(info: SampleInfo) -> BlockHistogram:
    return load_ppmf(info.file_paths()[0])


def _load_pl94171(info: SampleInfo) -> BlockHistogram:
    return load_pl94171_histogram(*info.file_paths()[:4])


TOPDOWN_LOADERS: dict[str, Callable[[SampleInfo], BlockHistogram]] = {
    "ri2010": _load_ri2010,
    "ppmf": _load_ppmf,
    "pl94171": _load_pl94171,
}
"""Manifest ``loader`` value → function loading a topdown sample's files."""


def load_topdown_sample(name: str, root: Path | None = None) -> BlockHistogram:
    """Load the ``"topdown"`` sample ``name`` as a :class:`BlockHistogram`."""
    info = get_sample(name, root)
    if info.kind != "topdown":
        raise DataValidationError(
            [
                Problem(
                    info.name, f"sample {info.name!r} is a {info.kind} sample, not a TopDown input"
                )
            ]
        )
    loader = TOPDOWN_LOADERS.get(info.loader)
    if loader is None:
        raise DataValidationError(
            [
                Problem(
                    str(info.path / MANIFEST),
                    f"unknown loader {info.loader!r}; known: {', '.join(TOPDOWN_LOADERS)}",
                    column="loader",
                )
            ]
        )
    histogram = loader(info)
    histogram.extra.setdefault("sample", info.name)
    return histogram


def declared_scale(data: str | Path) -> float | None:
    """The ``scale`` declared for ``data``: a shipped sample's name or a folder with a sample.json.

    ``None`` when nothing is declared (the data are then taken as a full population).
    """
    text = str(data)
    folder = Path(text)
    if folder.is_dir() and (folder / MANIFEST).is_file():
        return read_manifest(folder / MANIFEST).scale
    if "/" in text or folder.exists():
        return None
    try:
        return get_sample(text).scale
    except DataValidationError:
        return None
