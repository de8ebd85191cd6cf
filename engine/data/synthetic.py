"""Deterministic synthetic household generator producing a PHSafe CEF extract (persons/units/geo).

The generator builds a synthetic US population of households and group-quarters (GQ) persons whose
person-weighted family-size (``NPF``), own-children (``NOC``), tenure, GQ, age and race/ethnicity mixes
are calibrated on the NIST ACS 2019 national excerpt (tables in ``engine/data/calibration/``, derived
by :mod:`engine.data.synthetic_calibration`), spread over the 50 states + DC (+ Puerto Rico) in
proportion to their 2010 Census populations (``census2010_state_populations.csv``, from the MIT-licensed
``ppmf`` R package). The output uses the official PHSafe 3.0.0 CEF-extract layout
(:mod:`engine.data.cef_types`; PHSafe paper §3.1 and ``phsafe/resources/schema``), with ``HHT``,
``HHT2``, ``CPLT``, ``NPF``, ``HHSPAN``, ``HHRACE`` and ``FINAL_POP`` derived from the members so the
unit and person files agree.

Method (all steps vectorised with NumPy; randomness only from ``numpy.random.default_rng(seed)``):

1. Split the persons into institutional / non-institutional GQ persons and housing-unit persons by the
   ACS GQ shares; GQ persons fill facilities of log-normal size (median 25).
2. Households are drawn i.i.d. from household *cells*: the ACS (NPF, NOC) cells of family households,
   persons living alone and multi-person non-family households. A cell's household probability is its
   ACS person share divided by its expected household size, so persons — not households — reproduce
   the ACS person-weighted shares. A family cell (k, c) holds the householder, a spouse with the cell's
   ACS married share, c own children under 18, k − 1 − spouse − c other relatives, and optionally an
   unmarried partner and a non-relative (who count in the household but not in NPF, as in the ACS).
3. Households are taken while they fit in the housing-unit person count; the few persons left over
   live alone, so the total is exactly ``n_persons``.
4. Ages come from the ACS single-year distributions of the matching role group and are made
   consistent (children at least 15 years younger than the householder, parents older, etc.); race and
   Hispanic origin of householders and GQ persons come from the ACS joint distribution, and other
   members copy the householder's with a role-dependent probability (else an independent draw, which
   keeps the marginal distribution). Two-or-more-races persons get a detailed CENRACE combination
   with the 2010 Census mix (``census2010_two_or_more_races.csv``).
5. Tenure is owner with the ACS owner share of the household's cell; owners are split into "with a
   mortgage" / "free and clear" and renters into "rented" / "no payment of rent" with fixed shares
   (:data:`OWNER_MORTGAGE_SHARE`, :data:`RENTER_NO_CASH_RENT_SHARE`: assumptions, the ACS excerpt
   does not distinguish them). Vacant housing units are added at :data:`DEFAULT_VACANCY_RATE`.
6. Units are shuffled and cut into states by cumulative population; within a state they are numbered
   into synthetic but well-formed counties (odd FIPS codes 001, 003, …), tracts (``000100`` …),
   block groups (1–3) and blocks (first digit = block group), then given unique sequential MAFIDs.

Parameters that are assumptions rather than ACS calibrations are module constants, documented in
``docs/synthetic.md``; none of them affects the calibrated person shares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from engine.core.errors import ValidationError
from engine.data.cef_types import GEO_COLUMNS, PERSON_COLUMNS, UNIT_COLUMNS, CefExtract
from engine.data.synthetic_calibration import CALIBRATION_DIR, AcsCalibration, load_calibration

MIN_PERSONS = 1_000
MAX_PERSONS = 50_000_000

#: Share of persons in non-family households who live alone (2010 Census: 31.2 M one-person
#: households of 39.2 M non-family households; ≈ 8 M multi-person non-family households of ≈ 2.3
#: persons → 31.2 / (31.2 + 18.4) ≈ 0.63). Assumption: the ACS excerpt has no household size.
NONFAMILY_ALONE_PERSON_SHARE = 0.63
#: Sizes and probabilities of multi-person non-family households (assumption, mean ≈ 2.3).
NONFAMILY_MULTI_SIZES = np.array([2, 3, 4])
NONFAMILY_MULTI_PROBS = np.array([0.76, 0.17, 0.07])
#: Probability that a multi-person non-family household is a cohabiting couple (assumption).
NONFAMILY_PARTNER_PROB = 0.5
#: Probability that an unmarried family householder has an unmarried partner (assumption), by
#: whether own children under 18 are present.
FAMILY_PARTNER_PROB_WITH_CHILDREN = 0.30
FAMILY_PARTNER_PROB_NO_CHILDREN = 0.10
#: Probability that a family household also holds one non-relative (roommate, foster child, …).
FAMILY_NONRELATIVE_PROB = 0.05
#: Female share of family householders without a spouse (2010 Census: 15.3 M female vs 5.8 M male
#: "other family" householders ≈ 0.72).
OTHER_FAMILY_FEMALE_SHARE = 0.72
#: Same-sex shares of married and of unmarried-partner couples (≈ 2019 ACS national estimates).
SAME_SEX_MARRIED_SHARE = 0.011
SAME_SEX_PARTNER_SHARE = 0.07
#: Tenure splits (assumptions close to 2010 Census / 2019 ACS national tables).
OWNER_MORTGAGE_SHARE = 0.70
RENTER_NO_CASH_RENT_SHARE = 0.04
#: Share of housing units that are vacant (2010 Census: 14.99 M of 131.70 M ≈ 0.114).
DEFAULT_VACANCY_RATE = 0.114
#: Relationship codes of own children under 18: biological, adopted, stepchild and their shares.
OWN_CHILD_RELSHIPS = np.array([25, 26, 27])
OWN_CHILD_RELSHIP_PROBS = np.array([0.92, 0.03, 0.05])
#: Other relatives: adult child, grandchild, parent, sibling, child-in-law, parent-in-law, other.
RELATIVE_RELSHIPS = np.array([25, 30, 29, 28, 32, 31, 33])
RELATIVE_RELSHIP_PROBS = np.array([0.42, 0.20, 0.10, 0.12, 0.05, 0.03, 0.08])
#: Non-relatives in a family household: roommate, foster child, other non-relative.
NONRELATIVE_RELSHIPS = np.array([34, 35, 36])
NONRELATIVE_RELSHIP_PROBS = np.array([0.45, 0.10, 0.45])
#: Probability that a member copies the householder's race and Hispanic origin, by role.
RACE_COPY_PROB = {"spouse": 0.85, "partner": 0.75, "child": 0.92, "relative": 0.92, "nonrel": 0.4}
#: Family householders are drawn from the ACS age distribution of adults in family households
#: truncated at this age: the ACS group also holds adult children living with their parents, who
#: the generator adds separately as relatives (assumption; keeps the 18-24 share close to the ACS).
FAMILY_HOUSEHOLDER_MIN_AGE = 23
#: GQ facility size: log-normal with this median and log-sd, at least 1 person.
GQ_MEDIAN_SIZE = 25.0
GQ_LOG_SD = 1.0
#: Synthetic geography: units per block, blocks per block group, block groups per tract, tracts
#: per county.
UNITS_PER_BLOCK = 20
BLOCKS_PER_BLOCK_GROUP = 10
BLOCK_GROUPS_PER_TRACT = 3
TRACTS_PER_COUNTY = 40
MAX_COUNTIES_PER_STATE = 499  # odd county codes 001 … 997

PUERTO_RICO = "72"
MAX_AGE = 115

# Household roles of persons.
_HOUSEHOLDER, _SPOUSE, _PARTNER, _CHILD, _RELATIVE, _NONREL = range(6)
# Household kinds.
_FAMILY, _ALONE, _NONFAMILY_MULTI = range(3)


@dataclass(frozen=True)
class StateTable:
    """2010 state populations with Census region/division codes."""

    postal: np.ndarray
    fips: np.ndarray
    population: np.ndarray
    region: np.ndarray
    division: np.ndarray


def load_state_table(directory: Path | str = CALIBRATION_DIR) -> StateTable:
    """Read ``census2010_state_populations.csv`` (50 states, DC and PR)."""
    path = Path(directory) / "census2010_state_populations.csv"
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    return StateTable(
        postal=frame["state"].to_numpy(dtype=str),
        fips=frame["state_fips"].to_numpy(dtype=str),
        population=frame["population_2010"].astype(np.int64).to_numpy(),
        region=frame["region"].to_numpy(dtype=str),
        division=frame["division"].to_numpy(dtype=str),
    )


def load_two_or_more_races(
    directory: Path | str = CALIBRATION_DIR,
) -> tuple[np.ndarray, np.ndarray]:
    """CENRACE codes (as ints) of two-or-more-races combinations and their 2010 probabilities."""
    frame = pd.read_csv(
        Path(directory) / "census2010_two_or_more_races.csv", dtype={"cenrace": str}
    )
    weights = frame["persons_2010"].to_numpy(dtype=float)
    return frame["cenrace"].astype(int).to_numpy(), weights / weights.sum()


def select_states(table: StateTable, states: Sequence[str] | None, include_pr: bool) -> np.ndarray:
    """Indices into ``table`` of the requested states (postal codes or FIPS), validated."""
    if states is None:
        chosen = [i for i, f in enumerate(table.fips) if f != PUERTO_RICO]
    else:
        if isinstance(states, str):
            raise ValidationError("states must be a list of state codes, not a single string")
        by_code = {p.upper(): i for i, p in enumerate(table.postal)}
        by_code.update({f: i for i, f in enumerate(table.fips)})
        chosen = []
        unknown = []
        for code in states:
            key = str(code).strip().upper()
            if key not in by_code:
                unknown.append(str(code))
            elif by_code[key] not in chosen:
                chosen.append(by_code[key])
        if unknown:
            raise ValidationError(
                f"unknown state code(s) {unknown}; use postal codes (e.g. 'RI') or 2-digit FIPS "
                "(e.g. '44') of the 50 states, DC or PR"
            )
        if not chosen:
            raise ValidationError("states is empty; omit it to generate all 50 states and DC")
    pr_index = int(np.flatnonzero(table.fips == PUERTO_RICO)[0])
    if include_pr and pr_index not in chosen:
        chosen.append(pr_index)
    return np.array(sorted(chosen), dtype=np.int64)


def generate_households(
    n_persons: int,
    *,
    seed: int,
    states: Sequence[str] | None = None,
    include_pr: bool = False,
    vacancy_rate: float = DEFAULT_VACANCY_RATE,
    calibration: AcsCalibration | None = None,
) -> CefExtract:
    """Generate a synthetic CEF extract with exactly ``n_persons`` persons; deterministic in ``seed``.

    ``states`` restricts the geography to the listed states (postal codes or FIPS; default all 50
    states and DC); ``include_pr`` adds Puerto Rico. ``vacancy_rate`` is the share of housing units
    that are vacant. ``calibration`` defaults to the shipped ACS 2019 tables.
    """
    if isinstance(n_persons, bool) or not isinstance(n_persons, int | np.integer):
        raise ValidationError(f"n_persons must be an integer, got {n_persons!r}")
    if not MIN_PERSONS <= n_persons <= MAX_PERSONS:
        raise ValidationError(
            f"n_persons must be between {MIN_PERSONS:,} and {MAX_PERSONS:,}, got {n_persons:,}"
        )
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValidationError(f"seed must be a non-negative integer, got {seed!r}")
    if not isinstance(vacancy_rate, int | float) or not 0.0 <= vacancy_rate < 0.9:
        raise ValidationError(f"vacancy_rate must be in [0, 0.9), got {vacancy_rate!r}")
    cal = calibration if calibration is not None else load_calibration()
    state_table = load_state_table()
    state_idx = select_states(state_table, states, include_pr)
    two_codes, two_probs = load_two_or_more_races()
    rng = np.random.default_rng(int(seed))
    n_persons = int(n_persons)

    gq_shares = cal.group_quarters.set_index("gq_type")["person_share"]
    hu_share_total = float(cal.family_cells["person_share"].sum())
    total_share = hu_share_total + float(gq_shares.sum())
    n_inst = int(round(n_persons * gq_shares["institutional"] / total_share))
    n_noninst = int(round(n_persons * gq_shares["noninstitutional"] / total_share))
    n_hu_persons = n_persons - n_inst - n_noninst

    households = _draw_households(n_hu_persons, cal, rng)
    persons = _expand_household_persons(households, cal, two_codes, two_probs, rng)
    gq = _draw_group_quarters(n_inst, n_noninst, cal, two_codes, two_probs, rng)

    n_households = households["size"].size
    n_vacant = int(round(n_households * vacancy_rate / (1.0 - vacancy_rate)))
    return _assemble(households, persons, gq, n_vacant, state_table, state_idx, rng)


# --------------------------------------------------------------------------------------------------
# Households


def _cell_table(cal: AcsCalibration) -> dict[str, np.ndarray]:
    """Household cells with their household-draw probabilities (see the module docstring, step 2)."""
    cells = cal.family_cells
    family = cells[cells["npf"] >= 2]
    nonfamily_share = float(cells.loc[cells["npf"] == 0, "person_share"].sum())
    k = family["npf"].to_numpy(dtype=np.int64)
    c = family["noc"].to_numpy(dtype=np.int64)
    married = family["married_share"].to_numpy(dtype=float)
    partner_prob = np.where(
        c > 0, FAMILY_PARTNER_PROB_WITH_CHILDREN, FAMILY_PARTNER_PROB_NO_CHILDREN
    )
    expected_size = k + (1.0 - married) * partner_prob + FAMILY_NONRELATIVE_PROB
    multi_mean = float(np.dot(NONFAMILY_MULTI_SIZES, NONFAMILY_MULTI_PROBS))
    nonfamily_owner = float(cells.loc[cells["npf"] == 0, "owner_share"].iloc[0])

    person_share = np.concatenate(
        [
            family["person_share"].to_numpy(dtype=float),
            [nonfamily_share * NONFAMILY_ALONE_PERSON_SHARE],
            [nonfamily_share * (1.0 - NONFAMILY_ALONE_PERSON_SHARE)],
        ]
    )
    size = np.concatenate([expected_size, [1.0, multi_mean]])
    household_prob = person_share / size
    household_prob /= household_prob.sum()
    return {
        "kind": np.concatenate([np.full(k.size, _FAMILY), [_ALONE, _NONFAMILY_MULTI]]),
        "npf": np.concatenate([k, [0, 0]]),
        "noc": np.concatenate([c, [0, 0]]),
        "married": np.concatenate([married, [0.0, 0.0]]),
        "partner": np.concatenate([partner_prob, [0.0, NONFAMILY_PARTNER_PROB]]),
        "owner": np.concatenate(
            [family["owner_share"].to_numpy(dtype=float), [nonfamily_owner] * 2]
        ),
        "prob": household_prob,
        "mean_size": np.array(float(np.dot(household_prob, size))),
    }


def _draw_household_batch(n: int, cells: dict[str, np.ndarray], rng: np.random.Generator) -> dict:
    cell = rng.choice(cells["prob"].size, size=n, p=cells["prob"])
    kind = cells["kind"][cell]
    family = kind == _FAMILY
    npf = cells["npf"][cell]
    noc = cells["noc"][cell]
    married = family & (rng.random(n) < cells["married"][cell])
    partner = ~married & (kind != _ALONE) & (rng.random(n) < cells["partner"][cell])
    multi_size = rng.choice(NONFAMILY_MULTI_SIZES, size=n, p=NONFAMILY_MULTI_PROBS)
    nonrel = np.where(
        family,
        (rng.random(n) < FAMILY_NONRELATIVE_PROB).astype(np.int64),
        np.where(kind == _NONFAMILY_MULTI, multi_size - 1 - partner, 0),
    )
    relatives = np.where(family, npf - 1 - married - noc, 0)
    size = np.where(family, npf, 1) + partner + nonrel
    owner = rng.random(n) < cells["owner"][cell]
    return {
        "kind": kind,
        "npf": np.where(family, npf, 0),
        "noc": np.where(family, noc, 0),
        "married": married,
        "partner": partner,
        "relatives": relatives,
        "nonrel": nonrel,
        "size": size,
        "owner": owner,
    }


def _draw_households(n_hu_persons: int, cal: AcsCalibration, rng: np.random.Generator) -> dict:
    """Draw households until they hold ``n_hu_persons`` persons exactly (leftovers live alone)."""
    cells = _cell_table(cal)
    batches = []
    held = 0
    while True:
        estimate = int((n_hu_persons - held) / float(cells["mean_size"]) * 1.05) + 64
        batch = _draw_household_batch(estimate, cells, rng)
        batches.append(batch)
        held += int(batch["size"].sum())
        if held >= n_hu_persons:
            break
    drawn = {key: np.concatenate([b[key] for b in batches]) for key in batches[0]}
    cumulative = np.cumsum(drawn["size"])
    keep = int(np.searchsorted(cumulative, n_hu_persons, side="right"))
    kept = {key: value[:keep] for key, value in drawn.items()}
    leftover = n_hu_persons - (int(cumulative[keep - 1]) if keep else 0)
    if leftover:
        nonfamily_owner = float(cells["owner"][cells["kind"] == _ALONE][0])
        extra = {
            "kind": np.full(leftover, _ALONE),
            "npf": np.zeros(leftover, dtype=np.int64),
            "noc": np.zeros(leftover, dtype=np.int64),
            "married": np.zeros(leftover, dtype=bool),
            "partner": np.zeros(leftover, dtype=bool),
            "relatives": np.zeros(leftover, dtype=np.int64),
            "nonrel": np.zeros(leftover, dtype=np.int64),
            "size": np.ones(leftover, dtype=np.int64),
            "owner": rng.random(leftover) < nonfamily_owner,
        }
        kept = {key: np.concatenate([kept[key], extra[key]]) for key in kept}
    n = kept["size"].size
    family = kept["kind"] == _FAMILY
    female_share = np.where(
        family,
        OTHER_FAMILY_FEMALE_SHARE,
        float(cal.scalars.set_index("name").loc["nonfamily_female_share", "value"]),
    )
    kept["female"] = rng.random(n) < female_share
    kept["same_sex"] = rng.random(n) < np.where(
        kept["married"], SAME_SEX_MARRIED_SHARE, SAME_SEX_PARTNER_SHARE
    )
    tenure_split = rng.random(n)
    kept["ten"] = np.where(
        kept["owner"],
        np.where(tenure_split < OWNER_MORTGAGE_SHARE, 1, 2),
        np.where(tenure_split < RENTER_NO_CASH_RENT_SHARE, 4, 3),
    )
    return kept


def _sample_age(
    group: str, n: int, cal: AcsCalibration, rng: np.random.Generator, min_age: int = 0
) -> np.ndarray:
    """Ages from the ACS distribution of ``group``, truncated below at ``min_age``."""
    probs = cal.ages[group].to_numpy(dtype=float).copy()
    probs[:min_age] = 0.0
    return rng.choice(probs.size, size=n, p=probs / probs.sum())


def _sample_race(
    n: int,
    cal: AcsCalibration,
    two_codes: np.ndarray,
    two_probs: np.ndarray,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw (CENRACE as int 1–63, CENHISP 1/2) from the ACS joint distribution."""
    table = cal.race_ethnicity
    probs = table["person_share"].to_numpy(dtype=float)
    pick = rng.choice(probs.size, size=n, p=probs / probs.sum())
    races = table["race"].to_numpy(dtype=str)
    race = np.array([0 if r == "two" else int(r) for r in races])[pick]
    multiracial = race == 0
    race[multiracial] = rng.choice(two_codes, size=int(multiracial.sum()), p=two_probs)
    return race, table["cenhisp"].to_numpy(dtype=np.int64)[pick]


def _expand_household_persons(
    hh: dict,
    cal: AcsCalibration,
    two_codes: np.ndarray,
    two_probs: np.ndarray,
    rng: np.random.Generator,
) -> dict:
    """Person records of the households: role, RELSHIP, age, race, Hispanic origin."""
    size = hh["size"]
    n = int(size.sum())
    hh_id = np.repeat(np.arange(size.size), size)
    starts = np.cumsum(size) - size
    pos = np.arange(n) - starts[hh_id]
    b_couple = 1 + hh["married"] + hh["partner"]
    b_child = b_couple + hh["noc"]
    b_rel = b_child + hh["relatives"]
    p_couple, p_child, p_rel = b_couple[hh_id], b_child[hh_id], b_rel[hh_id]
    married_p = hh["married"][hh_id]
    role = np.select(
        [pos == 0, (pos < p_couple) & married_p, pos < p_couple, pos < p_child, pos < p_rel],
        [_HOUSEHOLDER, _SPOUSE, _PARTNER, _CHILD, _RELATIVE],
        default=_NONREL,
    )

    # Householder ages by household kind.
    kind = hh["kind"]
    hh_age = np.empty(size.size, dtype=np.int64)
    groups = {
        "parent_adult": (kind == _FAMILY) & (hh["noc"] > 0),
        "family_adult": (kind == _FAMILY) & (hh["noc"] == 0),
        "nonfamily_adult": kind != _FAMILY,
    }
    for group, mask in groups.items():
        min_age = FAMILY_HOUSEHOLDER_MIN_AGE if group != "nonfamily_adult" else 15
        hh_age[mask] = _sample_age(group, int(mask.sum()), cal, rng, min_age)
    head_age = hh_age[hh_id]

    age = np.zeros(n, dtype=np.int64)
    relship = np.zeros(n, dtype=np.int64)
    same_sex = hh["same_sex"][hh_id]

    is_head = role == _HOUSEHOLDER
    age[is_head] = head_age[is_head]
    relship[is_head] = 20

    for r, low, code_opposite, code_same in (
        (_SPOUSE, 18, 21, 23),
        (_PARTNER, 16, 22, 24),
    ):
        mask = role == r
        m = int(mask.sum())
        gap = np.rint(rng.normal(0.0, 4.0, size=m)).astype(np.int64)
        age[mask] = np.clip(head_age[mask] + gap, low, 99)
        relship[mask] = np.where(same_sex[mask], code_same, code_opposite)

    child = role == _CHILD
    m = int(child.sum())
    child_age = _sample_age("own_child", m, cal, rng)
    limit = head_age[child] - 15
    too_old = child_age > limit
    uniform = np.floor(rng.random(m) * (np.minimum(limit, 17) + 1)).astype(np.int64)
    age[child] = np.where(too_old, uniform, child_age)
    relship[child] = rng.choice(OWN_CHILD_RELSHIPS, size=m, p=OWN_CHILD_RELSHIP_PROBS)

    rel = role == _RELATIVE
    age[rel], relship[rel] = _relative_ages(head_age[rel], married_p[rel], rng)

    nonrel = role == _NONREL
    m = int(nonrel.sum())
    in_family = (kind[hh_id] == _FAMILY)[nonrel]
    nonrel_code = np.where(
        in_family, rng.choice(NONRELATIVE_RELSHIPS, size=m, p=NONRELATIVE_RELSHIP_PROBS), 34
    )
    adult_age = _sample_age("nonfamily_adult", m, cal, rng)
    foster_age = np.floor(rng.random(m) * 18).astype(np.int64)
    age[nonrel] = np.where(nonrel_code == 35, foster_age, adult_age)
    relship[nonrel] = nonrel_code

    # Race and Hispanic origin: householders draw, members copy with a role probability.
    head_race, head_hisp = _sample_race(size.size, cal, two_codes, two_probs, rng)
    own_race, own_hisp = _sample_race(n, cal, two_codes, two_probs, rng)
    copy_prob = np.select(
        [role == _SPOUSE, role == _PARTNER, role == _CHILD, role == _RELATIVE, role == _NONREL],
        [RACE_COPY_PROB[k] for k in ("spouse", "partner", "child", "relative", "nonrel")],
        default=1.0,
    )
    copy = rng.random(n) < copy_prob
    race = np.where(copy, head_race[hh_id], own_race)
    hisp = np.where(copy, head_hisp[hh_id], own_hisp)
    return {
        "hh_id": hh_id,
        "age": np.clip(age, 0, MAX_AGE),
        "relship": relship,
        "race": race,
        "hisp": hisp,
        "head_race": head_race,
        "head_hisp": head_hisp,
    }


def _relative_ages(
    head_age: np.ndarray, married: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """RELSHIP and age of "other relatives", kept plausible relative to the householder's age."""
    m = head_age.size
    code = rng.choice(RELATIVE_RELSHIPS, size=m, p=RELATIVE_RELSHIP_PROBS)
    u = rng.random(m)
    # Fall back to a sibling when the drawn relationship does not fit the householder's age.
    impossible = (
        ((code == 25) & (head_age < 33))
        | ((code == 30) & (head_age < 36))
        | ((code == 32) & (head_age < 38))
        | (np.isin(code, [29, 31]) & (head_age > 80))
        | ((code == 31) & ~married)
    )
    code = np.where(impossible, 28, code)
    adult_child = 18 + np.floor(u * (np.minimum(head_age - 15, 60) - 17)).astype(np.int64)
    grandchild = np.floor(u * (np.minimum(head_age - 30, 25) + 1)).astype(np.int64)
    elder = head_age + 18 + np.floor(u * 18).astype(np.int64)
    sibling = head_age + np.floor(u * 21).astype(np.int64) - 10
    child_in_law = 18 + np.floor(u * (np.minimum(head_age - 20, 60) - 17)).astype(np.int64)
    other = np.floor(u * 90).astype(np.int64)
    age = np.select(
        [code == 25, code == 30, np.isin(code, [29, 31]), code == 28, code == 32],
        [adult_child, grandchild, elder, sibling, child_in_law],
        default=other,
    )
    return np.clip(age, 0, 100), code


# --------------------------------------------------------------------------------------------------
# Group quarters


def _facility_sizes(n_persons: int, rng: np.random.Generator) -> np.ndarray:
    """Log-normal facility sizes summing exactly to ``n_persons`` (the last one trimmed)."""
    if n_persons == 0:
        return np.zeros(0, dtype=np.int64)
    sizes: list[np.ndarray] = []
    total = 0
    while total < n_persons:
        draw = np.maximum(
            1, np.rint(rng.lognormal(np.log(GQ_MEDIAN_SIZE), GQ_LOG_SD, size=64)).astype(np.int64)
        )
        sizes.append(draw)
        total += int(draw.sum())
    all_sizes = np.concatenate(sizes)
    cumulative = np.cumsum(all_sizes)
    last = int(np.searchsorted(cumulative, n_persons, side="left"))
    result = all_sizes[: last + 1].copy()
    result[-1] -= int(cumulative[last]) - n_persons
    return result


def _draw_group_quarters(
    n_inst: int,
    n_noninst: int,
    cal: AcsCalibration,
    two_codes: np.ndarray,
    two_probs: np.ndarray,
    rng: np.random.Generator,
) -> dict:
    """GQ facilities (sizes) and their persons (facility index, age, race, RELSHIP 37/38)."""
    parts = []
    for n_gq, group, relship in (
        (n_inst, "gq_institutional", 37),
        (n_noninst, "gq_noninstitutional", 38),
    ):
        sizes = _facility_sizes(n_gq, rng)
        parts.append((sizes, _sample_age(group, n_gq, cal, rng), np.full(n_gq, relship)))
    sizes = np.concatenate([p[0] for p in parts])
    n = int(sizes.sum())
    race, hisp = _sample_race(n, cal, two_codes, two_probs, rng)
    return {
        "size": sizes,
        "facility": np.repeat(np.arange(sizes.size), sizes),
        "age": np.concatenate([p[1] for p in parts]).astype(np.int64),
        "relship": np.concatenate([p[2] for p in parts]).astype(np.int64),
        "race": race,
        "hisp": hisp,
    }


# --------------------------------------------------------------------------------------------------
# Unit attributes, geography and the CEF tables


def _household_types(hh: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """HHT, HHT2 and CPLT of each household, derived from its members."""
    family = hh["kind"] == _FAMILY
    alone = hh["size"] == 1
    female = hh["female"]
    married, partner = hh["married"], hh["partner"]
    children = hh["noc"] > 0
    hht = np.select(
        [married, family & ~female, family & female, alone & ~female, ~alone & ~female, alone],
        [1, 2, 3, 4, 5, 6],
        default=7,
    )
    single = np.select([alone, children, family], [5, 6, 7], default=8) + np.where(female, 0, 4)
    hht2 = np.select(
        [married & children, married, partner & children, partner],
        [1, 2, 3, 4],
        default=single,
    )
    same = hh["same_sex"]
    cplt = np.select(
        [married & ~same, married & same, partner & ~same, partner & same], [1, 2, 3, 4], default=5
    )
    return hht, hht2, cplt


def _code_strings(width: int, count: int) -> np.ndarray:
    """Lookup table: integer i → zero-padded decimal string of ``width`` digits."""
    return np.array([f"{i:0{width}d}" for i in range(count)], dtype=object)


def _string_dtype() -> pd.StringDtype:
    """pandas' pyarrow-backed string dtype (``str`` in pandas 3) for the CEF code columns."""
    try:
        return pd.StringDtype("pyarrow", na_value=np.nan)
    except TypeError:  # pandas < 2.3 has no na_value argument
        return pd.StringDtype("pyarrow")


def _coded(codes: np.ndarray, labels: np.ndarray) -> pd.Series:
    """The strings ``labels[codes]`` as a string column (an Arrow take, no Python objects)."""
    taken = pa.array(np.asarray(labels, dtype=object), type=pa.string()).take(
        pa.array(np.asarray(codes, dtype=np.int64))
    )
    return pd.Series(taken, dtype=_string_dtype())


def _decimal(values: np.ndarray) -> pd.Series:
    """Unpadded decimal strings of non-negative integers as a string column (Arrow take or cast)."""
    values = np.asarray(values, dtype=np.int64)
    if values.size and int(values.max()) < 1000:
        return _coded(
            values, np.array([str(i) for i in range(int(values.max()) + 1)], dtype=object)
        )
    return pd.Series(pc.cast(pa.array(values), pa.string()), dtype=_string_dtype())


def _assemble(
    hh: dict,
    persons: dict,
    gq: dict,
    n_vacant: int,
    states: StateTable,
    state_idx: np.ndarray,
    rng: np.random.Generator,
) -> CefExtract:
    n_hh = hh["size"].size
    n_gq = gq["size"].size
    n_units = n_hh + n_gq + n_vacant
    unit_pop = np.concatenate([hh["size"], gq["size"], np.zeros(n_vacant, dtype=np.int64)])

    # Geography: shuffle, cut into states by cumulative population, number blocks within states.
    order = rng.permutation(n_units)
    pop_shuffled = unit_pop[order]
    midpoint = np.cumsum(pop_shuffled) - pop_shuffled / 2.0
    weights = states.population[state_idx].astype(float)
    bounds = np.cumsum(weights) / weights.sum() * float(unit_pop.sum())
    state_of_shuffled = np.minimum(
        np.searchsorted(bounds, midpoint, side="right"), state_idx.size - 1
    )
    by_state = np.argsort(state_of_shuffled, kind="stable")
    final_units = order[by_state]  # unit ids in MAFID order
    unit_state = state_idx[state_of_shuffled[by_state]]
    state_counts = np.bincount(state_of_shuffled, minlength=state_idx.size)
    state_starts = np.cumsum(state_counts) - state_counts
    rank = np.arange(n_units) - np.repeat(state_starts, state_counts)
    block = rank // UNITS_PER_BLOCK
    block_group = block // BLOCKS_PER_BLOCK_GROUP
    tract = block_group // BLOCK_GROUPS_PER_TRACT
    county = tract // TRACTS_PER_COUNTY
    if n_units and int(county.max()) >= MAX_COUNTIES_PER_STATE:
        raise ValidationError("too many units for the synthetic county codes; lower n_persons")

    mafid_of_unit = np.empty(n_units, dtype=np.int64)
    mafid_of_unit[final_units] = 100_000_001 + np.arange(n_units)
    mafid_str = _decimal(100_000_001 + np.arange(n_units))

    # Units table (in MAFID order).
    hht, hht2, cplt = _household_types(hh)
    is_hh = final_units < n_hh
    is_gq = (final_units >= n_hh) & (final_units < n_hh + n_gq)
    hh_of = np.where(is_hh, final_units, 0)

    def hh_field(values: np.ndarray, fill: int) -> np.ndarray:
        return np.where(is_hh, values[hh_of], fill)

    two = _code_strings(2, 64)
    rtype_unit = _coded(is_gq.astype(np.int64), np.array(["2", "4"], dtype=object))
    units = pd.DataFrame(
        {
            "RTYPE": rtype_unit,
            "MAFID": mafid_str,
            "FINAL_POP": _decimal(unit_pop[final_units]),
            "NPF": _decimal(hh_field(hh["npf"], 0)),
            "HHSPAN": _decimal(hh_field(persons["head_hisp"], 0)),
            "HHRACE": _coded(hh_field(persons["head_race"], 0), two),
            "TEN": _decimal(hh_field(hh["ten"], 0)),
            "HHT": _decimal(hh_field(hht, 0)),
            "HHT2": _coded(hh_field(hht2, 0), two),
            "CPLT": _decimal(hh_field(cplt, 0)),
        },
        columns=list(UNIT_COLUMNS),
    )

    # Geo table.
    block_group_code = block_group % BLOCK_GROUPS_PER_TRACT + 1
    geo = pd.DataFrame(
        {
            "RTYPE": rtype_unit,
            "MAFID": mafid_str,
            "TABBLKST": _coded(unit_state, states.fips),
            "TABBLKCOU": _coded(2 * county + 1, _code_strings(3, 2 * MAX_COUNTIES_PER_STATE + 1)),
            "TABTRACTCE": _coded(
                (tract % TRACTS_PER_COUNTY + 1) * 100,
                _code_strings(6, (TRACTS_PER_COUNTY + 1) * 100),
            ),
            "TABBLK": _coded(
                block_group_code * 1000 + block % BLOCKS_PER_BLOCK_GROUP, _code_strings(4, 10_000)
            ),
            "TABBLKGRPCE": _decimal(block_group_code),
            "REGIONCE": _coded(unit_state, states.region),
            "DIVISIONCE": _coded(unit_state, states.division),
            "PLACEFP": _coded(np.zeros(n_units, dtype=np.int64), np.array(["99999"], dtype=object)),
            "AIANNHCE": _coded(np.zeros(n_units, dtype=np.int64), np.array(["9999"], dtype=object)),
        },
        columns=list(GEO_COLUMNS),
    )

    # Persons table (sorted by MAFID; householder first within a household).
    person_unit = np.concatenate([persons["hh_id"], n_hh + gq["facility"]])
    person_mafid = mafid_of_unit[person_unit]
    person_order = np.argsort(person_mafid, kind="stable")
    n_hu_persons = persons["hh_id"].size
    in_gq = (person_order >= n_hu_persons).astype(np.int64)
    person_df = pd.DataFrame(
        {
            "RTYPE": _coded(in_gq, np.array(["3", "5"], dtype=object)),
            "MAFID": _decimal(person_mafid[person_order]),
            "QAGE": _decimal(np.concatenate([persons["age"], gq["age"]])[person_order]),
            "CENHISP": _decimal(np.concatenate([persons["hisp"], gq["hisp"]])[person_order]),
            "CENRACE": _coded(np.concatenate([persons["race"], gq["race"]])[person_order], two),
            "RELSHIP": _decimal(np.concatenate([persons["relship"], gq["relship"]])[person_order]),
        },
        columns=list(PERSON_COLUMNS),
    )
    return CefExtract(persons=person_df, units=units, geo=geo)
