"""The folded-schema note of an RI run: RI's σ per RACEETH group beside production's (TDA App. B).

:func:`folded_raceeth_comparison` puts numbers on :data:`engine.schema.ri_fold.NOTE` per geolevel:
RI's RACEETH σ per group next to production's HISPANIC × CENRACE σ per cell and the σ of a group
summed from its cells of that query (σ·√k; the other production queries, e.g. CENRACE, add
information the sum ignores, so this is the noisy-measurement σ of that one query), both at the
run's total ρ with the shares of the ``topdown-2020-production`` preset. Pure functions of
allocations: the CLI, the app and the report call the same code.
"""

from __future__ import annotations

import math
from typing import Any

from engine.dp.budget import TopDownAllocation
from engine.dp.presets import load_topdown_preset
from engine.schema.ri_fold import CELLS_PER_GROUP, NOTE, PRODUCTION_QUERY, is_folded

PRODUCTION_PRESET = "topdown-2020-production"


def folded_raceeth_comparison(
    allocation: TopDownAllocation, production: TopDownAllocation | None = None
) -> list[dict[str, Any]]:
    """Per geolevel measuring RACEETH: RI's σ per group and production's σ at the same total ρ.

    Rows: geolevel, ri_sigma (RACEETH, per group), production_cell_sigma (HISPANIC × CENRACE, per
    cell), production_sigma_two_or_more (57 cells summed), production_sigma_hispanic (63 cells
    summed). Empty for pure-DP allocations (production is zCDP) or when nothing compares.
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
        rows.append(
            {
                "geolevel": level,
                "ri_sigma": math.sqrt(allocation.sigma2(level, "RACEETH")),
                "production_cell_sigma": cell,
                "production_sigma_two_or_more": cell * math.sqrt(CELLS_PER_GROUP["two"]),
                "production_sigma_hispanic": cell * math.sqrt(CELLS_PER_GROUP["hisp"]),
            }
        )
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
    return lines
