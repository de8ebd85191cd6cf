"""Atomic, manifest-checked outputs: a folder (or file) appears complete or not at all.

Every PHExplore command that writes (``run topdown``, ``run phsafe``, ``experiment``, ``generate``,
``report``) writes into a temporary folder or file *beside* its target and renames it into place only
when everything is written, with a ``manifest.json`` recording the command, its inputs and their
SHA-256 hashes, the seed, the versions of PHExplore/Python/NumPy/…, every file written with its
SHA-256 hash, and ``"complete": true``. Readers (:mod:`engine.core.manifest`) refuse a folder without a complete manifest or whose files do
not match it.

Guarantees (docs/reliability.md):

- ``--out`` that already holds files is refused unless it is an earlier PHExplore output *and*
  ``overwrite`` is set, and it is refused even then when it holds anything its manifest does not
  list (a user's ``notes.md``, a ``.git``, a link), naming those entries: ``overwrite`` replaces
  only what PHExplore wrote, and no file of the earlier run is left beside the new ones. A command
  never writes over, or replaces a folder holding, one of its own inputs.
- No symbolic link is followed: a ``--out`` that is a link, a lock file name that is a link (or a
  hard link to another file) and links inside an output folder are refused with a message; lock and
  manifest files are opened with ``O_NOFOLLOW`` (``O_EXCL`` where they are created).
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
import stat
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
    NOFOLLOW,
    _tree_files,
    describe_input,
    listed_files,
    manifest_data,
    safe_relative,
    sha256_file,
    unlisted_entries,
    versions,
)

_TMP_TAG = ".phexplore-tmp-"
_CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK: int = getattr(os, "O_NONBLOCK", 0)
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
    """True if ``path`` is a folder holding a PHExplore ``manifest.json`` (complete or not; the
    manifest itself must not be a symbolic link)."""
    folder = Path(path)
    return folder.is_dir() and manifest_data(folder) is not None


def foreign_entries(path: str | os.PathLike[str]) -> list[str]:
    """What the earlier PHExplore output at ``path`` holds besides the files its manifest lists
    (and the manifest): a user's files, folders such as ``.git``, links. Empty when ``path`` holds
    only what PHExplore wrote — the condition for replacing it."""
    folder = Path(path)
    data = manifest_data(folder)
    if data is None:
        return sorted(os.listdir(folder))
    try:
        listed = listed_files(data, str(folder / MANIFEST_NAME))
    except OutputError:
        return [f"{MANIFEST_NAME} (lists names outside the folder)"]
    return unlisted_entries(folder, listed)


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
    if path.is_symlink():
        raise OutputError(
            f"{option} {path}: is a symbolic link (to {os.readlink(path)}); PHExplore never "
            "writes through or replaces a link — give the real path"
        )
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
                foreign = foreign_entries(path)
                if foreign:
                    shown = ", ".join(foreign[:8]) + (", …" if len(foreign) > 8 else "")
                    raise OutputError(
                        f"{option} {path}: holds an earlier PHExplore output and {len(foreign)} "
                        f"entr{'y' if len(foreign) == 1 else 'ies'} PHExplore did not write "
                        f"({shown}); --overwrite replaces only the files its manifest lists, so "
                        "move those out of the folder or choose another --out"
                    )
                if not overwrite:
                    raise OutputError(
                        f"{option} {path}: already holds an earlier PHExplore output; pass "
                        "--overwrite to replace it (only the files its manifest lists are replaced)"
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
        fd = os.open(path, os.O_RDONLY | NOFOLLOW | _NONBLOCK)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return False
        head = handle.read(4096)
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
        fd = _open_lock(lock_path, target, option)
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
            same = os.fstat(fd).st_ino == os.lstat(lock_path).st_ino
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


def _open_lock(lock_path: Path, target: Path, option: str) -> int:
    """The lock file's descriptor: created with ``O_EXCL`` when absent, else opened — never through
    a symbolic link (``O_NOFOLLOW``), and refused when it is not a plain file of its own (a hard
    link to another file would be truncated when the PID is written)."""
    flags = os.O_RDWR | NOFOLLOW | _NONBLOCK | _CLOEXEC
    for _ in range(5):
        try:
            fd = os.open(lock_path, flags | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            try:
                fd = os.open(lock_path, flags)
            except FileNotFoundError:
                continue  # removed by its holder meanwhile: create it
            except OSError as exc:
                raise _lock_error(lock_path, target, option, exc) from None
        except OSError as exc:
            raise _lock_error(lock_path, target, option, exc) from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            os.close(fd)
            raise OutputError(
                f"{option} {target}: the lock file {lock_path} is not a plain file of its own (a "
                "hard link or a special file); PHExplore will not write into it — remove it"
            )
        return fd
    raise OutputError(f"{option} {target}: cannot create the lock file {lock_path}; try again")


def _lock_error(lock_path: Path, target: Path, option: str, exc: OSError) -> OutputError:
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        return OutputError(
            f"{option} {target}: the lock file {lock_path} is a symbolic link; PHExplore never "
            "follows one (it would write into the file it points to) — remove the link"
        )
    return OutputError(
        f"{option} {target}: cannot create the lock file {lock_path} ({exc.strerror or exc})"
    )


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
    """Move the finished ``staging`` to ``target``, swapping out (then discarding) any old output."""
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
    _discard_replaced(old, target)


def _discard_replaced(old: Path, target: Path) -> None:
    """Delete a replaced (or stale) output: the files its manifest lists, the manifest, then the
    folders left empty — nothing else. Whatever else is found (put there after the checks) is kept
    in a visible folder beside the target, and said on stderr; a folder without a manifest is one
    of our own unfinished staging folders and is removed whole."""
    if old.is_symlink() or not old.is_dir():
        with contextlib.suppress(OSError):
            old.unlink()
        return
    data = manifest_data(old)
    if data is None:
        shutil.rmtree(old, ignore_errors=True)
        return
    files = data.get("files") if isinstance(data.get("files"), dict) else {}
    for rel in [*files, MANIFEST_NAME]:
        if not safe_relative(rel):
            continue
        path = old / rel
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.lstat(path).st_mode) and not _under_link(old, rel):
                path.unlink()
    for root, dirs, _ in os.walk(old, topdown=False):
        for name in dirs:
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(root, name))  # only empty folders go
    try:
        os.rmdir(old)
    except OSError:
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        kept = target.parent / f"{target.name}.kept-{stamp}-{os.getpid()}"
        with contextlib.suppress(OSError):
            os.rename(old, kept)
            print(
                f"note: files added to {target} while it was being replaced were kept in {kept}",
                file=sys.stderr,
            )


def _under_link(folder: Path, rel: str) -> bool:
    """True when a folder on the way from ``folder`` to ``rel`` is a symbolic link."""
    parts = rel.split("/")
    return any((folder.joinpath(*parts[:i])).is_symlink() for i in range(1, len(parts)))


def _remove_stale(target: Path) -> None:
    """Remove temporary/old siblings of ``target`` left by a killed run (call with the lock held),
    by :func:`_discard_replaced` (only what their manifest lists, when they have one)."""
    prefix_tmp = f".{target.name}{_TMP_TAG}"
    prefix_old = f".{target.name}{_OLD_TAG}"
    with contextlib.suppress(OSError):
        for entry in os.scandir(target.parent):
            if entry.name.startswith((prefix_tmp, prefix_old)):
                _discard_replaced(Path(entry.path), target)


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
            fd = os.open(p, os.O_RDONLY | NOFOLLOW | _CLOEXEC)
            try:
                os.fsync(fd)
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            files[rel] = {"bytes": size, "sha256": sha256_file(p)}
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
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | _CLOEXEC
        with os.fdopen(os.open(manifest_path, flags, 0o644), "w", encoding="utf-8") as handle:
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
            fd = os.open(tmp, os.O_RDONLY | NOFOLLOW | _CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.chmod(tmp, 0o644 & ~_umask())
            with _signals_blocked():
                os.replace(tmp, final)
                _fsync_dir(final.parent)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
