"""Spine-independent accuracy metrics of a TopDown run (SPN §7, Tables 2 and 3).

Whatever spine a run measured on, its output is a block-level histogram, so runs with different
spines are compared on common ground: the block estimates are re-aggregated onto

* the conventional tabulation spine (State, County, Tract, Block_Group, Block): the total
  population MAE of each level (SPN Table 2) → ``"conventional_mae"``;
* every off-spine entity set (sum of its entities' blocks): the total population MAE over its
  entities (SPN Table 3) → ``"entity_mae"``;

and each entity set's mean OSED on the spine actually used (SPN Algorithm 1) → ``"osed"``.
MAE = mean over geounits of |estimate − true| of the total population; PHExplore takes every
geounit present in the data (SPN's universe also drops geounits without housing units or GQs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from engine.topdown.geography import GeoTree
from engine.topdown.spine.entities import EntitySet
from engine.topdown.spine.levels import SpineLevels
from engine.topdown.spine.osed import entity_osed, tree_osed
from phexplore.errors import ValidationError


def level_total_mae(
    spine: SpineLevels, true_totals: np.ndarray, estimated_totals: np.ndarray
) -> dict[str, float]:
    """Total-population MAE of every level of ``spine`` below its root."""
    error = _block_error(spine.n_blocks, true_totals, estimated_totals)
    return {
        spine.names[level]: float(
            np.abs(
                np.bincount(spine.codes[level], weights=error, minlength=spine.n_units(level))
            ).mean()
        )
        for level in range(1, spine.n_levels)
    }


def entity_total_mae(
    entity_set: EntitySet, true_totals: np.ndarray, estimated_totals: np.ndarray
) -> float:
    """Total-population MAE over the entities of ``entity_set``."""
    error = _block_error(entity_set.codes.size, true_totals, estimated_totals)
    return float(np.abs(entity_set.entity_totals(error)).mean())


def spine_metrics(
    conventional: SpineLevels,
    used: SpineLevels | GeoTree,
    entity_sets: Sequence[EntitySet],
    true_totals: np.ndarray,
    estimated_totals: np.ndarray,
) -> dict[str, Any]:
    """The three metrics.json sections: ``conventional_mae``, ``entity_mae`` and ``osed``.

    ``conventional`` is the tabulation spine, ``used`` the spine the run measured on (its OSEDs
    are reported), as nested levels or as the run's tree (after bypassing).
    """
    if conventional.n_blocks != used.n_blocks:
        raise ValidationError("the conventional and the run's spine cover different blocks")

    def mean_osed(entity_set: EntitySet) -> float:
        if isinstance(used, GeoTree):
            return float(tree_osed(used.parent, used.block_node, entity_set.membership()).mean())
        return float(entity_osed(used, entity_set.membership()).mean())

    return {
        "conventional_mae": level_total_mae(conventional, true_totals, estimated_totals),
        "entity_mae": {
            s.name: entity_total_mae(s, true_totals, estimated_totals) for s in entity_sets
        },
        "osed": {s.name: mean_osed(s) for s in entity_sets},
    }


def _block_error(
    n_blocks: int, true_totals: np.ndarray, estimated_totals: np.ndarray
) -> np.ndarray:
    true_totals = np.asarray(true_totals, dtype=np.float64)
    estimated_totals = np.asarray(estimated_totals, dtype=np.float64)
    if true_totals.shape != (n_blocks,) or estimated_totals.shape != (n_blocks,):
        raise ValidationError(
            f"need one true and one estimated total per block ({n_blocks}); got shapes "
            f"{true_totals.shape} and {estimated_totals.shape}"
        )
    return estimated_totals - true_totals
