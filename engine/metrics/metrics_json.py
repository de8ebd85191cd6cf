"""The ``metrics.json`` file that ``phexplore run …`` writes beside an engine's outputs
(docs/science.md §5).

Schema (version 1; documented for users in ``docs/metrics.md``)::

    {
      "schema_version": 1,
      "engine": "topdown" | "phsafe" | …,            # required
      "rho": float | null,                            # required: total ρ of the run (null if pure DP)
      "seed": int | null,                             # required: RNG seed (null = OS randomness)
      "runtime_s": float,                             # required: engine wall-clock seconds
      "mae": {"<geolevel>": {"<query>": float}},      # required: mean absolute error PER CELL
                                                      # (over geounit × cell)
      "tda_mae": {"<geolevel>": {"<query>": float}},  # optional: TDA's absolute error (TDA §9,
                                                      # Tables 9–10): per geounit Σ over the
                                                      # query's cells of |error|, mean over geounits
      "error_universe": {"level", "universe", "label", "blocks", "blocks_in_data", …},
                                                      # optional: the blocks the block-level
                                                      # figures average over (absent: every block)
      "median_ae": {"<geolevel>": {"<query>": float}},# optional: median absolute error (PF)
      "n_cells": {"<geolevel>": {"<query>": int}},    # optional: cells behind each MAE
      "epl": {"<geolevel>": {"<query>": {"epl", "epl_low", "epl_high", "level",
              "n_residuals", "n_boot", "reason", "interval", "epl_percentile_low",
              "epl_percentile_high"}}},
                                                      # optional: PF's EPL with its bootstrap
                                                      # interval; "interval" names how it was made
                                                      # (absent in older files: plain percentile,
                                                      # which newer files keep as epl_percentile_low/high)
      "epl_settings": {"percentile", "multiplier", "bandwidth_factor", "pf_published", "label"},
                                                      # with "epl": the density range used
                                                      # (docs/science.md §5; default PF's published
                                                      # p = 95, m = 1.0)
      "blau_bias": {"<geolevel>": {"<quintile 1-5>": float}},   # optional: TDA Table 13, on the
                                                      # run's spine levels and the tabulation ones
      "blau_bias_geography": {"<geolevel>": "spine" | "tabulation" | "spine = tabulation"},
      … any further section a caller adds (e.g. "entity_mae", "conventional_mae", "osed",
        "epsilon", "data", "mechanism")
    }

Non-finite numbers are written as ``null`` by :func:`phexplore.cli._output.dumps_json`; an undefined
EPL therefore reads ``"epl": null`` with its ``"reason"``. :func:`build_metrics_json` builds the
dictionary from a tidy comparison table; :func:`validate_metrics_json` checks a loaded file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from engine.core.errors import ValidationError
from engine.metrics.blau import blau_quintile_bias
from engine.metrics.counted import CountedResiduals, counted_error_summary
from engine.metrics.epl import (
    INTERVAL_METHOD,
    bootstrap_generator,
    epl_details_counted,
    epl_table,
)
from engine.metrics.epl_settings import PF_FUNCTION_DEFAULT, EPLSettings, settings_of
from engine.metrics.error_tables import mae_table

SCHEMA_VERSION = 1
REQUIRED_KEYS: tuple[str, ...] = ("engine", "rho", "seed", "runtime_s", "mae")
RESERVED_KEYS: tuple[str, ...] = (
    "schema_version",
    *REQUIRED_KEYS,
    "tda_mae",
    "error_universe",
    "median_ae",
    "n_cells",
    "epl",
    "epl_settings",
    "blau_bias",
    "blau_bias_geography",
)


def nest(frame: pd.DataFrame, keys: Sequence[str], value: str) -> dict[str, Any]:
    """``{k1: {k2: … value}}`` from a table with one row per combination of ``keys``."""
    out: dict[str, Any] = {}
    for row in frame.itertuples(index=False):
        record = row._asdict()
        node = out
        for key in keys[:-1]:
            node = node.setdefault(str(record[key]), {})
        node[str(record[keys[-1]])] = _plain(record[value])
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating | float):
        return float(value)
    return value


def build_metrics_json(
    *,
    engine: str,
    tidy: pd.DataFrame | None,
    runtime_s: float,
    rho: float | None,
    seed: int | None,
    by: Sequence[str] = ("geolevel", "query"),
    median: bool = True,
    epl_boot: int | None = None,
    epl_rng: np.random.Generator | int | None = None,
    epl_settings: EPLSettings | None = None,
    blau: pd.DataFrame | None = None,
    blau_bias: pd.DataFrame | None = None,
    extra: Mapping[str, Any] | None = None,
    rho_spent: float | None = None,
    residuals: Mapping[tuple[str, ...], CountedResiduals] | None = None,
    error_universe: Mapping[str, Any] | None = None,
    tda_mae: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The metrics.json dictionary of one run.

    ``tidy`` is the (geolevel, geounit, query, cell, true, estimate) comparison table; ``by`` the
    two or more columns that key the nested ``mae`` section (PHSafe may pass e.g. ``("region",
    "table")``). ``epl_boot`` adds the ``epl`` section with that many bootstrap resamples (0 = no
    interval; ``None`` = no EPL section) drawn from ``epl_rng`` (a Generator or seed; default
    ``[seed, 1]``, a stream apart from the noise seed, as the app uses) with ``epl_settings`` (default
    PF's published p = 95, m = 1.0; recorded as the ``epl_settings`` section); ``blau`` (a :func:`engine.metrics.blau.blau_table`) adds
    ``blau_bias`` on the tidy table's levels, or ``blau_bias`` (a
    :func:`engine.metrics.blau.blau_bias_report`) gives it ready, with ``blau_bias_geography``; ``extra`` sections are merged last and may not overwrite the standard keys.
    ``rho_spent`` (TopDown) is the ρ of the noisy measurements, written beside ``rho``: less than
    ``rho`` when shares go to invariant queries (TDA §5.2).

    ``residuals`` (the sparse path: docs/metrics.md, "Counted residuals") replaces ``tidy`` for
    ``mae``, ``tda_mae``, ``median_ae``, ``n_cells`` and ``epl``: one
    :class:`~engine.metrics.counted.CountedResiduals` per ``by`` key (zeros counted, not stored),
    with the same numbers as the dense table they stand for (:func:`counted_metric_tables`).
    ``blau`` then needs a ``tidy`` holding the TOTAL rows.

    ``tda_mae`` (TDA's absolute error, summed over a query's cells per geounit) is written when the
    table has a ``geounit`` column or the residual sets know their geounits; ``error_universe``
    (:meth:`engine.metrics.universe.BlockUniverse.section`) records which blocks the block-level
    figures average over — the caller restricts ``tidy``/``residuals`` to it. A given ``tda_mae``
    section (TDA's figures on the tabulation geographies, :mod:`engine.metrics.tabulation`)
    replaces the one computed from the table.
    """
    if not isinstance(engine, str) or not engine:
        raise ValidationError(f"engine must be a non-empty name; got {engine!r}")
    if len(by) < 1:
        raise ValidationError("by needs at least one column to key the mae section")
    runtime = float(runtime_s)
    if not math.isfinite(runtime) or runtime < 0:
        raise ValidationError(f"runtime_s must be a non-negative number; got {runtime_s!r}")
    keys = list(by)
    counted = None
    if residuals is not None:
        errors, counted = counted_metric_tables(
            residuals, keys, epl_boot, epl_rng, seed, epl_settings
        )
    elif tidy is None:
        raise ValidationError("build_metrics_json needs a tidy table or counted residuals")
    else:
        errors = mae_table(tidy, by=keys)
    payload: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "engine": engine,
        "rho": None if rho is None else float(rho),
        **({} if rho_spent is None else {"rho_spent": float(rho_spent)}),
        "seed": None if seed is None else int(seed),
        "runtime_s": runtime,
        "mae": nest(errors, keys, "mae"),
        "n_cells": nest(errors, keys, "n_cells"),
    }
    if tda_mae is not None:
        payload["tda_mae"] = {str(k): dict(v) for k, v in tda_mae.items()}
    elif "tda_mae" in errors.columns and errors["tda_mae"].notna().any():
        payload["tda_mae"] = nest(errors, keys, "tda_mae")
    if error_universe is not None:
        payload["error_universe"] = dict(error_universe)
    if median:
        payload["median_ae"] = nest(errors, keys, "median_ae")
    if epl_boot is not None:
        if epl_rng is None:
            epl_rng = np.random.default_rng([0 if seed is None else int(seed), 1])
        chosen = settings_of(epl_settings)
        if counted is not None:
            table = counted
        else:
            assert tidy is not None
            table = epl_table(tidy, by=keys, n_boot=int(epl_boot), rng=epl_rng, settings=chosen)
        section: dict[str, Any] = {}
        for row in table.to_dict("records"):
            node = section
            for key in keys[:-1]:
                node = node.setdefault(str(row[key]), {})
            reason = row["reason"] if isinstance(row["reason"], str) else None
            node[str(row[keys[-1]])] = {
                "epl": _plain(row["epl"]),
                "epl_low": _plain(row["epl_low"]),
                "epl_high": _plain(row["epl_high"]),
                "level": 0.95,
                "n_residuals": _plain(row["n_residuals"]),
                "n_boot": int(epl_boot) if reason is None else 0,
                "reason": reason,
                "interval": INTERVAL_METHOD,
                # The resamples' own percentile interval (what older files hold as the interval).
                "epl_percentile_low": _plain(row["epl_percentile_low"]),
                "epl_percentile_high": _plain(row["epl_percentile_high"]),
            }
        payload["epl"] = section
        payload["epl_settings"] = chosen.as_dict()
    if blau_bias is not None:
        payload["blau_bias"] = nest(blau_bias, ["geolevel", "quintile"], "mean_signed_error")
        if "geography" in blau_bias.columns:
            payload["blau_bias_geography"] = {
                str(lv): str(g)
                for lv, g in blau_bias.drop_duplicates("geolevel")[
                    ["geolevel", "geography"]
                ].itertuples(index=False)
            }
    elif blau is not None:
        if tidy is None:
            raise ValidationError("blau needs a tidy table of the geounit totals (TOTAL rows)")
        bias = blau_quintile_bias(tidy, blau)
        payload["blau_bias"] = nest(bias, ["geolevel", "quintile"], "mean_signed_error")
    for key, value in (extra or {}).items():
        if key in RESERVED_KEYS:
            raise ValidationError(f"extra section {key!r} would overwrite a standard metrics key")
        payload[str(key)] = value
    return payload


def counted_metric_tables(
    residuals: Mapping[tuple[str, ...], CountedResiduals],
    by: Sequence[str],
    epl_boot: int | None,
    epl_rng: np.random.Generator | int | None,
    seed: int | None,
    epl_settings: EPLSettings | None,
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """``(errors, epl)`` tables of counted residual sets, as :func:`mae_table` and
    :func:`epl_table` give them on the dense table: keys in sorted order (the bootstrap draws
    from one generator in that order, as ``epl_table``'s sorted groupby does)."""
    keys = list(by)
    ordered = sorted(residuals, key=lambda k: tuple(str(v) for v in k))
    rows = []
    for key in ordered:
        if len(key) != len(keys):
            raise ValidationError(f"residual key {key!r} does not match the columns {keys}")
        rows.append({**dict(zip(keys, key, strict=True)), **counted_error_summary(residuals[key])})
    errors = pd.DataFrame(rows, columns=[*keys, "n_cells", "mae", "median_ae", "tda_mae"])
    if epl_boot is None:
        return errors, None
    if epl_rng is None:
        epl_rng = np.random.default_rng([0 if seed is None else int(seed), 1])

    generator = bootstrap_generator(epl_rng)
    chosen = settings_of(epl_settings)
    epl_rows = []
    for key in ordered:
        part = residuals[key]
        result = epl_details_counted(
            part.values, part.counts, n_boot=int(epl_boot), rng=generator, settings=chosen
        )
        epl_rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "epl": result.value,
                "epl_low": result.low,
                "epl_high": result.high,
                "epl_percentile_low": result.boot_low,
                "epl_percentile_high": result.boot_high,
                "n_residuals": result.n,
                "reason": result.reason,
            }
        )
    return errors, pd.DataFrame(epl_rows)


def _check_leaves(node: Any, path: str, kind: type | tuple[type, ...]) -> None:
    if isinstance(node, Mapping):
        if not node:
            raise ValidationError(f"metrics.json: {path} is empty")
        for key, child in node.items():
            _check_leaves(child, f"{path}.{key}", kind)
        return
    if node is not None and (isinstance(node, bool) or not isinstance(node, kind)):
        raise ValidationError(f"metrics.json: {path} must be a number or null; got {node!r}")


def validate_metrics_json(payload: Mapping[str, Any]) -> None:
    """Raise :class:`ValidationError` naming the first key that breaks the schema above."""
    if not isinstance(payload, Mapping):
        raise ValidationError("metrics.json must hold a JSON object")
    missing = [k for k in REQUIRED_KEYS if k not in payload]
    if missing:
        raise ValidationError(f"metrics.json lacks required key(s) {missing}")
    if not isinstance(payload["engine"], str) or not payload["engine"]:
        raise ValidationError("metrics.json: engine must be a non-empty string")
    for key in ("rho", "runtime_s"):
        value = payload[key]
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ValidationError(f"metrics.json: {key} must be a number or null; got {value!r}")
    seed = payload["seed"]
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValidationError(f"metrics.json: seed must be an integer or null; got {seed!r}")
    if not isinstance(payload["mae"], Mapping):
        raise ValidationError("metrics.json: mae must map geolevel → query → value")
    for key in ("mae", "tda_mae", "median_ae", "n_cells", "blau_bias"):
        if key in payload:
            _check_leaves(payload[key], key, (int, float))
    if "error_universe" in payload and not isinstance(payload["error_universe"], Mapping):
        raise ValidationError("metrics.json: error_universe must be an object")
    if "epl" in payload:
        _check_epl(payload["epl"], "epl")
    if "epl_settings" in payload:
        try:
            EPLSettings.from_dict(dict(payload["epl_settings"]))
        except (TypeError, ValueError, ValidationError) as exc:
            raise ValidationError(f"metrics.json: epl_settings is invalid: {exc}") from None


def epl_settings_of_metrics(payload: Mapping[str, Any]) -> EPLSettings | None:
    """The EPL settings a metrics.json was computed with.

    Files written before ``epl_settings`` existed used p = 99, m = 1.5 (the old default), so a
    file with an ``epl`` section but no settings reads as :data:`~engine.metrics.epl_settings.PF_FUNCTION_DEFAULT`;
    ``None`` when the file has no EPL at all.
    """

    if "epl_settings" in payload:
        return EPLSettings.from_dict(dict(payload["epl_settings"]))
    return PF_FUNCTION_DEFAULT if "epl" in payload else None


def _check_epl(node: Any, path: str) -> None:
    if not isinstance(node, Mapping):
        raise ValidationError(f"metrics.json: {path} must be an object")
    if "n_residuals" in node:
        for field in ("epl", "epl_low", "epl_high", "n_residuals"):
            if field not in node:
                raise ValidationError(f"metrics.json: {path} lacks {field!r}")
        if node["epl"] is None and not node.get("reason"):
            raise ValidationError(f"metrics.json: {path} has no EPL and no reason why")
        return
    for key, child in node.items():
        _check_epl(child, f"{path}.{key}")
