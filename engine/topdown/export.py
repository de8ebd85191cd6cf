"""The PPMF-like microdata of a TopDown run's estimated blocks (TDA §6.3).

:func:`microdata_frame` gives one row per person of the estimated block histograms, in the layout
of the Census Bureau's Privacy-Protected Microdata File: ``TABBLKST, TABBLKCOU, TABTRACTCE,
TABBLKGRPCE, TABBLK`` from 15-digit block GEOIDs, then the person attributes. For the 2,016-cell
redistricting schema these are the PPMF columns ``RTYPE`` (3 household, 5 group quarters),
``GQTYPE_PL`` (0 or the GQ major type 1–7), ``VOTING_AGE`` (1 under 18, 2 18+), ``CENHISP``
(1 not Hispanic, 2 Hispanic) and ``CENRACE`` (01–63); for other schemas one column per attribute
holding its level label (``VOTING_AGE`` is coded 1/2 whenever the schema has VOTINGAGE).

The run pipeline's write stage (:mod:`engine.runs.writers`) writes it as ``microdata.csv`` beside the
estimates, measurements and metrics.json; metrics come from :mod:`engine.runs.topdown` (engines
compute no metrics).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from engine.topdown.run import TopDownResult
from phexplore.errors import ValidationError

PPMF_GEOGRAPHY = ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLKGRPCE", "TABBLK")


def _attribute_columns(result: TopDownResult, cells: np.ndarray) -> dict[str, np.ndarray]:
    """Person attribute columns for histogram cell indices ``cells`` (PPMF codes when known)."""
    schema = result.schema
    coords = np.unravel_index(cells, schema.shape)
    out: dict[str, np.ndarray] = {}
    for attr, level_index in zip(schema.attributes, coords, strict=True):
        labels = np.asarray(attr.levels, dtype=object)[level_index]
        if attr.name == "HHGQ":
            household = labels == "household"
            out["RTYPE"] = np.where(household, "3", "5")
            out["GQTYPE_PL"] = np.where(household, "0", labels)
        elif attr.name == "VOTINGAGE":
            out["VOTING_AGE"] = np.where(labels == "18_plus", "2", "1")
        elif attr.name == "HISPANIC":
            out["CENHISP"] = np.where(labels == "hispanic", "2", "1")
        else:
            out[attr.name] = labels
    return out


def microdata_frame(result: TopDownResult) -> pd.DataFrame:
    """One row per person of the estimated block histograms (PPMF-like layout)."""
    blocks = result.block_histogram()
    counts = blocks.reshape(-1)
    if np.any(counts < 0):
        raise ValidationError("estimated counts must be non-negative to export microdata")
    n_cells = blocks.shape[1]
    flat = np.repeat(np.arange(counts.size), counts)
    block_of_person = flat // n_cells
    cell_of_person = flat % n_cells
    leaf_ids = np.asarray(result.tree.node_id, dtype=object)[result.tree.block_node]
    geoid = leaf_ids[block_of_person].astype(str)
    frame: dict[str, Any] = {}
    if leaf_ids.size and all(len(str(g)) == 15 and str(g).isdigit() for g in leaf_ids):
        frame["GEOID"] = geoid
        for name, (a, b) in zip(
            PPMF_GEOGRAPHY, ((0, 2), (2, 5), (5, 11), (11, 12), (11, 15)), strict=True
        ):
            frame[name] = np.array([g[a:b] for g in leaf_ids], dtype=object)[block_of_person]
    else:
        frame["GEOID"] = geoid
    frame.update(_attribute_columns(result, cell_of_person))
    return pd.DataFrame(frame)
