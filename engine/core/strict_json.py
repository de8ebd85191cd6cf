"""Strict JSON in and out: one reader for every JSON file a user gives PHExplore, one writer.

The reader (allocations, PHSafe ``config.json``, targets, mappings, scenarios, results):
:func:`loads_strict_json` / :func:`load_json_object` refuse duplicate keys, ``NaN``/``Infinity``,
numbers that overflow a float, nesting deeper than :data:`MAX_JSON_DEPTH`, text that is not UTF-8,
a byte-order mark, and say what a file is when it is not JSON (gzip, zip, UTF-16 …).
:func:`check_keys` refuses unknown keys with a "did you mean …?" suggestion, so a misspelt key never
silently changes a setting. Every error is a :class:`~engine.core.errors.ValidationError` naming
the file and the key path — never a traceback.

The writer (:func:`dumps_json`): numpy scalars as numbers, no NaN/∞ literals (RFC 8259).
"""

from __future__ import annotations

import difflib
import json
import math
import os
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from engine.core.errors import ValidationError
from engine.core.files import decode_text, read_input_bytes
from engine.core.numbers import value_kind

MAX_JSON_DEPTH = 32
"""Deepest nesting of objects/arrays accepted in a JSON file (ours need at most 5)."""
MAX_JSON_BYTES = 20_000_000
"""Largest JSON file read (20 MB; ours are a few kB; a results file a few MB)."""


# ------------------------------------------------------------------ strict JSON


class _Pairs(list):  # type: ignore[type-arg]
    """An object's key/value pairs as read, before duplicate checking with the key path known."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (write a finite number, or null)")


def _infinity_only(name: str) -> Any:
    if name == "Infinity":
        return math.inf
    return _reject_constant(name)


def _parse_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text[:40]} overflows a float")
    return value


def _parse_int(text: str) -> int:
    if len(text) > 400:
        raise ValueError(f"a whole number of {len(text)} digits is absurd here")
    return int(text)


def _path_str(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _build(value: Any, path: tuple[str | int, ...], depth: int, name: str) -> Any:
    if depth > MAX_JSON_DEPTH:
        raise ValidationError(
            f"{name}: nested deeper than {MAX_JSON_DEPTH} levels (at {_path_str(path)[:60]})"
        )
    if isinstance(value, _Pairs):
        out: dict[str, Any] = {}
        for key, item in value:
            if key in out:
                raise ValidationError(
                    f"{name}: duplicate key {_path_str((*path, key))!r} (a JSON object may name a "
                    "key only once; which value was meant is ambiguous)"
                )
            out[key] = _build(item, (*path, key), depth + 1, name)
        return out
    if isinstance(value, list):
        return [_build(v, (*path, i), depth + 1, name) for i, v in enumerate(value)]
    return value


def loads_strict_json(
    source: bytes | str, *, label: str = "JSON", allow_infinity: bool = False
) -> Any:
    """Parse JSON strictly (see the module docstring); ``label`` names the file in errors.

    ``allow_infinity`` accepts ``Infinity`` (never ``NaN``), which official PHSafe config files use
    for an unlimited budget.
    """
    if isinstance(source, bytes | bytearray):
        if len(source) > MAX_JSON_BYTES:
            raise ValidationError(
                f"{label}: {len(source):,} bytes; JSON files are limited to {MAX_JSON_BYTES:,}"
            )
        text = decode_text(bytes(source), label=label, what="JSON text")
    else:
        text = source
        if text.startswith("\ufeff"):
            raise ValidationError(
                f"{label}: starts with a byte-order mark (BOM); save it as UTF-8 without BOM"
            )
    if not text.strip():
        raise ValidationError(f"{label}: empty file (expected a JSON object)")
    try:
        raw = json.loads(
            text,
            object_pairs_hook=_Pairs,
            parse_constant=_infinity_only if allow_infinity else _reject_constant,
            parse_float=_parse_float,
            parse_int=_parse_int,
        )
    except json.JSONDecodeError as exc:
        raise ValidationError(
            f"{label}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except RecursionError:
        raise ValidationError(f"{label}: nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:
        raise ValidationError(f"{label}: {exc}") from None
    return _build(raw, (), 0, label)


def load_json_object(
    source: str | os.PathLike[str] | bytes,
    *,
    label: str | None = None,
    allowed_keys: Iterable[str] | None = None,
    allow_infinity: bool = False,
) -> dict[str, Any]:
    """Read a JSON object from a path (or bytes, e.g. an upload) with :func:`loads_strict_json`.

    ``label`` names it in errors; ``allowed_keys`` (optional) refuses unknown top-level keys.
    """
    if isinstance(source, bytes | bytearray):
        name = label or "upload"
        data = bytes(source)
    else:
        name = label or str(source)
        data = read_input_bytes(source, label=name, max_bytes=MAX_JSON_BYTES)
    value = as_mapping(
        loads_strict_json(data, label=name, allow_infinity=allow_infinity), where=name
    )
    if allowed_keys is not None:
        check_keys(value, allowed_keys, where=name)
    return value


def check_keys(
    mapping: Mapping[str, Any],
    allowed: Iterable[str],
    *,
    where: str,
    required: Iterable[str] = (),
) -> None:
    """Refuse keys outside ``allowed`` (suggesting the nearest allowed one) and missing ``required``.

    A misspelt key must never silently fall back to a default: ``"privacy_def"`` is refused with
    "did you mean 'privacy_defn'?".
    """
    allowed_list = list(allowed)
    for key in mapping:
        if key not in allowed_list:
            close = difflib.get_close_matches(str(key), allowed_list, n=1, cutoff=0.6)
            hint = (
                f"; did you mean {close[0]!r}?"
                if close
                else f"; allowed keys: {', '.join(sorted(allowed_list))}"
            )
            raise ValidationError(f"{where}: unknown key {key!r}{hint}")
    for key in required:
        if key not in mapping:
            raise ValidationError(f"{where}: missing required key {key!r}")


def as_mapping(value: Any, *, where: str) -> dict[str, Any]:
    """``value`` as a dict, or a ValidationError saying a JSON object was expected at ``where``."""
    if not isinstance(value, Mapping):
        kind = value_kind(value)
        raise ValidationError(f"{where}: expected a JSON object, got {kind}")
    return dict(value)


# ------------------------------------------------------------------ writing


def json_default(obj: Any) -> Any:
    """``json.dumps`` ``default=``: numpy scalars and arrays as numbers and lists, fractions as floats."""
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()

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
