"""Published-count accuracy beside the noisy-measurement σ in the TopDown MOE table (docs/science.md
§2, §7).

:func:`add_post_processed` extends the rows of :func:`phexplore.planning.moe_tables.topdown_rows`
(one per run × geolevel × query) with ``post_processed_rmse`` and ``post_processed_moe`` (90% by
default: z·RMSE) from :func:`engine.prediction.predict_topdown`, ``post_processed_holds`` (whether
the row lies in the range where the prediction was validated against runs,
:mod:`engine.prediction.validity`) and ``post_processed_reason`` (why not; ``None`` when it holds).
Only the persons run is estimated by TopDown's post-processing; other runs get ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.core.errors import ValidationError
from engine.dp.budget import TopDownAllocation
from engine.prediction.predict import DEFAULT_INVARIANTS, Prediction, predict_topdown
from engine.prediction.spine import SpineProfile


def predictions_for_runs(
    runs: Mapping[str, TopDownAllocation],
    profile: SpineProfile,
    *,
    confidence: float = 0.90,
    invariants: Mapping[str, Sequence[str]] = DEFAULT_INVARIANTS,
    max_units: int | None = None,
    max_families: int | None = None,
) -> dict[str, Prediction]:
    """One prediction per persons run (the runs TopDown post-processes)."""
    out: dict[str, Prediction] = {}
    for run, alloc in runs.items():
        if alloc.universe != "persons":
            continue
        queries = ["TOTAL", *alloc.all_queries()]
        out[run] = predict_topdown(
            alloc,
            profile,
            queries=list(dict.fromkeys(queries)),
            confidence=confidence,
            invariants=invariants,
            max_units=max_units,
            **({} if max_families is None else {"max_families": max_families}),
        )
    return out


def add_post_processed(
    rows: Sequence[Mapping[str, Any]], predictions: Mapping[str, Prediction]
) -> list[dict[str, Any]]:
    """``rows`` (with ``run``, ``geolevel``, ``query``) plus the post-processed keys."""
    out = []
    for row in rows:
        new = dict(row)
        pred = predictions.get(str(row.get("run")))
        hit = None if pred is None else pred.for_level(str(row["geolevel"]), str(row["query"]))
        new["post_processed_rmse"] = None if hit is None else hit.post_processed_rmse
        new["post_processed_moe"] = None if hit is None else hit.post_processed_moe
        new["post_processed_holds"] = None if hit is None else hit.model_holds
        new["post_processed_reason"] = None if hit is None else hit.validity
        out.append(new)
    return out


def prediction_summary(predictions: Mapping[str, Prediction], profile: SpineProfile) -> dict:
    """What the post-processed columns rest on: the profile, its source and licence, notes."""
    if not predictions:
        raise ValidationError(
            "--post-processed needs a persons run: TopDown post-processes person histograms only"
        )
    notes = sorted({n for p in predictions.values() for n in p.notes})
    return {
        "profile": profile.name,
        "profile_source": profile.source,
        "profile_licence": profile.licence,
        "spine_levels": {run: list(p.levels) for run, p in predictions.items()},
        "model": {run: p.model for run, p in predictions.items()},
        "rows_outside_validated_range": {
            run: sum(1 for r in p.rows if r.model_holds is False) for run, p in predictions.items()
        },
        "notes": notes,
    }
