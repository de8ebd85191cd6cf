"""A synthetic population at any scale, one set of persons for both engines (docs/synthetic.md; docs/science.md §6, §8).

:func:`generate_population` writes, from the same persons, into one folder:

* ``ppmf.csv`` — PPMF person records (the layout :mod:`engine.data.ppmf` reads for TopDown);
* ``persons.csv``, ``units.csv``, ``geo.csv`` — the PHSafe CEF extract (:mod:`engine.data.cef`);
* ``blocks.csv`` — the block frame: every block (empty ones too) with its housing units, occupied
  units and GQ facilities by type, which TopDown holds as structural zeros and bounds
  (:mod:`engine.topdown.constraints`);
* ``population.json`` — what was generated, written last (readers refuse a folder without it).

Households, GQ persons, ages and race/ethnicity come from the ACS-calibrated household generator
(:mod:`engine.data.synthetic`); this module adds realistic geography (method in
``docs/synthetic.md``):

1. persons per state ∝ 2010 state populations; a state is generated in chunks of at most
   ``chunk_persons`` persons (whole counties), each from its own seed ``(seed, state, chunk)``, so
   memory is bounded and the US (≈ 309 M) can be written chunk by chunk;
2. each household is placed in a *neighbourhood* (≈ :data:`NEIGHBOURHOOD_PERSONS` persons) with a
   Dirichlet race/ethnicity mix (concentration :data:`SEGREGATION_ALPHA`), and within it near the
   other households of its group (spread :data:`WITHIN_SPREAD`): blocks are more homogeneous than
   their tract, as real blocks are;
3. units are laid along that order and cut into blocks whose sizes are drawn from the real Rhode
   Island 2010 block sizes (heavy tailed), blocks into block groups and tracts of log-normal size
   (mean :data:`TRACT_PERSONS`), tracts into the state's 2010 number of counties (scaled down for
   small populations);
4. empty blocks are added so that they are :data:`EMPTY_BLOCK_SHARE` of all blocks (RI's own share
   for RI), a share :data:`VACANT_ONLY_SHARE` of them holding one vacant housing unit, the rest no
   unit at all (structural zeros); GQ facilities get a major type 1–7 with the 2010 national shares.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv

from engine.core.errors import ValidationError
from engine.core.numbers import RANGES
from engine.data.census2010_tables import StateTable, load_state_table, select_states
from engine.data.synthetic import DEFAULT_VACANCY_RATE
from engine.data.synthetic_calibration import CALIBRATION_DIR, AcsCalibration, load_calibration
from engine.data.synthetic_households import (
    draw_group_quarters,
    draw_households,
    expand_household_persons,
    household_types,
)

MIN_PERSONS = int(RANGES["population_persons"].low or 0)
MAX_PERSONS = int(RANGES["population_persons"].high or 0)
"""Valid population sizes (``engine.core.numbers.RANGES["population_persons"]``: 1,000 – 400M)."""
MIN_CHUNK_PERSONS = int(RANGES["chunk_persons"].low or 0)
MAX_CHUNK_PERSONS = int(RANGES["chunk_persons"].high or 0)
"""Valid ``chunk_persons`` (``RANGES["chunk_persons"]``: 10,000 – 50,000,000)."""
DEFAULT_CHUNK_PERSONS = 2_000_000
NEIGHBOURHOOD_PERSONS = 30_000
SEGREGATION_ALPHA = 0.3
"""Dirichlet concentration (× the national shares) of a neighbourhood's race/ethnicity mix: smaller
is more segregated. Chosen so generated RI blocks' Blau index, relative to the state's, matches the
real RI 2010 blocks' (docs/synthetic.md, tests/engine/data/test_population.py)."""
WITHIN_SPREAD = 0.08
"""Spread of a household around its group's place inside the neighbourhood (in neighbourhood
widths); smaller makes blocks more homogeneous than their tract."""
TRACT_PERSONS = 4_000
TRACT_LOG_SD = 0.35
BLOCK_GROUPS_PER_TRACT_MEAN = 3.0
EMPTY_BLOCK_SHARE = 1.0 - 6.2 / 11.0
"""US 2010: ≈ 11.0 M blocks, ≈ 6.2 M with population (docs/science.md §8) → 44% empty."""
RI_EMPTY_BLOCK_SHARE = 7_537 / 25_181
"""Rhode Island 2010 (the shipped sample): 7,537 of 25,181 blocks have no persons."""
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
FILES = ("ppmf.csv", "persons.csv", "units.csv", "geo.csv", "blocks.csv")
MANIFEST = "population.json"
KIND = "phexplore-generated-population"

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

Progress = Callable[[str, float], None]


@dataclass(frozen=True)
class PopulationSummary:
    """What :func:`generate_population` wrote (also the body of ``population.json``)."""

    kind: str
    persons: int
    seed: int
    states: list[str]
    housing_units: int
    occupied_units: int
    gq_facilities: int
    gq_persons: int
    blocks: int
    empty_blocks: int
    structural_zero_blocks: int
    block_groups: int
    tracts: int
    counties: int
    chunks: int
    compressed: bool
    files: list[str]
    seconds: float


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


def load_block_sizes(directory: Path | str = CALIBRATION_DIR) -> tuple[np.ndarray, np.ndarray]:
    """Populated-block sizes of RI 2010 and their probabilities."""
    frame = pd.read_csv(Path(directory) / "ri2010_block_sizes.csv")
    frame = frame[frame["persons"] > 0]
    weights = frame["blocks"].to_numpy(dtype=float)
    return frame["persons"].to_numpy(dtype=np.int64), weights / weights.sum()


def load_county_counts(directory: Path | str = CALIBRATION_DIR) -> dict[str, int]:
    frame = pd.read_csv(Path(directory) / "census2010_state_counties.csv", dtype=str)
    return dict(zip(frame["state_fips"], frame["counties_2010"].astype(int), strict=True))


def state_persons(n_persons: int, table: StateTable, chosen: np.ndarray) -> np.ndarray:
    """Persons per chosen state ∝ 2010 population, summing exactly to ``n_persons``."""
    weights = table.population[chosen].astype(float)
    exact = n_persons * weights / weights.sum()
    out = np.floor(exact).astype(np.int64)
    rest = n_persons - int(out.sum())
    out[np.argsort(-(exact - out), kind="stable")[:rest]] += 1
    return out


# ------------------------------------------------------------------------------ one chunk
@dataclass
class _Chunk:
    ppmf: pa.Table
    persons: pa.Table
    units: pa.Table
    geo: pa.Table
    blocks: pa.Table
    counts: dict[str, int]


def _labels(values: np.ndarray, width: int | None = None) -> pa.Array:
    """Integers as decimal strings (zero-padded to ``width``) — one Arrow cast, no Python loop."""
    arr = pa.array(np.asarray(values, dtype=np.int64))
    text = pa.compute.cast(arr, pa.string())
    if width is not None:
        text = pa.compute.utf8_lpad(text, width=width, padding="0")
    return text


def _geography(
    unit_pop: np.ndarray,
    order_key: np.ndarray,
    n_counties: int,
    block_sizes: tuple[np.ndarray, np.ndarray],
    empty_share: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, pd.DataFrame]:
    """Block index of every unit and the block table (county, tract, bg, block codes)."""
    order = np.argsort(order_key, kind="stable")
    pop = unit_pop[order]
    total = int(pop.sum())
    sizes, probs = block_sizes
    mean = float(sizes @ probs)
    targets = rng.choice(sizes, size=int(total / mean * 1.2) + 16, p=probs)
    while int(targets.sum()) < total:
        targets = np.concatenate([targets, rng.choice(sizes, size=targets.size // 2 + 16, p=probs)])
    edges = np.cumsum(targets)
    midpoint = np.cumsum(pop) - pop / 2.0
    block_sorted = np.searchsorted(edges, midpoint, side="right")
    n_blocks_raw = int(block_sorted.max()) + 1 if block_sorted.size else 1
    block_pop = np.bincount(block_sorted, weights=pop, minlength=n_blocks_raw)
    block_units = np.bincount(block_sorted, minlength=n_blocks_raw)
    keep = block_units > 0  # blocks the cut left without any unit are re-added as empty below
    new_index = np.cumsum(keep) - 1
    block_sorted = new_index[block_sorted]
    block_pop = block_pop[keep]
    n_nonempty = int(keep.sum())
    # Tracts and block groups by cumulative population (log-normal tract sizes).
    block_mid = np.cumsum(block_pop) - block_pop / 2.0
    tract_sizes = rng.lognormal(np.log(TRACT_PERSONS) - TRACT_LOG_SD**2 / 2, TRACT_LOG_SD, 64)
    while tract_sizes.sum() < total:
        tract_sizes = np.concatenate(
            [tract_sizes, rng.lognormal(np.log(TRACT_PERSONS), TRACT_LOG_SD, tract_sizes.size)]
        )
    tract_edges = np.cumsum(tract_sizes)
    tract = np.searchsorted(tract_edges, block_mid, side="right")
    tract_start = np.concatenate([[0.0], tract_edges])[tract]
    tract_size = tract_sizes[np.minimum(tract, tract_sizes.size - 1)]
    n_bg = 1 + rng.poisson(BLOCK_GROUPS_PER_TRACT_MEAN - 1.0, size=tract_sizes.size)
    n_bg = np.minimum(n_bg, 9)
    bg = np.minimum(
        ((block_mid - tract_start) / tract_size * n_bg[tract]).astype(np.int64), n_bg[tract] - 1
    )
    tract = pd.factorize(tract, sort=True)[0]
    n_tracts = int(tract.max()) + 1 if tract.size else 1
    bg_key = tract * 10 + bg
    # Counties: heavy-tailed numbers of tracts per county.
    n_counties = max(1, min(n_counties, n_tracts))
    weights = rng.lognormal(0.0, 1.0, n_counties)
    per_county = 1 + rng.multinomial(n_tracts - n_counties, weights / weights.sum())
    county_of_tract = np.repeat(np.arange(n_counties), per_county)
    county = county_of_tract[tract]
    tract_in_county = tract - (np.cumsum(per_county) - per_county)[county]
    # Empty blocks spread over block groups in proportion to their blocks.
    n_empty = int(round(empty_share / (1.0 - empty_share) * n_nonempty))
    bg_id, bg_of_block = np.unique(bg_key, return_inverse=True)
    bg_blocks = np.bincount(bg_of_block)
    empty_per_bg = rng.multinomial(n_empty, bg_blocks / bg_blocks.sum())
    first_block = np.r_[0, np.cumsum(bg_blocks)[:-1]]
    empty_template = np.repeat(first_block, empty_per_bg)
    all_county = np.concatenate([county, county[empty_template]])
    all_tract = np.concatenate([tract_in_county, tract_in_county[empty_template]])
    all_bg = np.concatenate([bg, bg[empty_template]])
    all_bg_key = np.concatenate([bg_of_block, bg_of_block[empty_template]])
    is_empty = np.concatenate([np.zeros(n_nonempty, bool), np.ones(empty_template.size, bool)])
    shuffle = rng.permutation(all_bg_key.size)  # empty blocks interleaved within the group
    rank = np.empty_like(shuffle)
    order_in_bg = np.lexsort((shuffle, all_bg_key))
    starts = np.r_[0, np.cumsum(np.bincount(all_bg_key))[:-1]]
    rank[order_in_bg] = np.arange(all_bg_key.size) - starts[all_bg_key[order_in_bg]]
    if rank.size and int(rank.max()) >= 1000:
        raise ValidationError("a synthetic block group has more than 999 blocks; lower the size")
    table = pd.DataFrame(
        {
            "county": all_county,
            "tract": all_tract,
            "bg": all_bg,
            "block": (all_bg + 1) * 1000 + rank,
            "empty": is_empty,
        }
    )
    unit_block = np.empty(unit_pop.size, dtype=np.int64)
    unit_block[order] = block_sorted
    return unit_block, table


def _chunk(
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
) -> _Chunk:
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
    unit_block, blocks = _geography(unit_pop, unit_key, n_counties, block_sizes, empty_share, rng)
    n_units = unit_pop.size
    # Vacant-only empty blocks: move vacant units into a share of the empty blocks.
    empty_blocks = np.flatnonzero(blocks["empty"].to_numpy())
    n_move = min(int(round(VACANT_ONLY_SHARE * empty_blocks.size)), n_vacant)
    if n_move:
        movers = n_hh + n_gq + rng.choice(n_vacant, size=n_move, replace=False)
        unit_block[movers] = rng.choice(empty_blocks, size=n_move, replace=False)
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
            "PLACEFP": pa.array(np.full(n_units, "99999", dtype=object), pa.string()),
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
    n_blocks = len(blocks)
    hu = np.bincount(unit_block[np.r_[0:n_hh, n_hh + n_gq : n_units]], minlength=n_blocks)
    occupied = np.bincount(unit_block[:n_hh], minlength=n_blocks)
    gq_blocks = unit_block[n_hh : n_hh + n_gq]
    facilities = np.zeros((n_blocks, 7), dtype=np.int64)
    np.add.at(facilities, (gq_blocks, gq_type - 1), 1)
    block_persons = np.bincount(unit_block, weights=unit_pop, minlength=n_blocks).astype(np.int64)
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
    }
    return _Chunk(ppmf, cef_persons, units, geo, block_table.take(block_sort), counts)


# ------------------------------------------------------------------------------ the writer
class _Sink:
    """One CSV file written chunk by chunk (gzip-compressed if asked), header once."""

    def __init__(self, path: Path, compress: bool) -> None:
        self.path = path
        raw = open(path, "wb")  # noqa: SIM115 - closed in close()
        self.handle = (
            gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=3, mtime=0) if compress else raw
        )
        self.raw = raw
        self.writer: pacsv.CSVWriter | None = None

    def write(self, table: pa.Table) -> None:
        if self.writer is None:
            self.handle.write((",".join(table.column_names) + "\n").encode())
            options = pacsv.WriteOptions(include_header=False, quoting_style="none")
            self.writer = pacsv.CSVWriter(self.handle, table.schema, write_options=options)
        self.writer.write_table(table)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.handle is not self.raw:
            self.handle.close()
        self.raw.close()


def plan_chunks(
    n_persons: int, states: Sequence[str] | None, chunk_persons: int
) -> list[tuple[str, str, str, str, int, int, int, int]]:
    """(postal, fips, region, division, persons, chunk number, county offset, counties) of every
    chunk, in order."""
    table = load_state_table()
    chosen = select_states(table, states, include_pr=False)
    if states is not None and any(str(s).strip().upper() in ("PR", "72") for s in states):
        chosen = select_states(table, states, include_pr=True)
    persons = state_persons(n_persons, table, chosen)
    counties = load_county_counts()
    plan = []
    for i, n in zip(chosen, persons, strict=True):
        if n <= 0:
            continue
        fips = str(table.fips[i])
        real = int(table.population[i])
        want = max(1, int(round(counties[fips] * min(1.0, n / real))))
        pieces = max(1, int(np.ceil(n / chunk_persons)))
        pieces = min(pieces, want)
        sizes = np.full(pieces, n // pieces)
        sizes[: n - int(sizes.sum())] += 1
        per = np.full(pieces, want // pieces)
        per[: want - int(per.sum())] += 1
        offset = 0
        for k in range(pieces):
            plan.append(
                (
                    str(table.postal[i]),
                    fips,
                    str(table.region[i]),
                    str(table.division[i]),
                    int(sizes[k]),
                    k,
                    offset,
                    int(per[k]),
                )
            )
            offset += int(per[k])
    return plan


def generate_population(
    n_persons: int,
    *,
    seed: int,
    out_dir: str | os.PathLike[str],
    states: Sequence[str] | None = None,
    compress: bool = False,
    chunk_persons: int = DEFAULT_CHUNK_PERSONS,
    vacancy_rate: float = DEFAULT_VACANCY_RATE,
    progress: Progress | None = None,
    atomic: bool = True,
) -> PopulationSummary:
    """Write the population's files into ``out_dir`` (module docstring); deterministic in ``seed``.

    With ``atomic`` (default) the files are written into a temporary folder beside ``out_dir`` and
    moved into place only when complete; ``atomic=False`` writes straight into ``out_dir`` (the
    CLI's staging folder of :mod:`engine.core.output_folder`, which does the same). Either way
    ``population.json`` is written last.
    """
    if isinstance(n_persons, bool) or not isinstance(n_persons, int | np.integer):
        raise ValidationError(f"persons must be a whole number, got {n_persons!r}")
    if not MIN_PERSONS <= n_persons <= MAX_PERSONS:
        raise ValidationError(
            f"persons must be between {MIN_PERSONS:,} and {MAX_PERSONS:,}; got {n_persons:,}"
        )
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValidationError(f"seed must be a non-negative whole number, got {seed!r}")
    if not MIN_CHUNK_PERSONS <= chunk_persons <= MAX_CHUNK_PERSONS:
        raise ValidationError(
            f"chunk_persons must be between {MIN_CHUNK_PERSONS:,} and {MAX_CHUNK_PERSONS:,}"
        )
    report = progress or (lambda message, fraction: None)
    started = time.perf_counter()
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        raise ValidationError(f"{out} exists and is not empty; choose a new folder")
    plan = plan_chunks(int(n_persons), states, chunk_persons)
    cal = load_calibration()
    two = all_two_or_more_races()
    block_sizes = load_block_sizes()
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}" if atomic else out
    if atomic and tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    suffix = ".csv.gz" if compress else ".csv"
    names = [f.replace(".csv", suffix) for f in FILES]
    sinks = {f: _Sink(tmp / n, compress) for f, n in zip(FILES, names, strict=True)}
    totals: dict[str, int] = {}
    mafid = 100_000_001
    done = 0
    try:
        for postal, fips, region, division, n, k, offset, n_counties in plan:
            report(f"Generating {postal} ({n:,} persons)", done / n_persons)
            empty_share = RI_EMPTY_BLOCK_SHARE if postal == "RI" else EMPTY_BLOCK_SHARE
            chunk = _chunk(
                n,
                fips,
                region,
                division,
                offset,
                n_counties,
                mafid,
                empty_share,
                int(seed),
                k,
                cal,
                two,
                block_sizes,
                vacancy_rate,
            )
            mafid += chunk.counts["units"]
            if mafid > 999_999_999:
                raise ValidationError("too many units for nine-digit MAFIDs")
            sinks["ppmf.csv"].write(chunk.ppmf)
            sinks["persons.csv"].write(chunk.persons)
            sinks["units.csv"].write(chunk.units)
            sinks["geo.csv"].write(chunk.geo)
            sinks["blocks.csv"].write(chunk.blocks)
            for key, value in chunk.counts.items():
                totals[key] = totals.get(key, 0) + value
            done += n
            del chunk
    finally:
        for sink in sinks.values():
            sink.close()
    summary = PopulationSummary(
        kind=KIND,
        persons=totals["persons"],
        seed=int(seed),
        states=sorted({p[0] for p in plan}),
        housing_units=totals["housing_units"],
        occupied_units=totals["occupied_units"],
        gq_facilities=totals["gq_facilities"],
        gq_persons=totals["gq_persons"],
        blocks=totals["blocks"],
        empty_blocks=totals["empty_blocks"],
        structural_zero_blocks=totals["structural_zero_blocks"],
        block_groups=totals["block_groups"],
        tracts=totals["tracts"],
        counties=totals["counties"],
        chunks=len(plan),
        compressed=bool(compress),
        files=names,
        seconds=round(time.perf_counter() - started, 3),
    )
    (tmp / MANIFEST).write_text(json.dumps(asdict(summary), indent=2) + "\n", encoding="utf-8")
    if atomic:
        if out.exists():
            out.rmdir()
        out.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, out)
    report("Done", 1.0)
    return summary


def read_manifest(directory: str | os.PathLike[str]) -> dict[str, object]:
    """The ``population.json`` of a generated population folder; refuses a folder without one."""
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise ValidationError(
            f"{directory} has no {MANIFEST}: not a complete generated population (the generator "
            "writes the manifest last); generate it again"
        )
    from engine.core.files import read_input_bytes
    from engine.core.manifest import MANIFEST_NAME, read_output_folder
    from engine.core.strict_json import as_mapping, loads_strict_json

    if (Path(directory) / MANIFEST_NAME).exists():
        read_output_folder(directory)  # written by the CLI: complete and unaltered, or refused
    data = as_mapping(
        loads_strict_json(read_input_bytes(path, label=str(path)), label=str(path)),
        where=str(path),
    )
    if data.get("kind") != KIND:
        raise ValidationError(f"{path} is not a generated-population manifest")
    return data
