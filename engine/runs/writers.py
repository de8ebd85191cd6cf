"""The write stage: the files of a finished run, written from what the other stages produced.

TopDown (:func:`write_topdown`; docs/topdown.md): ``estimates.csv`` (tidy geolevel, geounit,
query, cell, true, estimate), ``measurements.csv`` (noisy answers and variances, 0 for invariants),
``microdata.csv`` (PPMF-like person records, :func:`engine.topdown.export.microdata_frame`) and
``metrics.json`` (the metrics stage's payload).

PHSafe (:func:`write_phsafe`; docs/phsafe.md): the eleven official pipe-delimited files
``PH1_num.csv`` … ``PH8_denom.csv``, ``metrics.json``, ``summary.txt`` and ``details/`` (basis
cells, errors by level, truncation by τ and at scale, published tables).

The writers compute nothing: every number comes from the engine result or the metrics stage.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from phexplore.errors import ValidationError
from phexplore.json_text import json_default


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


def write_topdown(
    result: Any,
    payload: Mapping[str, Any],
    out_dir: str | Path,
    *,
    tidy: pd.DataFrame | None = None,
    microdata: bool = True,
    measurements: bool = True,
) -> dict[str, Path]:
    """Write estimates.csv, measurements.csv, microdata.csv and metrics.json into ``out_dir``."""
    from engine.topdown.export import microdata_frame

    out = _folder(out_dir)
    paths: dict[str, Path] = {}
    paths["estimates"] = out / "estimates.csv"
    (result.to_tidy() if tidy is None else tidy).to_csv(paths["estimates"], index=False)
    if measurements:
        paths["measurements"] = out / "measurements.csv"
        result.measurements.to_csv(paths["measurements"], index=False)
    if microdata:
        paths["microdata"] = out / "microdata.csv"
        microdata_frame(result).to_csv(paths["microdata"], index=False)
    paths["metrics"] = out / "metrics.json"
    paths["metrics"].write_text(json_text(payload), encoding="utf-8")
    return paths


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

    ``errors``: the run's :class:`engine.runs.phsafe.PHSafeErrors` (the metrics stage's error
    analysis, written to ``details/errors_by_level.csv`` and ``details/truncation_at_scale.csv``);
    when None it is computed here with ``scale`` (the data's fraction of the full population).
    """
    from engine.phsafe.outputs import write_official

    out = _folder(out_dir)
    paths: dict[str, Path] = {}
    for path in write_official(result.official, out, private=not result.non_private):
        paths[path.stem] = path
    paths["metrics"] = out / "metrics.json"
    paths["metrics"].write_text(json_text(payload, infinity="string"), encoding="utf-8")
    if errors is None:
        from engine.runs.phsafe import error_analysis

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
            frame.to_csv(paths[f"details/{stem}"], index=False)
    paths["summary"] = out / "summary.txt"
    paths["summary"].write_text("\n".join(summary) + "\n", encoding="utf-8")
    return paths
