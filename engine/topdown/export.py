"""Outputs of a TopDown run: tidy tables, PPMF-like microdata, metrics.json (TDA §6.3, §9).

* ``estimates.csv`` — the tidy comparison table [geolevel, geounit, query, cell, true, estimate]
  (:meth:`engine.topdown.run.TopDownResult.to_tidy`) for every geounit and query group.
* ``measurements.csv`` — the noisy measurements with their variances (0 for invariants).
* ``microdata.csv`` — one row per person of the estimated block histograms, in the layout of the
  Census Bureau's Privacy-Protected Microdata File: ``TABBLKST, TABBLKCOU, TABTRACTCE, TABBLKGRPCE,
  TABBLK`` from 15-digit block GEOIDs, then the person attributes. For the 2,016-cell redistricting
  schema these are the PPMF columns ``RTYPE`` (3 household, 5 group quarters), ``GQTYPE_PL`` (0 or the
  GQ major type 1–7), ``VOTING_AGE`` (1 under 18, 2 18+), ``CENHISP`` (1 not Hispanic, 2 Hispanic) and
  ``CENRACE`` (01–63); for other schemas one column per attribute holding its level label
  (``VOTING_AGE`` is coded 1/2 whenever the schema has VOTINGAGE).
* ``metrics.json`` — :func:`metrics_payload`, built by :func:`engine.metrics.metrics_json.build_metrics_json`:
  ``mae`` / ``median_ae`` / ``n_cells`` by geolevel and query, ``runtime_s``, ``rho`` and
  ``rho_spent`` (the ρ of the noisy measurements; ``epsilon_spent`` for pure DP), ``seed``,
  ``epl`` (EPL with a 200-resample bootstrap interval, generator seeded ``[seed, 1]``), ``blau_bias``
  (mean signed error of the total by Blau quintile, when the schema has RACEETH, e.g. RI 2010),
  plus ``allocation``, ``mechanism``, ``epsilon`` (pure DP), ``timings``, ``diagnostics`` and
  ``structural_zeros`` (whether structural zeros and GQ bounds were held, with a ``note`` in words).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from engine.data.histogram import BlockHistogram
from engine.metrics.epl import EPLSettings
from engine.metrics.metrics_json import build_metrics_json
from engine.topdown.run import TopDownResult
from phexplore.errors import ValidationError

EPL_BOOT = 200
"""Bootstrap resamples of the metrics.json EPL interval (generator seeded ``[seed, 1]``, as the app)."""

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


def metrics_payload(
    result: TopDownResult,
    extra_sections: Mapping[str, Any] | None = None,
    *,
    epl_settings: EPLSettings | None = None,
    hist: BlockHistogram | None = None,
) -> dict[str, Any]:
    """The metrics.json dictionary of a run (schema in :mod:`engine.metrics.metrics_json`).

    ``extra_sections`` (e.g. the spine metrics of :mod:`engine.topdown.spine`) are added as
    top-level keys; ``epl_settings`` (default PF's published p = 95, m = 1.0) are recorded as
    ``epl_settings``. With ``hist`` (the run's true blocks and their tabulation geography),
    ``blau_bias`` also covers the tabulation geographies summed from the estimated blocks
    (block groups, tracts …) whatever the spine (:func:`engine.metrics.blau.blau_bias_report`).
    """
    pure = result.mechanism == "puredp"
    extra: dict[str, Any] = {
        "allocation": result.allocation_name,
        "mechanism": result.mechanism,
        "timings": {k: round(float(v), 4) for k, v in result.timings.items()},
        "diagnostics": result.diagnostics,
        "structural_zeros": result.diagnostics.get("structural", {}),
        "n_blocks": result.tree.n_blocks,
        "n_geounits": {lv: int(result.tree.nodes_at_level(lv).size) for lv in result.tree.levels},
        **(extra_sections or {}),
    }
    if pure:
        extra["epsilon"] = result.rho
        extra["epsilon_spent"] = result.rho_spent
    tidy = result.to_tidy()
    blau = blau_bias = None
    if "RACEETH" in result.schema.names:
        from engine.metrics.blau import (
            RACEETH_GROUPS,
            blau_bias_report,
            blau_table,
            raceeth_counts_from_tidy,
        )

        attribute = result.schema.attributes[result.schema.axis("RACEETH")]
        if tuple(attribute.levels) == tuple(RACEETH_GROUPS):  # the eight Blau groups (RI schema)
            counts = raceeth_counts_from_tidy(result.to_tidy(("RACEETH",)))
            if hist is not None:
                estimated = result.block_histogram().sum(axis=1)
                blau_bias = blau_bias_report(tidy, hist, estimated, spine_counts=counts)
            else:
                blau = blau_table(counts)
    return build_metrics_json(
        engine="topdown",
        tidy=tidy,
        runtime_s=result.runtime_s,
        rho=None if pure else result.rho,
        rho_spent=None if pure else result.rho_spent,
        seed=result.seed,
        epl_boot=EPL_BOOT,
        epl_rng=np.random.default_rng([int(result.seed), 1]),
        epl_settings=epl_settings,
        blau=blau,
        blau_bias=blau_bias,
        extra=extra,
    )


def _strict(value: Any) -> Any:
    """JSON-ready copy: numpy scalars to Python, non-finite floats to null (RFC 8259)."""
    if isinstance(value, dict):
        return {str(k): _strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_outputs(
    result: TopDownResult,
    out_dir: str | Path,
    *,
    microdata: bool = True,
    measurements: bool = True,
    extra_sections: Mapping[str, Any] | None = None,
    epl_settings: EPLSettings | None = None,
    hist: BlockHistogram | None = None,
) -> dict[str, Path]:
    """Write estimates.csv, measurements.csv, microdata.csv and metrics.json into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    paths["estimates"] = out / "estimates.csv"
    result.to_tidy().to_csv(paths["estimates"], index=False)
    if measurements:
        paths["measurements"] = out / "measurements.csv"
        result.measurements.to_csv(paths["measurements"], index=False)
    if microdata:
        paths["microdata"] = out / "microdata.csv"
        microdata_frame(result).to_csv(paths["microdata"], index=False)
    paths["metrics"] = out / "metrics.json"
    payload = metrics_payload(result, extra_sections, epl_settings=epl_settings, hist=hist)
    text = json.dumps(_strict(payload), indent=2, allow_nan=False)
    paths["metrics"].write_text(text + "\n", encoding="utf-8")
    return paths
