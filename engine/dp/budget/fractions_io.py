"""Parsing and printing exact shares as :class:`fractions.Fraction` (TDA Tables 3–8 are rationals).

Budget shares must sum to exactly 1 (docs/science.md §4), so a share is read as exactly what was
written: ``"447/4099"`` and ``"0.25"`` as text, and a JSON number such as ``0.19999999999999998``
as that decimal — not rounded to a nearby simple fraction. Shares that miss 1 by 1e-16 are refused
like shares that miss it by 0.1, in the CLI and the app alike (:func:`parse_share`), and the message
says by how much and to write thirds as ``"1/3"``.
"""

from __future__ import annotations

import math
from fractions import Fraction

from engine.core.errors import ValidationError
from engine.core.numbers import parse_exact


def parse_fraction(value: object, *, where: str) -> Fraction:
    """Parse ``"447/4099"``, ``"0.25"``, an int, float or Fraction; ``where`` names the item for errors.

    Delegates to :func:`engine.core.numbers.parse_exact`, which refuses absurd text (``1e999999999``)
    before any arithmetic, NaN and infinities.
    """
    return parse_exact(value, where=where)


def format_fraction(value: Fraction) -> str:
    """``Fraction(447, 4099)`` → ``"447/4099"``; whole numbers print without a denominator."""
    return (
        str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
    )


def parse_share(value: object, *, where: str) -> Fraction:
    """A budget share read exactly as written: like :func:`parse_fraction`, except that a float
    (a JSON number) is its shortest decimal (``0.1`` → 1/10, ``0.19999999999999998`` →
    19999999999999998/10¹⁷), never snapped to a fraction with a small denominator."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError(f"{where}: expected a finite number, got {value!r}")
        return Fraction(repr(value))
    return parse_fraction(value, where=where)


def sum_text(total: Fraction) -> str:
    """How a sum of shares misses 1, in words: ``"9999…/10000… (1 − 2e-17)"`` for a near miss,
    ``"4/5 (≈ 0.800000)"`` otherwise, plus how to write shares exactly when they were decimals."""
    gap = total - 1
    if gap and abs(gap) < Fraction(1, 10**6):
        sign = "+" if gap > 0 else "−"
        return (
            f"{format_fraction(total)} (1 {sign} {float(abs(gap)):.3g}; shares are read exactly "
            "as written — write them as fractions such as '1/3' so they sum to 1)"
        )
    return f"{format_fraction(total)} (≈ {float(total):.6f})"


def exact_from_input(value: object, current: Fraction, *, where: str) -> Fraction:
    """The exact number a user meant by a number input showing ``current``.

    A widget holds a float: ``float(current)`` when left as it was, which stands for ``current``
    itself (a preset's 293764/114921, not the float nearest to it); anything else is read as the
    decimal it shows (``2.5`` → 5/2), as :func:`parse_share` reads a JSON number. Text and
    fractions are parsed exactly (:func:`parse_fraction`)."""
    if isinstance(value, float):
        if math.isfinite(value) and value == float(current):
            return current
        return parse_share(value, where=where)
    return parse_fraction(value, where=where)
