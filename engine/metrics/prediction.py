"""Predicted against measured accuracy of a run's published counts (docs/science.md §7).

:func:`rmse_table` measures the RMSE of the published counts per geolevel × query (over geounits and
answer cells); :func:`prediction_table` puts the analytic prediction of
:func:`engine.prediction.predict_topdown` — computed on the run's own spine and true counts —
beside it, with the ratio predicted / measured. One run gives one draw: over repeated runs the
ratio concentrates (``benchmarks/prediction.py``); a single run of a level with few geounits (a
state, a handful of counties) scatters widely around it. Each row says whether it lies in the
range where the prediction was validated (``model_holds``) and why not (``validity``,
:mod:`engine.prediction.validity`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from engine.core.errors import PHExploreError
from engine.dp.budget import TopDownAllocation
from engine.prediction import DEFAULT_INVARIANTS, predict_topdown
from engine.prediction.entities import predict_entities


def rmse_table(tidy: pd.DataFrame) -> pd.DataFrame:
    """Per (geolevel, query): ``measured_rmse`` and the number of answer cells ``n_cells``."""
    err2 = (tidy["estimate"].astype(float) - tidy["true"].astype(float)) ** 2
    g = err2.groupby([tidy["geolevel"], tidy["query"]], sort=False)
    out = pd.DataFrame({"measured_rmse": np.sqrt(g.mean()), "n_cells": g.size()})
    return out.reset_index()


def prediction_table(
    profile: Any,
    allocation: TopDownAllocation,
    tidy: pd.DataFrame,
    *,
    invariants: Mapping[str, Sequence[str]] = DEFAULT_INVARIANTS,
    max_units: int | None = None,
) -> pd.DataFrame | None:
    """Predicted (``predicted_rmse``, ``ls_rmse``) beside ``measured_rmse`` per geolevel × query,
    or ``None`` when the run's spine is not one the prediction covers (bypassed or optimized).

    ``profile`` is the count profile of the run's own spine and true counts
    (:func:`engine.topdown.profile.tree_profile`, computed by the run pipeline: metrics run no
    engine); ``max_units`` as in :func:`prediction_of_measured`.
    """
    return prediction_of_measured(
        profile, allocation, rmse_table(tidy), invariants=invariants, max_units=max_units
    )


def prediction_of_measured(
    profile: Any,
    allocation: TopDownAllocation,
    measured: pd.DataFrame,
    *,
    invariants: Mapping[str, Sequence[str]] = DEFAULT_INVARIANTS,
    max_units: int | None = None,
) -> pd.DataFrame | None:
    """:func:`prediction_table` from the measured RMSE per geolevel × query (``measured``: the
    columns of :func:`rmse_table`, e.g. :func:`engine.metrics.counted.counted_rmse_table` of a
    run's sparse residuals); the predicted queries are those of ``measured``, in its order.

    ``max_units``: evaluate the non-negativity correction on whole families of at most about
    this many geounits per level (every k-th family, deterministic; ``None``: all — the app
    passes :data:`engine.prediction.RUN_TABLE_MAX_UNITS`). Each row says on how many of the
    level's ``units`` it was evaluated (``units_evaluated``)."""
    try:
        queries = list(dict.fromkeys(str(q) for q in measured["query"].unique()))
        pred = predict_topdown(
            allocation, profile, queries=queries, invariants=invariants, max_units=max_units
        )
    except PHExploreError:
        return None
    predicted = pd.DataFrame(
        [
            {
                "geolevel": r.geolevel,
                "query": r.query,
                "sigma": r.sigma,
                "ls_rmse": r.ls_rmse,
                "predicted_rmse": r.post_processed_rmse,
                "mean_count": r.mean_count,
                "model_holds": r.model_holds,
                "validity": r.validity,
                "units": r.units,
                "units_evaluated": pred.evaluated.get(r.geolevel, (r.units, 0))[0],
            }
            for r in pred.rows
        ]
    )
    out = predicted.merge(measured, on=["geolevel", "query"], how="inner")
    # a row that holds has no reason: null, not NaN (pandas turns None into NaN in a string column)
    reason = out["validity"].astype(object)
    out["validity"] = reason.where(reason.notna(), None)
    with np.errstate(divide="ignore", invalid="ignore"):
        out["ratio"] = np.where(
            out["measured_rmse"] > 0, out["predicted_rmse"] / out["measured_rmse"], np.nan
        )
    return out


def entity_prediction_table(
    profile: Any,
    allocation: TopDownAllocation,
    entity_sets: Sequence[tuple[str, Sequence[str], np.ndarray, Mapping[str, np.ndarray]]],
) -> pd.DataFrame | None:
    """Per entity set × query: predicted RMSE of the entities' published counts (pooled over the
    set's entities; :mod:`engine.prediction.entities`) beside the measured one of this run.

    ``entity_sets``: ``(name, entity ids, membership (profile leaves × entities), {query: this
    run's errors (entities × answer cells)})`` — built by the run pipeline from the run's spine.
    """

    queries = list(dict.fromkeys(q for _, _, _, errors in entity_sets for q in errors))
    try:
        pred = predict_topdown(allocation, profile, queries=["TOTAL", *queries])
    except PHExploreError:
        return None
    rows = []
    for name, ids, member, errors in entity_sets:
        predicted = predict_entities(pred, member, ids, list(errors))
        for q, err in errors.items():
            p = [e for e in predicted if e.query == q]
            rows.append(
                {
                    "entity_set": name,
                    "query": q,
                    "entities": len(ids),
                    "ls_rmse": float(np.sqrt(np.mean([e.ls_rmse**2 for e in p]))),
                    "predicted_rmse": float(
                        np.sqrt(np.mean([e.post_processed_rmse**2 for e in p]))
                    ),
                    "measured_rmse": float(np.sqrt(np.mean(np.asarray(err) ** 2))),
                }
            )
    if not rows:
        return None
    out = pd.DataFrame(rows)
    out["ratio"] = out["predicted_rmse"] / out["measured_rmse"].where(out["measured_rmse"] > 0)
    return out
