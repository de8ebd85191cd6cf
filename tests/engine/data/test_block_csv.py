"""Tests of the plain block-CSV loader and its JSON column → cell mapping."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine.core.errors import DataValidationError
from engine.data.block_csv import load_block_csv, parse_mapping
from engine.data.ri2010 import load_ri2010
from engine.data.samples import samples_dir
from engine.schema.attributes import RI2010_SCHEMA

RI = samples_dir() / "ri2010" / "ri2010_blocks.csv"
GROUPS = RI2010_SCHEMA.attributes[1].levels


def ri_vap_mapping(**extra):
    cells = {f"vap_{g}": {"VOTINGAGE": "18_plus", "RACEETH": g} for g in GROUPS}
    return {"schema": "ri2010", "geography": {"geoid": "GEOID"}, "cells": cells, **extra}


def test_geoid_mapping_reproduces_the_ri2010_adult_cells(tmp_path):
    path = tmp_path / "mapping.json"
    path.write_text(json.dumps(ri_vap_mapping(allow_unmapped=True)))
    h = load_block_csv(RI, path)
    ref = load_ri2010(RI)
    np.testing.assert_array_equal(h.counts[:, 8:], ref.counts[:, 8:])
    assert (h.counts[:, :8] == 0).all()
    assert h.geography.equals(ref.geography)
    assert h.total == 828_611


def test_unmapped_cells_are_an_error_unless_allowed():
    with pytest.raises(DataValidationError, match="8 schema cell"):
        parse_mapping(ri_vap_mapping())


def test_custom_schema_level_columns_codes_and_full_ids():
    csv = (
        "st,cty,tr,bg,blk,kids,adults,more_adults\n"
        "44,7,100,1,1000,2,3,1\n"
        "44,44007,44007000100,440070001002,440070001002001,0,5,0\n"
    )
    mapping = {
        "schema": {"name": "age", "attributes": [{"name": "AGE", "levels": ["child", "adult"]}]},
        "geography": {
            "levels": {
                "State": "st",
                "County": "cty",
                "Tract": "tr",
                "Block_Group": "bg",
                "Block": "blk",
            }
        },
        "cells": {
            "kids": {"AGE": "child"},
            "adults": {"AGE": "adult"},
            "more_adults": {"AGE": "adult"},
        },
    }
    h = load_block_csv(csv.encode(), mapping)
    assert h.schema.name == "age"
    assert h.counts.tolist() == [[2, 4], [0, 5]]
    assert h.geography["Block"].tolist() == ["440070001001000", "440070001002001"]
    assert h.geography["Block_Group"].tolist() == ["440070001001", "440070001002"]


def test_geoid_with_summary_level_prefix_is_accepted():
    mapping = {
        "schema": {"attributes": [{"name": "ALL", "levels": ["all"]}]},
        "geography": {"geoid": "GEOID"},
        "cells": {"n": {"ALL": "all"}},
    }
    h = load_block_csv(b"GEOID,n\n7500000US440070001011000,4\n", mapping)
    assert h.geography["County"].tolist() == ["44007"] and h.total == 4
