"""Query groups are Kronecker marginals answered by reshaping, and partitions of the cells."""

from __future__ import annotations

import numpy as np
import pytest

from engine.core.errors import ValidationError
from engine.schema.attributes import REDISTRICTING_SCHEMA, RI2010_SCHEMA
from engine.topdown.queries import (
    QueryGroup,
    query_group,
    query_groups,
    rounder_chain,
)


def kronecker_matrix(group: QueryGroup) -> np.ndarray:
    """The dense Kronecker product the group stands for (SPN §2.3) — test oracle only."""
    out = np.ones((1, 1))
    for attr in group.schema.attributes:
        if attr.name not in group.kept:
            factor = np.ones((1, attr.size))
        elif group.recodes and group.recodes[0][0] == attr.name:
            groups = np.asarray(group.recodes[0][1])
            factor = (np.arange(len(group.recodes[0][2]))[:, None] == groups[None, :]).astype(float)
        else:
            factor = np.eye(attr.size)
        out = np.kron(out, factor)
    return out


@pytest.mark.parametrize("schema", [RI2010_SCHEMA, REDISTRICTING_SCHEMA], ids=lambda s: s.name)
def test_preset_groups_are_partitions_matching_the_kronecker_matrix(schema):
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 5, size=(3, schema.size))
    for group in query_groups(schema):
        index = group.cell_index
        assert np.all(np.bincount(index, minlength=group.size) >= 1)
        matrix = kronecker_matrix(group)
        assert np.array_equal(matrix.sum(axis=0), np.ones(schema.size))  # partition
        assert np.array_equal(group.answer(counts), counts @ matrix.T)


def test_ri_answers_and_labels():
    total, votingage, raceeth, detailed = query_groups(RI2010_SCHEMA)
    counts = np.arange(16).reshape(1, 16)
    assert total.answer(counts).tolist() == [[120]]
    assert votingage.answer(counts).tolist() == [[28, 92]]
    assert raceeth.answer(counts)[0, 0] == 0 + 8
    assert detailed.labels[9] == "18_plus|white"
    assert votingage.labels == ("under_18", "18_plus")


def test_hhinstlevels_groups_households_institutional_noninstitutional():
    group = query_group(REDISTRICTING_SCHEMA, "HHINSTLEVELS")
    counts = np.zeros((1, REDISTRICTING_SCHEMA.size), dtype=np.int64)
    cube = counts.reshape(REDISTRICTING_SCHEMA.shape)
    cube[0, 0, 0, 0] = 7  # household
    cube[3, 1, 0, 5] = 2  # GQ type 3 (institutional)
    cube[6, 1, 1, 0] = 4  # GQ type 6 (non-institutional)
    assert group.answer(cube.reshape(1, -1)).tolist() == [[7, 2, 4]]
    assert group.labels == ("household", "institutional", "noninstitutional")


def test_unknown_attribute_is_a_validation_error_listing_known_ones():
    with pytest.raises(ValidationError, match="known attributes: VOTINGAGE, RACEETH"):
        query_group(RI2010_SCHEMA, "CENRACE")
    with pytest.raises(ValidationError, match="HHGQ"):
        query_group(RI2010_SCHEMA, "HHINSTLEVELS")


def test_rounder_chain_is_nested_and_rejects_a_non_nested_one():
    chain = rounder_chain(REDISTRICTING_SCHEMA)
    assert [g.name for g in chain][0] == "TOTAL" and chain[-1].is_detailed
    for coarse, fine in zip(chain, chain[1:], strict=False):
        assert fine.refines(coarse)
    with pytest.raises(ValidationError, match="not nested"):
        rounder_chain(REDISTRICTING_SCHEMA, ["TOTAL", "HHGQ", "CENRACE", "DETAILED"])
    with pytest.raises(ValidationError, match="end with DETAILED"):
        rounder_chain(RI2010_SCHEMA, ["TOTAL", "VOTINGAGE"])
