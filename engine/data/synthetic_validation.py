"""Person-weighted distributions of a CEF extract and of ACS records, for calibration checks.

Used by the tests, the benchmark and ``docs/synthetic.md`` to show generated vs ACS
distributions. Definitions follow the ACS PUMS (and the NIST ACS 2019 data dictionary): ``NPF`` and
``NOC`` are household variables repeated on each person of the household, "N" for GQ persons (and,
for NPF, persons in non-family households). For a CEF extract, a person's NPF is the ``NPF`` of its
unit (0 = not in a family) and its NOC is the number of the householder's own children under 18 in
the unit (``RELSHIP`` 25/26/27 with ``QAGE`` < 18). ACS shares are weighted by ``PWGTP`` (the
weighting used to derive the calibration, :mod:`engine.data.synthetic_calibration`); generated
shares count persons.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from engine.core.errors import ValidationError
from engine.data.cef_types import CefExtract

#: Category labels shared by both profiles.
NPF_LABELS = ("not in family", "2", "3", "4", "5", "6", "7+")
NOC_LABELS = ("GQ", "0", "1", "2", "3", "4", "5+")
TENURE_LABELS = ("owner", "renter", "GQ")
AGE_BINS = (0, 5, 18, 25, 35, 45, 55, 65, 75, 200)
AGE_LABELS = ("0-4", "5-17", "18-24", "25-34", "35-44", "45-54", "55-64", "65-74", "75+")
RACE_LABELS = (
    "White alone",
    "Black alone",
    "AIAN alone",
    "Asian alone",
    "NHPI alone",
    "Some other race alone",
    "Two or more races",
)
HISPANIC_LABELS = ("not Hispanic", "Hispanic")
PROFILE_VARIABLES = ("npf", "noc", "tenure", "age", "race", "hispanic")
_OWN_CHILD_RELSHIPS = ("25", "26", "27")


def _categorical(codes: np.ndarray, labels: tuple[str, ...]) -> pd.Categorical:
    return pd.Categorical.from_codes(np.asarray(codes, dtype=np.int64), categories=list(labels))


def _npf_codes(npf: np.ndarray) -> np.ndarray:
    return np.where(npf < 2, 0, np.minimum(npf, 7) - 1)


def _noc_codes(noc: np.ndarray, in_gq: np.ndarray) -> np.ndarray:
    return np.where(in_gq, 0, np.minimum(noc, 5) + 1)


def _age_codes(age: np.ndarray) -> np.ndarray:
    return np.searchsorted(np.array(AGE_BINS), age, side="right") - 1


def _ints(values: pd.Series) -> np.ndarray:
    return values.astype("int64").to_numpy(dtype=np.int64)


def extract_person_profile(extract: CefExtract) -> pd.DataFrame:
    """One row per person of ``extract`` with the categories in :data:`PROFILE_VARIABLES`."""
    persons, units = extract.persons, extract.units
    unit_mafid = _ints(units["MAFID"])
    order = np.argsort(unit_mafid, kind="stable")
    person_mafid = _ints(persons["MAFID"])
    position = np.searchsorted(unit_mafid[order], person_mafid)
    unit_of_person = order[np.minimum(position, order.size - 1)]
    if not np.array_equal(unit_mafid[unit_of_person], person_mafid):
        raise ValidationError("persons reference MAFIDs that are not in the units table")
    age = _ints(persons["QAGE"])
    own_child = persons["RELSHIP"].isin(_OWN_CHILD_RELSHIPS).to_numpy() & (age < 18)
    noc_of_unit = np.bincount(unit_of_person, weights=own_child, minlength=unit_mafid.size)
    noc = noc_of_unit[unit_of_person].astype(np.int64)
    npf = _ints(units["NPF"])[unit_of_person]
    ten = _ints(units["TEN"])[unit_of_person]
    in_gq = (persons["RTYPE"] == "5").to_numpy()
    tenure = np.where(in_gq, 2, np.where(np.isin(ten, [1, 2]), 0, 1))
    race = np.minimum(_ints(persons["CENRACE"]), 7) - 1
    hispanic = (persons["CENHISP"] == "2").to_numpy().astype(np.int64)
    return pd.DataFrame(
        {
            "npf": _categorical(_npf_codes(np.where(in_gq, 0, npf)), NPF_LABELS),
            "noc": _categorical(_noc_codes(noc, in_gq), NOC_LABELS),
            "tenure": _categorical(tenure, TENURE_LABELS),
            "age": _categorical(_age_codes(age), AGE_LABELS),
            "race": _categorical(race, RACE_LABELS),
            "hispanic": _categorical(hispanic, HISPANIC_LABELS),
            "weight": np.ones(len(persons)),
        }
    )


def acs_person_profile(records: pd.DataFrame) -> pd.DataFrame:
    """One row per ACS person record (``N`` read as NaN) with the same categories, weight PWGTP."""
    in_gq = records["HOUSING_TYPE"].to_numpy() != 1
    npf = records["NPF"].fillna(0).astype(int).to_numpy()
    noc = records["NOC"].fillna(0).astype(int).to_numpy()
    own_rent = records["OWN_RENT"].to_numpy()
    tenure = np.where(in_gq, 2, np.where(own_rent == 1, 0, 1))
    rac1p = records["RAC1P"].astype(int).to_numpy()
    race = np.array([0, 0, 1, 2, 2, 2, 3, 4, 5, 6])[rac1p]
    return pd.DataFrame(
        {
            "npf": _categorical(_npf_codes(npf), NPF_LABELS),
            "noc": _categorical(_noc_codes(noc, in_gq), NOC_LABELS),
            "tenure": _categorical(tenure, TENURE_LABELS),
            "age": _categorical(_age_codes(records["AGEP"].astype(int).to_numpy()), AGE_LABELS),
            "race": _categorical(race, RACE_LABELS),
            "hispanic": _categorical((records["HISP"].to_numpy() > 0).astype(int), HISPANIC_LABELS),
            "weight": records["PWGTP"].astype(float).to_numpy(),
        }
    )


_LABELS = {
    "npf": NPF_LABELS,
    "noc": NOC_LABELS,
    "tenure": TENURE_LABELS,
    "age": AGE_LABELS,
    "race": RACE_LABELS,
    "hispanic": HISPANIC_LABELS,
}


def shares(profile: pd.DataFrame, variable: str) -> pd.Series:
    """Weighted shares (0–1) of ``variable``'s categories, in label order (missing → 0)."""
    totals = profile.groupby(variable, observed=False)["weight"].sum()
    return (totals / totals.sum()).reindex(list(_LABELS[variable]), fill_value=0.0)


def compare_profiles(generated: pd.DataFrame, acs: pd.DataFrame) -> pd.DataFrame:
    """Table of ``variable, category, acs_pct, generated_pct, difference_pp`` for every variable."""
    rows = []
    for variable in PROFILE_VARIABLES:
        gen, ref = shares(generated, variable), shares(acs, variable)
        for category in _LABELS[variable]:
            rows.append(
                {
                    "variable": variable,
                    "category": category,
                    "acs_pct": 100.0 * float(ref[category]),
                    "generated_pct": 100.0 * float(gen[category]),
                    "difference_pp": 100.0 * float(gen[category] - ref[category]),
                }
            )
    return pd.DataFrame(rows)
