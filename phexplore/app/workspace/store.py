"""The workspace: a folder of scenarios, run records, uploads and generated populations, indexed by
SQLite (:mod:`phexplore.app.workspace.index`; docs/app.md, "Workspace").

Everything a user makes in the app lives here, so a reload, a second tab or a server restart finds
it again, and ``phexplore scenarios`` reads the same store. Folder layout::

    <workspace>/workspace.sqlite      the index (WAL: also -wal and -shm beside it)
                README.txt            what the folder is, how to move or clear it
                scenarios/<id>.json   saved scenarios (phexplore-scenario/1, as downloaded)
                runs/<n>-<token>/     run records (run_folders.py)
                uploads/<sha256>/     uploaded file sets, by content hash
                populations/<key>/    generated populations

Deleting is explicit and undoable: a deleted scenario or run is only marked (``deleted``) and can be
restored until the workspace is next opened by the app a day or more later
(:meth:`Workspace.purge`). Whatever cannot be read — a scenario file edited outside PHExplore, a run
folder that lost a file, a file nobody indexed — is listed by :meth:`Workspace.problems` in one line
each and left alone, never a crash.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import socket
import tempfile
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.core.errors import PHExploreError
from phexplore.app.records import RunRecord
from phexplore.app.workspace.index import (
    INDEX_NAME,
    KNOWN_ENTRIES,
    Index,
    WorkspaceError,
    now,
    prepare_folder,
)
from phexplore.app.workspace.run_folders import read_run_folder, write_run_folder
from phexplore.planning.scenarios import Scenario

PURGE_AFTER = dt.timedelta(days=1)
"""Deleted scenarios and runs stay restorable for this long (and at least for the session)."""


@dataclass(frozen=True)
class ScenarioEntry:
    """A saved scenario as the index lists it."""

    id: str
    name: str
    kind: str
    fingerprint: str
    origin: str
    updated: str
    deleted: str | None = None


@dataclass(frozen=True)
class RunEntry:
    """A run as the index lists it (``status``: running, finished, failed, cancelled, interrupted)."""

    token: str
    number: int
    engine: str
    label: str
    scenario: str
    budget_fingerprint: str | None
    status: str
    folder: str | None
    message: str | None
    started: str
    finished: str | None
    deleted: str | None = None


@dataclass(frozen=True)
class UploadEntry:
    """An uploaded file set kept by content hash."""

    sha256: str
    engine: str
    kind: str
    label: str
    files: tuple[tuple[str, str, int], ...]
    """(name, SHA-256, bytes) of each file."""


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _pid_alive(owner: str) -> bool:
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's: not ours to judge
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _write_atomic(path: Path, data: bytes) -> None:
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise


class Workspace:
    """One workspace folder and its index; thread-safe, one object per folder per process
    (:func:`open_workspace`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.index = Index(root)
        self._records: dict[str, RunRecord] = {}
        self._records_lock = threading.Lock()
        self._open()

    # ------------------------------------------------------------------ opening
    def _open(self) -> None:
        prepare_folder(self.root)

    def generation(self) -> int:
        """The index's change counter (grows with every write)."""
        return self.index.generation()

    # ------------------------------------------------------------------ scenarios
    def scenario_entries(self, *, deleted: bool = False) -> list[ScenarioEntry]:
        """Saved scenarios (``deleted``: also the deleted ones), oldest first."""
        rows = self.index.rows(
            "SELECT id, name, kind, fingerprint, origin, updated, deleted FROM scenarios "
            + ("" if deleted else "WHERE deleted IS NULL ")
            + "ORDER BY created, name"
        )
        return [ScenarioEntry(**dict(r)) for r in rows]

    def _scenario_row(self, key: str) -> Any:
        rows = self.index.rows(
            "SELECT * FROM scenarios WHERE deleted IS NULL AND (id = ? OR name = ?)", (key, key)
        )
        if not rows:
            raise WorkspaceError(
                f"no scenario {key!r} in the workspace {self.root} (deleted, or saved in another "
                "workspace?)"
            )
        return rows[0]

    def load_scenario(self, key: str) -> Scenario:
        """The live scenario whose id or name is ``key`` (refused when its file changed outside
        PHExplore or cannot be read)."""
        row = self._scenario_row(key)
        path = self.root / row["file"]
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise WorkspaceError(
                f"{path}: the file of scenario “{row['name']}” cannot be read ({exc.strerror})"
            ) from None
        if hashlib.sha256(raw).hexdigest() != row["sha256"]:
            raise WorkspaceError(
                f"{path}: the file of scenario “{row['name']}” was changed outside PHExplore since "
                "it was saved, so it is not used; load a copy you trust with “Load a scenario "
                "JSON”, or delete it"
            )
        return Scenario.from_json(raw, source=str(path))

    def scenarios(self) -> tuple[dict[str, Scenario], list[str]]:
        """Every live scenario by name, and one line per scenario that cannot be used."""
        out: dict[str, Scenario] = {}
        problems: list[str] = []
        for entry in self.scenario_entries():
            try:
                out[entry.name] = self.load_scenario(entry.id)
            except PHExploreError as exc:
                problems.append(str(exc))
        return out, problems

    def save_scenario(self, scenario: Scenario) -> ScenarioEntry:
        """Save ``scenario``; one of the same name is replaced (and can be restored: it is marked
        deleted)."""
        raw = scenario.to_json().encode("utf-8")
        sid = uuid.uuid4().hex[:16]
        rel = f"scenarios/{sid}.json"
        _write_atomic(self.root / rel, raw)
        stamp = now()
        try:
            with self.index.write() as db:
                db.execute(
                    "UPDATE scenarios SET deleted = ? WHERE name = ? AND deleted IS NULL",
                    (stamp, scenario.name),
                )
                db.execute(
                    "INSERT INTO scenarios(id, name, kind, fingerprint, origin, file, sha256, "
                    "created, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        sid,
                        scenario.name,
                        scenario.kind,
                        scenario.fingerprint(),
                        scenario.origin(),
                        rel,
                        hashlib.sha256(raw).hexdigest(),
                        stamp,
                        stamp,
                    ),
                )
        except BaseException:
            (self.root / rel).unlink(missing_ok=True)
            raise
        return ScenarioEntry(
            sid, scenario.name, scenario.kind, scenario.fingerprint(), scenario.origin(), stamp
        )

    def delete_scenario(self, key: str) -> str:
        """Mark the live scenario ``key`` (id or name) deleted; returns its id (for
        :meth:`restore_scenario`)."""
        row = self._scenario_row(key)
        with self.index.write() as db:
            db.execute("UPDATE scenarios SET deleted = ? WHERE id = ?", (now(), row["id"]))
        return str(row["id"])

    def restore_scenario(self, sid: str) -> str:
        """Undo :meth:`delete_scenario` (or a replacement); a live scenario of the same name is
        marked deleted in its place. Returns the scenario's name."""
        rows = self.index.rows("SELECT name FROM scenarios WHERE id = ?", (sid,))
        if not rows:
            raise WorkspaceError(f"scenario {sid} is no longer in the workspace (purged)")
        name = rows[0]["name"]
        with self.index.write() as db:
            db.execute(
                "UPDATE scenarios SET deleted = ? WHERE name = ? AND deleted IS NULL AND id != ?",
                (now(), name, sid),
            )
            db.execute("UPDATE scenarios SET deleted = NULL WHERE id = ?", (sid,))
        return str(name)

    # ------------------------------------------------------------------ runs
    def reserve_run(
        self, engine: str, label: str, scenario: str, token: str | None = None
    ) -> RunEntry:
        """A new run's number (#N, one more than any run of the workspace ever had) and token,
        recorded as running."""
        token = token or uuid.uuid4().hex
        stamp = now()
        with self.index.write() as db:
            number = int(db.execute("SELECT COALESCE(MAX(number), 0) + 1 FROM runs").fetchone()[0])
            db.execute(
                "INSERT INTO runs(token, number, engine, label, scenario, status, owner, started) "
                "VALUES (?, ?, ?, ?, ?, 'running', ?, ?)",
                (token, number, engine, label, scenario, _owner(), stamp),
            )
        return RunEntry(
            token, number, engine, label, scenario, None, "running", None, None, stamp, None
        )

    def save_run(self, record: RunRecord) -> RunEntry:
        """Write ``record``'s folder and mark its run finished (reserving its number first when
        it has none in this workspace)."""
        rows = self.index.rows("SELECT number FROM runs WHERE token = ?", (record.token,))
        if not rows:
            entry = self.reserve_run(record.engine, record.label, record.scenario, record.token)
            if entry.number != record.id:
                record.label = record.label.replace(f"#{record.id} ", f"#{entry.number} ", 1)
                record.id = entry.number
        rel = f"runs/{record.id}-{record.token[:12]}"
        write_run_folder(self.root / rel, record)
        with self.index.write() as db:
            db.execute(
                "UPDATE runs SET status = 'finished', folder = ?, label = ?, scenario = ?, "
                "budget_fingerprint = ?, finished = ?, message = NULL WHERE token = ?",
                (
                    rel,
                    record.label,
                    record.scenario,
                    record.metrics.get("budget_fingerprint"),
                    now(),
                    record.token,
                ),
            )
        with self._records_lock:
            self._records[record.token] = record
        return self.run_entry(record.token)

    def release_run(self, token: str) -> None:
        """Give back a reserved number whose run never started (refused before its job)."""
        with self.index.write() as db:
            db.execute("DELETE FROM runs WHERE token = ? AND status = 'running'", (token,))

    def end_run(self, token: str, status: str, message: str) -> None:
        """Record that a reserved run ended without a result (failed, cancelled, interrupted)."""
        with self.index.write() as db:
            db.execute(
                "UPDATE runs SET status = ?, message = ?, finished = ? WHERE token = ? "
                "AND status = 'running'",
                (status, message, now(), token),
            )

    def run_entry(self, token: str) -> RunEntry:
        rows = self.index.rows(
            "SELECT token, number, engine, label, scenario, budget_fingerprint, status, folder, "
            "message, started, finished, deleted FROM runs WHERE token = ?",
            (token,),
        )
        if not rows:
            raise WorkspaceError(f"no run {token[:12]} in the workspace {self.root}")
        return RunEntry(**dict(rows[0]))

    def run_entries(self, *, deleted: bool = False) -> list[RunEntry]:
        """Every run (``deleted``: also the deleted ones), by number."""
        rows = self.index.rows(
            "SELECT token, number, engine, label, scenario, budget_fingerprint, status, folder, "
            "message, started, finished, deleted FROM runs "
            + ("" if deleted else "WHERE deleted IS NULL ")
            + "ORDER BY number"
        )
        return [RunEntry(**dict(r)) for r in rows]

    def records(self) -> tuple[list[RunRecord], list[str]]:
        """The finished, live runs as records (tables read on first use; one object per run for
        the whole server), and one line per run whose folder cannot be read."""
        out: list[RunRecord] = []
        problems: list[str] = []
        for entry in self.run_entries():
            if entry.status != "finished" or not entry.folder:
                continue
            with self._records_lock:
                held = self._records.get(entry.token)
            if held is None:
                try:
                    held = read_run_folder(self.root / entry.folder)
                except PHExploreError as exc:
                    problems.append(f"run #{entry.number} cannot be shown: {exc}")
                    continue
                with self._records_lock:
                    held = self._records.setdefault(entry.token, held)
            out.append(held)
        return out, problems

    def delete_run(self, token: str) -> None:
        """Mark a run deleted (undo: :meth:`restore_run`)."""
        with self.index.write() as db:
            db.execute("UPDATE runs SET deleted = ? WHERE token = ?", (now(), token))

    def restore_run(self, token: str) -> None:
        with self.index.write() as db:
            db.execute("UPDATE runs SET deleted = NULL WHERE token = ?", (token,))

    def mark_interrupted(self) -> int:
        """Runs left 'running' by a process that is gone: marked interrupted; returns how many."""
        stale = [
            r["token"]
            for r in self.index.rows("SELECT token, owner FROM runs WHERE status = 'running'")
            if not _pid_alive(str(r["owner"]))
        ]
        for token in stale:
            self.end_run(token, "interrupted", "the server stopped while it ran")
        return len(stale)

    # ------------------------------------------------------------------ uploads
    def store_upload(
        self, engine: str, kind: str, files: Sequence[tuple[str, bytes]]
    ) -> UploadEntry:
        """Keep an uploaded file set under its content hash (the same files are kept once)."""
        parts = sorted(
            (str(name), hashlib.sha256(data).hexdigest(), len(data)) for name, data in files
        )
        for name, _, _ in parts:
            if not name or "/" in name or "\\" in name or name in (".", ".."):
                raise WorkspaceError(f"upload {name!r}: not a plain file name")
        digest = hashlib.sha256(json.dumps([kind, parts]).encode("utf-8")).hexdigest()
        folder = self.root / "uploads" / digest
        label = ", ".join(name for name, _, _ in parts)
        if not self.index.rows("SELECT 1 FROM uploads WHERE sha256 = ?", (digest,)):
            folder.mkdir(exist_ok=True)
            for name, data in files:
                _write_atomic(folder / str(name), data)
            with self.index.write() as db:
                db.execute(
                    "INSERT OR IGNORE INTO uploads(sha256, engine, kind, label, files, created) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (digest, engine, kind, label, json.dumps(parts), now()),
                )
        return UploadEntry(digest, engine, kind, label, tuple(tuple(p) for p in parts))  # type: ignore[misc]

    def uploads(self, engine: str | None = None) -> list[UploadEntry]:
        """Kept uploads (of ``engine``), newest first."""
        rows = self.index.rows(
            "SELECT * FROM uploads"
            + (" WHERE engine = ?" if engine else "")
            + " ORDER BY created DESC",
            (engine,) if engine else (),
        )
        return [
            UploadEntry(
                r["sha256"],
                r["engine"],
                r["kind"],
                r["label"],
                tuple(tuple(p) for p in json.loads(r["files"])),  # type: ignore[misc]
            )
            for r in rows
        ]

    def upload_files(self, entry: UploadEntry) -> list[tuple[str, bytes]]:
        """The files of a kept upload, checked against their recorded SHA-256."""
        out = []
        for name, sha, _ in entry.files:
            path = self.root / "uploads" / entry.sha256 / name
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise WorkspaceError(
                    f"{path}: the kept upload cannot be read ({exc.strerror})"
                ) from None
            if hashlib.sha256(data).hexdigest() != sha:
                raise WorkspaceError(f"{path}: changed since it was uploaded; upload it again")
            out.append((name, data))
        return out

    # ------------------------------------------------------------------ populations
    def population_folder(
        self, persons: int, states: Sequence[str], seed: int
    ) -> tuple[Path, bool]:
        """The folder of the generated population (persons, states, seed) and whether it exists."""
        key = f"{int(persons)}-{'-'.join(states) or 'US'}-seed{int(seed)}"
        folder = self.root / "populations" / key / "population"
        known = bool(self.index.rows("SELECT 1 FROM populations WHERE key = ?", (key,)))
        return folder, known and folder.is_dir()

    def register_population(self, persons: int, states: Sequence[str], seed: int) -> None:
        key = f"{int(persons)}-{'-'.join(states) or 'US'}-seed{int(seed)}"
        folder = f"populations/{key}/population"
        with self.index.write() as db:
            db.execute(
                "INSERT OR REPLACE INTO populations(key, persons, states, seed, folder, created) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (key, int(persons), " ".join(states), int(seed), folder, now()),
            )

    # ------------------------------------------------------------------ housekeeping
    def purge(self, older_than: dt.timedelta = PURGE_AFTER) -> int:
        """Remove scenarios and runs deleted longer than ``older_than`` ago (their files too)."""
        cutoff = (dt.datetime.now(dt.UTC) - older_than).isoformat(timespec="seconds")
        gone_s = self.index.rows(
            "SELECT id, file FROM scenarios WHERE deleted IS NOT NULL AND deleted < ?", (cutoff,)
        )
        gone_r = self.index.rows(
            "SELECT token, folder FROM runs WHERE deleted IS NOT NULL AND deleted < ?", (cutoff,)
        )
        if not gone_s and not gone_r:
            return 0
        with self.index.write() as db:
            db.executemany("DELETE FROM scenarios WHERE id = ?", [(r["id"],) for r in gone_s])
            db.executemany("DELETE FROM runs WHERE token = ?", [(r["token"],) for r in gone_r])
        for r in gone_s:
            (self.root / r["file"]).unlink(missing_ok=True)
        for r in gone_r:
            if r["folder"]:
                shutil.rmtree(self.root / r["folder"], ignore_errors=True)
        return len(gone_s) + len(gone_r)

    def problems(self) -> list[str]:
        """One line for each thing in the folder that is not the workspace's (left alone)."""
        out = []
        for entry in sorted(os.scandir(self.root), key=lambda e: e.name):
            if entry.name not in KNOWN_ENTRIES:
                out.append(f"{entry.path}: not part of the workspace (ignored)")
        known = {r["file"] for r in self.index.rows("SELECT file FROM scenarios")}
        for entry in sorted(os.scandir(self.root / "scenarios"), key=lambda e: e.name):
            rel = f"scenarios/{entry.name}"
            if rel not in known and not entry.name.startswith("."):
                out.append(f"{entry.path}: not a scenario of this workspace (ignored)")
        folders = {r["folder"] for r in self.index.rows("SELECT folder FROM runs") if r["folder"]}
        for entry in sorted(os.scandir(self.root / "runs"), key=lambda e: e.name):
            rel = f"runs/{entry.name}"
            if rel not in folders and not entry.name.startswith("."):
                out.append(f"{entry.path}: not a run of this workspace (ignored)")
        return out


_OPEN: dict[Path, Workspace] = {}
_OPEN_LOCK = threading.Lock()


def open_workspace(root: str | os.PathLike[str]) -> Workspace:
    """The :class:`Workspace` of folder ``root`` (made when new or empty), one per process; a
    :class:`~phexplore.app.workspace.index.WorkspaceError` says why a folder cannot be used."""
    path = Path(os.path.abspath(Path(root).expanduser()))
    with _OPEN_LOCK:
        held = _OPEN.get(path)
        if held is not None and (path / INDEX_NAME).is_file():
            return held
        workspace = Workspace(path)
        _OPEN[path] = workspace
        return workspace
