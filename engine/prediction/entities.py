"""Predicted accuracy of off-spine entities (wards, places) built from blocks (docs/science.md §7;
SPN §4, §7).

The least-squares error of a leaf is d_b = ε_b + ε_p/n_p + ε_gp/(n_p n_gp) + …, where ε_v is the
innovation of geounit v in its family (Cov (1 − 1/n)K, −K/n between siblings, independent across
families; :mod:`engine.prediction.least_squares`) and n_u the number of children of u. An entity
E (any set of leaves) therefore has error Σ_v g_v ε_v with g_leaf = 1[leaf ∈ E] and, going up,
g_v = (Σ_children g_c)/n_v, so its variance is exact in closed form:

    Var = g_root² · v_root(q) + Σ_levels v_level(q) · Σ_families (Σ_c g_c² − (Σ_c g_c)²/n),

with v_level(q) the mean-cell variance of query q under K_level. The non-negativity and rounding
correction is carried over level by level as the ratio of the corrected to the least-squares
variance of the level's own published counts (capped at 1), and the entity's bias is the sum of its
blocks' predicted biases (small blocks up, large ones down, TDA Table 13): within a family they
cancel, so the bias of an entity comes from the families it cuts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.core.errors import ValidationError
from engine.dp.moe import z_for_confidence
from engine.prediction.predict import Prediction


@dataclass(frozen=True)
class EntityPrediction:
    """Predicted error of one query of one entity."""

    entity: str
    query: str
    blocks: int
    ls_rmse: float
    post_processed_rmse: float
    post_processed_moe: float

    def as_row(self) -> dict[str, object]:
        return {
            "entity": self.entity,
            "query": self.query,
            "blocks": self.blocks,
            "ls_rmse": self.ls_rmse,
            "post_processed_rmse": self.post_processed_rmse,
            "post_processed_moe": self.post_processed_moe,
        }


def family_factors(fanouts: Sequence[np.ndarray], member: np.ndarray) -> np.ndarray:
    """``(n_entities, n_levels)``: the factor of each level's v(q) in the entity's variance.

    ``member`` is ``(n_leaves, n_entities)`` (0/1 or weights) over the leaves in profile order.
    """
    g = np.asarray(member, dtype=np.float64)
    levels = len(fanouts)
    out = np.zeros((g.shape[1], levels))
    for k in range(levels - 1, 0, -1):
        n = np.asarray(fanouts[k], dtype=np.int64)
        if g.shape[0] != int(n.sum()):
            raise ValidationError(
                f"entity membership has {g.shape[0]} rows for {int(n.sum())} geounits"
            )
        starts = np.concatenate([[0], np.cumsum(n)[:-1]]).astype(np.int64)
        nonempty = n > 0
        sums = np.zeros((n.size, g.shape[1]))
        squares = np.zeros((n.size, g.shape[1]))
        sums[nonempty] = np.add.reduceat(g, starts[nonempty], axis=0)
        squares[nonempty] = np.add.reduceat(g * g, starts[nonempty], axis=0)
        nn = np.where(nonempty, n, 1).astype(np.float64)[:, None]
        out[:, k] = (squares - sums**2 / nn).sum(axis=0)
        g = sums / nn
    out[:, 0] = g[0] ** 2
    return out


def predict_entities(
    prediction: Prediction,
    member: np.ndarray,
    entity_ids: Sequence[str],
    queries: Sequence[str] = ("TOTAL",),
) -> list[EntityPrediction]:
    """Predicted RMSE and MOE of ``queries`` for each entity (columns of ``member``, rows the
    leaves of ``prediction``'s spine in profile order)."""
    spine, algebra = prediction.spine, prediction.algebra
    if spine is None or algebra is None:
        raise ValidationError("this prediction carries no spine; rerun predict_topdown")
    member = np.asarray(member, dtype=np.float64)
    if member.ndim != 2 or member.shape[1] != len(entity_ids):
        raise ValidationError("entity membership must be (leaves × entities)")
    factors = family_factors(spine.fanouts, member)
    z = z_for_confidence(prediction.confidence)
    out = []
    blocks = member.sum(axis=0)
    for q in queries:
        if q not in algebra.queries:
            raise ValidationError(f"query {q!r} was not predicted; add it to predict_topdown")
        v = np.array([algebra.mean_cell_variance(k, q) for k in prediction.level_covariances])
        shrink = np.ones(len(prediction.levels))
        for k, lv in enumerate(prediction.levels):
            row = prediction.row(lv, q)
            if row.ls_rmse > 0:
                shrink[k] = min(1.0, (row.post_processed_rmse / row.ls_rmse) ** 2)
        ls_var = factors @ v
        pp_var = factors @ (v * shrink)
        bias = prediction.leaf_bias.get(q)
        if bias is not None:
            pp_var = pp_var + np.mean((member.T @ bias) ** 2, axis=1)
        for e, name in enumerate(entity_ids):
            ls, pp = math.sqrt(max(ls_var[e], 0.0)), math.sqrt(max(pp_var[e], 0.0))
            out.append(EntityPrediction(str(name), q, int(blocks[e]), ls, pp, z * pp))
    return out
