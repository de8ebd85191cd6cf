"""Deterministic synthetic household generator producing a PHSafe CEF extract (persons/units/geo).

The generator builds a synthetic US population of households and group-quarters (GQ) persons whose
person-weighted family-size (``NPF``), own-children (``NOC``), tenure, GQ, age and race/ethnicity mixes
are calibrated on the NIST ACS 2019 national excerpt (tables in ``engine/data/calibration/``, derived
by :mod:`engine.data.synthetic_calibration`), spread over the 50 states + DC (+ Puerto Rico) in
proportion to their 2010 Census populations (``census2010_state_populations.csv``, from the MIT-licensed
``ppmf`` R package). The output uses the official PHSafe 3.0.0 CEF-extract layout
(:mod:`engine.data.cef_types`; PHS §3.1 and ``phsafe/resources/schema``), with ``HHT``,
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
   (``OWNER_MORTGAGE_SHARE``, ``RENTER_NO_CASH_RENT_SHARE``: assumptions, the ACS excerpt
   does not distinguish them). Vacant housing units are added at :data:`DEFAULT_VACANCY_RATE`.
6. Units are shuffled and cut into states by cumulative population; within a state they are numbered
   into synthetic but well-formed counties (odd FIPS codes 001, 003, …), tracts (``000100`` …),
   block groups (1–3) and blocks (first digit = block group), then given unique sequential MAFIDs.

Steps 1–5 (the people) are :mod:`engine.data.synthetic_households`; the state populations and the
two-or-more-races mix are read by :mod:`engine.data.census2010_tables`; this module checks the
arguments, numbers the geography (step 6) and writes the CEF tables. Parameters that are
assumptions rather than ACS calibrations are module constants there and here, documented in
``docs/synthetic.md``; none of them affects the calibrated person shares.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from engine.core.errors import ValidationError
from engine.data.cef_types import GEO_COLUMNS, PERSON_COLUMNS, UNIT_COLUMNS, CefExtract
from engine.data.census2010_tables import (
    StateTable,
    load_state_table,
    load_two_or_more_races,
    select_states,
)
from engine.data.synthetic_calibration import AcsCalibration, load_calibration
from engine.data.synthetic_households import (
    draw_group_quarters,
    draw_households,
    expand_household_persons,
    household_types,
)

MIN_PERSONS = 1_000
MAX_PERSONS = 50_000_000

#: Share of housing units that are vacant (2010 Census: 14.99 M of 131.70 M ≈ 0.114).
DEFAULT_VACANCY_RATE = 0.114
#: Synthetic geography: units per block, blocks per block group, block groups per tract, tracts
#: per county.
UNITS_PER_BLOCK = 20
BLOCKS_PER_BLOCK_GROUP = 10
BLOCK_GROUPS_PER_TRACT = 3
TRACTS_PER_COUNTY = 40
MAX_COUNTIES_PER_STATE = 499  # odd county codes 001 … 997


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

    households = draw_households(n_hu_persons, cal, rng)
    persons = expand_household_persons(households, cal, two_codes, two_probs, rng)
    gq = draw_group_quarters(n_inst, n_noninst, cal, two_codes, two_probs, rng)

    n_households = households["size"].size
    n_vacant = int(round(n_households * vacancy_rate / (1.0 - vacancy_rate)))
    return _assemble(households, persons, gq, n_vacant, state_table, state_idx, rng)


# --------------------------------------------------------------------------------------------------
# Geography and the CEF tables


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
    hht, hht2, cplt = household_types(hh)
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
