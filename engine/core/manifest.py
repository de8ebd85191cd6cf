"""The manifest of a PHExplore output and the checking readers of outputs.

Every output folder (or file) carries a ``manifest.json`` recording the command, its inputs and their
SHA-256 hashes, the seed, the versions of PHExplore/Python/NumPy/…, every file written with its
SHA-256 hash, and ``"complete": true`` (written by :mod:`engine.core.output_folder`). Readers
(:func:`read_output_folder`, :func:`check_result_file`) refuse a folder without a complete manifest
or whose files do not match it (docs/reliability.md).
"""

from __future__ import annotations

import hashlib
import os
import platform
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from engine.core.errors import OutputError, ValidationError
from engine.core.strict_json import loads_strict_json

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "phexplore-output/1"
"""Value of the manifest's ``format`` key; readers refuse other formats."""
_VERSIONED_PACKAGES: tuple[str, ...] = ("numpy", "pandas", "scipy", "cvxpy", "pyarrow")


# ------------------------------------------------------------------ hashing and provenance


def sha256_file(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    """SHA-256 hex digest of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _tree_files(folder: Path) -> list[Path]:
    """Every regular file under ``folder`` (sorted, symlinks not followed)."""
    out: list[Path] = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            if path.is_file() and not path.is_symlink():
                out.append(path)
    return out


def describe_input(value: str | os.PathLike[str]) -> dict[str, Any]:
    """Manifest entry of one input: a file (size, sha256), a folder (each file hashed) or a name."""
    path = Path(value)
    if path.is_file():
        return {
            "path": str(path.resolve()),
            "bytes": path.stat().st_size,
            "sha256": sha256_file(path),
        }
    if path.is_dir():
        files = {
            str(p.relative_to(path)): {"bytes": p.stat().st_size, "sha256": sha256_file(p)}
            for p in _tree_files(path)
        }
        return {"path": str(path.resolve()), "files": files}
    return {"name": str(value)}


def versions() -> dict[str, str]:
    """Versions of PHExplore, Python and the numerical libraries, for the manifest."""

    out = {"python": platform.python_version()}
    for name in ("phexplore", *_VERSIONED_PACKAGES):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "unknown"
    return out


# ------------------------------------------------------------------ reading


@dataclass(frozen=True)
class Manifest:
    """A verified manifest: the folder, the parsed JSON and the checked file names."""

    folder: Path
    data: dict[str, Any]

    @property
    def files(self) -> dict[str, Any]:
        """``{relative path: {"bytes", "sha256"}}`` of every file of the output."""
        return dict(self.data["files"])

    @property
    def command(self) -> str:
        """The command that wrote the folder, e.g. ``run topdown``."""
        return str(self.data.get("command", ""))


def read_manifest(folder: str | os.PathLike[str], *, verify: bool = True) -> Manifest:
    """The manifest of a PHExplore output folder; refuses anything incomplete or altered.

    Refused (:class:`OutputError`, naming the folder and the file): no ``manifest.json``; a manifest
    that is not a complete PHExplore manifest; a listed file missing or with another size/hash
    (when ``verify``); a file in the folder that the manifest does not list (files mixed in from
    elsewhere).
    """
    base = Path(folder)
    if not base.is_dir():
        raise OutputError(f"{base}: not a folder (expected a PHExplore output folder)")
    manifest_path = base / MANIFEST_NAME
    if not manifest_path.is_file():
        raise OutputError(
            f"{base}: no {MANIFEST_NAME}; not a complete PHExplore output (an interrupted run, or "
            "files written by something else)"
        )

    try:
        data = loads_strict_json(manifest_path.read_bytes(), label=str(manifest_path))
    except ValidationError as exc:
        raise OutputError(f"{exc}") from None
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        raise OutputError(f"{manifest_path}: not a PHExplore manifest (format {MANIFEST_FORMAT})")
    if data.get("complete") is not True:
        raise OutputError(f"{manifest_path}: the output is marked incomplete; rerun the command")
    files = data.get("files")
    if not isinstance(files, dict):
        raise OutputError(f"{manifest_path}: the manifest lists no files")
    for rel, entry in files.items():
        path = base / rel
        if not isinstance(entry, dict) or not path.is_file():
            raise OutputError(f"{base}: {rel} is listed in the manifest but missing")
        if verify:
            if path.stat().st_size != entry.get("bytes"):
                raise OutputError(
                    f"{base}: {rel} does not match the manifest (size changed); the output was "
                    "altered after it was written"
                )
            if sha256_file(path) != entry.get("sha256"):
                raise OutputError(
                    f"{base}: {rel} does not match the manifest (SHA-256 differs); the output was "
                    "altered after it was written"
                )
    extra = [
        p.relative_to(base).as_posix()
        for p in _tree_files(base)
        if p.relative_to(base).as_posix() not in files and p.name != MANIFEST_NAME
    ]
    if extra:
        raise OutputError(
            f"{base}: holds file(s) the manifest does not list ({', '.join(sorted(extra)[:5])}); "
            "files from another run were mixed in"
        )
    return Manifest(base, data)


def read_output_folder(folder: str | os.PathLike[str]) -> Manifest:
    """Alias of :func:`read_manifest` with full verification (the checking reader)."""
    return read_manifest(folder, verify=True)


def check_result_file(path: str | os.PathLike[str]) -> Path:
    """Check a results file (e.g. ``metrics.json``) or folder given to a reader; returns the file.

    A folder must be a verified PHExplore output holding ``metrics.json``. A file inside a folder
    with a manifest must be listed in it and match its hash; a file in a folder *without* a manifest
    is refused when the folder looks like run output (an interrupted or pre-manifest run). A
    standalone file (e.g. a ``metrics.json`` downloaded from the app) is accepted.
    """
    p = Path(path)
    if p.is_dir():
        manifest = read_manifest(p)
        if "metrics.json" not in manifest.files:
            raise OutputError(f"{p}: the output folder holds no metrics.json")
        return p / "metrics.json"
    if not p.exists():
        raise OutputError(f"{p}: file not found")
    folder = p.parent
    if (folder / MANIFEST_NAME).exists():
        manifest = read_manifest(folder)
        if p.name not in manifest.files:
            raise OutputError(f"{p}: not listed in {folder / MANIFEST_NAME}")
        return p
    siblings = {e.name for e in folder.iterdir()} if folder.is_dir() else set()
    if siblings & _RUN_OUTPUT_NAMES:
        raise OutputError(
            f"{p}: its folder looks like a run output but has no {MANIFEST_NAME} (an interrupted "
            "run, or one written before manifests); rerun the command"
        )
    return p


_RUN_OUTPUT_NAMES = frozenset(
    {
        "estimates.csv",
        "measurements.csv",
        "estimates.parquet",
        "measurements.parquet",
        "microdata.parquet",
        "PH1_num.csv",
        "runs.csv",
        "runs.parquet",
        "summary.txt",
    }
)
