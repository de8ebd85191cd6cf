"""A working budget's numbers beside a baseline's: the value, the baseline's value, Δ and Δ%.

Pure arithmetic on rows (dicts) keyed by what identifies a number (e.g. run, geolevel, query); no
science. Δ = working − baseline; Δ% = Δ / baseline (None where the baseline is 0 or missing, so a
number that appears or disappears is never shown as an infinite change).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

BASELINE_SUFFIX = "_baseline"
DELTA_SUFFIX = "_delta"
RELATIVE_SUFFIX = "_delta_pct"


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool | str):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def difference(working: Any, baseline: Any) -> float | None:
    """working − baseline, or None when either is not a finite number."""
    a, b = _number(working), _number(baseline)
    return None if a is None or b is None else a - b


def relative(working: Any, baseline: Any) -> float | None:
    """(working − baseline) / baseline as a fraction (0.2 = +20%); None when undefined."""
    a, b = _number(working), _number(baseline)
    if a is None or b is None or b == 0:
        return None
    return (a - b) / b


def with_baseline(
    working: Sequence[Mapping[str, Any]],
    baseline: Sequence[Mapping[str, Any]],
    keys: Sequence[str],
    values: Iterable[str],
) -> list[dict[str, Any]]:
    """Each working row plus, per column in ``values``, ``<col>_baseline``, ``<col>_delta`` and
    ``<col>_delta_pct`` from the baseline row with the same ``keys``.

    Rows of the baseline that the working budget lacks are appended (their working values None),
    so a dropped query or level shows as gone, not as unchanged.
    """
    columns = list(values)
    base = {tuple(r.get(k) for k in keys): r for r in baseline}
    seen: set[tuple[Any, ...]] = set()
    out: list[dict[str, Any]] = []
    for row in working:
        key = tuple(row.get(k) for k in keys)
        seen.add(key)
        out.append(_merged(dict(row), base.get(key), columns))
    for key, row in base.items():
        if key not in seen:
            missing = {k: row.get(k) for k in keys}
            missing.update(dict.fromkeys(columns))
            out.append(_merged(missing, row, columns))
    return out


def _merged(row: dict[str, Any], base: Mapping[str, Any] | None, columns: list[str]) -> dict:
    for col in columns:
        b = None if base is None else base.get(col)
        row[col + BASELINE_SUFFIX] = b
        row[col + DELTA_SUFFIX] = difference(row.get(col), b)
        row[col + RELATIVE_SUFFIX] = relative(row.get(col), b)
    return row
