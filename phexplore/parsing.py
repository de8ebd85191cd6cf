"""Strict parsing of user-supplied JSON: objects, numbers and mappings, with errors that say where.

Every scenario, allocation, target and configuration file a user gives PHExplore goes through these
helpers, so a list where an object belongs, or ``"abc"`` where a number belongs, becomes a
:class:`~phexplore.errors.ValidationError` naming the file and the key — never a traceback.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from phexplore.errors import ValidationError


def load_json_object(
    source: str | os.PathLike[str] | bytes, *, label: str | None = None
) -> dict[str, Any]:
    """Read a JSON object from a path (or from bytes, e.g. an upload); ``label`` names it in errors."""
    if isinstance(source, bytes | bytearray):
        name = label or "upload"
        text: str | bytes = bytes(source)
    else:
        path = Path(source)
        name = label or str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ValidationError(f"{name}: file not found") from None
        except IsADirectoryError:
            raise ValidationError(f"{name}: is a folder, not a JSON file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ValidationError(f"{name}: cannot read the file ({exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{name}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except UnicodeDecodeError:
        raise ValidationError(f"{name}: not UTF-8 text") from None
    return as_mapping(data, where=name)


def as_mapping(value: Any, *, where: str) -> dict[str, Any]:
    """``value`` as a dict, or a ValidationError saying a JSON object was expected at ``where``."""
    if not isinstance(value, Mapping):
        kind = type(value).__name__ if value is not None else "null"
        raise ValidationError(f"{where}: expected a JSON object, got {kind}")
    return dict(value)


def as_float(value: Any, *, where: str, allow_inf: bool = False) -> float:
    """``value`` as a float (numbers, numeric strings; ``Infinity`` if ``allow_inf``)."""
    if isinstance(value, bool) or value is None:
        raise ValidationError(f"{where}: expected a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValidationError(f"{where}: expected a number, got {value!r}") from None
    if math.isnan(number) or (math.isinf(number) and not allow_inf):
        raise ValidationError(f"{where}: expected a finite number, got {value!r}")
    return number


def as_int(value: Any, *, where: str) -> int:
    """``value`` as a whole number."""
    number = as_float(value, where=where)
    if number != int(number):
        raise ValidationError(f"{where}: expected a whole number, got {value!r}")
    return int(number)
