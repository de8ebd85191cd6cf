"""Analytic prediction of the accuracy of TopDown's published counts (docs/science.md §7).

:func:`predict_topdown` gives, per geolevel × query, the predicted RMSE and 90% MOE of the published
(post-processed) counts beside the noisy-measurement σ: an exact least-squares covariance
(:mod:`.least_squares` on the block algebra of :mod:`.algebra`; on the cells each family populates,
:mod:`.support`) corrected for non-negativity and rounding with a count profile (:mod:`.correction`),
on a spine profile (:mod:`.spine`; shipped ones in :mod:`.shipped`), each row flagged when it lies
outside the range where it was validated against runs (:mod:`.validity`).
"""

from engine.prediction.predict import (
    DEFAULT_INVARIANTS,
    PLANNER_MAX_FAMILIES,
    PLANNER_MAX_UNITS,
    RUN_TABLE_MAX_UNITS,
    Prediction,
    QueryPrediction,
    predict_topdown,
)
from engine.prediction.shipped import (
    describe_profile,
    profile_for,
    shipped_profile,
    shipped_profile_for,
)
from engine.prediction.spine import SpineProfile

__all__ = [
    "DEFAULT_INVARIANTS",
    "PLANNER_MAX_FAMILIES",
    "PLANNER_MAX_UNITS",
    "Prediction",
    "RUN_TABLE_MAX_UNITS",
    "QueryPrediction",
    "SpineProfile",
    "describe_profile",
    "predict_topdown",
    "profile_for",
    "shipped_profile",
    "shipped_profile_for",
]
