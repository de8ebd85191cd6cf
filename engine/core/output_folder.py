"""Atomic, manifest-checked outputs: a folder (or file) appears complete or not at all.

Every PHExplore command that writes (``run topdown``, ``run phsafe``, ``experiment``, ``generate``,
``report``) writes into a temporary folder or file *beside* its target and renames it into place only
when everything is written, with a ``manifest.json`` recording the command, its inputs and their
SHA-256 hashes, the seed, the versions of PHExplore/Python/NumPy/…, every file written with its
SHA-256 hash, and ``"complete": true``. Readers (:mod:`engine.core.manifest`) refuse a folder without a complete manifest or whose files do
not match it.

Guarantees (docs/reliability.md):

- ``--out`` that already holds files is refused unless it is an earlier PHExplore output *and*
  ``overwrite`` is set; then the whole folder is replaced (no file of the earlier run is left beside
  the new ones). A command never writes over, or replaces a folder holding, one of its own inputs.
- An interrupt (Ctrl-C, SIGTERM) at any moment leaves the previous output intact and no
  complete-looking partial output: the temporary folder is removed, and the swap of old and new is
  one atomic ``renameat2(RENAME_EXCHANGE)`` where the kernel offers it (signals blocked otherwise).
- Two runs aimed at the same target cannot interleave: an ``fcntl`` lock on a hidden lock file
  beside the target; the second run is refused at once with a message naming the first's PID.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import datetime as _dt
import errno
import fcntl
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from engine.core.errors import Interrupted, OutputError
from engine.core.manifest import (
    MANIFEST_FORMAT,
    MANIFEST_NAME,
    _tree_files,
    describe_input,
    sha256_file,
    versions,
)

_TMP_TAG = ".phexplore-tmp-"
_OLD_TAG = ".phexplore-old-"
_LOCK_TAG = ".phexplore-lock"


# ------------------------------------------------------------------ checks on a target


def _is_within(child: Path, parent: Path) -> bool:
    try:
        child.relative_to(parent)
    except ValueError:
        return False
    return True


def _input_paths(inputs: Mapping[str, Any]) -> list[Path]:
    paths: list[Path] = []
    for value in inputs.values():
        values = value if isinstance(value, list | tuple) else [value]
        for v in values:
            if v is None:
                continue
            p = Path(v)
            if p.exists():
                paths.append(p.resolve())
    return paths


def is_phexplore_output(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` is a folder holding a PHExplore ``manifest.json`` (complete or not)."""
    manifest = Path(path) / MANIFEST_NAME
    if not manifest.is_file():
        return False
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("format") == MANIFEST_FORMAT


def check_target(
    target: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    inputs: Mapping[str, Any] | None = None,
    option: str = "--out",
    kind: str = "folder",
) -> Path:
    """Refuse a target that cannot be (re)written; returns its absolute path.

    ``kind`` is ``"folder"`` or ``"file"``. A folder that holds files must be an earlier PHExplore
    output (it has a manifest) and ``overwrite`` must be set; a file must have been written by
    PHExplore before (:data:`REPORT_MARKER` for reports) and ``overwrite`` set. The target may be
    neither one of ``inputs`` nor a folder containing one.
    """
    path = Path(target).expanduser()
    absolute = Path(os.path.abspath(path))
    resolved = path.resolve()
    for item in _input_paths(inputs or {}):
        if resolved == item or _is_within(item, resolved):
            what = "is" if resolved == item else "contains"
            raise OutputError(
                f"{option} {path}: {what} one of this command's inputs ({item}); "
                "write the output somewhere else"
            )
    if path.is_symlink() and not path.exists():
        raise OutputError(f"{option} {path}: is a broken symbolic link; remove it or pick another")
    if kind == "folder":
        if path.exists() and not path.is_dir():
            raise OutputError(f"{option} {path}: a file is in the way (expected a folder)")
        if path.is_dir():
            try:
                entries = os.listdir(path)  # hidden files count: a .git must never be replaced
            except OSError as exc:
                raise OutputError(f"{option} {path}: cannot list it ({exc.strerror})") from None
            if entries:
                if not is_phexplore_output(path):
                    raise OutputError(
                        f"{option} {path}: already holds {len(entries)} file(s) that are not a "
                        "PHExplore output (no manifest.json); choose an empty or new folder"
                    )
                if not overwrite:
                    raise OutputError(
                        f"{option} {path}: already holds an earlier PHExplore output; pass "
                        "--overwrite to replace it (the whole folder is replaced)"
                    )
    else:
        if path.is_dir():
            raise OutputError(f"{option} {path}: is a folder; give the file to write")
        if path.exists():
            if not _is_phexplore_file(path):
                raise OutputError(
                    f"{option} {path}: exists and was not written by PHExplore; choose another name"
                )
            if not overwrite:
                raise OutputError(
                    f"{option} {path}: exists (an earlier PHExplore report); pass --overwrite to "
                    "replace it"
                )
    parent = absolute.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(
            f"{option} {path}: cannot write there (cannot create {parent}: {exc.strerror or exc})"
        ) from None
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{option} {path}: cannot write there ({parent}: permission denied)")
    return absolute


REPORT_MARKER = '<meta name="generator" content="PHExplore'
"""Written into every HTML report, so ``--overwrite`` only ever replaces an earlier report."""


def _is_phexplore_file(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return REPORT_MARKER.encode() in head


# ------------------------------------------------------------------ lock


@contextlib.contextmanager
def target_lock(target: Path, option: str = "--out") -> Iterator[None]:
    """Hold an exclusive ``fcntl`` lock for ``target`` (a hidden lock file beside it).

    A second holder is refused at once with :class:`OutputError` naming the first's PID. The lock
    file is removed on release; the inode check after locking makes that race-free.
    """
    lock_path = target.parent / f".{target.name}{_LOCK_TAG}"
    while True:
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise OutputError(
                f"{option} {target}: cannot create the lock file {lock_path} ({exc.strerror})"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = ""
            with contextlib.suppress(OSError, ValueError):
                holder = os.pread(fd, 64, 0).decode("ascii").strip()
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                who = f" (process {holder})" if holder else ""
                raise OutputError(
                    f"{option} {target}: another PHExplore run{who} is writing there; wait for it "
                    "to finish or choose another folder"
                ) from None
            raise
        try:
            same = os.fstat(fd).st_ino == os.stat(lock_path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the previous holder removed the file between our open and lock: retry
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode("ascii"), 0)
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock_path)
        os.close(fd)


# ------------------------------------------------------------------ signals and the swap


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Interrupted` (main thread only) so cleanup runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise Interrupted("terminated (SIGTERM)")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _signals_blocked() -> Iterator[None]:
    """Block SIGINT and SIGTERM for a few system calls (main thread; delivered on exit)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    mask = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, mask)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths with Linux ``renameat2(RENAME_EXCHANGE)``; False if unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    renameat2.restype = ctypes.c_int
    result = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP if hasattr(errno, "ENOTSUP") else -1):
        return False
    raise OSError(code, os.strerror(code), str(a))


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _replace_into_place(staging: Path, target: Path) -> None:
    """Move the finished ``staging`` to ``target``, swapping out (then deleting) any old content."""
    with _signals_blocked():
        if not target.exists() and not target.is_symlink():
            os.rename(staging, target)
            _fsync_dir(target.parent)
            return
        if _exchange(staging, target):
            old = staging  # after the swap the staging name holds the old content
        else:
            old = target.parent / f".{target.name}{_OLD_TAG}{os.getpid()}"
            os.rename(target, old)
            os.rename(staging, target)
        _fsync_dir(target.parent)
    if old.is_dir() and not old.is_symlink():
        shutil.rmtree(old, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            old.unlink()


def _remove_stale(target: Path) -> None:
    """Remove temporary/old siblings of ``target`` left by a killed run (call with the lock held)."""
    prefix_tmp = f".{target.name}{_TMP_TAG}"
    prefix_old = f".{target.name}{_OLD_TAG}"
    with contextlib.suppress(OSError):
        for entry in os.scandir(target.parent):
            if entry.name.startswith((prefix_tmp, prefix_old)):
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)


# ------------------------------------------------------------------ writing


@dataclass
class OutputFolder:
    """Stage an output folder; on success write the manifest and move it into place atomically.

    Use as a context manager around the *whole* command (so the lock and the checks come before any
    work)::

        with OutputFolder(args.out, command="run topdown", inputs={"data": path}, seed=seed,
                          overwrite=args.overwrite) as staging:
            write_files(staging.path)           # write everything into staging.path
            staging.settings["rho"] = "64/25"   # anything else worth recording
        # here args.out holds the complete output and its manifest

    On any exception (including Ctrl-C and SIGTERM) the staging folder is deleted and the previous
    content of the target, if any, is left untouched.
    """

    target: str | os.PathLike[str]
    command: str
    inputs: Mapping[str, Any] = field(default_factory=dict)
    seed: int | None = None
    overwrite: bool = False
    settings: dict[str, Any] = field(default_factory=dict)
    option: str = "--out"
    path: Path = field(init=False)
    final: Path = field(init=False)
    _stack: contextlib.ExitStack = field(init=False)

    def __enter__(self) -> OutputFolder:
        self.final = check_target(
            self.target, overwrite=self.overwrite, inputs=self.inputs, option=self.option
        )
        self._stack = contextlib.ExitStack()
        try:
            self._stack.enter_context(target_lock(self.final, self.option))
            self._stack.enter_context(_sigterm_as_interrupt())
            # Re-check under the lock: another run may have finished into the target meanwhile.
            check_target(
                self.target, overwrite=self.overwrite, inputs=self.inputs, option=self.option
            )
            _remove_stale(self.final)
            self._input_entries = {
                key: (
                    [describe_input(v) for v in value]
                    if isinstance(value, list | tuple)
                    else describe_input(value)
                )
                for key, value in self.inputs.items()
                if value is not None
            }
            self.path = Path(
                tempfile.mkdtemp(prefix=f".{self.final.name}{_TMP_TAG}", dir=self.final.parent)
            )
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if exc_type is None:
                try:
                    self._finish()
                except BaseException:
                    shutil.rmtree(self.path, ignore_errors=True)
                    raise
            else:
                shutil.rmtree(self.path, ignore_errors=True)
        finally:
            self._stack.close()

    def _finish(self) -> None:
        files = {}
        for p in _tree_files(self.path):
            rel = p.relative_to(self.path).as_posix()
            if rel == MANIFEST_NAME:
                raise OutputError(f"{self.command}: {MANIFEST_NAME} is reserved for the manifest")
            with open(p, "rb+") as handle:
                os.fsync(handle.fileno())
            files[rel] = {"bytes": p.stat().st_size, "sha256": sha256_file(p)}
        manifest = {
            "format": MANIFEST_FORMAT,
            "command": self.command,
            "argv": list(sys.argv),
            "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "inputs": self._input_entries,
            "seed": self.seed,
            "settings": self.settings,
            "versions": versions(),
            "files": files,
            "complete": True,
        }
        text = json.dumps(manifest, indent=2, default=str, allow_nan=False) + "\n"
        manifest_path = self.path / MANIFEST_NAME
        with open(manifest_path, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        _fsync_dir(self.path)
        os.chmod(self.path, 0o755 & ~_umask())
        _replace_into_place(self.path, self.final)


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


@contextlib.contextmanager
def atomic_file(
    target: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    inputs: Mapping[str, Any] | None = None,
    option: str = "--out",
) -> Iterator[Path]:
    """Write one file atomically: yields a temporary path beside ``target``, renamed on success.

    An existing ``target`` is replaced only when it was written by PHExplore
    (:data:`REPORT_MARKER`) and ``overwrite`` is set. On any exception the temporary file is removed
    and ``target`` is untouched.
    """
    final = check_target(target, overwrite=overwrite, inputs=inputs, option=option, kind="file")
    with target_lock(final, option), _sigterm_as_interrupt():
        check_target(target, overwrite=overwrite, inputs=inputs, option=option, kind="file")
        _remove_stale(final)
        fd, name = tempfile.mkstemp(prefix=f".{final.name}{_TMP_TAG}", dir=final.parent)
        os.close(fd)
        tmp = Path(name)
        try:
            yield tmp
            with open(tmp, "rb+") as handle:
                os.fsync(handle.fileno())
            os.chmod(tmp, 0o644 & ~_umask())
            with _signals_blocked():
                os.replace(tmp, final)
                _fsync_dir(final.parent)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
