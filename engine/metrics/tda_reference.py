"""TDA's published accuracy at the production settings beside a run's (TDA §9, Tables 9–13).

Reads ``data/reference/tda_2022_production/`` (public domain; README there): TDA's absolute error
by geographic level and query (Tables 9–10), the TOTAL error by county and block size class
(Tables 11–12) and the Blau-quintile bias (Table 13) of TopDown at the 2020 production settings on
the 2010 Census Edited File. :func:`tda_comparison` puts a run's ``tda_mae`` beside Tables 9–10,
:func:`size_class_comparison` its ``tda_size_classes`` beside Tables 11–12, and
:func:`comparison_caption` says what differs between the run and TDA's (population, spine,
universe, allocation) — drawn only for runs made with production's persons allocation
(:func:`comparability`), as Petti & Flaxman's EPLs are drawn only beside EPLs computed the same way.

Runs written before ``tda_mae`` existed still compare: :func:`tda_mae_of_metrics` derives TDA's
figure from the per-cell MAE (× cells per geounit) and says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

import pandas as pd

from engine.core.errors import ValidationError
from engine.dp.budget import TopDownAllocation
from engine.dp.presets import load_topdown_preset
from engine.metrics.universe import universe_of_metrics

RUNS: tuple[str, ...] = ("baseline1", "baseline2", "inc_rho", "l2_onepass")
"""TDA §9's four runs (README of the reference folder)."""
REFERENCE_RUN = "baseline1"
"""The published production run (the June 8, 2021 PPMF)."""
PRODUCTION_PRESET = "topdown-2020-production"
COMPARED_QUERIES: tuple[str, ...] = (
    "TOTAL",
    "VOTINGAGE",
    "HISPANIC",
    "CENRACE",
    "HISPANIC*CENRACE",
    "DETAILED",
)
LEVEL_ORDER: tuple[str, ...] = ("US", "State", "County", "Tract", "Block_Group", "Block")
SOURCE = (
    "Abowd et al. (2022), The 2020 Census Disclosure Avoidance System TopDown Algorithm, Harvard "
    "Data Science Review, §9, Tables 9–13: TopDown at the production settings (persons ρ = 2.56) "
    "on the 2010 Census Edited File, run baseline1 (the published June 8, 2021 PPMF)"
)
TDA_SPINE = (
    "production's: AIAN branches in 36 states and optimized (custom) block groups around places, "
    "minor civil divisions, AIAN areas and GQ types; tabulation block groups off the spine"
)
TDA_POPULATION = (
    "the 2010 CEF of the whole US (308.7 M persons, 3,143 counties, 6,398,202 blocks with housing "
    "units or group quarters)"
)
TDA_UNIVERSE = "blocks with housing units or group quarters"


def reference_dir() -> Path:
    """``data/reference/tda_2022_production`` of the repository."""
    return Path(__file__).resolve().parents[2] / "data" / "reference" / "tda_2022_production"


def _read(name: str, directory: Path | None) -> pd.DataFrame:
    path = (reference_dir() if directory is None else Path(directory)) / name
    if not path.is_file():
        raise ValidationError(
            f"TDA reference file {path} is missing; it ships with the repository under "
            "data/reference/tda_2022_production/"
        )
    return pd.read_csv(path, dtype={"size_class": str, "quintile": str})


def load_tda_absolute_error(directory: Path | None = None) -> pd.DataFrame:
    """TDA Tables 9–10: table, geolevel, query and one column per run (:data:`RUNS`)."""
    return _read("table_09_10_absolute_error.csv", directory)


def load_tda_size_classes(directory: Path | None = None) -> pd.DataFrame:
    """TDA Tables 11–12: table, geolevel, size_class, count, metric (``mae``, ``q0.005`` …) and
    one column per run."""
    return _read("table_11_12_size_classes.csv", directory)


def load_tda_blau_bias(directory: Path | None = None) -> pd.DataFrame:
    """TDA Table 13: table, geolevel, quintile (``"1 and 2"`` for the merged block quintiles) and
    one column per run."""
    return _read("table_13_blau_bias.csv", directory)


# ------------------------------------------------------------------ a run's figures
def tda_mae_of_metrics(payload: Mapping[str, Any]) -> tuple[dict[str, dict[str, float]], str]:
    """``(tda_mae, note)`` of a metrics.json: its ``tda_mae``, or — in files written before it
    existed — the per-cell ``mae`` × cells per geounit (``n_cells`` / ``n_geounits``), which is the
    same number on the run's spine levels; ``({}, reason)`` when neither is possible."""
    section = payload.get("tda_mae")
    if isinstance(section, Mapping) and section:
        note = "TDA's definition, recorded by the run"
        if payload.get("tda_mae_geography"):
            built = ", ".join(sorted(payload["tda_mae_geography"]))
            note += f" ({built}: tabulation geounits summed from the estimated blocks)"
        return {str(k): dict(v) for k, v in section.items() if isinstance(v, Mapping)}, note
    mae, cells, units = payload.get("mae"), payload.get("n_cells"), payload.get("n_geounits")
    if not (isinstance(mae, Mapping) and isinstance(cells, Mapping) and isinstance(units, Mapping)):
        return {}, (
            "this metrics.json predates tda_mae and records no n_cells / n_geounits to derive it "
            "from the per-cell MAE"
        )
    out: dict[str, dict[str, float]] = {}
    for level, per_query in mae.items():
        n_units = units.get(level)
        if not isinstance(per_query, Mapping) or not n_units:
            continue
        for query, value in per_query.items():
            n = (cells.get(level) or {}).get(query)
            if isinstance(value, int | float) and isinstance(n, int | float):
                out.setdefault(str(level), {})[str(query)] = float(value) * float(n) / n_units
    return out, (
        "derived from the per-cell MAE × cells per geounit (this metrics.json predates tda_mae); "
        "on the run's spine levels, every block"
    )


def comparability(payload: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether a run's figures compare with TDA Tables 9–12: production's persons allocation
    (its ρ and shares) on the 2,016-cell schema. ``(False, why)`` otherwise."""
    if payload.get("engine") != "topdown":
        return False, "TDA's tables are for TopDown runs"
    if payload.get("mechanism", "zcdp") != "zcdp":
        return False, "TDA's tables are for the zCDP production run, this run is pure DP"
    production = load_topdown_preset(PRODUCTION_PRESET)["persons"]
    config = (payload.get("run") or {}).get("config")
    name = str(payload.get("allocation") or "")
    if isinstance(config, Mapping):
        try:
            ran = TopDownAllocation.from_dict(dict(config), name=name or "run")
        except (ValidationError, TypeError, ValueError):
            return False, "this run's allocation could not be read from its metrics.json"
        same = (
            ran.level_shares == production.level_shares
            and ran.query_shares == production.query_shares
        )
        if not same:
            return False, (
                f"this run used {name or 'another allocation'}, not production's shares "
                f"({PRODUCTION_PRESET}); TDA's tables are for production's"
            )
        if not math.isclose(float(ran.rho), float(production.rho), rel_tol=1e-9):
            return False, (
                f"this run's persons ρ is {float(ran.rho):.4g}; TDA's tables are for "
                f"production's ρ = {float(production.rho):.4g} (reported 2.56)"
            )
        return True, "production's persons allocation"
    rho = payload.get("rho")
    if name.startswith(PRODUCTION_PRESET) and isinstance(rho, int | float):
        if math.isclose(float(rho), float(production.rho), rel_tol=1e-9):
            return True, "production's persons allocation (by name; no run description recorded)"
        return False, (
            f"this run's persons ρ is {float(rho):.4g}; TDA's tables are for production's "
            f"ρ = {float(Fraction(production.rho)):.4g}"
        )
    return False, f"this run used {name or 'an unnamed allocation'}, not {PRODUCTION_PRESET}"


def tda_comparison(payload: Mapping[str, Any], run: str = REFERENCE_RUN) -> pd.DataFrame:
    """A run's TDA figure beside TDA Tables 9–10, one row per (geolevel, query) both have:
    geolevel, query, this_run, tda (the published ``run``), ratio_to_tda (this_run / tda; NaN
    where TDA prints 0). A one-state run's ``US`` row (the state itself) is left out."""
    ours, _ = tda_mae_of_metrics(payload)
    reference = load_tda_absolute_error()
    one_state = (payload.get("n_geounits") or {}).get("State", 1) == 1
    rows = []
    for record in reference.itertuples(index=False):
        level, query = str(record.geolevel), str(record.query)
        if level == "US" and one_state:
            continue
        value = (ours.get(level) or {}).get(query)
        if not isinstance(value, int | float):
            continue
        tda = float(getattr(record, run))
        rows.append(
            {
                "geolevel": level,
                "query": query,
                "this_run": float(value),
                "tda": tda,
                "ratio_to_tda": float(value) / tda if tda else float("nan"),
            }
        )
    frame = pd.DataFrame(rows, columns=["geolevel", "query", "this_run", "tda", "ratio_to_tda"])
    frame["_l"] = frame["geolevel"].map({lv: i for i, lv in enumerate(LEVEL_ORDER)})
    frame["_q"] = frame["query"].map({q: i for i, q in enumerate(COMPARED_QUERIES)})
    return frame.sort_values(["_q", "_l"]).drop(columns=["_l", "_q"]).reset_index(drop=True)


def size_class_comparison(payload: Mapping[str, Any], run: str = REFERENCE_RUN) -> pd.DataFrame:
    """A run's ``tda_size_classes`` beside TDA Tables 11–12: geolevel, size_class, n (this run's
    geounits), tda_count, this_run_mae, tda_mae, this_run_mean_error."""
    section = payload.get("tda_size_classes") or {}
    reference = load_tda_size_classes()
    reference = reference[reference["metric"] == "mae"]
    rows = []
    for record in reference.itertuples(index=False):
        level, label = str(record.geolevel), str(record.size_class)
        entry = (section.get(level) or {}).get(label)
        if not isinstance(entry, Mapping):
            continue
        rows.append(
            {
                "geolevel": level,
                "size_class": label,
                "n": int(entry.get("n", 0)),
                "tda_count": int(record.count),
                "this_run_mae": float(entry.get("mae", float("nan"))),
                "tda_mae": float(getattr(record, run)),
                "this_run_mean_error": float(entry.get("mean_error", float("nan"))),
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "geolevel",
            "size_class",
            "n",
            "tda_count",
            "this_run_mae",
            "tda_mae",
            "this_run_mean_error",
        ],
    )


def _spine_text(payload: Mapping[str, Any]) -> str:
    used = payload.get("spine_used")
    if isinstance(used, Mapping) and used.get("label"):
        return str(used["label"])
    spine = payload.get("spine")
    if isinstance(spine, Mapping) and spine.get("kind"):
        return f"{spine['kind']} spine"
    if isinstance(spine, str):
        return f"{spine} spine"
    return "conventional spine (not recorded: the default before the spine was recorded)"


def comparison_caption(payload: Mapping[str, Any]) -> str:
    """What differs between a run and TDA Tables 9–12 (population, spine, universe, allocation)."""
    universe = universe_of_metrics(payload)
    data = payload.get("data") or ((payload.get("run") or {}).get("data") or {}).get("source")
    counties = (payload.get("n_geounits") or {}).get("County")
    blocks = (payload.get("n_geounits") or {}).get("Block")
    size = ""
    if counties or blocks:
        size = f" ({counties or '?'} counties, {blocks or '?'} blocks)"
    ok, why = comparability(payload)
    parts = [
        f"TDA: {SOURCE}. What differs — population: this run {data or 'unnamed data'}{size}; "
        f"TDA {TDA_POPULATION}",
        f"spine: this run {_spine_text(payload)}; TDA {TDA_SPINE}",
        f"block universe: this run {universe.get('label')}; TDA {TDA_UNIVERSE}",
        f"allocation: {'the same' if ok else why}",
        "TDA's County and State rows average 3,143 counties and 51 states; a one-state run's "
        "average a handful of geounits and scatter from seed to seed",
    ]
    return "; ".join(parts) + "."
