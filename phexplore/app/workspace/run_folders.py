"""A run's record folder in the workspace: its metrics.json, tables and sweep, with a manifest.

Written once, when the run finishes, through :class:`engine.core.output_folder.OutputFolder` (staged
beside the target, moved into place complete with ``manifest.json``), so a folder is either whole
or absent. Read back by :func:`read_run_folder`: ``record.json`` and ``metrics.json`` at once, the
tables only when a page asks (every read checked against the manifest: a file edited or swapped
since is refused, naming it). Layout (``phexplore-run-record/1``)::

    runs/<number>-<token>/record.json        label, engine, scenario, settings, table files, sweep
                          metrics.json       the run's metrics.json (as downloaded)
                          tidy.parquet       the tidy comparison table
                          tables/NN.parquet  the extra tables (names in record.json)
                          sweep/<name>.parquet  the ρ sweep's tables (when one ran)
                          manifest.json
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from engine.core.errors import OutputError, ValidationError
from engine.core.manifest import Manifest, read_manifest
from engine.core.output_folder import OutputFolder
from engine.core.strict_json import as_mapping, json_default, loads_strict_json
from engine.metrics.experiments import ExperimentResult
from engine.runs.writers import json_text
from phexplore.app.records import LazyTables, RunRecord

RECORD_FORMAT = "phexplore-run-record/1"
SWEEP_FRAMES: tuple[str, ...] = (
    "runs",
    "srs",
    "blau_bias",
    "homogeneity_bias",
    "error_quantiles",
    "moe_coverage",
    "runtime_s",
)
"""The tables of an :class:`~engine.metrics.experiments.ExperimentResult` kept with a run."""


def _parquet_bytes(frame: pd.DataFrame) -> bytes:
    """A frame as Parquet bytes; object columns holding anything but text or numbers are kept
    as their text."""
    out = io.BytesIO()
    try:
        frame.to_parquet(out, index=False)
    except (pa.ArrowException, TypeError, ValueError):
        plain = frame.copy()
        for column in plain.columns:
            if plain[column].dtype == object:
                plain[column] = plain[column].map(lambda v: v if v is None else str(v))
        out = io.BytesIO()
        plain.to_parquet(out, index=False)
    return out.getvalue()


def write_run_folder(target: Path, record: RunRecord) -> None:
    """Write ``record`` into the new folder ``target`` (atomically, with a manifest)."""
    with OutputFolder(
        target, command="app run record", settings={"run_token": record.token}, option="workspace"
    ) as staging:
        root = staging.path
        (root / "metrics.json").write_text(
            json_text(_plain(record.metrics), infinity="string"), encoding="utf-8"
        )
        (root / "tidy.parquet").write_bytes(_parquet_bytes(record.tidy))
        tables: dict[str, str] = {}
        if record.tables:
            (root / "tables").mkdir()
        for i, (name, frame) in enumerate(record.tables.items()):
            rel = f"tables/{i:02d}.parquet"
            (root / rel).write_bytes(_parquet_bytes(frame))
            tables[str(name)] = rel
        sweep = None
        experiment = record.experiment
        if experiment is not None:
            (root / "sweep").mkdir()
            for name in SWEEP_FRAMES:
                (root / "sweep" / f"{name}.parquet").write_bytes(
                    _parquet_bytes(getattr(experiment, name))
                )
            sweep = {
                "engine": experiment.engine,
                "data": experiment.data,
                "preset": experiment.preset,
                "mechanism": experiment.mechanism,
                "rhos": [float(r) for r in experiment.rhos],
                "seeds": [int(x) for x in experiment.seeds],
                "notes": _plain(experiment.notes),
            }
        description = {
            "format": RECORD_FORMAT,
            "token": record.token,
            "number": record.id,
            "engine": record.engine,
            "label": record.label,
            "scenario": record.scenario,
            "settings": _plain(record.settings),
            "tidy": "tidy.parquet",
            "tables": tables,
            "sweep": sweep,
        }
        (root / "record.json").write_text(
            json_text(description, infinity="string"), encoding="utf-8"
        )


def _frame(manifest: Manifest, rel: str) -> pd.DataFrame:
    with manifest.open(rel) as handle:
        try:
            return pd.read_parquet(handle)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise OutputError(f"{manifest.folder / rel}: cannot be read ({exc})") from None


def _json(manifest: Manifest, rel: str) -> dict[str, Any]:
    raw = manifest.read(rel)
    data = loads_strict_json(raw, label=str(manifest.folder / rel), allow_infinity=True)
    return as_mapping(data, where=str(manifest.folder / rel))


def read_run_folder(folder: Path) -> RunRecord:
    """The :class:`RunRecord` of a record folder; its tables are read when first used.

    Refused (:class:`~engine.core.errors.OutputError` or ValidationError, naming the file): an
    incomplete folder, a file edited since it was written, a folder holding what its manifest does
    not list, a record of another format."""
    manifest = read_manifest(folder, verify=False)
    description = _json(manifest, "record.json")
    if description.get("format") != RECORD_FORMAT:
        raise ValidationError(
            f"{folder / 'record.json'}: not a PHExplore run record (format {RECORD_FORMAT})"
        )
    metrics = _json(manifest, "metrics.json")
    tables = as_mapping(description.get("tables") or {}, where=f"{folder}: tables")
    settings = dict(as_mapping(description.get("settings") or {}, where=f"{folder}: settings"))
    sweep = description.get("sweep")

    def load_table(name: str) -> pd.DataFrame:
        return _frame(manifest, str(tables[name]))

    def load_sweep() -> ExperimentResult | None:
        if not isinstance(sweep, Mapping):
            return None
        frames = {name: _frame(manifest, f"sweep/{name}.parquet") for name in SWEEP_FRAMES}
        return ExperimentResult(
            engine=str(sweep["engine"]),
            data=str(sweep["data"]),
            preset=str(sweep["preset"]),
            mechanism=str(sweep["mechanism"]),
            rhos=tuple(float(r) for r in sweep["rhos"]),
            seeds=tuple(int(x) for x in sweep["seeds"]),
            notes=dict(sweep.get("notes") or {}),
            **frames,
        )

    return RunRecord(
        id=int(description["number"]),
        label=str(description["label"]),
        engine=str(description["engine"]),
        scenario=str(description.get("scenario", "")),
        settings=settings,
        metrics=dict(metrics),
        tables=LazyTables(list(tables), load_table),
        token=str(description["token"]),
        load_tidy=lambda: _frame(manifest, str(description.get("tidy", "tidy.parquet"))),
        load_experiment=load_sweep if isinstance(sweep, Mapping) else None,
    )


def _plain(value: Any) -> Any:
    """``value`` as plain JSON data: numpy numbers as numbers, anything else unknown as text."""

    def fallback(obj: Any) -> Any:
        try:
            return json_default(obj)
        except TypeError:
            return str(obj)

    return json.loads(json.dumps(value, default=fallback))
