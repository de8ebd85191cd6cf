"""The views of the one schema declaration (engine.schema.attributes) say what the papers say.

Each view — the ``(attribute, levels)`` pairs of the marginal parser, the planner's cell counts,
the RI fold, the rounder's chains — is derived from the declaration; these tests hold the derived
values to the numbers printed in TDA §5.1 and Tables 4 and 7 (docs/science.md §4) and to each other.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine.core.errors import ValidationError
from engine.schema.attributes import (
    CENRACE,
    HHGQ,
    HHINSTLEVELS_RECODE,
    HISPANIC,
    PERSONS_SCHEMAS,
    PL94171_SCHEMA,
    RACEETH,
    RECODES,
    REDISTRICTING_SCHEMA,
    RI2010_SCHEMA,
    SCHEMAS,
    VOTINGAGE,
    Attribute,
    Schema,
)
from engine.schema.marginals import (
    ROUNDER_CHAINS,
    SCHEMA_ATTRIBUTES,
    answer_cells,
    attribute_factor,
    cell_index,
    default_rounder_chain,
    parse_marginal,
)
from engine.schema.query_cells import (
    ATTRIBUTE_SIZES,
    DETAILED_CELLS,
    allocation_schema,
    query_cells,
    query_parts,
    schema_mismatch,
)
from engine.schema.ri_fold import (
    CELLS_PER_GROUP,
    FOLDED_SCHEMAS,
    PRODUCTION_QUERY,
    is_folded,
    raceeth_of,
)
from engine.topdown.queries import SCHEMA_QUERIES, rounder_chain

TDA_2020_QUERY_CELLS = {
    "TOTAL": 1,
    "CENRACE": 63,
    "HISPANIC": 2,
    "VOTINGAGE": 2,
    "HHINSTLEVELS": 3,
    "HHGQ": 8,
    "HISPANIC*CENRACE": 126,
    "VOTINGAGE*CENRACE": 126,
    "VOTINGAGE*HISPANIC": 4,
    "VOTINGAGE*HISPANIC*CENRACE": 252,
    "DETAILED": 2016,
}
"""Cells of the 2020 persons queries, as printed in TDA Tables 4 and 7 (docs/science.md §4)."""


def test_declared_schemas_have_the_papers_sizes() -> None:
    assert REDISTRICTING_SCHEMA.shape == (8, 2, 2, 63) and REDISTRICTING_SCHEMA.size == 2016
    assert RI2010_SCHEMA.size == PL94171_SCHEMA.size == 16
    assert SCHEMAS["units2020"].size == 2  # TDA §5.1: occupancy status, 2 levels
    assert set(SCHEMAS) == {"ri2010", "pl94171", "redistricting2020", "units2020"}
    assert REDISTRICTING_SCHEMA.attribute_levels == tuple(
        (a.name, a.levels) for a in (HHGQ, VOTINGAGE, HISPANIC, CENRACE)
    )


def test_hhinstlevels_partitions_every_hhgq_level() -> None:
    members = [lv for _, levels in HHINSTLEVELS_RECODE.groups for lv in levels]
    assert sorted(members) == sorted(HHGQ.levels)  # each level in exactly one group
    assert HHINSTLEVELS_RECODE.labels == ("household", "institutional", "noninstitutional")
    parse = parse_marginal("HHINSTLEVELS", REDISTRICTING_SCHEMA.attribute_levels)
    assert parse.kept == ("HHGQ",)
    assert parse.recode("HHGQ") == ((0, 1, 1, 1, 1, 2, 2, 2), HHINSTLEVELS_RECODE.labels)
    assert HHINSTLEVELS_RECODE.group_of("not an HHGQ level") is None


def test_marginal_view_lists_each_persons_attribute_list_once_in_inference_order() -> None:
    assert list(SCHEMA_ATTRIBUTES) == ["ri2010", "redistricting2020"]
    assert SCHEMA_ATTRIBUTES["ri2010"] == RI2010_SCHEMA.attribute_levels
    assert SCHEMA_ATTRIBUTES["redistricting2020"] == REDISTRICTING_SCHEMA.attribute_levels
    for schema in PERSONS_SCHEMAS:
        assert schema.attribute_levels in SCHEMA_ATTRIBUTES.values()


def test_query_cells_match_tda_tables_and_the_parse() -> None:
    for query, cells in TDA_2020_QUERY_CELLS.items():
        assert query_cells(query, "redistricting2020") == cells
        parse = parse_marginal(query, REDISTRICTING_SCHEMA.attribute_levels)
        assert answer_cells(parse, REDISTRICTING_SCHEMA.attribute_levels) == cells
    for name, queries in SCHEMA_QUERIES.items():
        attrs = SCHEMAS[name].attribute_levels
        for query in queries:
            assert query_cells(query, name) == answer_cells(parse_marginal(query, attrs), attrs)
    assert {name: schema.size for name, schema in SCHEMAS.items()} == DETAILED_CELLS
    assert ATTRIBUTE_SIZES == {
        "HHGQ": 8,
        "HHINSTLEVELS": 3,
        "VOTINGAGE": 2,
        "HISPANIC": 2,
        "CENRACE": 63,
        "RACEETH": 8,
        "OCCUPANCY": 2,
    }
    assert query_cells("OCCUPANCY") == 2  # the units allocation's one query
    assert query_cells("NOT_AN_ATTRIBUTE") is None


def test_allocation_schema_inference_follows_the_declared_attributes() -> None:
    assert query_parts(RI2010_SCHEMA) == {"VOTINGAGE", "RACEETH"}
    assert query_parts(REDISTRICTING_SCHEMA) == {
        "HHGQ",
        "HHINSTLEVELS",
        "VOTINGAGE",
        "HISPANIC",
        "CENRACE",
    }
    assert allocation_schema(["TOTAL", "VOTINGAGE", "RACEETH", "DETAILED"]) == "ri2010"
    assert allocation_schema(["TOTAL", "VOTINGAGE", "DETAILED"]) == "redistricting2020"
    assert allocation_schema(["RACEETH", "HHGQ"]) == "redistricting2020"
    assert allocation_schema(["RACEETH"], declared="pl94171") == "pl94171"
    assert schema_mismatch(["RACEETH"], None, "ri2010") is None
    message = schema_mismatch(["HHINSTLEVELS"], None, "ri2010")
    assert message is not None and "redistricting2020" in message and "ri2010 data" in message


def test_cell_index_is_the_kronecker_matrix_of_the_query() -> None:
    """Against the dense Kronecker product of the per-attribute factors (SPN §2.3)."""
    small = (
        ("HHGQ", HHGQ.levels),
        ("VOTINGAGE", VOTINGAGE.levels),
        ("CENRACE", ("01", "02", "03")),
    )
    for query in ("TOTAL", "HHINSTLEVELS", "HHGQ", "VOTINGAGE*CENRACE", "CENRACE", "DETAILED"):
        parse = parse_marginal(query, small)
        matrix = np.ones((1, 1))
        for attr, levels in small:
            matrix = np.kron(matrix, attribute_factor(parse, attr, len(levels)))
        assert matrix.shape[0] == answer_cells(parse, small)
        assert np.array_equal(matrix.sum(axis=0), np.ones(matrix.shape[1]))
        np.testing.assert_array_equal(cell_index(parse, small), matrix.argmax(axis=0))


def test_parse_errors_name_the_schema_and_the_recodes() -> None:
    attrs = RI2010_SCHEMA.attribute_levels
    with pytest.raises(ValidationError, match="needs attribute HHGQ, which schema 'ri2010' lacks"):
        parse_marginal("HHINSTLEVELS", attrs, "ri2010")
    with pytest.raises(ValidationError, match=r"\(or TOTAL, DETAILED, HHINSTLEVELS\)"):
        parse_marginal("CENRACE", attrs)
    odd = (("HHGQ", ("household", "9")),)
    with pytest.raises(ValidationError, match=r"HHINSTLEVELS cannot group HHGQ level\(s\) \['9'\]"):
        parse_marginal("HHINSTLEVELS", odd)
    with pytest.raises(ValidationError, match="twice"):
        parse_marginal("VOTINGAGE*VOTINGAGE", attrs)
    assert set(RECODES) == {"HHINSTLEVELS"}


def test_ri_fold_is_the_declared_attributes_folded() -> None:
    assert FOLDED_SCHEMAS == ("ri2010", "pl94171")
    assert is_folded("pl94171") and not is_folded("redistricting2020") and not is_folded(None)
    assert tuple(CELLS_PER_GROUP) == RACEETH.levels
    assert CELLS_PER_GROUP["hisp"] == 63 and CELLS_PER_GROUP["two"] == 57
    assert all(CELLS_PER_GROUP[g] == 1 for g in ("white", "black", "aian", "asian", "nhpi"))
    assert sum(CELLS_PER_GROUP.values()) == query_cells(PRODUCTION_QUERY) == 126
    assert raceeth_of("hispanic", "07") == "hisp"
    assert raceeth_of("not_hispanic", "01") == "white"
    assert raceeth_of("not_hispanic", "63") == "two"


def test_rounder_chains_agree_between_prediction_and_engine() -> None:
    for schema in PERSONS_SCHEMAS:
        chain = default_rounder_chain(schema.attribute_levels)
        assert tuple(g.name for g in rounder_chain(schema)) == chain
    assert default_rounder_chain(PL94171_SCHEMA.attribute_levels) == ROUNDER_CHAINS["ri2010"]
    toy = Schema("toy", (Attribute("A", ("x", "y")), Attribute("B", ("u", "v", "w"))))
    assert default_rounder_chain(toy.attribute_levels) == ("TOTAL", "A", "DETAILED")
    assert tuple(g.name for g in rounder_chain(toy)) == ("TOTAL", "A", "DETAILED")
