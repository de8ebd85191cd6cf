"""Strict JSON text for files and scripts: numpy scalars as numbers, no NaN/∞ literals (RFC 8259).

Used by the CLI (``--format json``, metrics.json) and by the analytic core (scenario files), so it
lives in the core rather than in :mod:`phexplore.cli`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any


def json_default(obj: Any) -> Any:
    """``json.dumps`` ``default=``: numpy scalars and arrays as numbers and lists, fractions as floats."""
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    from fractions import Fraction

    if isinstance(obj, Fraction):
        return float(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _clean(obj: Any) -> Any:
    """Replace non-finite floats by None/strings so the JSON is strict (RFC 8259)."""
    if isinstance(obj, float):
        if math.isnan(obj):
            return None
        if math.isinf(obj):
            return "Infinity" if obj > 0 else "-Infinity"
        return obj
    if isinstance(obj, Mapping):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if hasattr(obj, "item") and not hasattr(obj, "__len__"):
        return _clean(obj.item())
    return obj


def dumps_json(payload: Any) -> str:
    """Serialise ``payload`` as strict, indented JSON."""
    return json.dumps(_clean(payload), indent=2, default=json_default, allow_nan=False)
