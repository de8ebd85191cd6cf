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
