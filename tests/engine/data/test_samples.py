"""Tests of the sample registry: every manifest listed, documented totals, licence files present."""

from __future__ import annotations

import json

import pytest

from engine.core.errors import DataValidationError
from engine.data.samples import (
    KINDS,
    get_sample,
    list_samples,
    load_topdown_sample,
    samples_dir,
)

DOCUMENTED = {
    "ri2010": (1_052_567, 25_181),
    "ppmf_perry_al": (10_588, 511),
    "pl94171_ri2018": (29_225, 569),
}


def test_samples_dir_is_the_repository_folder():
    assert samples_dir().name == "samples" and samples_dir().parent.name == "data"


def test_every_manifest_is_listed_with_its_files_and_licence():
    manifests = sorted(p.parent.name for p in samples_dir().glob("*/sample.json"))
    samples = list_samples()
    assert [s.name for s in samples] == manifests
    assert set(DOCUMENTED) <= set(manifests)
    for info in samples:
        assert info.kind in KINDS
        assert (info.path / info.licence_file).is_file(), info.name
        for path in info.file_paths():
            assert path.is_file(), path


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_topdown_samples_load_to_documented_totals(name):
    persons, blocks = DOCUMENTED[name]
    info = get_sample(name)
    histogram = load_topdown_sample(name)
    assert (histogram.total, histogram.n_blocks) == (persons, blocks)
    assert info.persons == persons
    assert info.manifest["blocks"] == blocks


def test_manifest_rows_count_the_first_file():
    for name in DOCUMENTED:
        info = get_sample(name)
        lines = info.file_paths()[0].read_bytes().count(b"\n")
        has_header = info.loader != "pl94171"
        assert info.rows == lines - has_header, name


def test_unknown_sample_lists_the_known_ones():
    with pytest.raises(DataValidationError) as caught:
        get_sample("no_such_sample")
    assert "ri2010" in str(caught.value) and "no_such_sample" in str(caught.value)


def test_non_topdown_kind_is_refused(tmp_path):
    folder = tmp_path / "units_only"
    folder.mkdir()
    manifest = {
        "name": "units_only",
        "kind": "phsafe",
        "title": "t",
        "description": "d",
        "files": [],
        "rows": 0,
        "persons": None,
        "geography": "g",
        "source": "s",
        "licence": "l",
        "licence_file": "LICENSE",
        "loader": "cef",
    }
    (folder / "sample.json").write_text(json.dumps(manifest))
    assert [s.name for s in list_samples(tmp_path)] == ["units_only"]
    with pytest.raises(DataValidationError, match="not a TopDown input"):
        load_topdown_sample("units_only", tmp_path)


def test_samples_declare_their_scale(tmp_path):
    """The synthetic US households are 1/1000 of the US; the real extracts are whole."""
    from engine.data.samples import declared_scale, read_manifest

    us = get_sample("phsafe_synthetic_us")
    assert us.scale == 0.001
    assert us.full_scale_persons == 308_745_538
    assert us.persons / us.scale == pytest.approx(us.full_scale_persons, rel=1e-5)
    assert get_sample("ri2010").scale is None
    assert declared_scale("phsafe_synthetic_us") == 0.001
    assert declared_scale(us.path) == 0.001
    assert declared_scale("ri2010") is None and declared_scale(tmp_path) is None
    bad = json.loads((us.path / "sample.json").read_text())
    folder = tmp_path / "phsafe_synthetic_us"
    folder.mkdir()
    (folder / "sample.json").write_text(json.dumps({**bad, "scale": 1000}))
    with pytest.raises(DataValidationError, match="scale"):
        read_manifest(folder / "sample.json")
