"""A TopDown run folder written by the command line, opened on the Results page (docs/app.md).

Part of the app-facing API (:mod:`phexplore.api`). :func:`folder_record` reads a folder written
by ``phexplore run topdown`` / ``run replay`` — CSV or Parquet, dense or sparse — through the
checking reader :func:`engine.runs.run_folder.open_run_folder` (complete manifest, matching hashes,
readable tables with their recorded row counts) and turns it into a :class:`RunRecord` the Results
page shows like a run of the session: the MAE table from the estimates (``engine.metrics``), EPL,
Blau-quintile bias and predicted-vs-measured RMSE as recorded in its metrics.json.

Production-scale runs hold tens of millions of dense estimate rows; the record keeps at most
:data:`~phexplore.api.limits.APP_MAX_ROWS` of them: every query when the dense table fits, else the smallest queries that
fit together (TOTAL first; :func:`engine.runs.dense_rows.chosen_queries`, the rule a run of the
session follows too), and says which were left out (their MAE is in metrics.json).
:func:`folder_files` lists the folder's files for download in the format written, with a CSV
conversion for tables of at most :data:`~phexplore.api.limits.CSV_CONVERSION_MAX_ROWS` rows.

The record keeps the manifest read when the folder was opened. A download reads its file at click
time, without following links, and refuses bytes whose SHA-256 is not that manifest's
(:meth:`engine.core.manifest.Manifest.read`); :func:`folder_changed` tells the page, on every rerun,
that the folder was replaced or edited since (its files then are not offered). So a folder replaced
after it was opened never serves another run's files under the first run's label
(docs/reliability.md, "Outputs").
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from engine.core.csv_cells import frame_to_csv
from engine.core.errors import ValidationError
from engine.core.manifest import Manifest, unlisted_entries
from engine.metrics.error_tables import mae_table
from engine.runs.dense_rows import chosen_queries
from engine.runs.provenance import Provenance
from engine.runs.run_folder import dense_estimates, open_run_folder
from engine.runs.table_files import read_table
from phexplore.api import limits
from phexplore.api.jobs import RunRecord
from phexplore.api.run_records import run_label


def _estimates(run: Any, limit: int) -> tuple[pd.DataFrame, list[str]]:
    """The dense tidy estimates the app keeps and the queries left out."""
    dense_rows = int(run.outputs.get("files", {}).get("estimates", {}).get("dense_rows") or 0)
    if not run.sparse:
        if dense_rows and dense_rows > limit:
            raise ValidationError(
                f"{run.folder}: its dense estimates table has {dense_rows:,} rows, more than the "
                f"app holds ({limit:,}); rerun with --output-format parquet (sparse estimates) or "
                "read it in Python with engine.runs.run_folder.open_run_folder"
            )
        return run.estimates(), []
    geounits, cells = run.table("geounits"), run.table("cells")
    sizes = cells.groupby("query", sort=False).size()
    chosen = chosen_queries({str(q): int(n) for q, n in sizes.items()}, len(geounits), limit)
    if not chosen:
        raise ValidationError(
            f"{run.folder}: even its smallest query has more dense rows than the app holds "
            f"({limit:,}); read it in Python with engine.runs.run_folder.open_run_folder"
        )
    stored = run.table("estimates")
    keep = cells["query"].isin(chosen)
    tidy = dense_estimates(
        stored[stored["query"].isin(chosen)].reset_index(drop=True),
        geounits,
        cells[keep].reset_index(drop=True),
    )
    left_out = [q for q in dict.fromkeys(cells["query"]) if q not in chosen]
    return tidy, left_out


def _epl_frame(metrics: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for level, per_query in (metrics.get("epl") or {}).items():
        for query, entry in (per_query or {}).items():
            if isinstance(entry, dict):
                rows.append({"geolevel": level, "query": query, **entry})
    return pd.DataFrame(rows)


def _blau_frame(metrics: dict[str, Any]) -> pd.DataFrame | None:
    section = metrics.get("blau_bias") or {}
    if not section:
        return None
    geography = metrics.get("blau_bias_geography") or {}
    rows = [
        {
            "geolevel": level,
            "quintile": int(q),
            "mean_signed_error": value,
            **({"geography": geography[level]} if level in geography else {}),
        }
        for level, quintiles in section.items()
        for q, value in quintiles.items()
    ]
    return pd.DataFrame(rows)


def _mae_frame(metrics: dict[str, Any], tidy: pd.DataFrame) -> pd.DataFrame:
    """The folder's error table: n_cells, mae, median_ae and tda_mae as its metrics.json
    recorded them (every query, over the run's error universe), the other columns from the
    estimates file — except at the block level of a universe that leaves blocks out, where the
    file cannot tell which blocks those are (NaN there). Files without ``mae`` in metrics.json:
    everything from the estimates."""
    dense = mae_table(tidy)
    recorded = metrics.get("mae")
    if not isinstance(recorded, dict) or not recorded:
        return dense
    rows = []
    for level, per_query in recorded.items():
        for query, value in (per_query or {}).items():
            rows.append(
                {
                    "geolevel": level,
                    "query": query,
                    "n_cells": ((metrics.get("n_cells") or {}).get(level) or {}).get(query),
                    "mae": value,
                    "median_ae": ((metrics.get("median_ae") or {}).get(level) or {}).get(query),
                    "tda_mae": ((metrics.get("tda_mae") or {}).get(level) or {}).get(query),
                }
            )
    frame = pd.DataFrame(rows)
    extra = dense[["geolevel", "query", "mean_error", "p95_ae", "max_ae"]].astype(
        {"geolevel": str, "query": str}
    )
    universe = metrics.get("error_universe") or {}
    if int(universe.get("blocks_left_out") or 0) > 0:
        extra = extra[extra["geolevel"] != str(universe.get("level", "Block"))]
    frame = frame.merge(extra, on=["geolevel", "query"], how="left")
    columns = ["geolevel", "query", "n_cells", "mae", "median_ae", "mean_error", "p95_ae"]
    return frame[[*columns, "max_ae", "tda_mae"]]


def folder_record(
    path: str | Path, run_id: int, scenario: str, token: str | None = None
) -> RunRecord:
    """The :class:`RunRecord` of the TopDown run folder at ``path`` (refused when incomplete), as
    run ``run_id`` of the workspace with ``token`` (default a fresh one)."""
    text = str(path).strip()
    if not text:
        raise ValidationError("give the path of a run folder written by 'phexplore run topdown'")
    run = open_run_folder(Path(text).expanduser())
    metrics = run.metrics
    tidy, left_out = _estimates(run, limits.APP_MAX_ROWS)
    spec = metrics.get("run") or {}
    tables: dict[str, pd.DataFrame] = {"mae": _mae_frame(metrics, tidy), "epl": _epl_frame(metrics)}
    blau = _blau_frame(metrics)
    if blau is not None:
        tables["blau_bias"] = blau
    if metrics.get("prediction"):
        tables["prediction"] = pd.DataFrame(metrics["prediction"])
    mechanism = str(metrics.get("mechanism", "zcdp"))
    rho = metrics.get("epsilon") if mechanism == "puredp" else metrics.get("rho")
    data = str((spec.get("data") or {}).get("source", run.folder.name))
    what = "ε" if mechanism == "puredp" else "ρ"
    budget_text = f"{what}={float(rho or 0):.4g}"
    fingerprint = metrics.get("budget_fingerprint")
    provenance: Provenance | None = None
    if fingerprint:
        # The CLI records the budget it ran (budget_fingerprint, budget_origin): label and attach
        # the run like an app run.
        provenance = Provenance(
            budget_fingerprint=str(fingerprint),
            budget_origin=str(metrics.get("budget_origin") or metrics.get("allocation", "?")),
            run_id=run_id,
            run_token=token or uuid.uuid4().hex,
            data=data,
            seed=int(metrics.get("seed") or 0),
        )
        label = run_label(
            run_id,
            "TopDown",
            f"folder {run.folder}",
            budget_text,
            int(provenance.seed or 0),
            provenance,
        )
    else:  # folders written before budgets were recorded
        label = (
            f"#{run_id} · TopDown · folder {run.folder} · {metrics.get('allocation', '?')} · "
            f"{budget_text} · seed {metrics.get('seed')} · budget not recorded"
        )
    epl_settings = metrics.get("epl_settings") or {}
    return RunRecord(
        id=run_id,
        label=label,
        engine="topdown",
        scenario=scenario,
        token=str(provenance.run_token) if provenance else token,
        settings={
            "data": data,
            "allocation": metrics.get("allocation"),
            "mechanism": mechanism,
            "rho": None if rho is None else float(rho),
            "rho_spent": metrics.get("epsilon_spent" if mechanism == "puredp" else "rho_spent"),
            "spread_invariant_share": bool(metrics.get("spread_invariant_share")),
            "seed": int(metrics.get("seed") or 0),
            "levels": list(dict.fromkeys(tidy["geolevel"])),
            "runtime_s": float(metrics.get("runtime_s") or 0.0),
            "epl_settings": epl_settings,
            "fingerprint": spec.get("fingerprint"),
            "folder": str(run.folder),
            "outputs": run.outputs,
            "manifest_files": run.manifest.files,
            "folder_state": _folder_state(run.folder, run.manifest.files),
            "queries_left_out": left_out,
            **(provenance.as_dict() if provenance else {}),
        },
        metrics=metrics,
        tidy=tidy,
        tables=tables,
    )


@dataclass(frozen=True)
class FolderFile:
    """One downloadable file of a run folder: its name, rows, and how to get its bytes."""

    name: str
    label: str
    mime: str
    data: Callable[[], bytes]


def _folder_state(folder: Path, files: dict[str, Any]) -> dict[str, list[int]]:
    """Inode, size and modification time of each listed file (``lstat``: a link is not followed)."""
    state: dict[str, list[int]] = {}
    for name in files:
        try:
            info = (folder / name).lstat()
        except OSError:
            continue
        state[name] = [info.st_ino, info.st_size, info.st_mtime_ns, info.st_mode]
    return state


def folder_changed(record: RunRecord) -> str | None:
    """Why the folder of an opened record is no longer what was opened (None when unchanged): a
    listed file replaced, edited, removed or turned into a link, or something added to the folder.
    A cheap check for every rerun of the page; each download still checks its file's SHA-256."""
    settings = record.settings
    folder = Path(str(settings.get("folder", "")))
    files = settings.get("manifest_files")
    if not files or not settings.get("folder_state"):
        return None
    what = ""
    if not folder.is_dir():
        what = "it is gone"
    elif _folder_state(folder, files) != settings["folder_state"]:
        what = "its files were replaced or edited"
    else:
        try:
            added = unlisted_entries(folder, files)
        except OSError:
            added = ["?"]
        if added:
            what = f"it now holds what its manifest does not list ({', '.join(added[:3])})"
    if not what:
        return None
    return (
        f"The run folder {folder} changed since it was opened ({what}); its files are no longer "
        "offered here, and this run's charts show what was read when it was opened. Open the "
        "folder again to see what it holds now."
    )


def _manifest(record: RunRecord) -> Manifest:
    """The manifest captured when the record's folder was opened."""
    folder = Path(str(record.settings["folder"]))
    files = record.settings.get("manifest_files")
    if not isinstance(files, dict):
        raise ValidationError(f"{folder}: open the folder again (no manifest was kept)")
    return Manifest(folder, {"files": files})


def folder_files(record: RunRecord) -> list[FolderFile]:
    """The tables and metrics.json of an opened folder, in the format written, plus CSV copies of
    the Parquet tables of at most :data:`~phexplore.api.limits.CSV_CONVERSION_MAX_ROWS` rows (sparse
    estimates as stored). Each file's bytes are read when asked for and checked against the
    manifest read when the folder was opened (a changed folder raises, naming the file)."""
    manifest = _manifest(record)
    outputs = record.settings.get("outputs") or {}
    out: list[FolderFile] = []
    for table, entry in (outputs.get("files") or {}).items():
        name = str(entry["file"])
        parquet = name.endswith(".parquet")
        rows = int(entry.get("rows") or 0)
        sparse = " (sparse)" if entry.get("sparse") else ""
        out.append(
            FolderFile(
                name,
                f"{name}{sparse} · {rows:,} rows",
                "application/octet-stream" if parquet else "text/csv",
                lambda name=name: manifest.read(name),
            )
        )
        if parquet and rows <= limits.CSV_CONVERSION_MAX_ROWS:
            out.append(
                FolderFile(
                    f"{table}.csv",
                    f"{table}.csv{sparse} (converted) · {rows:,} rows",
                    "text/csv",
                    lambda name=name: _csv_bytes(manifest, name),
                )
            )
    out.append(
        FolderFile(
            "metrics.json",
            "metrics.json",
            "application/json",
            lambda: manifest.read("metrics.json"),
        )
    )
    return out


def _csv_bytes(manifest: Manifest, name: str) -> bytes:
    with manifest.open(name) as source:
        frame = read_table(manifest.folder / name, source=source)
    return frame_to_csv(frame).encode("utf-8")
