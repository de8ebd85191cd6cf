"""One chunk of a generated population: its persons, units, blocks and places as Arrow tables
(docs/synthetic.md "Method", steps 2, 4 and 5).

:func:`generate_chunk` draws a chunk's households, GQ persons, ages and race/ethnicity with the
ACS-calibrated household generator (:mod:`engine.data.synthetic_households`) from the chunk's own
seed ``(seed, state, chunk)``, then

* places each household in a *neighbourhood* (≈ :data:`NEIGHBOURHOOD_PERSONS` persons) with a
  Dirichlet race/ethnicity mix (concentration :data:`SEGREGATION_ALPHA`), and within it near the
  other households of its group (spread :data:`WITHIN_SPREAD`): blocks are more homogeneous than
  their tract, as real blocks are;
* lays the units along that order into blocks, block groups, tracts and counties
  (:func:`engine.data.population_geography.block_geography`); a share :data:`VACANT_ONLY_SHARE` of
  the empty blocks gets one vacant housing unit, the rest no unit at all (structural zeros); GQ
  facilities get a major type 1–7 with the 2010 national shares (:data:`GQ_TYPE_PERSONS_2010`);
* cuts places out of each county's population line (:mod:`engine.data.places`) with a generator of
  their own, so the persons, units and blocks of a seed are the same with or without them;
* writes the records: PPMF persons (:data:`PPMF_COLUMNS`), the CEF extract's persons, units and
  geo, the block frame (:data:`BLOCK_COLUMNS`) and each block's place.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from engine.core.errors import ValidationError
from engine.data.places import draw_places, place_codes, place_rng
from engine.data.population_geography import block_geography
from engine.data.synthetic_calibration import CALIBRATION_DIR, AcsCalibration
from engine.data.synthetic_households import (
    draw_group_quarters,
    draw_households,
    expand_household_persons,
    household_types,
)

NEIGHBOURHOOD_PERSONS = 30_000
SEGREGATION_ALPHA = 0.3
"""Dirichlet concentration (× the national shares) of a neighbourhood's race/ethnicity mix: smaller
is more segregated. Chosen so generated RI blocks' Blau index, relative to the state's, matches the
real RI 2010 blocks' (docs/synthetic.md, tests/engine/data/test_population.py)."""
WITHIN_SPREAD = 0.08
"""Spread of a household around its group's place inside the neighbourhood (in neighbourhood
widths); smaller makes blocks more homogeneous than their tract."""
VACANT_ONLY_SHARE = 0.2
"""Share of empty blocks that hold a vacant housing unit (assumption); the rest hold no unit."""
GQ_TYPE_PERSONS_2010 = {
    "1": 2_263_602,  # correctional facilities for adults
    "2": 151_622,  # juvenile facilities
    "3": 1_502_264,  # nursing facilities
    "4": 76_171,  # other institutional
    "5": 2_521_090,  # college/university student housing
    "6": 354_751,  # military quarters
    "7": 1_117_823,  # other noninstitutional
}
"""2010 Census national GQ population by major type (SF1 P42), used as facility-type shares."""
RACE_COUNT_PERSONS_2010 = {2: 8_265_318, 3: 676_469, 4: 57_875, 5: 8_619, 6: 792}
"""2010 Census persons reporting exactly k races (Census Brief C2010BR-13, Table 1)."""
CENRACE_CODES_BY_RACE_COUNT = {
    2: range(7, 22),
    3: range(22, 42),
    4: range(42, 57),
    5: range(57, 63),
    6: range(63, 64),
}
"""CENRACE codes 07–63 grouped by the number of races (P.L. 94-171 CENRACE order)."""
RACEETH_GROUPS = ("hispanic", "white", "black", "aian", "asian", "nhpi", "other", "two")

PPMF_COLUMNS = (
    "TABBLKST",
    "TABBLKCOU",
    "TABTRACTCE",
    "TABBLKGRPCE",
    "TABBLK",
    "RTYPE",
    "GQTYPE_PL",
    "VOTING_AGE",
    "QAGE",
    "CENHISP",
    "CENRACE",
)
BLOCK_COLUMNS = (
    "TABBLKST",
    "TABBLKCOU",
    "TABTRACTCE",
    "TABBLKGRPCE",
    "TABBLK",
    "HOUSING_UNITS",
    "OCCUPIED_UNITS",
    *(f"GQ_FACILITIES_{t}" for t in GQ_TYPE_PERSONS_2010),
    "PERSONS",
)


def raceeth_group(race: np.ndarray, hisp: np.ndarray) -> np.ndarray:
    """RACEETH index (order :data:`RACEETH_GROUPS`) from CENRACE 1–63 and CENHISP 1/2."""
    race = np.asarray(race)
    group = np.where(race <= 6, race, 7)
    return np.where(np.asarray(hisp) == 2, 0, group).astype(np.int64)


def all_two_or_more_races() -> tuple[np.ndarray, np.ndarray]:
    """Every CENRACE code 07–63 with a 2010 probability among multiracial persons.

    Codes in the shipped table (:func:`engine.data.census2010_tables.load_two_or_more_races`, the
    largest combinations) keep their 2010 counts; each other code gets an equal share of what is
    left of its race count's 2010 total (:data:`RACE_COUNT_PERSONS_2010`), so all 57 codes occur.
    """
    frame = pd.read_csv(
        Path(CALIBRATION_DIR) / "census2010_two_or_more_races.csv", dtype={"cenrace": str}
    )
    known = dict(
        zip(frame["cenrace"].astype(int), frame["persons_2010"].astype(float), strict=True)
    )
    weights: dict[int, float] = {}
    for k, code_range in CENRACE_CODES_BY_RACE_COUNT.items():
        members = list(code_range)
        shipped = {c: known[c] for c in members if c in known}
        weights.update(shipped)
        rest = [c for c in members if c not in shipped]
        left = max(RACE_COUNT_PERSONS_2010[k] - sum(shipped.values()), 0.0)
        for c in rest:
            weights[c] = max(left / len(rest), 1.0)
    all_codes = np.array(sorted(weights), dtype=np.int64)
    w = np.array([weights[c] for c in all_codes], dtype=float)
    return all_codes, w / w.sum()


@dataclass
class Chunk:
    """One chunk's tables (the rows of each file) and its counts (:class:`PopulationSummary`
    fields of :mod:`engine.data.population`)."""

    ppmf: pa.Table
    persons: pa.Table
    units: pa.Table
    geo: pa.Table
    blocks: pa.Table
    counts: dict[str, int]
    places: pa.Table


def _labels(values: np.ndarray, width: int | None = None) -> pa.Array:
    """Integers as decimal strings (zero-padded to ``width``) — one Arrow cast, no Python loop."""
    arr = pa.array(np.asarray(values, dtype=np.int64))
    text = pa.compute.cast(arr, pa.string())
    if width is not None:
        text = pa.compute.utf8_lpad(text, width=width, padding="0")
    return text


def generate_chunk(
    n_persons: int,
    state_fips: str,
    region: str,
    division: str,
    county_offset: int,
    n_counties: int,
    mafid_offset: int,
    empty_share: float,
    seed: int,
    chunk_no: int,
    cal: AcsCalibration,
    two: tuple[np.ndarray, np.ndarray],
    block_sizes: tuple[np.ndarray, np.ndarray],
    vacancy_rate: float,
    place_offset: int = 0,
) -> Chunk:
    """Chunk ``chunk_no`` of state ``state_fips`` (module docstring): ``n_persons`` persons in
    ``n_counties`` counties numbered from ``county_offset``, units numbered (MAFID) from
    ``mafid_offset``, places (PLACEFP) from ``place_offset``; deterministic in ``seed``."""
    rng = np.random.default_rng([int(seed), int(state_fips), int(chunk_no)])
    gq_shares = cal.group_quarters.set_index("gq_type")["person_share"]
    hu_share = float(cal.family_cells["person_share"].sum())
    total_share = hu_share + float(gq_shares.sum())
    n_inst = int(round(n_persons * gq_shares["institutional"] / total_share))
    n_noninst = int(round(n_persons * gq_shares["noninstitutional"] / total_share))
    hh = draw_households(n_persons - n_inst - n_noninst, cal, rng)
    persons = expand_household_persons(hh, cal, two[0], two[1], rng)
    gq = draw_group_quarters(n_inst, n_noninst, cal, two[0], two[1], rng)
    n_hh, n_gq = hh["size"].size, gq["size"].size
    n_vacant = int(round(n_hh * vacancy_rate / (1.0 - vacancy_rate)))
    # GQ facility types: institutional 1–4, non-institutional 5–7, by 2010 national shares.
    first_person = np.cumsum(np.r_[0, gq["size"]])[:-1]  # empty when a state has no GQ
    inst = gq["relship"][np.minimum(first_person, max(gq["relship"].size - 1, 0))] == 37
    weights = np.array(list(GQ_TYPE_PERSONS_2010.values()), dtype=float)
    gq_type = np.where(
        inst,
        1 + rng.choice(4, size=n_gq, p=weights[:4] / weights[:4].sum()),
        5 + rng.choice(3, size=n_gq, p=weights[4:] / weights[4:].sum()),
    )
    # Order key: neighbourhood + the group's place in it (module docstring, step 2).
    n_hoods = max(1, int(round(n_persons / NEIGHBOURHOOD_PERSONS)))
    head_group = raceeth_group(persons["head_race"], persons["head_hisp"])
    share = np.bincount(head_group, minlength=8).astype(float) + 1e-3
    share /= share.sum()
    mix = rng.dirichlet(SEGREGATION_ALPHA * 8 * share, size=n_hoods)  # (hoods, groups)
    hood_weight = rng.lognormal(0.0, 0.3, n_hoods)
    hood = np.empty(n_hh, dtype=np.int64)
    for g in range(8):
        members = np.flatnonzero(head_group == g)
        if members.size:
            p = (mix[:, g] + 1e-12) * hood_weight  # tiny Dirichlet draws underflow to 0
            hood[members] = rng.choice(n_hoods, size=members.size, p=p / p.sum())
    place = rng.permuted(np.tile(np.arange(8), (n_hoods, 1)), axis=1)  # group's place per hood
    within = (place[hood, head_group] + 0.5) / 8.0 + WITHIN_SPREAD * rng.standard_normal(n_hh)
    key_hh = hood + np.mod(within, 1.0)
    key_gq = rng.random(n_gq) * n_hoods
    key_vac = rng.random(n_vacant) * n_hoods
    unit_pop = np.concatenate([hh["size"], gq["size"], np.zeros(n_vacant, dtype=np.int64)])
    unit_key = np.concatenate([key_hh, key_gq, key_vac])
    unit_block, blocks = block_geography(
        unit_pop, unit_key, n_counties, block_sizes, empty_share, rng
    )
    n_units = unit_pop.size
    # Vacant-only empty blocks: move vacant units into a share of the empty blocks.
    empty_blocks = np.flatnonzero(blocks["empty"].to_numpy())
    n_move = min(int(round(VACANT_ONLY_SHARE * empty_blocks.size)), n_vacant)
    if n_move:
        movers = n_hh + n_gq + rng.choice(n_vacant, size=n_move, replace=False)
        unit_block[movers] = rng.choice(empty_blocks, size=n_move, replace=False)
    # Places from their own generator (engine.data.places): the persons' draws are untouched.
    n_blocks = len(blocks)
    block_persons = np.bincount(unit_block, weights=unit_pop, minlength=n_blocks).astype(np.int64)
    place_of_block = draw_places(
        blocks["county"].to_numpy(),
        blocks["midpoint"].to_numpy(),
        block_persons,
        place_rng(seed, state_fips, chunk_no),
    )
    placefp = place_codes(place_of_block, place_offset)
    # Units in MAFID order: by block, then by the neighbourhood order.
    unit_order = np.lexsort((unit_key, unit_block))
    mafid = np.empty(n_units, dtype=np.int64)
    mafid[unit_order] = mafid_offset + np.arange(n_units)
    is_hh = unit_order < n_hh
    is_gq = (unit_order >= n_hh) & (unit_order < n_hh + n_gq)
    blk = unit_block[unit_order]
    county_code = 2 * (county_offset + blocks["county"].to_numpy()) + 1
    if int(county_code.max()) > 999:
        raise ValidationError("too many synthetic counties in a state (county codes above 999)")
    geo_arrays = {
        "TABBLKST": pa.array(np.full(len(blocks), state_fips, dtype=object), pa.string()),
        "TABBLKCOU": _labels(county_code, 3),
        "TABTRACTCE": _labels((blocks["tract"].to_numpy() + 1) * 100, 6),
        "TABBLKGRPCE": _labels(blocks["bg"].to_numpy() + 1),
        "TABBLK": _labels(blocks["block"].to_numpy(), 4),
    }
    block_geo = pa.table(geo_arrays)

    # Units, geo (CEF).
    hht, hht2, cplt = household_types(hh)
    hh_of = np.where(is_hh, unit_order, 0)

    def hh_field(values: np.ndarray) -> np.ndarray:
        return np.where(is_hh, np.asarray(values)[hh_of], 0)

    mafid_text = _labels(mafid[unit_order])
    rtype_unit = pa.array(np.where(is_gq, "4", "2").astype(object), pa.string())
    units = pa.table(
        {
            "RTYPE": rtype_unit,
            "MAFID": mafid_text,
            "FINAL_POP": _labels(unit_pop[unit_order]),
            "NPF": _labels(hh_field(hh["npf"])),
            "HHSPAN": _labels(hh_field(persons["head_hisp"])),
            "HHRACE": _labels(hh_field(persons["head_race"]), 2),
            "TEN": _labels(hh_field(hh["ten"])),
            "HHT": _labels(hh_field(hht)),
            "HHT2": _labels(hh_field(hht2), 2),
            "CPLT": _labels(hh_field(cplt)),
        }
    )
    take = pa.array(blk)
    geo = pa.table(
        {
            "RTYPE": rtype_unit,
            "MAFID": mafid_text,
            "TABBLKST": block_geo["TABBLKST"].take(take),
            "TABBLKCOU": block_geo["TABBLKCOU"].take(take),
            "TABTRACTCE": block_geo["TABTRACTCE"].take(take),
            "TABBLK": block_geo["TABBLK"].take(take),
            "TABBLKGRPCE": block_geo["TABBLKGRPCE"].take(take),
            "REGIONCE": pa.array(np.full(n_units, region, dtype=object), pa.string()),
            "DIVISIONCE": pa.array(np.full(n_units, division, dtype=object), pa.string()),
            "PLACEFP": pa.array(placefp[blk], pa.string()),
            "AIANNHCE": pa.array(np.full(n_units, "9999", dtype=object), pa.string()),
        }
    )

    # Persons in MAFID order (householder first within a household).
    person_unit = np.concatenate([persons["hh_id"], n_hh + gq["facility"]])
    p_order = np.argsort(mafid[person_unit], kind="stable")
    age = np.concatenate([persons["age"], gq["age"]])[p_order]
    hisp = np.concatenate([persons["hisp"], gq["hisp"]])[p_order]
    race = np.concatenate([persons["race"], gq["race"]])[p_order]
    relship = np.concatenate([persons["relship"], gq["relship"]])[p_order]
    unit_of_person = person_unit[p_order]
    in_gq = unit_of_person >= n_hh
    person_gq_type = (
        np.where(in_gq, gq_type[np.maximum(unit_of_person - n_hh, 0)], 0)
        if n_gq
        else np.zeros(unit_of_person.size, dtype=gq_type.dtype)
    )
    person_block = unit_block[unit_of_person]
    rtype_person = pa.array(np.where(in_gq, "5", "3").astype(object), pa.string())
    cef_persons = pa.table(
        {
            "RTYPE": rtype_person,
            "MAFID": _labels(mafid[unit_of_person]),
            "QAGE": _labels(age),
            "CENHISP": _labels(hisp),
            "CENRACE": _labels(race, 2),
            "RELSHIP": _labels(relship),
        }
    )
    ptake = pa.array(person_block)
    ppmf = pa.table(
        {
            **{k: v.take(ptake) for k, v in geo_arrays.items()},
            "RTYPE": rtype_person,
            "GQTYPE_PL": _labels(person_gq_type),
            "VOTING_AGE": _labels(np.where(age >= 18, 2, 1)),
            "QAGE": _labels(age),
            "CENHISP": _labels(hisp),
            "CENRACE": _labels(race, 2),
        }
    )

    # Block frame.
    hu = np.bincount(unit_block[np.r_[0:n_hh, n_hh + n_gq : n_units]], minlength=n_blocks)
    occupied = np.bincount(unit_block[:n_hh], minlength=n_blocks)
    gq_blocks = unit_block[n_hh : n_hh + n_gq]
    facilities = np.zeros((n_blocks, 7), dtype=np.int64)
    np.add.at(facilities, (gq_blocks, gq_type - 1), 1)
    frame = dict(geo_arrays)
    frame["HOUSING_UNITS"] = _labels(hu)
    frame["OCCUPIED_UNITS"] = _labels(occupied)
    for t in range(7):
        frame[f"GQ_FACILITIES_{t + 1}"] = _labels(facilities[:, t])
    frame["PERSONS"] = _labels(block_persons)
    block_table = pa.table(frame)
    block_sort = pa.compute.sort_indices(
        block_table, sort_keys=[(c, "ascending") for c in BLOCK_COLUMNS[:5]]
    )
    n_tracts = len({(c, t) for c, t in zip(blocks["county"], blocks["tract"], strict=True)})
    counts = {
        "persons": int(unit_pop.sum()),
        "housing_units": int(hu.sum()),
        "occupied_units": int(occupied.sum()),
        "gq_facilities": int(n_gq),
        "gq_persons": int(gq["size"].sum()),
        "blocks": n_blocks,
        "empty_blocks": int(np.sum(block_persons == 0)),
        "structural_zero_blocks": int(np.sum((hu == 0) & (facilities.sum(axis=1) == 0))),
        "block_groups": len(
            {
                (c, t, b)
                for c, t, b in zip(blocks["county"], blocks["tract"], blocks["bg"], strict=True)
            }
        ),
        "tracts": n_tracts,
        "counties": int(blocks["county"].nunique()),
        "units": n_units,
        "places": int(np.unique(place_of_block[place_of_block >= 0]).size),
        "place_persons": int(block_persons[place_of_block >= 0].sum()),
    }
    places = pa.table({**geo_arrays, "PLACEFP": pa.array(placefp, pa.string())})
    return Chunk(
        ppmf, cef_persons, units, geo, block_table.take(block_sort), counts, places.take(block_sort)
    )
