"""Read a TopDown run folder back — CSV or Parquet, dense or sparse — refusing incomplete output.

:func:`open_run_folder` is the checking reader of a folder written by ``phexplore run topdown`` or
``run replay`` (docs/reliability.md): the manifest must be complete and every file must match its
hash (:func:`engine.core.manifest.read_output_folder`), metrics.json must parse, and every table
its ``outputs`` section lists must be readable with the row count recorded when it was written
(:func:`engine.runs.table_files.check_table`; a truncated Parquet file is refused by name), and
nothing the manifest does not list may be in the folder (a file, a folder, a link). Folders
written before tables could be Parquet (``estimates.csv`` etc., no ``outputs`` section) are read as
dense CSV.

Every later read (:meth:`RunFolder.table`, :meth:`RunFolder.iter`, :meth:`RunFolder.read`) opens
the file without following links and checks its bytes, as they are read, against the manifest
captured when the folder was opened (:meth:`engine.core.manifest.Manifest.open`): a folder replaced
or edited afterwards is refused ("does not match the manifest … open it again"), never read as the
run it was opened as (docs/reliability.md, "Outputs").

:meth:`RunFolder.estimates` returns the dense tidy table (geolevel, geounit, query, cell, true,
estimate), re-expanding a sparse one with :func:`dense_estimates` (every geounit × every cell, the
left-out rows with true = estimate = 0, in the writer's order), or the rows as stored with
``dense=False``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from engine.core.errors import OutputError
from engine.core.manifest import Manifest, read_output_folder
from engine.runs.table_files import check_table, iter_table, read_table

TABLES: tuple[str, ...] = ("estimates", "measurements", "microdata")


@dataclass(frozen=True)
class RunFolder:
    """A checked TopDown run folder: its manifest, metrics.json and the tables it holds."""

    folder: Path
    manifest: Manifest
    metrics: dict[str, Any]
    outputs: dict[str, Any]
    """metrics.json ``outputs`` (for older folders: the CSV files found, dense)."""

    @property
    def format(self) -> str:
        """The tables' file format: ``"csv"`` or ``"parquet"``."""
        return str(self.outputs.get("format", "csv"))

    @property
    def sparse(self) -> bool:
        """True when the estimates table omits rows whose true and estimated counts are both 0."""
        return bool(self.outputs.get("sparse_estimates", False))

    def path(self, table: str) -> Path:
        """The file of ``table`` (estimates, measurements, microdata, geounits, cells)."""
        entry = self.outputs.get("files", {}).get(table)
        if entry is None:
            raise OutputError(
                f"{self.folder}: this run wrote no {table} table"
                + (
                    " (it was run with --no-measurements)"
                    if table == "measurements"
                    else " (it was run with --no-microdata)"
                    if table == "microdata"
                    else ""
                )
            )
        return self.folder / str(entry["file"])

    def has(self, table: str) -> bool:
        """Whether the run wrote ``table`` (measurements and microdata can be left out)."""
        return table in self.outputs.get("files", {})

    def file_name(self, table: str) -> str:
        """The file name of ``table`` inside the folder (as the manifest lists it)."""
        return self.path(table).relative_to(self.folder).as_posix()

    def read(self, name: str) -> bytes:
        """The bytes of the folder's file ``name``, checked against the manifest read at open."""
        return self.manifest.read(name)

    def table(self, table: str) -> pd.DataFrame:
        """A whole table as stored (estimates may be sparse: see :meth:`estimates`), read from the
        file checked against the manifest read at open."""
        with self.manifest.open(self.file_name(table)) as source:
            return read_table(self.path(table), source=source)

    def iter(self, table: str, chunk_rows: int = 500_000) -> Iterator[pd.DataFrame]:
        """A table as stored, in frames of at most ``chunk_rows`` rows (checked like :meth:`table`)."""
        with self.manifest.open(self.file_name(table)) as source:
            yield from iter_table(self.path(table), chunk_rows=chunk_rows, source=source)

    def estimates(self, *, dense: bool = True) -> pd.DataFrame:
        """The tidy estimates; a sparse table is re-expanded unless ``dense=False``."""
        stored = self.table("estimates")
        if not self.sparse or not dense:
            return stored
        return dense_estimates(stored, self.table("geounits"), self.table("cells"))


def dense_estimates(
    sparse: pd.DataFrame, geounits: pd.DataFrame, cells: pd.DataFrame
) -> pd.DataFrame:
    """The dense tidy table of a sparse one: every geounit (``geounits``: geolevel, geounit, in
    tree order) × every (query, cell) of ``cells`` (in order), query by query as
    :meth:`engine.topdown.result.TopDownResult.to_tidy` orders them; rows not in ``sparse`` get
    true = estimate = 0. Refuses a sparse row whose geounit or cell the index tables do not list.
    """
    levels = geounits["geolevel"].astype(str).to_numpy(dtype=object)
    ids = geounits["geounit"].astype(str).to_numpy(dtype=object)
    n_nodes = len(geounits)
    node_index = pd.MultiIndex.from_arrays([levels, ids])
    frames, blocks = [], []
    offset = 0
    query_offset: dict[str, tuple[int, int, pd.Index]] = {}
    for query, part in cells.groupby("query", sort=False):
        labels = pd.Index(part["cell"].astype(str).to_numpy(dtype=object))
        query_offset[str(query)] = (offset, len(labels), labels)
        blocks.append((str(query), labels))
        offset += n_nodes * len(labels)
    total = offset
    true = np.zeros(total, dtype=np.int64)
    estimate = np.zeros(total, dtype=np.int64)
    if len(sparse):
        node = node_index.get_indexer(
            pd.MultiIndex.from_arrays(
                [
                    sparse["geolevel"].astype(str).to_numpy(),
                    sparse["geounit"].astype(str).to_numpy(),
                ]
            )
        )
        if np.any(node < 0):
            bad = sparse.iloc[int(np.flatnonzero(node < 0)[0])]
            raise OutputError(
                f"sparse estimates: geounit {bad['geolevel']} {bad['geounit']} is not in the "
                "geounits table; the run folder is inconsistent — rerun the command"
            )
        position = np.empty(len(sparse), dtype=np.int64)
        for query, rows in sparse.groupby("query", sort=False).indices.items():
            if str(query) not in query_offset:
                raise OutputError(
                    f"sparse estimates: query {query!r} is not in the cells table; the run folder "
                    "is inconsistent — rerun the command"
                )
            start, size, labels = query_offset[str(query)]
            cell = labels.get_indexer(sparse["cell"].astype(str).to_numpy()[rows])
            if np.any(cell < 0):
                raise OutputError(
                    f"sparse estimates: a cell of query {query!r} is not in the cells table; the "
                    "run folder is inconsistent — rerun the command"
                )
            position[rows] = start + node[rows] * size + cell
        true[position] = sparse["true"].to_numpy(dtype=np.int64)
        estimate[position] = sparse["estimate"].to_numpy(dtype=np.int64)
    for query, labels in blocks:
        frames.append(
            pd.DataFrame(
                {
                    "geolevel": np.repeat(levels, len(labels)),
                    "geounit": np.repeat(ids, len(labels)),
                    "query": query,
                    "cell": np.tile(labels.to_numpy(dtype=object), n_nodes),
                }
            )
        )
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    frame["true"] = true
    frame["estimate"] = estimate
    return frame


def _legacy_outputs(files: dict[str, Any]) -> dict[str, Any]:
    """The ``outputs`` section of a folder written before tables could be Parquet: dense CSV."""
    found = {
        name: {"file": f"{name}.csv", "format": "csv"} for name in TABLES if f"{name}.csv" in files
    }
    return {"format": "csv", "sparse_estimates": False, "files": found}


def open_run_folder(folder: str | Path, *, check_tables: bool = True) -> RunFolder:
    """The checked TopDown run folder at ``folder`` (see the module docstring).

    Raises :class:`~engine.core.errors.OutputError` naming the folder and the file for a
    folder that is not a complete PHExplore output, not a TopDown run, or whose tables are
    incomplete. ``check_tables=False`` skips reading every table through (the manifest's hashes are
    still checked).
    """
    manifest = read_output_folder(folder)
    base = manifest.folder
    if "metrics.json" not in manifest.files:
        raise OutputError(f"{base}: the output folder holds no metrics.json (not a run folder)")
    try:
        metrics = json.loads(manifest.read("metrics.json").decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise OutputError(f"{base / 'metrics.json'}: not valid JSON ({exc})") from None
    if not isinstance(metrics, dict) or metrics.get("engine", "topdown") != "topdown":
        raise OutputError(
            f"{base}: not a TopDown run folder (metrics.json engine "
            f"{metrics.get('engine') if isinstance(metrics, dict) else '?'!r})"
        )
    outputs = metrics.get("outputs")
    if not isinstance(outputs, dict):
        outputs = _legacy_outputs(manifest.files)
    if "estimates" not in outputs.get("files", {}):
        raise OutputError(f"{base}: the run folder holds no estimates table")
    for name, entry in outputs["files"].items():
        if str(entry.get("file")) not in manifest.files:
            raise OutputError(
                f"{base}: metrics.json lists {entry.get('file')} ({name}) but the manifest does "
                "not; the folder is incomplete — rerun the command"
            )
        if check_tables:
            with manifest.open(str(entry["file"])) as source:
                check_table(base / str(entry["file"]), rows=entry.get("rows"), source=source)
    return RunFolder(base, manifest, metrics, outputs)
