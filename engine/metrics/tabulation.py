"""TDA's accuracy figures on the tabulation geographies, whatever the spine (TDA §9, Tables 9–12).

TDA Tables 9–12 report the published geographies — tabulation counties, tracts, block groups and
blocks — although production measured *custom* block groups (TDA Table 6 note, §8.2): the
tabulation block groups are off its spine and are built from its blocks. A run on another spine
(optimized block groups, AIAN-style branches, SPN §1–§6) likewise reports its own spine levels in
``mae``; for the comparison with TDA, this module gives TDA's figures on the tabulation geographies:

* :func:`tabulation_residual_sets` — the residuals (estimate − true, per geounit and query cell) of
  tabulation levels the spine does not have, from the estimated blocks summed to the level;
* :func:`tda_mae_section` — metrics.json ``tda_mae`` (per geounit Σ over the query's cells of
  |error|, averaged over the geounits; TDA §9) on the tabulation levels: the spine's own residuals
  where a spine level holds exactly the tabulation geounits, the summed ones elsewhere, and
  ``tda_mae_geography`` naming the levels built from blocks;
* :func:`size_class_section` — TOTAL error by size class of the true count (TDA Tables 11–12:
  counties, blocks): geounits, mean absolute error, mean signed error and TDA's signed-error
  quantiles.

Inputs are plain arrays and sparse matrices; the run pipeline (:mod:`engine.runs.tabulation`)
assembles them from the run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from engine.core.errors import ValidationError
from engine.metrics.counted import CountedResiduals, counted_residuals, tda_absolute_error
from engine.metrics.error_tables import (
    BLOCK_SIZE_CLASSES,
    COUNTY_SIZE_CLASSES,
    SIGNED_ERROR_QUANTILES,
)

FROM_BLOCKS = "tabulation (summed from the estimated blocks; not on the run's spine)"
"""How ``tda_mae_geography`` labels a level built from blocks."""
SIZE_CLASSES: dict[str, tuple[tuple[str, float, float], ...]] = {
    "County": COUNTY_SIZE_CLASSES,
    "Block": BLOCK_SIZE_CLASSES,
}
"""The levels and classes of TDA Tables 11 (counties) and 12 (blocks)."""


def grouping_matrix(codes: np.ndarray, n_units: int) -> sp.csr_matrix:
    """``(n_units, n_blocks)`` 0/1 matrix summing blocks into their geounit (``codes[b] < 0``:
    block ``b`` is left out)."""
    codes = np.asarray(codes, dtype=np.int64)
    inside = np.flatnonzero(codes >= 0)
    return sp.csr_matrix(
        (np.ones(inside.size), (codes[inside], inside)), shape=(int(n_units), codes.size)
    )


def tabulation_residual_sets(
    block_difference: sp.spmatrix,
    levels: Mapping[str, tuple[np.ndarray, int]],
    answers: Mapping[str, sp.spmatrix],
) -> dict[tuple[str, str], CountedResiduals]:
    """``{(level, query): CountedResiduals}`` of tabulation levels summed from blocks.

    ``block_difference``: estimate − true per block and histogram cell, ``(n_blocks, n_cells)``;
    ``levels``: level → (geounit code of every block, negative = left out; number of geounits);
    ``answers``: query → ``(n_cells, query cells)`` matrix mapping cells to answer cells.
    """
    difference = sp.csr_matrix(block_difference)
    out: dict[tuple[str, str], CountedResiduals] = {}
    for level, (codes, n_units) in levels.items():
        if np.asarray(codes).shape != (difference.shape[0],):
            raise ValidationError(
                f"level {level!r}: need one geounit code per block ({difference.shape[0]})"
            )
        summed = sp.csr_matrix(grouping_matrix(codes, n_units) @ difference)
        for query, matrix in answers.items():
            out[(str(level), str(query))] = counted_residuals(sp.csr_matrix(summed @ matrix))
    return out


def tda_mae_section(
    spine_residuals: Mapping[tuple[str, str], CountedResiduals],
    tabulation_residuals: Mapping[tuple[str, str], CountedResiduals],
    *,
    tabulation_levels: Sequence[str],
    spine_equals_tabulation: Sequence[str],
) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    """``(tda_mae, tda_mae_geography)`` on the tabulation levels (module docstring).

    ``spine_equals_tabulation``: the spine levels (and a root such as ``US``) whose geounits are
    exactly the tabulation ones, taken from ``spine_residuals``; every other level of
    ``tabulation_levels`` from ``tabulation_residuals``. Levels in root-to-block order.
    """
    section: dict[str, dict[str, float]] = {}
    geography: dict[str, str] = {}
    same = set(map(str, spine_equals_tabulation))
    tabulation = [str(lv) for lv in tabulation_levels]
    # root to block: the tabulation levels in their order, a root the tabulation lacks (US) first
    order = [lv for lv in map(str, spine_equals_tabulation) if lv not in tabulation] + tabulation
    for level in order:
        level = str(level)
        source = spine_residuals if level in same else tabulation_residuals
        entries = {q: tda_absolute_error(r) for (lv, q), r in source.items() if lv == level}
        if not entries:
            continue
        section[level] = dict(sorted(entries.items()))
        if level not in same:
            geography[level] = FROM_BLOCKS
    return section, geography


def size_class_rows(
    true_totals: np.ndarray,
    estimated_totals: np.ndarray,
    classes: Sequence[tuple[str, float, float]],
    quantiles: Sequence[float] = SIGNED_ERROR_QUANTILES,
) -> list[dict[str, Any]]:
    """TOTAL error by size class of the true count (TDA Tables 11–12): per class ``size_class``,
    ``n``, ``mae``, ``mean_error`` and ``q<quantile>`` of the signed error (classes with no
    geounit are left out)."""
    true = np.asarray(true_totals, dtype=np.float64).reshape(-1)
    error = np.asarray(estimated_totals, dtype=np.float64).reshape(-1) - true
    rows = []
    for label, low, high in classes:
        part = error[(true >= low) & (true <= high)]
        if part.size == 0:
            continue
        row: dict[str, Any] = {
            "size_class": label,
            "n": int(part.size),
            "mae": float(np.abs(part).mean()),
            "mean_error": float(part.mean()),
        }
        for q in quantiles:
            row[f"q{q:g}"] = float(pd.Series(part).quantile(q))
        rows.append(row)
    return rows


def size_class_section(
    totals: Mapping[str, tuple[np.ndarray, np.ndarray]],
) -> dict[str, dict[str, dict[str, float]]]:
    """metrics.json ``tda_size_classes``: ``{level: {size class: {n, mae, mean_error, q…}}}`` for
    the levels of :data:`SIZE_CLASSES` present in ``totals`` (level → (true, estimated) totals of
    its geounits)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for level, classes in SIZE_CLASSES.items():
        if level not in totals:
            continue
        true, estimated = totals[level]
        rows = size_class_rows(true, estimated, classes)
        out[level] = {
            r["size_class"]: {k: v for k, v in r.items() if k != "size_class"} for r in rows
        }
    return out
