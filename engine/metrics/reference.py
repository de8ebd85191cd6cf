"""Petti & Flaxman's published 1940-Census results as tidy tables (PF Table 1, Figs. 2–3).

Reads the MIT-licensed files shipped in ``data/reference/petti_flaxman_1940/`` (see the README and
LICENSE there). These are the *published* results of the 2018 End-to-End TopDown run on 1940 data
and of PF's simple-random-sampling baseline; the app overlays them, labelled as such, on PHExplore's
own MAE–EPL curves. EPL values PF print as ``inf`` (state totals, which are invariant) are returned as
NaN with ``epl_note`` saying why.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from engine.core.errors import ValidationError
from engine.core.strict_json import loads_strict_json

LEVEL_NAMES: dict[str, str] = {
    "state": "State",
    "county": "County",
    "enum_dist": "Enumeration district",
}
_BIAS_KEY = re.compile(r"^(tc|sc)_(state|county|enum_dist)_(\d+)_(\d+)_(\d+)_bias$")


def reference_dir() -> Path:
    """``data/reference/petti_flaxman_1940`` of the repository."""
    return Path(__file__).resolve().parents[2] / "data" / "reference" / "petti_flaxman_1940"


def _read_csv(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise ValidationError(
            f"Petti & Flaxman reference file {path} is missing; it ships with the repository "
            "under data/reference/petti_flaxman_1940/"
        )
    return pd.read_csv(path, index_col=0)


def load_petti_flaxman_tradeoff(directory: Path | None = None) -> pd.DataFrame:
    """PF's TopDown (by ε) and SRS (by sample fraction) error and EPL, one row per setting.

    Columns: design (``"topdown"``/``"srs"``), epsilon (TopDown, else NaN), fraction (SRS, else
    NaN), geolevel, count_type (``tc``/``sc``), count_median, count_pct95, median_ae, p95_ae,
    max_ae, epl, epl_note.
    """
    folder = reference_dir() if directory is None else Path(directory)
    frames = []
    for design, name in (("topdown", "sup_table_Sheet1.csv"), ("srs", "sup_table_2_Sheet1.csv")):
        raw = _read_csv(folder / name)
        setting = raw["epsilon"].astype(str)
        if design == "topdown":
            epsilon = setting.astype(float)
            fraction = pd.Series(np.nan, index=raw.index)
        else:
            epsilon = pd.Series(np.nan, index=raw.index)
            fraction = setting.str.removesuffix("pct").astype(float) / 100.0
        epl = pd.to_numeric(raw["epl"], errors="coerce")
        note = np.where(
            ~np.isfinite(epl.to_numpy(dtype=float)),
            "undefined: the invariant makes every residual 0",
            None,
        )
        frames.append(
            pd.DataFrame(
                {
                    "design": design,
                    "epsilon": epsilon.to_numpy(),
                    "fraction": fraction.to_numpy(),
                    "geolevel": raw["geographic_level"].map(LEVEL_NAMES).to_numpy(),
                    "count_type": raw["stratification_type"].to_numpy(),
                    "count_median": raw["count_median"].to_numpy(float),
                    "count_pct95": raw["count_pct95"].to_numpy(float),
                    "median_ae": raw["error_median"].to_numpy(float),
                    "p95_ae": raw["error_pct95"].to_numpy(float),
                    "max_ae": raw["error_max_abs"].to_numpy(float),
                    "epl": epl.where(np.isfinite(epl)).to_numpy(float),
                    "epl_note": pd.Series(note, dtype=object).to_numpy(),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def load_petti_flaxman_homogeneity_bias(directory: Path | None = None) -> pd.DataFrame:
    """PF Fig. 3 data: mean signed error of TopDown by homogeneity index, level, count type and ε.

    Columns: count_type, geolevel, epsilon, homogeneity_index, mean_signed_error.
    """
    folder = reference_dir() if directory is None else Path(directory)
    path = folder / "results_dp_bias.json"
    if not path.is_file():
        raise ValidationError(f"Petti & Flaxman reference file {path} is missing")
    raw = loads_strict_json(path.read_bytes(), label=str(path))
    rows = []
    for key, value in raw.items():
        match = _BIAS_KEY.match(key)
        if match is None:
            continue
        count_type, level, whole, frac, homogeneity = match.groups()
        rows.append(
            {
                "count_type": count_type,
                "geolevel": LEVEL_NAMES[level],
                "epsilon": float(f"{whole}.{frac}"),
                "homogeneity_index": int(homogeneity),
                "mean_signed_error": float(value),
            }
        )
    frame = pd.DataFrame(rows)
    return frame.sort_values(
        ["count_type", "geolevel", "epsilon", "homogeneity_index"], ignore_index=True
    )


PF_TABLE_SA1: tuple[tuple[float, float, float, float], ...] = (
    (0.001, 0.0010, 0.0008, 0.0013),
    (0.005, 0.0048, 0.0039, 0.0068),
    (0.01, 0.0099, 0.0076, 0.0130),
    (0.05, 0.0490, 0.0390, 0.0673),
    (0.1, 0.0980, 0.0752, 0.1262),
    (0.15, 0.1475, 0.1181, 0.1941),
    (0.2, 0.1988, 0.1521, 0.2639),
)
"""PF Supplementary Appendix Table SA1 as printed in their response to reviewers (Gates Open
Research 3:1722, version 2): (ε of the geometric mechanism, mean EPL, 2.5th percentile, 97.5th
percentile) over random seeds, 2,663 residuals, EPL settings p = 95, m = 1.0. Reproduced by
:func:`engine.metrics.epl_check.geometric_epl_check`."""
