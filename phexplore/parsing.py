"""Strict parsing of everything a user types or uploads: JSON files, numbers, options.

One reader for every JSON file a user gives PHExplore (allocations, PHSafe ``config.json``, targets,
mappings, scenarios, results): :func:`loads_strict_json` / :func:`load_json_object` refuse duplicate
keys, ``NaN``/``Infinity``, numbers that overflow a float, nesting deeper than
:data:`MAX_JSON_DEPTH`, text that is not UTF-8, a byte-order mark, and say what a file is when it is
not JSON (gzip, zip, UTF-16 …). :func:`check_keys` refuses unknown keys with a "did you mean …?"
suggestion, so a misspelt key never silently changes a setting. Every error is a
:class:`~phexplore.errors.ValidationError` naming the file and the key path — never a traceback.

Numbers: :func:`parse_exact`, :func:`parse_real` and :func:`parse_whole` check the text before any
arithmetic (at most :data:`MAX_NUMBER_CHARS` characters and a decimal exponent within
±:data:`MAX_EXPONENT`, so ``1e999999999`` is refused at once instead of computed), refuse NaN,
infinities and floats that overflow, and check a documented :class:`Range`. :data:`RANGES` is the
table of every user-typed number's valid range (docs/reliability.md prints it).
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from phexplore.errors import PHExploreError, ValidationError

MAX_JSON_DEPTH = 32
"""Deepest nesting of objects/arrays accepted in a JSON file (ours need at most 5)."""
MAX_JSON_BYTES = 20_000_000
"""Largest JSON file read (20 MB; ours are a few kB; a results file a few MB)."""
MAX_NUMBER_CHARS = 64
"""Longest number text accepted (digits, sign, point, exponent, '/')."""
MAX_EXPONENT = 300
"""Largest decimal exponent magnitude accepted in a typed number (``1e300`` yes, ``1e400`` no)."""


# ------------------------------------------------------------------ what is this file?

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "a gzip-compressed file"),
    (b"PK\x03\x04", "a zip archive (or an Excel .xlsx workbook)"),
    (b"BZh", "a bzip2-compressed file"),
    (b"\xfd7zXZ\x00", "an xz-compressed file"),
    (b"(\xb5/\xfd", "a zstd-compressed file"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-zip archive"),
    (b"\xd0\xcf\x11\xe0", "an old Excel/Office (.xls) file"),
    (b"PAR1", "a Parquet file"),
    (b"%PDF", "a PDF document"),
    (b"\xff\xfe\x00\x00", "UTF-32 text"),
    (b"\x00\x00\xfe\xff", "UTF-32 text"),
    (b"\xff\xfe", "UTF-16 text"),
    (b"\xfe\xff", "UTF-16 text"),
)


def content_kind(head: bytes) -> str | None:
    """What the first bytes of a file say it is, when it is not plain text (None for plain text).

    Recognises compressed files and archives, spreadsheets, UTF-16/32 text (with or without a
    byte-order mark) and other binary data.
    """
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if len(head) >= 4 and head[1:4:2] == b"\x00\x00" and head[0:1] != b"\x00":
        return "UTF-16 text (little-endian, no byte-order mark)"
    if len(head) >= 4 and head[0:4:2] == b"\x00\x00" and head[1:2] != b"\x00":
        return "UTF-16 text (big-endian, no byte-order mark)"
    if b"\x00" in head:
        return "a binary file"
    return None


def read_input_bytes(
    source: str | os.PathLike[str], *, label: str | None = None, max_bytes: int | None = None
) -> bytes:
    """The bytes of a user's file, or a ValidationError saying why not (in words).

    Covers: not found, a folder, a symbolic-link loop, no permission, not a regular file (a FIFO or
    device), larger than ``max_bytes``.
    """
    path = Path(source)
    name = label or str(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            raise ValidationError(f"{name}: a broken symbolic link") from None
        raise ValidationError(f"{name}: file not found") from None
    except OSError as exc:
        raise ValidationError(f"{name}: {_os_reason(exc)}") from None
    import stat as _stat

    if _stat.S_ISDIR(info.st_mode):
        raise ValidationError(f"{name}: is a folder, not a file")
    if not _stat.S_ISREG(info.st_mode):
        raise ValidationError(f"{name}: not a regular file (a pipe, socket or device)")
    if max_bytes is not None and info.st_size > max_bytes:
        raise ValidationError(
            f"{name}: {info.st_size:,} bytes, over the limit of {max_bytes:,} bytes"
        )
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ValidationError(f"{name}: {_os_reason(exc)}") from None


def _os_reason(exc: OSError) -> str:
    import errno

    if exc.errno == errno.ELOOP:
        return "a symbolic-link loop (the link points back at itself)"
    if exc.errno == errno.EACCES or isinstance(exc, PermissionError):
        return "cannot read it (permission denied)"
    if exc.errno == errno.ENAMETOOLONG:
        return "the path is too long"
    return f"cannot read it ({exc.strerror or exc})"


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


def decode_text(data: bytes, *, label: str, what: str = "UTF-8 text") -> str:
    """``data`` as UTF-8 text, refusing a byte-order mark, UTF-16, compressed or binary data."""
    if data.startswith(b"\xef\xbb\xbf"):
        raise ValidationError(
            f"{label}: starts with a byte-order mark (BOM); save it as UTF-8 without BOM"
        )
    kind = content_kind(data[:64])
    if kind is not None:
        raise ValidationError(f"{label}: is {kind}, not {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ValidationError(
            f"{label}: not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}); save it as "
            "UTF-8"
        ) from None


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
        kind = _kind(value)
        raise ValidationError(f"{where}: expected a JSON object, got {kind}")
    return dict(value)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, str):
        return f"the text {value[:40]!r}"
    if isinstance(value, list):
        return "list"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    return type(value).__name__


def as_float(value: Any, *, where: str, allow_inf: bool = False) -> float:
    """``value`` as a float (numbers, numeric strings; ``Infinity`` if ``allow_inf``)."""
    if isinstance(value, bool) or value is None:
        raise ValidationError(f"{where}: expected a number, got {value!r}")
    if isinstance(value, str):
        text = value.strip()
        if not (allow_inf and text.lower().lstrip("+") in ("inf", "infinity")):
            _check_number_text(text, where)
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
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


# ------------------------------------------------------------------ typed numbers and ranges

_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_FRACTION = re.compile(r"^[+-]?\d+\s*/\s*\d+$")


def _check_number_text(text: str, where: str) -> None:
    """Refuse absurd number text before any arithmetic: too long, or too large an exponent."""
    if len(text) > MAX_NUMBER_CHARS:
        raise ValidationError(
            f"{where}: {text[:20]}… is {len(text)} characters long; numbers are limited to "
            f"{MAX_NUMBER_CHARS}"
        )
    if not text.isascii():
        raise ValidationError(
            f"{where}: {text!r} contains characters that are not ASCII digits; type the number "
            "with 0-9"
        )
    m = re.search(r"[eE]([+-]?\d+)$", text)
    if m and abs(int(m.group(1))) > MAX_EXPONENT:
        raise ValidationError(
            f"{where}: {text!r} has a decimal exponent beyond ±{MAX_EXPONENT}; that is no sensible "
            "value"
        )


@dataclass(frozen=True)
class Range:
    """A documented valid range of a user-typed number: ``low``/``high`` with open or closed ends."""

    low: float | None
    high: float | None
    low_open: bool = False
    high_open: bool = False
    meaning: str = ""

    def contains(self, value: float | Fraction) -> bool:
        """True if ``value`` lies in the range."""
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return not (
            self.high is not None and (value >= self.high if self.high_open else value > self.high)
        )

    def __str__(self) -> str:
        parts = []
        if self.low is not None:
            parts.append(f"{'greater than' if self.low_open else 'at least'} {_fmt(self.low)}")
        if self.high is not None:
            parts.append(f"{'less than' if self.high_open else 'at most'} {_fmt(self.high)}")
        return " and ".join(parts) or "any number"

    def check(self, value: float | Fraction, where: str, shown: Any = None) -> None:
        """Raise a ValidationError naming ``where`` and the range when ``value`` is outside it."""
        if not self.contains(value):
            text = shown if shown is not None else value
            raise ValidationError(
                f"{where}: {text} is out of range; it must be {self}"
                + (f" ({self.meaning})" if self.meaning else "")
            )


def _fmt(x: float) -> str:
    if isinstance(x, int) or (float(x).is_integer() and abs(x) < 1e15):
        return f"{int(x):,}"
    return f"{x:g}"


class OptionError(PHExploreError):
    """A command-line option's value is invalid (raised from argparse types; exit status 1)."""


MAX_SEED = 2**63 - 1
RANGES: dict[str, Range] = {
    "rho": Range(0, 1e6, low_open=True, meaning="total ρ of zCDP; production used 2.56–15.29"),
    "epsilon": Range(0, 1e6, low_open=True, meaning="total ε; production used 10.3–52.8"),
    "delta": Range(0, 1, low_open=True, high_open=True, meaning="δ of (ε, δ)-DP, e.g. 1e-10"),
    "tau": Range(1, 10_000, meaning="PHSafe truncation threshold: persons kept per household"),
    "share": Range(0, 1, meaning="a budget share"),
    "trials": Range(1, 10_000, meaning="noise trials per run"),
    "seed": Range(0, MAX_SEED, meaning="random seed, a whole number ≥ 0"),
    "seeds": Range(1, 10_000, meaning="number of seeds of an experiment"),
    "workers": Range(1, 256, meaning="worker processes"),
    "confidence": Range(0, 1, low_open=True, high_open=True, meaning="e.g. 0.9 for a 90% MOE"),
    "moe": Range(0, 1e9, low_open=True, meaning="target margin of error, in persons"),
    "n_boot": Range(0, 100_000, meaning="bootstrap resamples"),
    "persons": Range(1_000, 50_000_000, meaning="persons to generate"),
    "max_bytes": Range(1, 2**40, meaning="input size limit in bytes (1 TiB at most)"),
    "fraction": Range(0, 1, low_open=True, meaning="a sampling fraction"),
    "share_rho": Range(0, 1e6, meaning="ρ of one table and level; 0 skips it"),
    "denominator": Range(1, 1e9, meaning="common denominator of rounded shares"),
    "fanout": Range(0, 1_000_000, meaning="optimized block groups hold at most √n + X blocks"),
    "scale": Range(
        0, 1, low_open=True, meaning="fraction of the full population the data hold, e.g. 0.001"
    ),
    "epl_percentile": Range(
        50, 100, low_open=True, meaning="EPL density range percentile p; PF published with 95"
    ),
    "epl_multiplier": Range(
        0, 10, low_open=True, meaning="EPL density range multiplier m; PF published with 1.0"
    ),
}
"""Every user-typed number's valid range (the CLI, the app and docs/reliability.md use these)."""


def parse_exact(
    value: Any, *, where: str, range_name: str | None = None, rng: Range | None = None
) -> Fraction:
    """An exact number: ``"447/4099"``, ``"0.25"``, ``"1e-3"``, an int, float or Fraction.

    The text is checked (:func:`_check_number_text`) before ``Fraction`` sees it, so absurd
    exponents cost nothing. A float is taken to 12 significant denominators (as before).
    """
    if isinstance(value, bool) or value is None:
        raise ValidationError(f"{where}: expected a number or 'a/b' fraction, got {_kind(value)}")
    try:
        if isinstance(value, Fraction):
            frac = value
        elif isinstance(value, int):
            if abs(value) > 10**MAX_EXPONENT:
                raise ValidationError(f"{where}: {str(value)[:20]}… is absurdly large")
            frac = Fraction(value)
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise ValidationError(f"{where}: expected a finite number, got {value!r}")
            frac = Fraction(value).limit_denominator(10**12)
        elif isinstance(value, str):
            text = value.strip()
            low = text.lower().lstrip("+-")
            if low in ("nan", "inf", "infinity"):
                raise ValidationError(f"{where}: expected a finite number, got {value!r}")
            _check_number_text(text, where)
            if not (_NUMBER.match(text) or _FRACTION.match(text)):
                raise ValueError
            frac = Fraction(text.replace(" ", ""))
        else:
            raise TypeError
    except (TypeError, ValueError, ZeroDivisionError) as exc:
        if isinstance(exc, ValidationError):
            raise
        raise ValidationError(
            f"{where}: {value!r} is not a number or an 'a/b' fraction (e.g. '447/4099')"
        ) from None
    the_range = rng or (RANGES[range_name] if range_name else None)
    if the_range is not None:
        the_range.check(frac, where, shown=value)
    return frac


def parse_real(
    value: Any, *, where: str, range_name: str | None = None, rng: Range | None = None
) -> float:
    """A finite float from text or a number, checked against a documented range."""
    number = as_float(value, where=where)
    the_range = rng or (RANGES[range_name] if range_name else None)
    if the_range is not None:
        the_range.check(number, where, shown=value)
    return number


def parse_whole(
    value: Any, *, where: str, range_name: str | None = None, rng: Range | None = None
) -> int:
    """A whole number from text (``"1,000"``/``"1_000"`` allowed) or an int, range-checked."""
    if isinstance(value, bool) or value is None:
        raise ValidationError(f"{where}: expected a whole number, got {_kind(value)}")
    if isinstance(value, int):
        number = value
    else:
        text = str(value).strip().replace("_", "").replace(",", "")
        if len(text) > MAX_NUMBER_CHARS:
            raise ValidationError(
                f"{where}: {text[:20]}… is {len(text)} characters long; numbers are limited to "
                f"{MAX_NUMBER_CHARS}"
            )
        if not text.isascii():
            raise ValidationError(
                f"{where}: {value!r} contains characters that are not ASCII digits; use 0-9"
            )
        if not re.fullmatch(r"[+-]?\d+", text):
            raise ValidationError(f"{where}: expected a whole number, got {value!r}")
        number = int(text)
    the_range = rng or (RANGES[range_name] if range_name else None)
    if the_range is not None:
        the_range.check(number, where, shown=value)
    return number


def option_type(kind: str, range_name: str, option: str) -> Any:
    """An argparse ``type=`` that parses ``kind`` ("whole", "real", "exact") within a range.

    It raises :class:`OptionError` (not a ``ValueError``, which argparse would reword), so the CLI
    prints the full message — what, the valid range and why — and exits with status 1.
    """
    parser = {"whole": parse_whole, "real": parse_real, "exact": parse_exact}[kind]

    def convert(text: str) -> Any:
        try:
            return parser(text, where=option, range_name=range_name)
        except ValidationError as exc:
            raise OptionError(str(exc)) from None

    convert.__name__ = f"{kind} number ({RANGES[range_name]})"
    return convert
