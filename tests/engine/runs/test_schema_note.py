"""RI's folded schema: the note and production's σ for comparison (docs/science.md §4: the RI
sample's folded schema)."""

from __future__ import annotations

import math

import pytest

from engine.dp.presets import load_topdown_preset
from engine.runs.schema_note import folded_raceeth_comparison, note_lines, schema_note_section
from engine.schema.ri_fold import CELLS_PER_GROUP, is_folded


def test_cells_per_group_cover_hispanic_by_cenrace() -> None:
    assert sum(CELLS_PER_GROUP.values()) == 126 == 2 * 63
    assert CELLS_PER_GROUP["two"] == 57 and CELLS_PER_GROUP["hisp"] == 63


def test_ri_sigma_is_one_production_cell_multi_race_is_much_larger() -> None:
    ri = load_topdown_preset("ri2010-production-like")["persons"]
    rows = {r["geolevel"]: r for r in folded_raceeth_comparison(ri)}
    assert set(rows) == {"State", "County", "Tract", "Block_Group", "Block"}
    tract = rows["Tract"]
    # At Tract, RI's RACEETH gets (almost) exactly production's HISPANIC×CENRACE share: σ ≈ 2.2 …
    assert tract["ri_sigma"] == pytest.approx(2.22, abs=0.01)
    assert tract["production_cell_sigma"] == pytest.approx(2.23, abs=0.01)
    # … but a multi-race group is 57 production cells: σ ≈ 2.2·√57 ≈ 16.8, 7.5× RI's.
    assert tract["production_sigma_two_or_more"] == pytest.approx(
        tract["production_cell_sigma"] * math.sqrt(57)
    )
    assert tract["production_sigma_two_or_more"] > 7 * tract["ri_sigma"]


def test_section_only_for_folded_schemas() -> None:
    ri = load_topdown_preset("ri2010-production-like")["persons"]
    assert is_folded("ri2010") and is_folded("pl94171") and not is_folded("redistricting2020")
    assert schema_note_section("redistricting2020", ri) is None
    section = schema_note_section("ri2010", ri)
    assert section is not None and "overstates production" in section["note"]
    text = "\n".join(note_lines(section))
    assert "Two or more races (57 cells)" in text and "Tract" in text
    pure = load_topdown_preset("ri2010-e2e-1940-like")["persons"]
    assert folded_raceeth_comparison(pure) == []


def test_folding_detailed_makes_votingage_and_hispanic_far_more_precise() -> None:
    """Production's VOTINGAGE cell sums 1,008 DETAILED cells, RI's 8: from all of a tract's
    noisy measurements RI's VOTINGAGE σ is about a third of production's at the same ρ."""
    ri = load_topdown_preset("ri2010-production-like")["persons"]
    rows = {r["geolevel"]: r for r in folded_raceeth_comparison(ri)}
    assert "ri_votingage_sigma" not in rows["State"]  # State TOTAL is held exact
    tract = rows["Tract"]
    assert tract["production_votingage_sigma"] > 2.5 * tract["ri_votingage_sigma"]
    assert tract["production_hispanic_combined_sigma"] > 3 * tract["ri_hispanic_sigma"]
    for level in ("County", "Block_Group", "Block"):
        assert rows[level]["production_votingage_sigma"] > rows[level]["ri_votingage_sigma"]
    section = schema_note_section("ri2010", ri)
    assert "VOTINGAGE and HISPANIC" in section["note"]
    assert "VOTINGAGE 18+ σ" in "\n".join(note_lines(section))


def test_the_reduced_least_squares_equals_the_full_one() -> None:
    """The σ of one cell from all of a tract's measurements, solved on 32 groups of cells, equals
    the direct solve over production's 2,016 cells."""
    import numpy as np

    from engine.runs.schema_note import measurement_sigma
    from engine.schema.attributes import REDISTRICTING_SCHEMA as schema
    from engine.topdown.queries import query_group

    production = load_topdown_preset("topdown-2020-production")["persons"]
    precision = np.zeros((schema.size, schema.size))
    for query in production.queries("Tract"):
        index = np.asarray(query_group(schema, query).cell_index)
        precision += (index[:, None] == index[None, :]) / production.sigma2("Tract", query)
    cells = np.unravel_index(np.arange(schema.size), schema.shape)
    target = (cells[schema.axis("VOTINGAGE")] == 1).astype(float)
    direct = float(np.sqrt(target @ np.linalg.solve(precision, target)))
    reduced = measurement_sigma(production, schema, "Tract", "VOTINGAGE", "18_plus")
    assert reduced == pytest.approx(direct, rel=1e-9)
