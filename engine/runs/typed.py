"""Typed fields of the run description: each field of a record checked against its kind and range.

The records of :mod:`engine.runs.spec` (data source, engine options, backend options) are frozen
dataclasses whose fields carry a *check* in their metadata (:func:`typed`): a function that takes
the field's name and value and returns the value in its one accepted form (a tuple for a list, a
float for a real number) or raises :class:`FieldError`. The checks use the ranges table
:data:`engine.core.numbers.RANGES` (docs/reliability.md prints it), so a number means the same
whether it came from the command line, the app or a file.

:func:`record_from_json` reads a record from parsed JSON: an unknown or misspelt key is refused with
the nearest known one (:func:`engine.core.strict_json.check_keys`: ``unknown key 'spin'; did you
mean 'spine'?``) — a key a run does not know is never dropped, and a run never falls back to a
default in its place. :func:`record_to_json` writes a record back as JSON.

Why dataclasses and not a validation library: the checks are the project's own (the ranges table,
the strict JSON reader's key check and its messages), the records are few and small, and the
run's description must round-trip to exactly the JSON it was read from (its fingerprint is the
SHA-256 of that JSON). A library would add a dependency whose coercions and messages we would then
have to undo.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, Field, field, fields, is_dataclass
from types import MappingProxyType
from typing import Any, TypeVar

from engine.core.errors import ValidationError
from engine.core.numbers import RANGES, value_kind
from engine.core.strict_json import check_keys

Check = Callable[[str, Any], Any]
"""``check(name, value)`` → the value in its accepted form, or :class:`FieldError`."""

R = TypeVar("R")

MAX_TEXT = 4096
"""Longest text a field of the run description accepts (paths, names, labels)."""


class FieldError(ValidationError):
    """A field of a record has a value it does not accept; the message starts with its name."""


def typed(
    check: Check, default: Any = MISSING, *, factory: Any = MISSING, when_set: bool = False
) -> Any:
    """A dataclass field checked by ``check`` (see the module docstring).

    ``when_set``: :func:`record_to_json` writes the field only when it is not at its default — for
    a field added after runs were recorded, so that a run at the default keeps the JSON, and so the
    fingerprint, it had before the field existed."""
    metadata = {"check": check, "when_set": when_set}
    if factory is not MISSING:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def check_fields(record: Any) -> None:
    """Run every field's check on ``record`` and store the accepted form (frozen records too)."""
    for item in fields(record):
        check = item.metadata.get("check")
        if check is not None:
            object.__setattr__(record, item.name, check(item.name, getattr(record, item.name)))


def field_names(cls: type) -> list[str]:
    """The JSON keys of a record class: its fields, in declaration order."""
    return [item.name for item in fields(cls) if item.init]


def check_known_keys(raw: Mapping[str, Any], allowed: Sequence[str], where: str) -> None:
    """Refuse a key outside ``allowed`` with the nearest known one, saying that nothing ran."""
    try:
        check_keys(raw, allowed, where=where)
    except ValidationError as exc:
        raise ValidationError(
            f"{exc} — a run is never made with a key it does not know (a misspelling, or a "
            "file written by a newer PHExplore); nothing was run"
        ) from None


def record_from_json(cls: type[R], raw: Any, where: str) -> R:
    """The record ``cls`` of a parsed JSON object: known keys only, each value checked."""
    if not isinstance(raw, Mapping):
        raise ValidationError(f"{where}: expected a JSON object, got {value_kind(raw)}")
    check_known_keys(raw, field_names(cls), where)
    try:
        return cls(**{str(k): v for k, v in raw.items()})
    except FieldError as exc:
        raise ValidationError(f"{where}.{exc}") from None


def to_json_value(value: Any) -> Any:
    """A field value as JSON data: records as objects, tuples as lists, mappings as objects."""
    if is_dataclass(value) and not isinstance(value, type):
        return record_to_json(value)
    if isinstance(value, Mapping):
        return {str(k): to_json_value(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [to_json_value(v) for v in value]
    return value


def record_to_json(record: Any, *, only_set: bool = False) -> dict[str, Any]:
    """``record`` as a JSON object; ``only_set`` leaves out every field at its default (without
    it, only the fields declared ``when_set``, :func:`typed`)."""
    out: dict[str, Any] = {}
    for item in fields(record):
        value = getattr(record, item.name)
        if (only_set or item.metadata.get("when_set")) and _is_default(item, value):
            continue
        out[item.name] = to_json_value(value)
    return out


def _is_default(item: Field[Any], value: Any) -> bool:
    if item.default is not MISSING:
        return bool(value == item.default)
    if item.default_factory is not MISSING:
        return bool(value == item.default_factory())
    return False


# ------------------------------------------------------------------ checks


def text(name: str, value: Any) -> str:
    """A non-empty text of at most :data:`MAX_TEXT` characters."""
    if not isinstance(value, str) or not value.strip():
        raise FieldError(f"{name}: expected a non-empty text, got {value_kind(value)}")
    if len(value) > MAX_TEXT or "\x00" in value:
        raise FieldError(f"{name}: not a sensible text ({len(value):,} characters)")
    return value


def flag(name: str, value: Any) -> bool:
    """``true`` or ``false`` (never a number or a text standing for one)."""
    if not isinstance(value, bool):
        raise FieldError(f"{name}: expected true or false, got {value_kind(value)}")
    return value


def choice(*allowed: str) -> Check:
    """One of ``allowed``."""

    def check(name: str, value: Any) -> str:
        if not isinstance(value, str) or value not in allowed:
            raise FieldError(
                f"{name}: {value_kind(value)} is not one of {', '.join(allowed)}"
                if isinstance(value, str)
                else f"{name}: expected one of {', '.join(allowed)}, got {value_kind(value)}"
            )
        return value

    return check


def whole(range_name: str) -> Check:
    """A whole number (not true/false, not 3.0) in ``RANGES[range_name]``."""

    def check(name: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise FieldError(f"{name}: expected a whole number, got {value_kind(value)}")
        _in_range(name, value, range_name)
        return int(value)

    return check


def real(range_name: str) -> Check:
    """A finite number in ``RANGES[range_name]``, kept as a float."""

    def check(name: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise FieldError(f"{name}: expected a number, got {value_kind(value)}")
        number = float(value)
        if not math.isfinite(number):
            raise FieldError(f"{name}: expected a finite number, got {value!r}")
        _in_range(name, number, range_name)
        return number

    return check


def _in_range(name: str, value: float, range_name: str) -> None:
    try:
        RANGES[range_name].check(value, name)
    except ValidationError as exc:
        raise FieldError(str(exc)) from None


def names(name: str, value: Any) -> tuple[str, ...]:
    """A list of non-empty texts, kept as a tuple."""
    if not isinstance(value, list | tuple):
        raise FieldError(f"{name}: expected a list of texts, got {value_kind(value)}")
    return tuple(text(f"{name}[{i}]", v) for i, v in enumerate(value))


def optional(check: Check) -> Check:
    """``None`` (JSON ``null``) or what ``check`` accepts."""

    def check_optional(name: str, value: Any) -> Any:
        return None if value is None else check(name, value)

    return check_optional


def record(cls: type[R]) -> Check:
    """A nested record: an instance of ``cls`` or its JSON object."""

    def check(name: str, value: Any) -> R:
        if isinstance(value, cls):
            return value
        return record_from_json(cls, value, name)

    return check


HEX_DIGITS = frozenset("0123456789abcdef")


def sha256_hex(name: str, value: Any) -> str:
    """A SHA-256 digest as 64 lower-case hexadecimal digits."""
    if not isinstance(value, str) or len(value) != 64 or not set(value) <= HEX_DIGITS:
        raise FieldError(
            f"{name}: expected a SHA-256 digest (64 hex digits), got {value_kind(value)}"
        )
    return value


def digests(name: str, value: Any) -> Mapping[str, str]:
    """``{file: SHA-256}``, kept as a read-only mapping sorted by file."""
    if not isinstance(value, Mapping):
        raise FieldError(
            f"{name}: expected a JSON object of file → SHA-256, got {value_kind(value)}"
        )
    checked = {text(f"{name} key", k): sha256_hex(f"{name}[{k!r}]", v) for k, v in value.items()}
    return MappingProxyType(dict(sorted(checked.items())))
