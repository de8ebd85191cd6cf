"""Metrics shared by both engines, the CLI and the app (docs/science.md §5; TDA §9; PF Methods).

Pure functions on the tidy comparison table (geolevel, geounit, query, cell, true, estimate):

- :mod:`engine.metrics.error_tables` — MAE, median AE, relative error, share within ±k, size
  classes;
- :mod:`engine.metrics.blau` — Blau index, quintile bias (TDA Table 13), homogeneity index (PF Fig. 3);
- :mod:`engine.metrics.epl` — empirical privacy loss with its bootstrap interval (PF);
- :mod:`engine.metrics.srs` — the simple-random-sampling baseline (PF Fig. 2);
- :mod:`engine.metrics.spine` — total-population MAE on the tabulation levels and off-spine
  entities, whatever the spine (SPN §7, Tables 2–3);
- :mod:`engine.metrics.phsafe_errors` — PHSafe's noise vs truncation error, empirical vs analytic
  MOE, truncation at scale (PHS §7.1), from plain truth/estimate arrays;
- :mod:`engine.metrics.metrics_json` — the metrics.json written by ``phexplore run``;
- :mod:`engine.metrics.reference` — Petti & Flaxman's published 1940 results (to overlay);
- :mod:`engine.metrics.experiments` — the tables of a grid of runs (ρ × seeds) and trade-off curves
  (the grid itself runs in :mod:`engine.runs.experiments`: metrics run no engine).
"""

from __future__ import annotations

from engine.data.histogram import subset_histogram
from engine.metrics.blau import (
    blau_index,
    blau_quintile_bias,
    blau_table,
    geounit_totals,
    homogeneity_bias,
    homogeneity_index_from_histogram,
    homogeneity_index_from_tidy,
    raceeth_counts_from_histogram,
    raceeth_counts_from_tidy,
    rank_quintiles,
)
from engine.metrics.epl import (
    PF_FUNCTION_DEFAULT,
    PF_PUBLISHED,
    EPLResult,
    EPLSettings,
    empirical_privacy_loss,
    epl_details,
    epl_table,
)
from engine.metrics.error_tables import (
    BLOCK_SIZE_CLASSES,
    COUNTY_SIZE_CLASSES,
    TIDY_COLUMNS,
    check_tidy,
    error_table,
    mae_table,
    relative_error_table,
    size_class_table,
    within_k_table,
)
from engine.metrics.experiments import ExperimentResult, moe_coverage_table
from engine.metrics.metrics_json import build_metrics_json, validate_metrics_json
from engine.metrics.reference import (
    load_petti_flaxman_homogeneity_bias,
    load_petti_flaxman_tradeoff,
)
from engine.metrics.srs import sample_counts, srs_estimate, srs_sweep, srs_tidy, tabulate_tidy

__all__ = [
    "BLOCK_SIZE_CLASSES",
    "COUNTY_SIZE_CLASSES",
    "EPLResult",
    "EPLSettings",
    "PF_FUNCTION_DEFAULT",
    "PF_PUBLISHED",
    "ExperimentResult",
    "TIDY_COLUMNS",
    "blau_index",
    "blau_quintile_bias",
    "blau_table",
    "build_metrics_json",
    "check_tidy",
    "empirical_privacy_loss",
    "epl_details",
    "epl_table",
    "error_table",
    "geounit_totals",
    "homogeneity_bias",
    "homogeneity_index_from_histogram",
    "homogeneity_index_from_tidy",
    "load_petti_flaxman_homogeneity_bias",
    "load_petti_flaxman_tradeoff",
    "mae_table",
    "moe_coverage_table",
    "raceeth_counts_from_histogram",
    "raceeth_counts_from_tidy",
    "rank_quintiles",
    "relative_error_table",
    "sample_counts",
    "size_class_table",
    "srs_estimate",
    "srs_sweep",
    "srs_tidy",
    "subset_histogram",
    "tabulate_tidy",
    "validate_metrics_json",
    "within_k_table",
]
