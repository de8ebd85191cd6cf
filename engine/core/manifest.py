"""The manifest of a PHExplore output and the checking readers of outputs.

Every output folder (or file) carries a ``manifest.json`` recording the command, its inputs and their
SHA-256 hashes, the seed, the versions of PHExplore/Python/NumPy/…, every file written with its
SHA-256 hash, and ``"complete": true`` (written by :mod:`engine.core.output_folder`). Readers
(:func:`read_output_folder`, :func:`check_result_file`) refuse a folder without a complete manifest,
whose files do not match it, or that holds anything the manifest does not list — a file, a folder, a
symbolic link (never followed) — (docs/reliability.md, "Outputs").

What a reader takes from a checked folder it reads with :func:`read_verified` / :func:`open_verified`:
the file is opened without following links and its bytes are hashed again *as they are read*, against
the manifest captured when the folder was opened, so a folder replaced or edited after it was opened
is refused instead of serving another run's files under the first run's label.
"""

from __future__ import annotations

import errno
import hashlib
import os
import platform
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path, PurePosixPath
from typing import IO, Any

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


# ------------------------------------------------------------------ opening files inside a folder

NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
"""``os.O_NOFOLLOW`` (0 on a platform without it: links are then refused by ``lstat`` only, which
another program could race — docs/reliability.md, "Limits")."""
_CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY: int = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK: int = getattr(os, "O_NONBLOCK", 0)  # a FIFO planted under a listed name must not block
_CHUNK = 1 << 20


def safe_relative(rel: object) -> bool:
    """True for a relative POSIX path naming something *inside* a folder (no ``..``, ``.``, empty
    or absolute parts, no backslash or NUL): what a manifest may list."""
    if not isinstance(rel, str) or not rel or "\\" in rel or "\x00" in rel:
        return False
    return not PurePosixPath(rel).is_absolute() and all(
        part not in ("", ".", "..") for part in rel.split("/")
    )


def open_in_folder(folder: Path, rel: str) -> int:
    """A read-only descriptor of the regular file ``folder/rel``, no symbolic link followed below
    ``folder`` (every component is opened with ``O_NOFOLLOW`` relative to its parent's descriptor).

    Raises :class:`OutputError` naming the file: a link, missing, not a regular file, unreadable.
    """
    parts = rel.split("/")
    try:
        if os.open not in os.supports_dir_fd:  # pragma: no cover - not POSIX: lstat, then open
            path = folder.joinpath(*parts)
            for i in range(1, len(parts) + 1):
                if folder.joinpath(*parts[:i]).is_symlink():
                    raise OSError(40, "symbolic link", str(path))
            fd = os.open(path, os.O_RDONLY | _CLOEXEC)
        else:
            dfd = os.open(folder, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
            try:
                for part in parts[:-1]:
                    flags = os.O_RDONLY | _DIRECTORY | NOFOLLOW | _CLOEXEC
                    nfd = os.open(part, flags, dir_fd=dfd)
                    os.close(dfd)
                    dfd = nfd
                flags = os.O_RDONLY | NOFOLLOW | _NONBLOCK | _CLOEXEC
                fd = os.open(parts[-1], flags, dir_fd=dfd)
            finally:
                os.close(dfd)
    except OSError as exc:
        raise _open_error(folder, rel, exc) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OutputError(f"{folder}: {rel} is not a regular file; the output was altered")
    return fd


def _open_error(folder: Path, rel: str, exc: OSError) -> OutputError:
    # O_NOFOLLOW on a link: ELOOP (Linux), EMLINK (FreeBSD, macOS); a linked folder: ENOTDIR too
    if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR):
        return OutputError(
            f"{folder}: {rel} is (or lies under) a symbolic link; PHExplore never follows a link "
            "inside an output folder — the folder was altered (links to another run's files?)"
        )
    if exc.errno == errno.ENOENT:
        return OutputError(f"{folder}: {rel} is listed in the manifest but missing")
    return OutputError(f"{folder}: {rel} cannot be read ({exc.strerror or exc})")


def _mismatch(folder: Path, rel: str, what: str) -> OutputError:
    return OutputError(
        f"{folder}: {rel} does not match the manifest ({what}); the output was altered after it "
        "was written, or the folder was replaced since it was opened — open it again"
    )


def read_verified(folder: Path, rel: str, entry: Mapping[str, Any]) -> bytes:
    """The bytes of ``folder/rel``, refused unless their size and SHA-256 are ``entry``'s (the
    manifest entry captured when the folder was checked); no link is followed."""
    fd = open_in_folder(folder, rel)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(int(entry.get("bytes", 0)) + 1)
    if len(data) != entry.get("bytes"):
        raise _mismatch(folder, rel, "size changed")
    if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
        raise _mismatch(folder, rel, "SHA-256 differs")
    return data


def open_verified(folder: Path, rel: str, entry: Mapping[str, Any]) -> IO[bytes]:
    """``folder/rel`` opened for reading after its content, read through once on this descriptor,
    matched ``entry``'s size and SHA-256 (then rewound): a large table is checked without holding
    it in memory, and what is parsed next is that same file, even if the folder is replaced."""
    fd = open_in_folder(folder, rel)
    handle = os.fdopen(fd, "rb")
    try:
        digest, size = hashlib.sha256(), 0
        while block := handle.read(_CHUNK):
            digest.update(block)
            size += len(block)
        if size != entry.get("bytes"):
            raise _mismatch(folder, rel, "size changed")
        if digest.hexdigest() != entry.get("sha256"):
            raise _mismatch(folder, rel, "SHA-256 differs")
        handle.seek(0)
    except BaseException:
        handle.close()
        raise
    return handle


# ------------------------------------------------------------------ what a folder holds


def listed_files(data: Mapping[str, Any], where: str) -> dict[str, dict[str, Any]]:
    """The manifest's ``files`` (relative path → ``{"bytes", "sha256"}``), each name checked to lie
    inside the folder: a manifest naming ``../x`` or ``/etc/x`` is refused, so nothing a manifest
    says can make PHExplore read or delete outside its folder."""
    files = data.get("files")
    if not isinstance(files, dict):
        raise OutputError(f"{where}: the manifest lists no files")
    for rel, entry in files.items():
        if not safe_relative(rel) or rel == MANIFEST_NAME:
            raise OutputError(
                f"{where}: lists {rel!r}, which is not a file inside the folder; the manifest was "
                "altered"
            )
        if (
            not isinstance(entry, dict)
            or isinstance(entry.get("bytes"), bool)
            or not isinstance(entry.get("bytes"), int)
            or not isinstance(entry.get("sha256"), str)
        ):
            raise OutputError(f"{where}: the entry of {rel} has no size and SHA-256")
    return {str(k): dict(v) for k, v in files.items()}


def unlisted_entries(folder: Path, listed: Iterable[str]) -> list[str]:
    """Everything under ``folder`` that is neither its ``manifest.json`` nor a regular file the
    manifest lists — files, folders (``.git/``, shown once), symbolic links and special files —
    sorted; links are reported, never followed."""
    names = set(listed)
    parents = {"/".join(p[:i]) for p in (n.split("/") for n in names) for i in range(1, len(p))}
    out: list[str] = []

    def walk(rel_dir: str) -> None:
        with os.scandir(folder / rel_dir if rel_dir else folder) as scan:
            entries = sorted(scan, key=lambda e: e.name)
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if entry.is_symlink():
                out.append(f"{rel} (a symbolic link)")
            elif entry.is_dir(follow_symlinks=False):
                if rel in parents:
                    walk(rel)
                else:
                    out.append(f"{rel}/")
            elif not entry.is_file(follow_symlinks=False):
                out.append(f"{rel} (not a regular file)")
            elif rel not in names and rel != MANIFEST_NAME:
                out.append(rel)

    walk("")
    return out


def manifest_data(folder: Path) -> dict[str, Any] | None:
    """The parsed ``manifest.json`` of ``folder`` when it is a PHExplore manifest (read without
    following a link); None when there is none, it is a link, or it is not a PHExplore manifest."""
    try:
        fd = open_in_folder(folder, MANIFEST_NAME)
    except OutputError:
        return None
    with os.fdopen(fd, "rb") as handle:
        raw = handle.read(_MANIFEST_MAX_BYTES + 1)
    if len(raw) > _MANIFEST_MAX_BYTES:
        return None
    try:
        data = loads_strict_json(raw, label=str(folder / MANIFEST_NAME))
    except ValidationError:
        return None
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        return None
    return data


_MANIFEST_MAX_BYTES = 64 << 20


# ------------------------------------------------------------------ reading


@dataclass(frozen=True)
class Manifest:
    """A verified manifest: the folder, the parsed JSON and the checked file names.

    :meth:`read` and :meth:`open` give a listed file's content checked against *this* manifest (the
    one read when the folder was opened), however long ago that was.
    """

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

    def entry(self, rel: str) -> dict[str, Any]:
        """The manifest entry of ``rel``; an :class:`OutputError` when it is not listed."""
        entry = self.data["files"].get(rel)
        if entry is None:
            raise OutputError(f"{self.folder}: {rel} is not listed in its {MANIFEST_NAME}")
        return dict(entry)

    def read(self, rel: str) -> bytes:
        """The bytes of listed file ``rel``, verified (:func:`read_verified`)."""
        return read_verified(self.folder, rel, self.entry(rel))

    def open(self, rel: str) -> IO[bytes]:
        """Listed file ``rel`` opened after verification (:func:`open_verified`); close it."""
        return open_verified(self.folder, rel, self.entry(rel))


def read_manifest(folder: str | os.PathLike[str], *, verify: bool = True) -> Manifest:
    """The manifest of a PHExplore output folder; refuses anything incomplete or altered.

    Refused (:class:`OutputError`, naming the folder and the file): no ``manifest.json`` (or one
    that is a link); a manifest that is not a complete PHExplore manifest or lists a name outside
    the folder; a listed file missing, a link, or with another size/hash (when ``verify``);
    anything in the folder that the manifest does not list — a file, a folder, a link — (files
    mixed in from elsewhere).
    """
    base = Path(os.path.abspath(Path(folder).expanduser()))
    if not base.is_dir():
        raise OutputError(f"{base}: not a folder (expected a PHExplore output folder)")
    manifest_path = base / MANIFEST_NAME
    if manifest_path.is_symlink():
        raise OutputError(
            f"{manifest_path}: is a symbolic link; PHExplore never follows a link inside an "
            "output folder"
        )
    if not manifest_path.is_file():
        raise OutputError(
            f"{base}: no {MANIFEST_NAME}; not a complete PHExplore output (an interrupted run, or "
            "files written by something else)"
        )

    fd = open_in_folder(base, MANIFEST_NAME)
    with os.fdopen(fd, "rb") as handle:
        raw = handle.read()
    try:
        data = loads_strict_json(raw, label=str(manifest_path))
    except ValidationError as exc:
        raise OutputError(f"{exc}") from None
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        raise OutputError(f"{manifest_path}: not a PHExplore manifest (format {MANIFEST_FORMAT})")
    if data.get("complete") is not True:
        raise OutputError(f"{manifest_path}: the output is marked incomplete; rerun the command")
    files = listed_files(data, str(manifest_path))
    for rel, entry in files.items():
        if verify:
            open_verified(base, rel, entry).close()
        else:
            os.close(open_in_folder(base, rel))
    extra = unlisted_entries(base, files)
    if extra:
        raise OutputError(
            f"{base}: holds what its manifest does not list ({', '.join(extra[:5])}"
            f"{', …' if len(extra) > 5 else ''}); files from another run were mixed in or "
            "linked in — use the folder as PHExplore wrote it"
        )
    return Manifest(base, {**data, "files": files})


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
    if (folder / MANIFEST_NAME).exists() or (folder / MANIFEST_NAME).is_symlink():
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
