"""Person-weighted distributions of a CEF extract and of ACS records, for calibration checks.

Used by the tests, the benchmark and ``docs/readme/synthetic.md`` to show generated vs ACS
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


def _npf_label(npf: np.ndarray) -> np.ndarray:
    labels = np.array(NPF_LABELS, dtype=object)
    index = np.where(npf < 2, 0, np.minimum(npf, 7) - 1)
    return labels[index]


def _noc_label(noc: np.ndarray, in_gq: np.ndarray) -> np.ndarray:
    labels = np.array(NOC_LABELS, dtype=object)
    return np.where(in_gq, "GQ", labels[np.minimum(noc, 5) + 1])


def _age_label(age: np.ndarray) -> np.ndarray:
    index = np.searchsorted(np.array(AGE_BINS), age, side="right") - 1
    return np.array(AGE_LABELS, dtype=object)[index]


def extract_person_profile(extract: CefExtract) -> pd.DataFrame:
    """One row per person of ``extract`` with the categories in :data:`PROFILE_VARIABLES`."""
    persons, units = extract.persons, extract.units
    child = persons["RELSHIP"].isin(_OWN_CHILD_RELSHIPS).to_numpy() & (
        persons["QAGE"].astype(int).to_numpy() < 18
    )
    noc_by_unit = pd.Series(child.astype(np.int64)).groupby(persons["MAFID"].to_numpy()).sum()
    unit_info = units.set_index("MAFID")
    mafid = persons["MAFID"].to_numpy()
    npf = unit_info["NPF"].astype(int).reindex(mafid).to_numpy()
    ten = unit_info["TEN"].reindex(mafid).to_numpy()
    noc = noc_by_unit.reindex(mafid).to_numpy()
    in_gq = persons["RTYPE"].to_numpy() == "5"
    tenure = np.where(in_gq, "GQ", np.where(np.isin(ten, ["1", "2"]), "owner", "renter"))
    race_code = persons["CENRACE"].astype(int).to_numpy()
    race = np.array(RACE_LABELS, dtype=object)[np.minimum(race_code, 7) - 1]
    hispanic = np.where(persons["CENHISP"].to_numpy() == "2", "Hispanic", "not Hispanic")
    return pd.DataFrame(
        {
            "npf": _npf_label(np.where(in_gq, 0, npf)),
            "noc": _noc_label(noc, in_gq),
            "tenure": tenure,
            "age": _age_label(persons["QAGE"].astype(int).to_numpy()),
            "race": race,
            "hispanic": hispanic,
            "weight": 1.0,
        }
    )


def acs_person_profile(records: pd.DataFrame) -> pd.DataFrame:
    """One row per ACS person record (``N`` read as NaN) with the same categories, weight PWGTP."""
    in_gq = records["HOUSING_TYPE"].to_numpy() != 1
    npf = records["NPF"].fillna(0).astype(int).to_numpy()
    noc = records["NOC"].fillna(0).astype(int).to_numpy()
    own_rent = records["OWN_RENT"].to_numpy()
    tenure = np.where(in_gq, "GQ", np.where(own_rent == 1, "owner", "renter"))
    rac1p = records["RAC1P"].astype(int).to_numpy()
    race_index = np.array([0, 0, 1, 2, 2, 2, 3, 4, 5, 6])[rac1p]
    return pd.DataFrame(
        {
            "npf": _npf_label(npf),
            "noc": _noc_label(noc, in_gq),
            "tenure": tenure,
            "age": _age_label(records["AGEP"].astype(int).to_numpy()),
            "race": np.array(RACE_LABELS, dtype=object)[race_index],
            "hispanic": np.where(records["HISP"].to_numpy() > 0, "Hispanic", "not Hispanic"),
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
    totals = profile.groupby(variable)["weight"].sum()
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
