"""Typed numbers with documented ranges: every number a user types or a file gives.

:func:`parse_exact`, :func:`parse_real` and :func:`parse_whole` check the text before any arithmetic
(at most :data:`MAX_NUMBER_CHARS` characters and a decimal exponent within ±:data:`MAX_EXPONENT`,
so ``1e999999999`` is refused at once instead of computed), refuse NaN, infinities and floats that
overflow, and check a documented :class:`Range`. :data:`RANGES` is the table of every user-typed
number's valid range (docs/reliability.md prints it).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from engine.core.errors import PHExploreError, ValidationError

MAX_NUMBER_CHARS = 64
"""Longest number text accepted (digits, sign, point, exponent, '/')."""
MAX_EXPONENT = 300
"""Largest decimal exponent magnitude accepted in a typed number (``1e300`` yes, ``1e400`` no)."""


def value_kind(value: Any) -> str:
    """How a JSON value reads in a message: ``null``, ``true/false``, ``the text '…'``, ``list``…"""
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
    "population_persons": Range(
        1_000, 400_000_000, meaning="persons of a generated population (the US has 331 million)"
    ),
    "chunk_persons": Range(
        10_000, 50_000_000, meaning="persons generated at once; bounds the generator's memory"
    ),
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
        raise ValidationError(
            f"{where}: expected a number or 'a/b' fraction, got {value_kind(value)}"
        )
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
        raise ValidationError(f"{where}: expected a whole number, got {value_kind(value)}")
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
