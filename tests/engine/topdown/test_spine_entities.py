"""Entity sets: the shipped Providence wards sample and uploaded block → entity CSVs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from engine.core.errors import DataValidationError
from engine.data.samples import get_sample
from engine.topdown.spine.entities import EntitySet, load_entities, read_entity_csv

BLOCKS = np.array([f"4400700010010{i:02d}" for i in range(6)], dtype=object)


def test_shipped_providence_sample_has_licence_and_manifest():
    info = get_sample("providence_wards")
    assert info.kind == "entities" and info.loader == "entities_csv"
    assert (info.path / info.licence_file).is_file()
    assert "Open Database License" in (info.path / info.licence_file).read_text()
    manifest = json.loads((info.path / "sample.json").read_text())
    for key in (
        "name",
        "kind",
        "title",
        "description",
        "files",
        "rows",
        "geography",
        "source",
        "licence",
        "licence_file",
        "loader",
    ):
        assert key in manifest
    assert sum(1 for _ in (info.path / info.files[0]).open()) - 1 == info.rows == 3014


def test_providence_city_and_wards_load_against_block_ids():
    path = get_sample("providence_wards").file_paths()[0]
    ids = np.array(
        [line.split(",")[0] for line in path.read_text().splitlines()[1:]] + ["440010301001000"],
        dtype=object,
    )
    city, wards = load_entities("providence-wards", ids)
    assert city.name == "providence_city" and city.entity_ids == ("Providence",)
    assert wards.entity_ids[:3] == ("Ward 1", "Ward 2", "Ward 3") and wards.n_entities == 15
    assert city.union().sum() == wards.union().sum() == 3014
    assert not city.union()[-1]  # the extra (non-Providence) block is outside
    assert np.array_equal(wards.membership().sum(axis=1), city.union().astype(int))


def test_uploaded_csv_with_and_without_entity_sets(tmp_path: Path):
    plain = tmp_path / "districts.csv"
    plain.write_text(
        "GEOID,entity\n440070001001000,east\n440070001001001,east\n440070001001003,west\n"
    )
    (districts,) = read_entity_csv(plain, BLOCKS)
    assert districts.name == "districts"
    assert districts.codes.tolist() == [0, 0, -1, 1, -1, -1]
    sets = tmp_path / "sets.csv"
    sets.write_text(
        "block;entity;entity_set\n440070001001000;a;one\n440070001001000;x;two\n440070001001005;b;one\n"
    )
    one, two = read_entity_csv(sets, BLOCKS)
    assert (one.name, one.entity_ids, one.codes.tolist()) == (
        "one",
        ("a", "b"),
        [0, -1, -1, -1, -1, 1],
    )
    assert (two.name, two.codes.tolist()) == ("two", [0, -1, -1, -1, -1, -1])


def test_bad_csv_reports_every_located_problem(tmp_path: Path):
    bad = tmp_path / "bad.csv"
    bad.write_text(
        "GEOID,entity\n4400700010010,a\n440070001001000,\n440070001001001,b\n440070001001001,c\n"
        "449990001001000,d\n"
    )
    with pytest.raises(DataValidationError) as info:
        read_entity_csv(bad, BLOCKS)
    messages = [(p.row, p.message) for p in info.value.problems]
    assert any(row == 1 and "15-digit" in m for row, m in messages)
    assert any(row == 2 and "entity name is empty" in m for row, m in messages)
    assert any(row == 4 and "listed twice" in m for row, m in messages)
    assert any(row == 5 and "not in the data" in m for row, m in messages)


def test_missing_column_and_unknown_name(tmp_path: Path):
    bad = tmp_path / "nocol.csv"
    bad.write_text("GEOID,ward\n440070001001000,1\n")
    with pytest.raises(DataValidationError, match="missing column 'entity'"):
        read_entity_csv(bad, BLOCKS)
    with pytest.raises(DataValidationError, match="neither a shipped entity set"):
        load_entities("no-such-entities", BLOCKS)


def test_entity_set_checks_its_codes():
    with pytest.raises(Exception, match="has no block"):
        EntitySet("s", ("a", "b"), np.array([0, 0, -1]))


def test_shipped_sample_on_a_subset_keeps_the_blocks_present():
    path = get_sample("providence_wards").file_paths()[0]
    lines = path.read_text().splitlines()[1:]
    ward_one = np.array([ln.split(",")[0] for ln in lines if ln.endswith(",1")], dtype=object)
    city, wards = load_entities("providence_wards", ward_one)
    assert wards.entity_ids == ("Ward 1",) and city.union().all()
    with pytest.raises(DataValidationError, match="none of the 3,014 blocks"):
        load_entities("providence_wards", BLOCKS)
