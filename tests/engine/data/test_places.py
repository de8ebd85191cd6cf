"""Places of generated populations: production's optimized-spine targets, persons unchanged.

The places come from a generator of their own (engine.data.places), so every file the generator
wrote before places existed is byte-identical for the same seed (hashes recorded with the code of
commit d2a7ab4), and geo.csv differs from its old self only in PLACEFP.
"""

from __future__ import annotations

import hashlib
import shutil

import numpy as np
import pandas as pd
import pytest

from engine.data.generated import load_generated_population
from engine.data.places import (
    NO_PLACE,
    PLACE_MEDIAN_PERSONS,
    PLACE_PERSON_SHARE,
    draw_places,
    place_codes,
    place_sizes,
)
from engine.data.population import generate_population, read_manifest
from engine.topdown.spine.entities import has_places, places_entity_set

BEFORE_PLACES = {
    "ppmf.csv": "0ba66f18996fd7291d1322f436dc83801a2517d4832662cfd6a1af44f4498e18",
    "persons.csv": "3e0e671a6ed618cbb69652a11215375d74be7e5f0442b87467e4a31f8e3bbb82",
    "units.csv": "1db16bbe15bffc22ddc05258e618dfbf72f2fec67c3dc56c90602a3bd674358c",
    "blocks.csv": "d63f8a6ef369dd2b224f19caba2637cd154f3bc5f0c3fdfa73dca306b019fed6",
    "geo.csv": "66da1df6ce4786bfdc662c14e45f39729b27fc95b9de87d76f2f955707a34ce9",
}
"""sha256 of the files of generate_population(30_000, seed=9, states=["RI", "DE"],
chunk_persons=10_000) written by the generator before places (commit d2a7ab4)."""


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def two_states(tmp_path_factory):
    out = tmp_path_factory.mktemp("places") / "p"
    summary = generate_population(
        30_000, seed=9, states=["RI", "DE"], out_dir=out, chunk_persons=10_000
    )
    return out, summary


def test_places_leave_every_earlier_file_byte_identical(two_states):
    out, summary = two_states
    for name in ("ppmf.csv", "persons.csv", "units.csv", "blocks.csv"):
        assert _sha((out / name).read_bytes()) == BEFORE_PLACES[name], name
    # geo.csv: only PLACEFP changed ("99999" before places existed)
    geo = pd.read_csv(out / "geo.csv", dtype=str, keep_default_na=False)
    assert (geo["PLACEFP"] != NO_PLACE).any()
    old = geo.assign(PLACEFP=NO_PLACE).to_csv(index=False, lineterminator="\n")
    assert _sha(old.encode()) == BEFORE_PLACES["geo.csv"]
    assert summary.places >= 2 and read_manifest(out)["places"] == summary.places


def test_places_csv_agrees_with_geo_and_nests_in_counties(two_states):
    out, summary = two_states
    places = pd.read_csv(out / "places.csv", dtype=str)
    blocks = pd.read_csv(out / "blocks.csv", dtype=str)
    key = ["TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLKGRPCE", "TABBLK"]
    assert places[key].equals(blocks[key])  # one row per block, the frame's order
    inside = places[places["PLACEFP"] != NO_PLACE]
    # a place code belongs to one state and one county
    assert inside.groupby(["TABBLKST", "PLACEFP"])["TABBLKCOU"].nunique().max() == 1
    persons = blocks["PERSONS"].astype(int)
    assert int(persons[places["PLACEFP"] != NO_PLACE].sum()) == summary.place_persons
    geo = pd.read_csv(out / "geo.csv", dtype=str)
    geo_block = geo[key].agg("".join, axis=1)
    by_block = dict(zip(places[key].agg("".join, axis=1), places["PLACEFP"], strict=True))
    assert (geo_block.map(by_block) == geo["PLACEFP"]).all()


def test_loaded_places_make_one_entity_set_and_old_folders_have_none(two_states, tmp_path):
    out, summary = two_states
    hist = load_generated_population(out)
    assert has_places(hist)
    places = places_entity_set(hist)
    assert places.name == "places" and places.n_entities == summary.places
    assert all(e.startswith("place ") for e in places.entity_ids)
    old = tmp_path / "old"
    shutil.copytree(out, old)
    (old / "places.csv").unlink()
    assert not has_places(load_generated_population(old))


def test_places_are_intervals_of_each_countys_line():
    rng = np.random.default_rng(0)
    county = np.repeat(np.arange(40), 500)
    persons = rng.integers(0, 80, county.size).astype(float)
    midpoint = np.cumsum(persons) - persons / 2
    place = draw_places(county, midpoint, persons, np.random.default_rng(1))
    for c in range(40):
        mine = place[county == c]
        # in line order a place's blocks are consecutive (an interval), never split
        runs = mine[np.r_[True, mine[1:] != mine[:-1]]]
        runs = runs[runs >= 0]
        assert len(runs) == len(set(runs.tolist()))
    share = persons[place >= 0].sum() / persons.sum()
    assert share == pytest.approx(PLACE_PERSON_SHARE, abs=0.05)


def test_place_sizes_follow_the_calibration():
    sizes = np.concatenate(
        [place_sizes(5e6, 5e6, np.random.default_rng(seed)) for seed in range(3)]
    )
    assert np.median(sizes) == pytest.approx(PLACE_MEDIAN_PERSONS, rel=0.15)
    assert np.mean(sizes < 1_000) == pytest.approx(0.46, abs=0.05)
    assert np.mean(sizes >= 100_000) == pytest.approx(0.016, abs=0.008)
    assert sizes.sum() == pytest.approx(3 * 5e6)


def test_place_codes_are_five_digits():
    codes = place_codes(np.array([-1, 0, 11]), 40)
    assert codes.tolist() == [NO_PLACE, "00041", "00052"]
