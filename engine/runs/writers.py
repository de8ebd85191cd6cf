"""The write stage: the files of a finished run, written from what the other stages produced.

TopDown (:func:`write_topdown`; docs/topdown.md "Outputs"): ``estimates`` (tidy geolevel, geounit,
query, cell, true, estimate), ``measurements`` (noisy answers and variances, 0 for invariants),
``microdata`` (PPMF-like person records, :func:`engine.topdown.export.iter_microdata_frames`) as
CSV or Parquet (``output_format``; ``auto`` = CSV up to
:data:`engine.runs.table_files.AUTO_CSV_MAX_ROWS` dense estimate rows), each streamed chunk by
chunk from the result (:mod:`engine.runs.table_files`), and ``metrics.json`` (the metrics stage's
payload plus an ``outputs`` section saying which format was written and what each file holds).
Sparse estimates (the default for Parquet) leave out the rows whose true and estimated counts are
both 0 and come with ``geounits`` and ``cells`` tables from which a reader re-expands them
(:func:`engine.runs.run_folder.dense_estimates`).

PHSafe (:func:`write_phsafe`; docs/phsafe.md): the eleven official pipe-delimited files
``PH1_num.csv`` … ``PH8_denom.csv``, ``metrics.json``, ``summary.txt`` and ``details/`` (basis
cells, errors by level, truncation by τ and at scale, published tables).

The writers compute nothing: every number comes from the engine result or the metrics stage.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from engine.core.csv_cells import frame_to_csv
from engine.core.errors import ValidationError
from engine.core.strict_json import json_default
from engine.phsafe.outputs import write_official
from engine.runs.output_options import ESTIMATE_CHOICES
from engine.runs.phsafe import error_analysis
from engine.runs.table_files import (
    AUTO_CSV_MAX_ROWS,
    check_format,
    resolve_format,
    text_type,
    write_table,
)
from engine.topdown.export import (
    DEFAULT_CHUNK_ROWS,
    estimate_rows,
    iter_estimate_frames,
    iter_measurement_frames,
    iter_microdata_frames,
)
from engine.topdown.queries import query_group


def strict(value: Any, *, infinity: str | None = None) -> Any:
    """JSON-ready copy: numpy scalars to Python, NaN to null, ±∞ to null (or ``"Infinity"``).

    ``infinity="string"`` keeps ±∞ as the strings ``"Infinity"``/``"-Infinity"`` (PHSafe's
    metrics.json, where an infinite budget means "no noise"); by default they become null.
    """
    if isinstance(value, Mapping):
        return {str(k): strict(v, infinity=infinity) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict(v, infinity=infinity) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        if math.isinf(value) and infinity == "string":
            return "Infinity" if value > 0 else "-Infinity"
        return None
    return value


def json_text(payload: Mapping[str, Any], *, infinity: str | None = None) -> str:
    """Strict, indented JSON (RFC 8259: no NaN or ∞ literals), ending with a newline."""
    text = json.dumps(
        strict(payload, infinity=infinity), indent=2, allow_nan=False, default=json_default
    )
    return text + "\n"


def _folder(out_dir: str | Path) -> Path:
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValidationError(f"cannot create output folder {out}: {exc.strerror}") from None
    return out


SPARSE_NOTE = (
    "rows whose true and estimated counts are both 0 are left out; every geounit (geounits table) "
    "× every cell of every query (cells table) not listed has true = estimate = 0"
)


def _estimate_schema() -> Any:
    return pa.schema(
        [
            ("geolevel", text_type()),
            ("geounit", text_type()),
            ("query", text_type()),
            ("cell", text_type()),
            ("true", pa.int64()),
            ("estimate", pa.int64()),
        ]
    )


def _measurement_schema() -> Any:
    return pa.schema(
        [
            ("geolevel", text_type()),
            ("geounit", text_type()),
            ("query", text_type()),
            ("cell", text_type()),
            ("noisy", pa.float64()),
            ("variance", pa.float64()),
        ]
    )


def _frame_slices(frame: pd.DataFrame, chunk_rows: int, sparse: bool) -> Iterator[pd.DataFrame]:
    """``frame`` in slices of ``chunk_rows`` rows (without its all-zero rows when ``sparse``)."""
    for start in range(0, max(len(frame), 1), chunk_rows):
        part = frame.iloc[start : start + chunk_rows]
        if sparse:
            part = part[(part["true"] != 0) | (part["estimate"] != 0)]
        yield part.reset_index(drop=True)


def write_topdown(
    result: Any,
    payload: Mapping[str, Any],
    out_dir: str | Path,
    *,
    tidy: pd.DataFrame | None = None,
    microdata: bool = True,
    measurements: bool = True,
    output_format: str = "auto",
    estimates: str = "auto",
    queries: Sequence[str] | None = None,
    chunk_rows: int | None = None,
) -> dict[str, Path]:
    """Write the estimates, measurements and microdata tables and metrics.json into ``out_dir``.

    ``output_format``: ``csv``, ``parquet`` or ``auto`` (:func:`engine.runs.table_files.
    resolve_format` on the dense estimate rows). ``estimates``: ``dense``, ``sparse`` or ``auto``
    (sparse for Parquet). Tables are streamed from the result in chunks of ``chunk_rows`` rows
    (default :data:`engine.topdown.export.DEFAULT_CHUNK_ROWS`); ``tidy`` (an estimates table the
    caller already holds) is written in slices instead; ``queries`` are the estimates' queries
    (default the run's). metrics.json gets an ``outputs`` section describing every file.
    """
    check_format(output_format)
    if estimates not in ESTIMATE_CHOICES:
        raise ValidationError(
            f"--estimates: expected one of {', '.join(ESTIMATE_CHOICES)}; got {estimates!r}"
        )
    rows = chunk_rows or DEFAULT_CHUNK_ROWS
    out = _folder(out_dir)
    dense_rows = estimate_rows(result, queries) if tidy is None else len(tidy)
    fmt = resolve_format(output_format, dense_rows)
    sparse = estimates == "sparse" or (estimates == "auto" and fmt == "parquet")
    written = {}
    chunks = (
        iter_estimate_frames(result, queries, chunk_rows=rows, sparse=sparse)
        if tidy is None
        else _frame_slices(tidy, rows, sparse)
    )
    description: dict[str, Any] = {"sparse": sparse, "dense_rows": dense_rows}
    if sparse:
        description.update(omitted=SPARSE_NOTE, geounits="geounits", cells="cells")
    written["estimates"] = write_table(
        chunks, out, "estimates", fmt, schema=_estimate_schema(), description=description
    )
    if sparse:
        nodes = result.nodes[["node", "geolevel", "geounit", "parent", "depth"]]
        written["geounits"] = write_table([nodes], out, "geounits", fmt)
        written["cells"] = write_table([_cells_frame(result, queries, tidy)], out, "cells", fmt)
    if measurements:
        written["measurements"] = write_table(
            iter_measurement_frames(result, chunk_rows=rows),
            out,
            "measurements",
            fmt,
            schema=_measurement_schema(),
            description={"note": "every measured cell (noisy answers are never sparse)"},
        )
    if microdata:
        written["microdata"] = write_table(
            iter_microdata_frames(result, chunk_rows=rows), out, "microdata", fmt
        )
    section: dict[str, Any] = {
        "format": fmt,
        "requested": output_format,
        "auto_csv_max_rows": AUTO_CSV_MAX_ROWS,
        "sparse_estimates": sparse,
        "chunk_rows": rows,
        "measurements_written": bool(measurements),
        "microdata_written": bool(microdata),
        "files": {name: table.as_dict(out) for name, table in written.items()},
    }
    if sparse:
        section["note"] = f"estimates are sparse: {SPARSE_NOTE}"
    paths = {name: out / table.file for name, table in written.items()}
    paths["metrics"] = out / "metrics.json"
    paths["metrics"].write_text(json_text({**payload, "outputs": section}), encoding="utf-8")
    return paths


def _cells_frame(
    result: Any, queries: Sequence[str] | None, tidy: pd.DataFrame | None
) -> pd.DataFrame:
    """query, cell of every estimates cell, in the estimates' order (for re-expansion)."""
    if tidy is not None:
        return tidy[["query", "cell"]].drop_duplicates().reset_index(drop=True)

    names = result.query_names if queries is None else tuple(queries)
    rows = [
        (name, str(label)) for name in names for label in query_group(result.schema, name).labels
    ]
    return pd.DataFrame(rows, columns=["query", "cell"])


def write_phsafe(
    result: Any,
    payload: Mapping[str, Any],
    out_dir: str | Path,
    summary: Sequence[str],
    *,
    errors: Any = None,
    scale: float | None = None,
) -> dict[str, Path]:
    """Write the official files, metrics.json, summary.txt and details/ into ``out_dir``.

    ``errors``: the run's :class:`engine.runs.phsafe.PHSafeErrorAnalysis` (the metrics stage's error
    analysis, written to ``details/errors_by_level.csv`` and ``details/truncation_at_scale.csv``);
    when None it is computed here with ``scale`` (the data's fraction of the full population).
    """
    out = _folder(out_dir)
    paths: dict[str, Path] = {}
    for path in write_official(result.official, out, private=not result.non_private):
        paths[path.stem] = path
    paths["metrics"] = out / "metrics.json"
    paths["metrics"].write_text(json_text(payload, infinity="string"), encoding="utf-8")
    if errors is None:
        errors = error_analysis(result, scale)
    details = out / "details"
    details.mkdir(exist_ok=True)
    frames = {
        "cells": result.measurements,
        "errors_by_level": errors.levels,
        "truncation_by_tau": result.truncation,
        "truncation_at_scale": errors.at_scale,
        "published_tables": result.published,
    }
    for stem, frame in frames.items():
        if frame is not None:
            paths[f"details/{stem}"] = details / f"{stem}.csv"
            frame_to_csv(frame, paths[f"details/{stem}"])  # formula-like text made inert
    paths["summary"] = out / "summary.txt"
    paths["summary"].write_text("\n".join(summary) + "\n", encoding="utf-8")
    return paths
