"""The folded-schema note of an RI run: RI's σ beside production's (TDA App. B; TDA §5.1, Tables 6–7).

:func:`folded_raceeth_comparison` puts numbers on :data:`engine.schema.ri_fold.NOTE` per geolevel,
both allocations at the run's total ρ (production with the shares of ``topdown-2020-production``):

* race–ethnicity: RI's RACEETH σ per group next to production's HISPANIC × CENRACE σ per cell and
  the σ of a group summed from its cells of that query (σ·√k; the other production queries, e.g.
  CENRACE, add information the sum ignores, so this is the noisy-measurement σ of that one query);
* VOTINGAGE and HISPANIC: the σ of one cell from **all** of one geounit's noisy measurements
  combined by generalised least squares (:func:`measurement_sigma`: the variance
  tᵀ(Σ_q ρ_q A_q A_qᵀ)⁻¹t of the cell's indicator t over the histogram, A_q a query's answer
  matrix) — RI's folded DETAILED (16 cells) measures each VOTINGAGE cell as a sum of 8 cells where
  production's sums 1,008, so the folded schema is far more precise there (Tract VOTINGAGE at
  ρ = 2.56: σ ≈ 8 on RI, ≈ 23 in production). Before post-processing; one geounit's own
  measurements, not its parent's.

Pure functions of allocations: the CLI, the app and the report call the same code.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
import scipy.linalg

from engine.dp.budget import TopDownAllocation
from engine.dp.presets import load_topdown_preset
from engine.schema.attributes import REDISTRICTING_SCHEMA, RI2010_SCHEMA, Schema
from engine.schema.ri_fold import CELLS_PER_GROUP, NOTE, PRODUCTION_QUERY, is_folded
from engine.topdown.queries import query_group

PRODUCTION_PRESET = "topdown-2020-production"
INVARIANT_LEVELS: tuple[str, ...] = ("US", "State")
"""Levels whose TOTAL is held exact (TDA §5.2): left out of the combined-σ comparison."""
TARGETS: dict[str, dict[str, tuple[str, str]]] = {
    "votingage": {
        "ri2010": ("VOTINGAGE", "18_plus"),
        "redistricting2020": ("VOTINGAGE", "18_plus"),
    },
    "hispanic": {"ri2010": ("RACEETH", "hisp"), "redistricting2020": ("HISPANIC", "hispanic")},
}
"""The cell whose σ is compared, per schema: VOTINGAGE 18+ and Hispanic (any race)."""


def measurement_sigma(
    allocation: TopDownAllocation, schema: Schema, level: str, attribute: str, value: str
) -> float:
    """σ of the count of ``attribute`` = ``value`` in one geounit of ``level``, from all the
    level's noisy measurements combined by generalised least squares (module docstring)."""
    return _sigmas(allocation, schema, level, ((attribute, value),))[0]


def _sigmas(
    allocation: TopDownAllocation,
    schema: Schema,
    level: str,
    targets: tuple[tuple[str, str], ...],
) -> list[float]:
    """σ of each target cell by generalised least squares over the level's queries.

    The precision matrix P = Σ_q A_q A_qᵀ / σ_q² is invariant under any relabelling of the levels
    of an attribute that no query recodes and no target names (CENRACE here: a query keeps it level
    by level or sums it out), so P⁻¹t is constant over such attributes and the solve shrinks to the
    other attributes' cells (32 instead of 2,016 on the production schema): with B the cells ×
    groups indicator, BᵀPB y = BᵀB s and tᵀP⁻¹t = sᵀBᵀB y for t = B s; BᵀA_qA_qᵀB = N_q N_qᵀ with
    N_q the groups × answer cells counts."""
    groups_ = [query_group(schema, q) for q in allocation.queries(level)]
    recoded = {name for g in groups_ for name, _, _ in g.recodes}
    named = {attribute for attribute, _ in targets}
    kept = [i for i, a in enumerate(schema.attributes) if a.name in recoded | named]
    index = np.unravel_index(np.arange(schema.size), schema.shape)
    if kept:
        group = np.ravel_multi_index(
            tuple(index[i] for i in kept), tuple(schema.shape[i] for i in kept)
        )
        n_groups = int(np.prod([schema.shape[i] for i in kept]))
    else:
        group, n_groups = np.zeros(schema.size, dtype=np.int64), 1
    size = schema.size // n_groups  # cells per group (every group has the same number)
    precision = np.zeros((n_groups, n_groups))
    for query, g in zip(allocation.queries(level), groups_, strict=True):
        counts = np.zeros((n_groups, g.size))
        np.add.at(counts, (group, np.asarray(g.cell_index)), 1.0)
        precision += (counts @ counts.T) / allocation.sigma2(level, query)
    factor = scipy.linalg.cho_factor(precision)
    out = []
    for attribute, value in targets:
        axis = schema.axis(attribute)
        cell = index[axis] == schema.attributes[axis].levels.index(value)
        s_ = np.zeros(n_groups)
        s_[np.unique(group[cell])] = 1.0
        y = scipy.linalg.cho_solve(factor, size * s_)
        out.append(float(np.sqrt(size * (s_ @ y))))
    return out


@lru_cache(maxsize=8)
def _production_sigmas(rho: Any) -> dict[str, tuple[float, float]]:
    """Production's (VOTINGAGE, HISPANIC) combined σ per level below the state at ρ = ``rho``."""
    production = load_topdown_preset(PRODUCTION_PRESET)["persons"].with_rho(rho)
    targets = (
        TARGETS["votingage"]["redistricting2020"],
        TARGETS["hispanic"]["redistricting2020"],
    )
    return {
        level: tuple(_sigmas(production, REDISTRICTING_SCHEMA, level, targets))  # type: ignore[misc]
        for level in production.geolevels
        if level not in INVARIANT_LEVELS
    }


def folded_raceeth_comparison(
    allocation: TopDownAllocation, production: TopDownAllocation | None = None
) -> list[dict[str, Any]]:
    """Per geolevel measuring RACEETH: RI's σ per group and production's σ at the same total ρ.

    Rows: geolevel, ri_sigma (RACEETH, per group), production_cell_sigma (HISPANIC × CENRACE, per
    cell), production_sigma_two_or_more (57 cells summed), production_sigma_hispanic (63 cells
    summed) and, below the state, ri_votingage_sigma / production_votingage_sigma and
    ri_hispanic_sigma / production_hispanic_combined_sigma (one cell from all of a geounit's
    measurements, :func:`measurement_sigma`). Empty for pure-DP allocations (production is zCDP)
    or when nothing compares.
    """
    if allocation.mechanism != "zcdp":
        return []
    if production is None:
        production = load_topdown_preset(PRODUCTION_PRESET)["persons"]
    prod = production.with_rho(allocation.rho)
    rows = []
    for level in allocation.geolevels:
        if "RACEETH" not in allocation.queries(level) or level not in prod.geolevels:
            continue
        if PRODUCTION_QUERY not in prod.queries(level):
            continue
        cell = math.sqrt(prod.sigma2(level, PRODUCTION_QUERY))
        row: dict[str, Any] = {
            "geolevel": level,
            "ri_sigma": math.sqrt(allocation.sigma2(level, "RACEETH")),
            "production_cell_sigma": cell,
            "production_sigma_two_or_more": cell * math.sqrt(CELLS_PER_GROUP["two"]),
            "production_sigma_hispanic": cell * math.sqrt(CELLS_PER_GROUP["hisp"]),
        }
        combined = _production_sigmas(allocation.rho).get(level)
        if combined is not None:
            ri_votingage, ri_hispanic = _sigmas(
                allocation,
                RI2010_SCHEMA,
                level,
                (TARGETS["votingage"]["ri2010"], TARGETS["hispanic"]["ri2010"]),
            )
            row.update(
                ri_votingage_sigma=ri_votingage,
                production_votingage_sigma=combined[0],
                ri_hispanic_sigma=ri_hispanic,
                production_hispanic_combined_sigma=combined[1],
            )
        rows.append(row)
    return rows


def schema_note_section(schema: str | None, allocation: TopDownAllocation) -> dict[str, Any] | None:
    """The ``schema_note`` section of metrics.json for a run on a folded schema (else None)."""
    if not is_folded(schema):
        return None
    return {
        "schema": schema,
        "folded": "HISPANIC*CENRACE (126 cells) -> RACEETH (8 groups)",
        "note": NOTE,
        "production_preset": PRODUCTION_PRESET,
        "rho": float(allocation.rho),
        "sigma_comparison": folded_raceeth_comparison(allocation),
    }


def note_lines(section: dict[str, Any] | None) -> list[str]:
    """The note as printed text: the sentence and one line per geolevel of σ."""
    if not section:
        return []
    lines = [f"  note: {section['note']}"]
    rows = section.get("sigma_comparison") or []
    if rows:
        lines.append(
            f"  σ at ρ = {section['rho']:g} (production shares of {section['production_preset']}):"
        )
        for r in rows:
            lines.append(
                f"    {r['geolevel']}: RI RACEETH σ {r['ri_sigma']:.1f} per group; production "
                f"HISPANIC×CENRACE σ {r['production_cell_sigma']:.1f} per cell → Two or more races "
                f"(57 cells) σ {r['production_sigma_two_or_more']:.1f}, Hispanic (63 cells) σ "
                f"{r['production_sigma_hispanic']:.1f}"
            )
        combined = [r for r in rows if "ri_votingage_sigma" in r]
        if combined:
            lines.append(
                "  σ of one cell from all of a geounit's noisy measurements (least squares, "
                "before post-processing):"
            )
        for r in combined:
            lines.append(
                f"    {r['geolevel']}: VOTINGAGE 18+ σ {r['ri_votingage_sigma']:.1f} on RI vs "
                f"{r['production_votingage_sigma']:.1f} in production; Hispanic σ "
                f"{r['ri_hispanic_sigma']:.1f} on RI vs "
                f"{r['production_hispanic_combined_sigma']:.1f} in production"
            )
    return lines
