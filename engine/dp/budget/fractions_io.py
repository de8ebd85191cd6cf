"""Parsing and printing exact shares as :class:`fractions.Fraction` (TDA Tables 3–8 are rationals)."""

from __future__ import annotations

from fractions import Fraction

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
