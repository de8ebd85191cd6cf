"""The EPL options shared by ``phexplore run topdown`` and ``phexplore experiment`` (docs/science.md §5).

``--epl-percentile P`` (50 < P ≤ 100, default 95) and ``--epl-multiplier M`` (0 < M ≤ 10, default
1.0): EPL's density range is ±M × max(|P(100−P)|, |P(P)|) of the residuals. The defaults are Petti
& Flaxman's published settings; only EPLs computed with them are comparable with PF's numbers.
"""

from __future__ import annotations

import argparse
from typing import Any

from engine.core.errors import ValidationError
from engine.core.numbers import option_type
from engine.metrics.epl_settings import (
    MULTIPLIER_RANGE,
    PERCENTILE_RANGE,
    PF_MULTIPLIER,
    PF_PERCENTILE,
    EPLSettings,
)


def add_epl_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--epl-percentile`` and ``--epl-multiplier``."""
    group = parser.add_argument_group("empirical privacy loss (PF, docs/science.md §5)")
    group.add_argument(
        "--epl-percentile",
        type=option_type("real", "epl_percentile", "--epl-percentile"),
        default=PF_PERCENTILE,
        metavar="P",
        help=f"EPL density range uses the (100−P)th and Pth percentiles of the residuals; "
        f"{PERCENTILE_RANGE[0]:g} < P ≤ {PERCENTILE_RANGE[1]:g} (default {PF_PERCENTILE:g}, "
        "Petti & Flaxman's published setting)",
    )
    group.add_argument(
        "--epl-multiplier",
        type=option_type("real", "epl_multiplier", "--epl-multiplier"),
        default=PF_MULTIPLIER,
        metavar="M",
        help=f"EPL density range is ±M × max(|P(100−P)|, |P(P)|); {MULTIPLIER_RANGE[0]:g} < M ≤ "
        f"{MULTIPLIER_RANGE[1]:g} (default {PF_MULTIPLIER:g}, Petti & Flaxman's published "
        "setting; their function's defaults 99 / 1.5 give EPLs up to ~10× larger)",
    )


def epl_settings_from_args(args: Any) -> EPLSettings:
    """The checked :class:`EPLSettings` of the parsed options (a ValidationError names the bad one)."""
    try:
        return EPLSettings(
            percentile=getattr(args, "epl_percentile", PF_PERCENTILE),
            multiplier=getattr(args, "epl_multiplier", PF_MULTIPLIER),
        )
    except ValidationError as exc:
        raise ValidationError(f"--epl-percentile / --epl-multiplier: {exc}") from None
