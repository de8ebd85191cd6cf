"""The workspace's SQLite index: what the folder holds, one writer at a time, its schema version.

Standard-library :mod:`sqlite3` in WAL mode (readers never wait for the writer; a reload, a second
tab, the CLI and a restarted server read the same file). Writes go through :meth:`Index.write`: a
process lock and ``BEGIN IMMEDIATE`` make them one writer at a time, and each bumps the
``generation`` counter pages poll to know the workspace changed. The schema version is recorded
twice — ``PRAGMA user_version`` and the ``meta`` table — beside an ``application_id`` that marks
the file as PHExplore's, so a damaged file, another program's database or a newer version's
index is named in one clear message (:class:`WorkspaceError`), never a traceback.

Schema (version 1):

``meta(key, value)``
    ``format`` = ``phexplore-workspace``, ``schema_version``, ``created``, ``generation``.
``scenarios(id, name, kind, fingerprint, origin, file, sha256, created, updated, deleted)``
    a saved scenario (``file``: its ``phexplore-scenario/1`` JSON under ``scenarios/``, whose
    SHA-256 is kept to notice edits made outside PHExplore); ``deleted`` set = deleted, undoable
    until purged; a live name is unique.
``runs(token, number, engine, label, scenario, budget_fingerprint, status, folder, message,
owner, started, finished, deleted)``
    a run: ``number`` is its #N in this workspace; ``status`` running, finished, failed, cancelled
    or interrupted; ``folder`` its record folder under ``runs/`` (metrics.json, tables, manifest);
    ``owner`` the host and process that ran it.
``uploads(sha256, engine, kind, label, files, created)``
    an uploaded file set under ``uploads/<sha256>/`` (``files``: JSON list of name, SHA-256, bytes).
``populations(key, persons, states, seed, folder, created)``
    a generated population under ``populations/``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from engine.core.errors import PHExploreError

INDEX_NAME = "workspace.sqlite"
FORMAT = "phexplore-workspace"
SCHEMA_VERSION = 1
APPLICATION_ID = 0x50485857
"""``PRAGMA application_id`` of a PHExplore workspace index ("PHXW")."""
BUSY_TIMEOUT_MS = 15_000

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE scenarios (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('phsafe', 'topdown')),
    fingerprint TEXT NOT NULL,
    origin TEXT NOT NULL,
    file TEXT NOT NULL UNIQUE,
    sha256 TEXT NOT NULL,
    created TEXT NOT NULL,
    updated TEXT NOT NULL,
    deleted TEXT
);
CREATE UNIQUE INDEX scenarios_live_name ON scenarios(name) WHERE deleted IS NULL;
CREATE TABLE runs (
    token TEXT PRIMARY KEY,
    number INTEGER NOT NULL UNIQUE,
    engine TEXT NOT NULL CHECK (engine IN ('topdown', 'phsafe')),
    label TEXT NOT NULL,
    scenario TEXT NOT NULL,
    budget_fingerprint TEXT,
    status TEXT NOT NULL
        CHECK (status IN ('running', 'finished', 'failed', 'cancelled', 'interrupted')),
    folder TEXT,
    message TEXT,
    owner TEXT NOT NULL,
    started TEXT NOT NULL,
    finished TEXT,
    deleted TEXT
);
CREATE TABLE uploads (
    sha256 TEXT PRIMARY KEY,
    engine TEXT NOT NULL,
    kind TEXT NOT NULL,
    label TEXT NOT NULL,
    files TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE TABLE populations (
    key TEXT PRIMARY KEY,
    persons INTEGER NOT NULL,
    states TEXT NOT NULL,
    seed INTEGER NOT NULL,
    folder TEXT NOT NULL,
    created TEXT NOT NULL
);
"""

README = """This folder is a PHExplore workspace: the scenarios, runs, uploads and generated
populations of the app (`phexplore app`), indexed by workspace.sqlite.

Move it: stop the app, move the whole folder, then start the app with
    phexplore app --workspace NEW_FOLDER      (or set PHEXPLORE_WORKSPACE=NEW_FOLDER)
Clear it: stop the app and delete the folder (a new, empty one is made at the next start).
Keep a scenario: `phexplore scenarios export NAME --out FILE.json` or the app's Download JSON.

Do not edit the files here by hand: the app notices and refuses what changed.
"""
KNOWN_ENTRIES = frozenset(
    {
        INDEX_NAME,
        f"{INDEX_NAME}-wal",
        f"{INDEX_NAME}-shm",
        "README.txt",
        "scenarios",
        "runs",
        "uploads",
        "populations",
    }
)


SUBFOLDERS = ("scenarios", "runs", "uploads", "populations")

_LOCKS: dict[Path, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


class WorkspaceError(PHExploreError):
    """A workspace folder or index that cannot be used (named, with what to do)."""


def now() -> str:
    """The current time as ISO 8601 UTC (what the index stores)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _writer_lock(path: Path) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(path, threading.Lock())


class Index:
    """The SQLite index of one workspace folder (``<root>/workspace.sqlite``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / INDEX_NAME

    # ------------------------------------------------------------------ connections
    def _connect(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        except sqlite3.Error as exc:
            raise self._unusable(exc) from None
        db.row_factory = sqlite3.Row
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        return db

    @contextlib.contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A connection for reading (WAL: never waits for the writer)."""
        db = self._connect()
        try:
            yield db
        except sqlite3.DatabaseError as exc:
            raise self._unusable(exc) from None
        finally:
            db.close()

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A transaction for writing: one writer at a time (a process lock, then ``BEGIN
        IMMEDIATE`` against other processes); bumps ``generation``; rolled back on error."""
        with _writer_lock(self.path):
            db = self._connect()
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    yield db
                    db.execute(
                        "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'"
                    )
                    db.execute("COMMIT")
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
            except sqlite3.DatabaseError as exc:
                raise self._unusable(exc) from None
            finally:
                db.close()

    # ------------------------------------------------------------------ creation and checks
    def create(self) -> None:
        """Create the index (WAL mode, schema, meta rows) in an empty workspace folder."""
        with _writer_lock(self.path):
            db = self._connect()
            try:
                db.execute("PRAGMA journal_mode = WAL")
                db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                db.execute("BEGIN IMMEDIATE")
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.executemany(
                    "INSERT INTO meta(key, value) VALUES (?, ?)",
                    [
                        ("format", FORMAT),
                        ("schema_version", str(SCHEMA_VERSION)),
                        ("created", now()),
                        ("generation", "0"),
                    ],
                )
                db.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                raise self._unusable(exc) from None
            finally:
                db.close()

    def check(self) -> None:
        """Refuse an index that is not a PHExplore workspace index of a version this one reads."""
        if self.path.is_symlink() or not self.path.is_file():
            raise WorkspaceError(
                f"{self.path}: not a regular file; a workspace index is never a link or a folder "
                "— move it aside or choose another workspace (--workspace, "
                "$PHEXPLORE_WORKSPACE)"
            )
        with self.read() as db:
            app_id = db.execute("PRAGMA application_id").fetchone()[0]
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if app_id != APPLICATION_ID:
                raise WorkspaceError(
                    f"{self.path}: an SQLite database, but not a PHExplore workspace index "
                    "(another program's file?); choose another folder for the workspace "
                    "(--workspace DIR or $PHEXPLORE_WORKSPACE)"
                )
            if version > SCHEMA_VERSION:
                raise WorkspaceError(
                    f"{self.path}: written by a newer PHExplore (workspace schema version "
                    f"{version}; this version reads {SCHEMA_VERSION}); upgrade PHExplore or "
                    "choose another workspace"
                )
            row = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
            if row is None or row[0] != FORMAT:
                raise WorkspaceError(f"{self.path}: its meta table does not name a workspace")
            db.execute("PRAGMA journal_mode = WAL")

    def _unusable(self, exc: Exception) -> WorkspaceError:
        reason = str(exc) or type(exc).__name__
        return WorkspaceError(
            f"{self.path}: the workspace index cannot be read ({reason}); it may be damaged or "
            "not a PHExplore file — move it aside (the scenarios and runs beside it are plain "
            "files) or choose another workspace (--workspace DIR or $PHEXPLORE_WORKSPACE)"
        )

    # ------------------------------------------------------------------ queries
    def generation(self) -> int:
        """The change counter: it grows with every write (pages reload what changed)."""
        with self.read() as db:
            row = db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(row[0]) if row is not None else 0

    def meta(self) -> dict[str, str]:
        """The ``meta`` table."""
        with self.read() as db:
            return {r["key"]: r["value"] for r in db.execute("SELECT key, value FROM meta")}

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """The rows of a read query."""
        with self.read() as db:
            return list(db.execute(sql, params))


def prepare_folder(root: Path, *, create: bool = True) -> Index:
    """Check (and, when new or empty, make) the workspace folder ``root``; its :class:`Index`.

    Refused with a :class:`WorkspaceError` naming the folder: a link or a file where the folder
    should be, a folder that holds other things but no workspace index (a workspace is only made
    in a new or empty folder), an index that is damaged, another program's or a newer version's.
    ``create=False``: a folder without a workspace is refused too."""
    index = Index(root)
    if root.is_symlink():
        raise WorkspaceError(
            f"{root}: is a symbolic link; give the workspace folder itself (--workspace DIR or "
            "$PHEXPLORE_WORKSPACE)"
        )
    if root.exists() and not root.is_dir():
        raise WorkspaceError(
            f"{root}: is a file, not a folder; choose a folder for the workspace (--workspace DIR "
            "or $PHEXPLORE_WORKSPACE)"
        )
    index_file = root / INDEX_NAME
    if index_file.exists() or index_file.is_symlink():
        index.check()
    else:
        if not create:
            raise WorkspaceError(
                f"no PHExplore workspace at {root}: the app makes one when it starts "
                f"(phexplore app --workspace {root}); give another with --workspace DIR or "
                "$PHEXPLORE_WORKSPACE"
            )
        if root.is_dir():
            try:
                held = sorted(e.name for e in os.scandir(root))
            except OSError as exc:
                raise WorkspaceError(f"{root}: cannot be read ({exc.strerror})") from None
            if held:
                shown = ", ".join(held[:4]) + (", …" if len(held) > 4 else "")
                raise WorkspaceError(
                    f"{root}: not a PHExplore workspace and not empty ({shown}); a workspace is "
                    "made only in a new or empty folder — choose another one (--workspace DIR or "
                    "$PHEXPLORE_WORKSPACE)"
                )
        try:
            root.mkdir(parents=True, exist_ok=True)
            index.create()
            (root / "README.txt").write_text(README, encoding="utf-8")
        except OSError as exc:
            raise WorkspaceError(
                f"{root}: cannot create the workspace here ({exc.strerror}); choose a writable "
                "folder (--workspace DIR or $PHEXPLORE_WORKSPACE)"
            ) from None
    for sub in SUBFOLDERS:
        path = root / sub
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            raise WorkspaceError(f"{path}: expected a folder of the workspace (not a file or link)")
        try:
            path.mkdir(exist_ok=True)
        except OSError as exc:
            raise WorkspaceError(f"{path}: cannot be created ({exc.strerror})") from None
    return index
