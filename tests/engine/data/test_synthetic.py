"""Tests of the synthetic household generator (engine.data.synthetic) and its calibration.

The ACS targets are recomputed here from the NIST ACS 2019 national excerpt copied into
``tests/fixtures/nist_acs2019`` (see its NOTICE.md), weighted by PWGTP as in the calibration.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.errors import ValidationError
from engine.data.cef_types import GEO_COLUMNS, PERSON_COLUMNS, UNIT_COLUMNS, CefExtract
from engine.data.census2010_tables import load_state_table
from engine.data.synthetic import generate_households
from engine.data.synthetic_calibration import (
    CALIBRATION_DIR,
    TABLE_FILES,
    derive_calibration,
    load_calibration,
    read_acs_records,
)
from engine.data.synthetic_households import FAMILY_HOUSEHOLDER_MIN_AGE
from engine.data.synthetic_validation import acs_person_profile, extract_person_profile, shares

FIXTURE = (
    Path(__file__).resolve().parents[2] / "fixtures" / "nist_acs2019" / "national2019_columns.csv"
)
FAMILY_RELSHIPS = {"21", "23", "25", "26", "27", "28", "29", "30", "31", "32", "33"}


@pytest.fixture(scope="module")
def acs_records() -> pd.DataFrame:
    return read_acs_records(FIXTURE)


@pytest.fixture(scope="module")
def small() -> CefExtract:
    return generate_households(20_000, seed=11)


@pytest.fixture(scope="module")
def large() -> CefExtract:
    return generate_households(100_000, seed=2026)


@pytest.fixture(scope="module")
def households(small: CefExtract) -> pd.DataFrame:
    """Per occupied housing unit: the unit row joined with counts computed from its members."""
    p = small.persons.copy()
    p["age"] = p["QAGE"].astype(int)
    p["own_child"] = p["RELSHIP"].isin(["25", "26", "27"]) & (p["age"] < 18)
    p["family"] = p["RELSHIP"].isin(FAMILY_RELSHIPS)
    rel = p["RELSHIP"]
    flags = pd.DataFrame(
        {
            "n": 1,
            "householders": rel == "20",
            "spouse": rel.isin(["21", "23"]),
            "same_sex_spouse": rel == "23",
            "partner": rel.isin(["22", "24"]),
            "same_sex_partner": rel == "24",
            "relatives": p["family"],
            "own_children": p["own_child"],
        }
    ).astype(int)
    members = flags.groupby(p["MAFID"].to_numpy()).sum()
    heads = p[p["RELSHIP"] == "20"].set_index("MAFID")
    units = small.units[small.units["RTYPE"] == "2"].set_index("MAFID")
    occupied = units[units["FINAL_POP"] != "0"]
    out = occupied.join(members, how="left").join(
        heads[["age", "CENHISP", "CENRACE"]].rename(columns={"age": "head_age"})
    )
    return out


# -- determinism and format -------------------------------------------------------------------------


def test_same_seed_gives_identical_extract() -> None:
    a = generate_households(5_000, seed=99)
    b = generate_households(5_000, seed=99)
    for name in ("persons", "units", "geo"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name))


def test_different_seeds_differ() -> None:
    a = generate_households(5_000, seed=1)
    b = generate_households(5_000, seed=2)
    assert not a.persons.equals(b.persons)


@pytest.mark.parametrize("n", [1_000, 12_345, 20_000])
def test_exact_person_count(n: int) -> None:
    extract = generate_households(n, seed=5)
    assert len(extract.persons) == n
    assert extract.units["FINAL_POP"].astype(int).sum() == n


def test_columns_and_code_formats_follow_official_schema(small: CefExtract) -> None:
    assert tuple(small.persons.columns) == PERSON_COLUMNS
    assert tuple(small.units.columns) == UNIT_COLUMNS
    assert tuple(small.geo.columns) == GEO_COLUMNS
    patterns = {
        "persons": {
            "RTYPE": r"[35]",
            "MAFID": r"\d{9}",
            "QAGE": r"(\d|[1-9]\d|10\d|11[0-5])",
            "CENHISP": r"[12]",
            "CENRACE": r"(0[1-9]|[1-5]\d|6[0-3])",
            "RELSHIP": r"(2\d|3[0-8])",
        },
        "units": {
            "RTYPE": r"[24]",
            "MAFID": r"\d{9}",
            "FINAL_POP": r"\d+",
            "NPF": r"(0|[2-9]|[1-8]\d|9[0-7])",
            "HHSPAN": r"[012]",
            "HHRACE": r"([0-5]\d|6[0-3])",
            "TEN": r"[0-4]",
            "HHT": r"[0-7]",
            "HHT2": r"(0\d|1[0-2])",
            "CPLT": r"[0-5]",
        },
        "geo": {
            "RTYPE": r"[24]",
            "MAFID": r"\d{9}",
            "TABBLKST": r"\d{2}",
            "TABBLKCOU": r"\d{3}",
            "TABTRACTCE": r"\d{6}",
            "TABBLK": r"\d{4}",
            "TABBLKGRPCE": r"\d",
            "REGIONCE": r"[12349]",
            "DIVISIONCE": r"\d",
            "PLACEFP": r"\d{5}",
            "AIANNHCE": r"\d{4}",
        },
    }
    for table, columns in patterns.items():
        frame = getattr(small, table)
        for column, pattern in columns.items():
            ok = frame[column].astype(str).str.fullmatch(pattern)
            assert ok.all(), f"{table}.{column}: {frame.loc[~ok, column].head().tolist()}"


def test_mafids_unique_and_linked(small: CefExtract) -> None:
    units, geo, persons = small.units, small.geo, small.persons
    assert units["MAFID"].is_unique
    assert units["MAFID"].tolist() == geo["MAFID"].tolist()
    assert (units["RTYPE"] == geo["RTYPE"]).all()
    assert set(persons["MAFID"]) <= set(units["MAFID"])
    mafid = units["MAFID"].astype(int)
    assert mafid.min() >= 100_000_001 and mafid.max() <= 900_000_000


# -- internal consistency ---------------------------------------------------------------------------


def test_final_pop_matches_persons_per_unit(small: CefExtract) -> None:
    counts = small.persons.groupby("MAFID").size()
    final_pop = small.units.set_index("MAFID")["FINAL_POP"].astype(int)
    assert (counts.reindex(final_pop.index, fill_value=0) == final_pop).all()


def test_gq_persons_live_in_gq_units(small: CefExtract) -> None:
    rtype_of_unit = small.units.set_index("MAFID")["RTYPE"]
    unit_rtype = rtype_of_unit.reindex(small.persons["MAFID"]).to_numpy()
    person_rtype = small.persons["RTYPE"].to_numpy()
    assert ((person_rtype == "5") == (unit_rtype == "4")).all()
    assert ((person_rtype == "3") == (unit_rtype == "2")).all()
    gq_rel = small.persons.loc[person_rtype == "5", "RELSHIP"]
    hu_rel = small.persons.loc[person_rtype == "3", "RELSHIP"]
    assert gq_rel.isin(["37", "38"]).all() and len(gq_rel) > 0
    assert not hu_rel.isin(["37", "38"]).any()
    # One GQ type per facility.
    per_facility = small.persons[person_rtype == "5"].groupby("MAFID")["RELSHIP"].nunique()
    assert (per_facility == 1).all()
    gq_units = small.units[small.units["RTYPE"] == "4"]
    assert (gq_units[["NPF", "HHSPAN", "TEN", "HHT", "CPLT"]] == "0").all().all()
    assert (gq_units[["HHRACE", "HHT2"]] == "00").all().all()


def test_vacant_units_have_no_attributes(small: CefExtract) -> None:
    vacant = small.units[(small.units["RTYPE"] == "2") & (small.units["FINAL_POP"] == "0")]
    occupied = (small.units["RTYPE"] == "2").sum() - len(vacant)
    assert 0.08 < len(vacant) / (len(vacant) + occupied) < 0.15
    assert (vacant[["NPF", "HHSPAN", "TEN", "HHT", "CPLT"]] == "0").all().all()


def test_exactly_one_householder_per_household(households: pd.DataFrame) -> None:
    assert (households["householders"] == 1).all()
    assert (households["spouse"] + households["partner"] <= 1).all()


def test_npf_counts_family_members(households: pd.DataFrame) -> None:
    npf = households["NPF"].astype(int)
    family_size = 1 + households["relatives"]
    assert (np.where(households["relatives"] > 0, family_size, 0) == npf).all()
    assert not (npf == 1).any()


def test_hht_hht2_cplt_follow_members(households: pd.DataFrame) -> None:
    h = households
    hht = h["HHT"].astype(int)
    hht2 = h["HHT2"].astype(int)
    cplt = h["CPLT"].astype(int)
    married = h["spouse"] == 1
    partner = h["partner"] == 1
    family = h["relatives"] > 0
    alone = h["n"] == 1
    kids = h["own_children"] > 0
    assert ((hht == 1) == married).all()
    assert (hht.isin([2, 3]) == (family & ~married)).all()
    assert (hht.isin([4, 6]) == alone).all()
    assert (hht.isin([5, 7]) == (~family & ~alone)).all()
    assert (cplt[married] == np.where(h["same_sex_spouse"][married] == 1, 2, 1)).all()
    assert (cplt[partner] == np.where(h["same_sex_partner"][partner] == 1, 4, 3)).all()
    assert (cplt[~married & ~partner] == 5).all()
    assert (hht2[married] == np.where(kids[married], 1, 2)).all()
    assert (hht2[partner] == np.where(kids[partner], 3, 4)).all()
    other = ~married & ~partner
    female = hht.isin([3, 6, 7])
    base = np.select([alone, kids, family], [5, 6, 7], default=8)
    expected = base + np.where(female, 0, 4)
    assert (hht2[other] == expected[other]).all()
    for code in range(1, 13):
        assert (hht2 == code).any(), f"HHT2 {code:02d} never generated"


def test_householder_race_and_ethnicity_on_unit(households: pd.DataFrame) -> None:
    assert (households["HHSPAN"] == households["CENHISP"]).all()
    assert (households["HHRACE"] == households["CENRACE"]).all()


def test_tenure_codes(households: pd.DataFrame) -> None:
    ten = households["TEN"].astype(int)
    assert ten.between(1, 4).all()
    assert set(ten) == {1, 2, 3, 4}


def test_ages_plausible(small: CefExtract, households: pd.DataFrame) -> None:
    p = small.persons.assign(age=small.persons["QAGE"].astype(int))
    head_age = households["head_age"].reindex(p["MAFID"]).to_numpy()
    rel = p["RELSHIP"].to_numpy()
    age = p["age"].to_numpy()
    assert age.min() >= 0 and age.max() <= 115
    assert (age[rel == "20"] >= 15).all()
    family_heads = households.loc[households["relatives"] > 0, "head_age"]
    assert (family_heads >= FAMILY_HOUSEHOLDER_MIN_AGE).all()
    own_child = np.isin(rel, ["25", "26", "27"]) & (age < 18)
    assert (age[own_child] <= head_age[own_child] - 15).all()
    adult_child = np.isin(rel, ["25", "26", "27"]) & (age >= 18)
    assert (age[adult_child] <= head_age[adult_child] - 15).all()
    assert (age[np.isin(rel, ["29", "31"])] > head_age[np.isin(rel, ["29", "31"])]).all()
    assert (age[rel == "30"] <= head_age[rel == "30"] - 30).all()
    assert (age[np.isin(rel, ["21", "23"])] >= 18).all()
    assert (age[rel == "35"] < 18).all()


# -- geography --------------------------------------------------------------------------------------


def test_states_proportional_to_2010_population(large: CefExtract) -> None:
    table = load_state_table()
    states = large.geo.set_index("MAFID")["TABBLKST"]
    person_state = states.reindex(large.persons["MAFID"]).to_numpy()
    counts = pd.Series(person_state).value_counts()
    us = table.fips != "72"
    expected = pd.Series(table.population[us] / table.population[us].sum(), index=table.fips[us])
    assert set(counts.index) == set(expected.index)  # 50 states + DC, no PR
    observed = counts.reindex(expected.index) / counts.sum()
    assert (observed - expected).abs().max() < 0.001


def test_block_codes_well_formed(large: CefExtract) -> None:
    geo = large.geo
    assert (geo["TABBLKGRPCE"] == geo["TABBLK"].str[0]).all()
    assert (geo["TABBLKCOU"].astype(int) % 2 == 1).all()
    table = load_state_table()
    region = dict(zip(table.fips, table.region, strict=True))
    division = dict(zip(table.fips, table.division, strict=True))
    assert (geo["REGIONCE"] == geo["TABBLKST"].map(region)).all()
    assert (geo["DIVISIONCE"] == geo["TABBLKST"].map(division)).all()
    # Blocks are nested in block groups, tracts and counties of one state.
    block_id = geo["TABBLKST"] + geo["TABBLKCOU"] + geo["TABTRACTCE"] + geo["TABBLK"]
    assert block_id.nunique() > 100


def test_state_selection_and_puerto_rico() -> None:
    extract = generate_households(5_000, seed=3, states=["RI", "44", "06"], include_pr=True)
    assert set(extract.geo["TABBLKST"]) == {"44", "06", "72"}
    pr = extract.geo[extract.geo["TABBLKST"] == "72"]
    assert (pr["REGIONCE"] == "9").all() and (pr["DIVISIONCE"] == "0").all()
    only_pr = generate_households(2_000, seed=3, states=["PR"])
    assert set(only_pr.geo["TABBLKST"]) == {"72"}


# -- calibration and acceptance ---------------------------------------------------------------------


def test_shipped_calibration_is_derived_from_acs_records(acs_records: pd.DataFrame) -> None:
    derived = derive_calibration(acs_records)
    shipped = load_calibration(CALIBRATION_DIR)
    for attr in TABLE_FILES:
        a, b = getattr(derived, attr), getattr(shipped, attr)
        assert list(a.columns) == list(b.columns), attr
        for column in a.columns:
            if pd.api.types.is_numeric_dtype(a[column]):
                np.testing.assert_allclose(
                    a[column].to_numpy(dtype=float), b[column].to_numpy(dtype=float), rtol=1e-8
                )
            else:
                assert a[column].astype(str).tolist() == b[column].astype(str).tolist(), attr


def _pp_gaps(generated: CefExtract, acs_records: pd.DataFrame, variable: str) -> pd.Series:
    gen = shares(extract_person_profile(generated), variable)
    ref = shares(acs_person_profile(acs_records), variable)
    return 100.0 * (gen - ref)


def test_acs_targets_recomputed_independently(acs_records: pd.DataFrame) -> None:
    """The shared profile code gives the same ACS shares as a direct PWGTP-weighted count."""
    w = acs_records["PWGTP"].astype(float)
    npf = acs_records["NPF"]
    direct_not_in_family = w[npf.isna()].sum() / w.sum()
    direct_seven_plus = w[npf >= 7].sum() / w.sum()
    profile = shares(acs_person_profile(acs_records), "npf")
    assert profile["not in family"] == pytest.approx(direct_not_in_family)
    assert profile["7+"] == pytest.approx(direct_seven_plus)
    owners = w[acs_records["OWN_RENT"] == 1].sum() / w.sum()
    assert shares(acs_person_profile(acs_records), "tenure")["owner"] == pytest.approx(owners)


@pytest.mark.parametrize("variable", ["npf", "noc", "tenure"])
def test_acceptance_within_two_points_of_acs(
    large: CefExtract, acs_records: pd.DataFrame, variable: str
) -> None:
    gaps = _pp_gaps(large, acs_records, variable)
    assert gaps.abs().max() <= 2.0, gaps.round(2).to_dict()


@pytest.mark.parametrize("variable", ["age", "race", "hispanic"])
def test_age_and_race_mix_close_to_acs(
    large: CefExtract, acs_records: pd.DataFrame, variable: str
) -> None:
    gaps = _pp_gaps(large, acs_records, variable)
    assert gaps.abs().max() <= 2.0, gaps.round(2).to_dict()


def test_acceptance_holds_for_other_seeds(acs_records: pd.DataFrame) -> None:
    for seed in (1, 2):
        extract = generate_households(50_000, seed=seed)
        for variable in ("npf", "noc", "tenure"):
            assert _pp_gaps(extract, acs_records, variable).abs().max() <= 2.0


def test_distribution_is_sensitive_to_calibration(acs_records: pd.DataFrame) -> None:
    """A generator fed a different calibration misses the ACS targets: the check can fail."""
    skewed = acs_records[acs_records["NPF"].isna() | (acs_records["NPF"] <= 2)]
    other = generate_households(20_000, seed=4, calibration=derive_calibration(skewed))
    assert _pp_gaps(other, acs_records, "npf").abs().max() > 2.0


# -- errors -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n_persons": 999, "seed": 1},
        {"n_persons": 60_000_000, "seed": 1},
        {"n_persons": 1500.0, "seed": 1},
        {"n_persons": True, "seed": 1},
        {"n_persons": 5_000, "seed": -1},
        {"n_persons": 5_000, "seed": 1, "states": ["XX"]},
        {"n_persons": 5_000, "seed": 1, "states": []},
        {"n_persons": 5_000, "seed": 1, "states": "RI"},
        {"n_persons": 5_000, "seed": 1, "vacancy_rate": 0.95},
        {"n_persons": 5_000, "seed": 1, "vacancy_rate": "0.1"},
    ],
)
def test_bad_input_raises_validation_error(kwargs: dict) -> None:
    n = kwargs.pop("n_persons")
    with pytest.raises(ValidationError):
        generate_households(n, **kwargs)


def test_missing_acs_file_raises(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="not found"):
        read_acs_records(tmp_path / "absent.csv")
    with pytest.raises(ValidationError, match="calibration table missing"):
        load_calibration(tmp_path)


# -- properties and the 10^6 acceptance run ---------------------------------------------------------


@settings(max_examples=8, deadline=None)
@given(
    n=st.integers(min_value=1_000, max_value=3_000),
    seed=st.integers(min_value=0, max_value=2**32),
    states=st.one_of(
        st.none(), st.lists(st.sampled_from(["RI", "CA", "WY", "DC", "72", "48"]), min_size=1)
    ),
)
def test_invariants_hold_for_any_seed_and_states(
    n: int, seed: int, states: list[str] | None
) -> None:
    extract = generate_households(n, seed=seed, states=states)
    persons, units = extract.persons, extract.units
    assert len(persons) == n
    assert units["MAFID"].is_unique
    final_pop = units.set_index("MAFID")["FINAL_POP"].astype(int)
    counts = persons.groupby("MAFID").size().reindex(final_pop.index, fill_value=0)
    assert (counts == final_pop).all()
    housing = persons[persons["RTYPE"] == "3"]
    heads = (housing["RELSHIP"] == "20").groupby(housing["MAFID"]).sum()
    assert (heads == 1).all()
    if states is not None:
        fips = {"RI": "44", "CA": "06", "WY": "56", "DC": "11", "72": "72", "48": "48"}
        assert set(extract.geo["TABBLKST"]) <= {fips[s] for s in states}


@pytest.mark.slow
def test_million_persons_under_a_minute_and_within_two_points(acs_records: pd.DataFrame) -> None:
    start = time.perf_counter()
    extract = generate_households(1_000_000, seed=1)
    elapsed = time.perf_counter() - start
    assert elapsed < 60.0
    for variable in ("npf", "noc", "tenure"):
        assert _pp_gaps(extract, acs_records, variable).abs().max() <= 2.0
