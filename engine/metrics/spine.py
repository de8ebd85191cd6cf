"""Spine-independent accuracy of a TopDown run: total-population MAE by geography (SPN §7, Tables 2–3).

Whatever spine a run measured on, its output is a block-level histogram, so runs with different
spines are compared on common ground: the block errors (estimate − true total population) are
summed onto

* every level of the conventional tabulation spine (State, County, Tract, Block_Group, Block):
  the total population MAE of each level (SPN Table 2) → metrics.json ``"conventional_mae"``;
* every off-spine entity set (sum of its entities' blocks): the total population MAE over its
  entities (SPN Table 3) → ``"entity_mae"``.

MAE = mean over geounits of |estimate − true| of the total population; PHExplore takes every
geounit present in the data (SPN's universe also drops geounits without housing units or GQs).
A grouping is given as plain arrays — ``codes`` (one group index per block; negative = in no
group) and the number of groups — so this module knows no engine: the run pipeline
(:mod:`engine.runs.spine`) turns the spine's levels and the entity sets into groupings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from engine.core.errors import ValidationError

Grouping = tuple[np.ndarray, int]
"""(codes: the group index of every block, negative for none; number of groups)."""


def block_errors(true_totals: np.ndarray, estimated_totals: np.ndarray) -> np.ndarray:
    """estimate − true per block, as float64 (both arrays must hold one value per block)."""
    true_totals = np.asarray(true_totals, dtype=np.float64)
    estimated_totals = np.asarray(estimated_totals, dtype=np.float64)
    if true_totals.ndim != 1 or true_totals.shape != estimated_totals.shape:
        raise ValidationError(
            "need one true and one estimated total per block; got shapes "
            f"{true_totals.shape} and {estimated_totals.shape}"
        )
    return estimated_totals - true_totals


def grouped_total_mae(
    codes: np.ndarray, n_groups: int, true_totals: np.ndarray, estimated_totals: np.ndarray
) -> float:
    """Mean over the ``n_groups`` groups of |Σ estimate − Σ true| of their blocks.

    ``codes`` holds each block's group (0 … n_groups − 1; negative: the block is in no group);
    a group without blocks counts with error 0.
    """
    error = block_errors(true_totals, estimated_totals)
    codes = np.asarray(codes)
    if codes.shape != error.shape:
        raise ValidationError(
            f"need one group code per block ({error.size}); got shape {codes.shape}"
        )
    inside = codes >= 0
    return float(
        np.abs(np.bincount(codes[inside], weights=error[inside], minlength=int(n_groups))).mean()
    )


def level_total_mae(
    levels: Mapping[str, Grouping], true_totals: np.ndarray, estimated_totals: np.ndarray
) -> dict[str, float]:
    """Total-population MAE of every level (name → grouping of the blocks into its geounits)."""
    return {
        name: grouped_total_mae(codes, n, true_totals, estimated_totals)
        for name, (codes, n) in levels.items()
    }


def entity_total_mae(
    codes: np.ndarray, n_entities: int, true_totals: np.ndarray, estimated_totals: np.ndarray
) -> float:
    """Total-population MAE over the entities of one entity set (``codes``: entity per block)."""
    return grouped_total_mae(codes, n_entities, true_totals, estimated_totals)


def spine_mae(
    levels: Mapping[str, Grouping],
    entity_sets: Mapping[str, Grouping],
    true_totals: np.ndarray,
    estimated_totals: np.ndarray,
) -> dict[str, Any]:
    """The metrics.json sections ``conventional_mae`` (per level) and ``entity_mae`` (per set)."""
    return {
        "conventional_mae": level_total_mae(levels, true_totals, estimated_totals),
        "entity_mae": {
            name: entity_total_mae(codes, n, true_totals, estimated_totals)
            for name, (codes, n) in entity_sets.items()
        },
    }
