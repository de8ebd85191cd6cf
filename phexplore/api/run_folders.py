"""A TopDown run folder written by the command line, opened on the Results page.

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
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from engine.core.errors import ValidationError
from engine.runs.dense_rows import chosen_queries
from phexplore.api import limits
from phexplore.api.jobs import RunRecord
from phexplore.api.runs import run_label, run_provenance


def _estimates(run: Any, limit: int) -> tuple[pd.DataFrame, list[str]]:
    """The dense tidy estimates the app keeps and the queries left out."""
    from engine.runs.run_folder import dense_estimates

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
    from engine.metrics.errors import mae_table

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


def folder_record(path: str | Path, run_id: int, scenario: str) -> RunRecord:
    """The :class:`RunRecord` of the TopDown run folder at ``path`` (refused when incomplete)."""
    from engine.runs.run_folder import open_run_folder

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
    provenance: dict[str, Any] = {}
    if fingerprint:
        # The CLI records the budget it ran: label and attach the run like an app run.
        provenance = run_provenance(
            run_id=run_id,
            token=uuid.uuid4().hex,
            data_label=data,
            seed=int(metrics.get("seed") or 0),
            fingerprint=str(fingerprint),
            origin=str(metrics.get("budget_origin") or metrics.get("allocation", "?")),
        )
        label = run_label(
            run_id, "TopDown", f"folder {run.folder}", budget_text, provenance["seed"], provenance
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
        **({"token": provenance["run_token"]} if provenance else {}),
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
            "queries_left_out": left_out,
            **provenance,
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


def folder_files(record: RunRecord) -> list[FolderFile]:
    """The tables and metrics.json of an opened folder, in the format written, plus CSV copies of
    the Parquet tables of at most :data:`~phexplore.api.limits.CSV_CONVERSION_MAX_ROWS` rows (sparse estimates as stored)."""
    folder = Path(str(record.settings["folder"]))
    outputs = record.settings.get("outputs") or {}
    out: list[FolderFile] = []
    for table, entry in (outputs.get("files") or {}).items():
        name = str(entry["file"])
        path = folder / name
        parquet = name.endswith(".parquet")
        rows = int(entry.get("rows") or 0)
        sparse = " (sparse)" if entry.get("sparse") else ""
        out.append(
            FolderFile(
                name,
                f"{name}{sparse} · {rows:,} rows",
                "application/octet-stream" if parquet else "text/csv",
                path.read_bytes,
            )
        )
        if parquet and rows <= limits.CSV_CONVERSION_MAX_ROWS:
            out.append(
                FolderFile(
                    f"{table}.csv",
                    f"{table}.csv{sparse} (converted) · {rows:,} rows",
                    "text/csv",
                    lambda path=path: _csv_bytes(path),
                )
            )
    out.append(
        FolderFile(
            "metrics.json",
            "metrics.json",
            "application/json",
            (folder / "metrics.json").read_bytes,
        )
    )
    return out


def _csv_bytes(path: Path) -> bytes:
    from engine.runs.table_files import read_table

    return read_table(path).to_csv(index=False).encode("utf-8")
