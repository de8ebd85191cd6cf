"""PHSafe outputs: the official pipe-delimited files and the same data as tidy frames for the app.

Official layout (PHSafe 3.0.0; the fixtures' ``expected_outputs`` are the authority, README
"outputs"): one file per table, ``|``-separated with a header.

* private: ``REGION_ID|REGION_TYPE|ITERATION_CODE|<T>_DATA_CELL|NOISE_DISTRIBUTION|VARIANCE|COUNT``
  — every population group of every measured level (zeros included), basis cells only (PHS §3.2);
  PH5_num repeats PH4 and PH8_num sums PH7 (owner = mortgage + free and clear, renter = renter),
  with summed variances (PHS §6.4.1).
* non-private (the true tabulation, labelled as such): ``REGION_ID|REGION_TYPE|ITERATION_CODE|
  <T>_DATA_CELL|COUNT`` — basis cells *and* totals, non-zero counts only; the denominators PH1_denom
  and PH5_denom repeat the household/family count on cells 1–3, and PH8_num is the sum of the units'
  ``FINAL_POP`` (as the official non-private tabulation does).

PH2 and PH6 have no ``ITERATION_CODE`` column. ``REGION_TYPE`` is ``USA`` (``REGION_ID`` 1) or
``STATE`` (the two-digit FIPS code).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from engine.core.csv_cells import frame_to_csv
from engine.dp.distributions import discrete_gaussian_moe
from engine.phsafe.measure import MeasuredLevel
from engine.phsafe.tables import OUTPUT_SHELLS, OUTPUT_TABLES, PH8_NUM_FROM_PH7

NO_ITERATION_TABLES = ("PH2", "PH6")
KEY_COLUMNS = ["table", "level", "region_type", "region_id", "iteration_code", "cell"]


def data_cell_column(table: str) -> str:
    """``PH1_num`` → ``PH1_NUM_DATA_CELL``."""
    return f"{table.upper()}_DATA_CELL"


def official_columns(table: str, private: bool) -> list[str]:
    """Header of one official output file, in order."""
    cols = ["REGION_ID", "REGION_TYPE"]
    if table not in NO_ITERATION_TABLES:
        cols.append("ITERATION_CODE")
    cols.append(data_cell_column(table))
    if private:
        cols += ["NOISE_DISTRIBUTION", "VARIANCE"]
    cols.append("COUNT")
    return cols


def format_variance(value: float) -> str:
    """The VARIANCE text: plain decimal, no exponent, no trailing ``.0`` (schema ``\\d+(\\.\\d+)?``)."""
    return np.format_float_positional(float(value), trim="-")


def _flatten(level: MeasuredLevel) -> pd.DataFrame:
    frame = level.basis_frame()
    if level.spec is not None and level.noise is not None:
        s = level.spec
        frame["noise"] = level.noise[0].reshape(-1)
        frame["noisy"] = frame["true_truncated"] + frame["noise"]
        frame["variance"] = s.variance
        frame["noise_distribution"] = s.distribution
        frame["budget"] = s.budget
        frame["sensitivity"] = s.sensitivity
        frame["moe90"] = s.moe90
    return frame


def measurement_frame(levels: Iterable[MeasuredLevel]) -> pd.DataFrame:
    """Tidy basis cells of every measured level, plus derived PH5_num and PH8_num (private runs).

    PH8_num's owner cell sums two independent noises; its ``moe90`` is that of a discrete Gaussian
    with the summed variance (an approximation; the sum is not exactly discrete Gaussian).

    Columns: table, level, region_type, region_id, iteration_code, cell, true (untruncated truth),
    true_truncated (what PHSafe measured), and for private runs noise, noisy (trial 0), variance,
    noise_distribution, budget, sensitivity, moe90.
    """
    frames = [_flatten(level) for level in levels]
    if not frames:
        return pd.DataFrame(columns=[*KEY_COLUMNS, "true", "true_truncated"])
    frame = pd.concat(frames, ignore_index=True)
    frame["derived"] = False
    private = "noisy" in frame.columns
    extra: list[pd.DataFrame] = []
    ph4 = frame[frame["table"] == "PH4"]
    if not ph4.empty:
        extra.append(ph4.assign(table="PH5_num", derived=True))
    ph7 = frame[frame["table"] == "PH7"]
    if private and not ph7.empty:
        to_ph8 = {src: dst for dst, srcs in PH8_NUM_FROM_PH7.items() for src in srcs}
        sums = ["true", "true_truncated", "noise", "noisy", "variance"]
        firsts = ["noise_distribution", "budget", "sensitivity"]
        ph8 = (
            ph7.assign(cell=ph7["cell"].map(to_ph8))
            .groupby(["level", "region_type", "region_id", "iteration_code", "cell"], sort=False)
            .agg({**{c: "sum" for c in sums}, **{c: "first" for c in firsts}})
            .reset_index()
        )
        moes = {v: (discrete_gaussian_moe(v) if v > 0 else 0) for v in ph8["variance"].unique()}
        ph8["moe90"] = ph8["variance"].map(moes)
        extra.append(ph8.assign(table="PH8_num", derived=True))
    if extra:
        frame = pd.concat([frame, *extra], ignore_index=True)
    return frame


def private_official_frames(measurements: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The official private output files (as string frames) from :func:`measurement_frame`."""
    out: dict[str, pd.DataFrame] = {}
    for table in OUTPUT_TABLES:
        rows = measurements[measurements["table"] == table]
        if rows.empty:
            continue
        frame = pd.DataFrame(
            {
                "REGION_ID": rows["region_id"].astype(str),
                "REGION_TYPE": rows["region_type"].astype(str),
                "ITERATION_CODE": rows["iteration_code"].astype(str),
                data_cell_column(table): rows["cell"].astype(np.int64).astype(str),
                "NOISE_DISTRIBUTION": rows["noise_distribution"].astype(str),
                "VARIANCE": rows["variance"].map(format_variance),
                "COUNT": rows["noisy"].astype(np.int64).astype(str),
            }
        )
        out[table] = frame[official_columns(table, private=True)].reset_index(drop=True)
    return out


def _expand_totals(table: str, basis_rows: pd.DataFrame) -> pd.DataFrame:
    """Add each derived total of ``table``'s shell as the sum of its basis cells."""
    shell = OUTPUT_SHELLS[table]
    keys = ["region_type", "region_id", "iteration_code"]
    parts = [basis_rows]
    for total, members in shell.totals.items():
        sub = basis_rows[basis_rows["cell"].isin(members)]
        if sub.empty:
            continue
        parts.append(sub.groupby(keys, sort=False)["count"].sum().reset_index().assign(cell=total))
    return pd.concat(parts, ignore_index=True)


def nonprivate_official_frames(
    measurements: pd.DataFrame, ph8_final_pop: pd.DataFrame | None
) -> dict[str, pd.DataFrame]:
    """The official non-private output files: true counts with totals, non-zero rows only.

    ``ph8_final_pop`` holds Σ FINAL_POP by PH8_denom group and cell (columns region_type, region_id,
    iteration_code, cell, count) for the official PH8_num.
    """
    keys = ["region_type", "region_id", "iteration_code"]
    out: dict[str, pd.DataFrame] = {}
    for table in OUTPUT_TABLES:
        if table in ("PH1_denom", "PH5_denom"):
            src = measurements[measurements["table"] == table]
            base = src[keys].assign(count=src["true"].to_numpy())
            expanded = pd.concat([base.assign(cell=c) for c in (1, 2, 3)], ignore_index=True)
        elif table == "PH8_num":
            if ph8_final_pop is None or ph8_final_pop.empty:
                continue
            expanded = _expand_totals(table, ph8_final_pop)
        else:
            src = measurements[measurements["table"] == table]
            if src.empty:
                continue
            counts = src[[*keys, "cell"]].assign(count=src["true"].to_numpy())
            expanded = _expand_totals(table, counts)
        expanded = expanded[expanded["count"] != 0]
        frame = pd.DataFrame(
            {
                "REGION_ID": expanded["region_id"].astype(str),
                "REGION_TYPE": expanded["region_type"].astype(str),
                "ITERATION_CODE": expanded["iteration_code"].astype(str),
                data_cell_column(table): expanded["cell"].astype(np.int64).astype(str),
                "COUNT": expanded["count"].astype(np.int64).astype(str),
            }
        )
        out[table] = frame[official_columns(table, private=False)].reset_index(drop=True)
    return out


def write_official(
    frames: Mapping[str, pd.DataFrame], out_dir: str | Path, *, private: bool
) -> list[Path]:
    """Write each table to ``out_dir/<table>.csv`` (pipe-delimited); empty tables keep their header."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for table in OUTPUT_TABLES:
        frame = frames.get(table)
        if frame is None:
            if private:
                continue
            frame = pd.DataFrame(columns=official_columns(table, private=False))
        path = out / f"{table}.csv"
        frame_to_csv(frame, path, sep="|", lineterminator="\n")  # formula-like text made inert
        paths.append(path)
    return paths
