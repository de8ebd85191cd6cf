"""Parsing and printing exact shares as :class:`fractions.Fraction` (TDA Tables 3–8 are rationals)."""

from __future__ import annotations

from fractions import Fraction

from phexplore.errors import ValidationError


def parse_fraction(value: object, *, where: str) -> Fraction:
    """Parse ``"447/4099"``, ``"0.25"``, an int, float or Fraction; ``where`` names the item for errors."""
    if isinstance(value, bool):
        raise ValidationError(f"{where}: expected a number or 'a/b' fraction, got {value!r}")
    try:
        if isinstance(value, Fraction):
            frac = value
        elif isinstance(value, int):
            frac = Fraction(value)
        elif isinstance(value, float):
            frac = Fraction(value).limit_denominator(10**12)
        elif isinstance(value, str):
            frac = Fraction(value.strip())
        else:
            raise TypeError
    except (TypeError, ValueError, ZeroDivisionError):
        raise ValidationError(
            f"{where}: {value!r} is not a number or an 'a/b' fraction (e.g. '447/4099')"
        ) from None
    return frac


def format_fraction(value: Fraction) -> str:
    """``Fraction(447, 4099)`` → ``"447/4099"``; whole numbers print without a denominator."""
    return (
        str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
    )
