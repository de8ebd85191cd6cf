"""The settings of an empirical privacy loss: the density range of PF's EPL grid (PF Methods; docs/science.md §5).

EPL's density is evaluated on ±m × max(|P(100−p)|, |P(p)|) of the residuals. Petti & Flaxman
published every EPL with p = 95 and m = 1.0 (:data:`PF_PUBLISHED`, the default); the defaults of
their function's signature (p = 99, m = 1.5) give values up to two orders of magnitude larger and are
only a labelled option. No heavy import, so the CLI's ``--help`` can show the ranges.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from engine.core.errors import ValidationError
from engine.core.numbers import RANGES

BANDWIDTH_FACTOR = 0.1
"""KDE bandwidth as a multiple of the residuals' sample standard deviation (docs/science.md §5)."""
PERCENTILE_RANGE: tuple[float, float] = (
    float(RANGES["epl_percentile"].low or 0),
    float(RANGES["epl_percentile"].high or 100),
)
"""Valid percentile p: 50 < p ≤ 100 (the range is ±m·max(|P(100−p)|, |P(p)|))."""
MULTIPLIER_RANGE: tuple[float, float] = (
    float(RANGES["epl_multiplier"].low or 0),
    float(RANGES["epl_multiplier"].high or 10),
)
"""Valid multiplier m: 0 < m ≤ 10."""


@dataclass(frozen=True)
class EPLSettings:
    """Density range of the EPL grid: ±``multiplier`` × max(|P(100−p)|, |P(p)|) of the residuals.

    ``percentile`` p must satisfy 50 < p ≤ 100 and ``multiplier`` m 0 < m ≤ 10 (docs/science.md §5).
    """

    percentile: float = 95.0
    multiplier: float = 1.0

    def __post_init__(self) -> None:
        for name, value, (lo, hi) in (
            ("percentile", self.percentile, PERCENTILE_RANGE),
            ("multiplier", self.multiplier, MULTIPLIER_RANGE),
        ):
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise ValidationError(f"EPL {name} must be a number; got {value!r}")
            v = float(value)
            if not (math.isfinite(v) and lo < v <= hi):
                raise ValidationError(
                    f"EPL {name} must satisfy {lo:g} < {name} ≤ {hi:g}; got {value!r} "
                    f"(Petti & Flaxman published EPLs with percentile 95, multiplier 1.0)"
                )
            object.__setattr__(self, name, v)

    @property
    def is_pf_published(self) -> bool:
        """True for p = 95, m = 1.0: the settings of every EPL Petti & Flaxman published."""
        return self == PF_PUBLISHED

    @property
    def low_percentile(self) -> float:
        """100 − p, the lower percentile of the range."""
        return 100.0 - self.percentile

    def label(self) -> str:
        """E.g. ``±1 × max(|P5|, |P95|) (Petti & Flaxman's published settings)``."""
        text = (
            f"±{self.multiplier:g} × max(|P{self.low_percentile:g}|, |P{self.percentile:g}|) "
            "of the residuals"
        )
        if self.is_pf_published:
            return text + " (Petti & Flaxman's published settings)"
        if self == PF_FUNCTION_DEFAULT:
            return text + " (the defaults of PF's function, not their published settings)"
        return text + " (not Petti & Flaxman's published settings)"

    def as_dict(self) -> dict[str, float | bool | str]:
        """The ``epl_settings`` section of metrics.json."""
        return {
            "percentile": self.percentile,
            "multiplier": self.multiplier,
            "bandwidth_factor": BANDWIDTH_FACTOR,
            "pf_published": self.is_pf_published,
            "label": self.label(),
        }

    @classmethod
    def from_dict(cls, data: object) -> EPLSettings:
        """Read an ``epl_settings`` section (missing keys: PF's published values)."""
        if not isinstance(data, dict):
            raise ValidationError(f"epl_settings must be an object; got {data!r}")
        return cls(
            percentile=data.get("percentile", PF_PERCENTILE),
            multiplier=data.get("multiplier", PF_MULTIPLIER),
        )


PF_PERCENTILE = 95.0
"""Percentile of every EPL Petti & Flaxman published (``est_range_percentile=95``)."""
PF_MULTIPLIER = 1.0
"""Multiplier of every EPL Petti & Flaxman published (``est_range_multiplier=1.0``)."""
PF_PUBLISHED = EPLSettings(PF_PERCENTILE, PF_MULTIPLIER)
"""The default: Petti & Flaxman's published settings (docs/science.md §5)."""
PF_FUNCTION_DEFAULT = EPLSettings(99.0, 1.5)
"""The defaults of PF's function signature (p = 99, m = 1.5); never used for their results."""


EPL_TABLE_COLUMNS: tuple[str, ...] = (
    "epl",
    "epl_low",
    "epl_high",
    "epl_percentile_low",
    "epl_percentile_high",
    "n_residuals",
    "reason",
)
"""The columns of an EPL table after its grouping columns (:func:`~.epl.epl_table` and the
counted residuals' table of a TopDown run)."""


def settings_of(settings: EPLSettings | None) -> EPLSettings:
    """``settings`` or, for None, :data:`PF_PUBLISHED`; anything else is refused."""
    if settings is None:
        return PF_PUBLISHED
    if not isinstance(settings, EPLSettings):
        raise ValidationError(f"EPL settings must be an EPLSettings; got {settings!r}")
    return settings
