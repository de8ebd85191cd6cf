"""What a published-count prediction returns: one row per geolevel × query
(:class:`QueryPrediction`) and the whole prediction (:class:`Prediction`), with what off-spine
entities and the run's predicted-vs-measured table need (docs/prediction.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.prediction.algebra import CellAlgebra, Operator
from engine.prediction.spine import SpineProfile


@dataclass(frozen=True)
class QueryPrediction:
    """Predicted accuracy of one query at one geolevel (all errors in persons per answer cell).

    ``model_holds``: whether the row lies in the range where the prediction was validated against
    repeated runs (:mod:`engine.prediction.validity`); ``validity`` says why not (``None`` when
    it holds)."""

    geolevel: str
    query: str
    cells: int
    units: int
    sigma: float | None
    ls_rmse: float
    post_processed_rmse: float
    post_processed_moe: float
    mean_count: float | None
    model_holds: bool | None
    invariant: bool = False
    validity: str | None = None

    def as_row(self) -> dict[str, Any]:
        return {
            "geolevel": self.geolevel,
            "query": self.query,
            "cells": self.cells,
            "units": self.units,
            "sigma": self.sigma,
            "ls_rmse": self.ls_rmse,
            "post_processed_rmse": self.post_processed_rmse,
            "post_processed_moe": self.post_processed_moe,
            "mean_count": self.mean_count,
            "model_holds": self.model_holds,
            "validity": self.validity,
            "invariant": self.invariant,
        }


@dataclass(frozen=True, eq=False)
class Prediction:
    """Predictions of one allocation on one spine, with what an off-spine query needs."""

    allocation: str
    profile: str
    levels: tuple[str, ...]
    rows: tuple[QueryPrediction, ...]
    confidence: float
    level_covariances: tuple[Operator, ...] = field(repr=False, default=())
    algebra: CellAlgebra | None = field(repr=False, default=None)
    notes: tuple[str, ...] = ()
    spine: SpineProfile | None = field(repr=False, default=None)
    leaf_bias: dict[str, np.ndarray] = field(repr=False, default_factory=dict)
    """Per query, the leaves' predicted mean error per answer cell (all leaves, profile order;
    only when the correction ran on every leaf) — what off-spine entities sum."""
    folded: tuple[str, ...] = ()
    """Allocation levels folded into the spine's root (their published counts are the root's)."""
    evaluated: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per level, (geounits, families) on which the non-negativity correction (and the support
    model) was evaluated — whole families, every k-th (:func:`engine.prediction.correction.sample_families`); a level absent
    here had no correction. Compare with the level's ``units`` and its number of parents."""
    model: str = ""
    """The least-squares model the rows rest on (:class:`engine.prediction.validity.ModelUsed`)."""

    def for_level(self, geolevel: str, query: str) -> QueryPrediction | None:
        """The prediction of an allocation level (a folded root level maps to the spine root)."""
        level = self.levels[0] if geolevel in self.folded else geolevel
        try:
            return self.row(level, query)
        except KeyError:
            return None

    def row(self, geolevel: str, query: str) -> QueryPrediction:
        for r in self.rows:
            if r.geolevel == geolevel and r.query == query:
                return r
        raise KeyError((geolevel, query))

    def as_rows(self) -> list[dict[str, Any]]:
        return [r.as_row() for r in self.rows]
