"""Calibration tables of the synthetic household generator, derived from the NIST ACS 2019 excerpts.

Source: NIST "Diverse Communities" Data Excerpts, national file ``national2019.csv`` (27,253 person
records of the 2019 American Community Survey from 20 PUMAs; National Institute of Standards and
Technology, https://github.com/usnistgov/SDNist; not subject to US copyright — see
``calibration/NOTICE.md``). The derived tables are shipped in ``engine/data/calibration/`` so that
neither the generator nor CI needs the NIST files; :func:`main` regenerates them::

    python -m engine.data.synthetic_calibration /path/to/national2019.csv engine/data/calibration

Every share is **person-weighted with the ACS person weight PWGTP** (a survey estimate of the
population of the 20 PUMAs). In the ACS, ``NPF`` (persons in the householder's family) and ``NOC``
(the householder's own children under 18) are household variables repeated on every person record
of the household, so the person-weighted share of ``NPF = k`` is the share of people who live in a
household whose family has ``k`` members — the quantity the generator reproduces.

Tables (one job each):

* ``acs2019_family_cells.csv`` — for each (``npf``, ``noc``) cell of housing-unit persons
  (``npf = 0`` = not in a family household): its share of all persons, the probability that the
  householder is married with spouse present (``married_share``, estimated as ``npf`` × the
  weighted share of MSP = 1 persons / 2, pooled over npf 7+ and over "with/without own children",
  capped at 1 and 0 when the cell leaves no room for a spouse) and the owner share (OWN_RENT = 1).
* ``acs2019_group_quarters.csv`` — shares of persons in institutional (HOUSING_TYPE 2) and
  non-institutional (3) group quarters.
* ``acs2019_ages.csv`` — single-year age distributions (0–99) of the groups the generator draws ages
  for: own children (< 18, households with NOC > 0), adults (≥ 18) in households with own children,
  adults in family households without own children, persons ≥ 15 not in a family household, and the
  two GQ types.
* ``acs2019_race_ethnicity.csv`` — joint shares of CENRACE major group (RAC1P 1 → 01 White, 2 → 02
  Black, 3/4/5 → 03 AIAN, 6 → 04 Asian, 7 → 05 NHPI, 8 → 06 Some Other Race, 9 → ``two``) and
  CENHISP (HISP 0 → 1 not Hispanic, else 2).
* ``acs2019_scalars.csv`` — scalars: the female share of persons ≥ 15 not in a family household
  (used as the female share of non-family householders).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from engine.core.errors import ValidationError

#: Directory of the shipped calibration tables.
CALIBRATION_DIR: Path = Path(__file__).resolve().parent / "calibration"

#: ACS columns the derivation reads.
ACS_COLUMNS: tuple[str, ...] = (
    "AGEP",
    "SEX",
    "MSP",
    "HISP",
    "RAC1P",
    "NOC",
    "NPF",
    "HOUSING_TYPE",
    "OWN_RENT",
    "PWGTP",
)

#: RAC1P → CENRACE major group ("two" = two or more races, detailed in the generator).
RAC1P_TO_CENRACE: dict[int, str] = {
    1: "01",
    2: "02",
    3: "03",
    4: "03",
    5: "03",
    6: "04",
    7: "05",
    8: "06",
    9: "two",
}

MAX_ACS_AGE = 99
_MARRIED_POOL_NPF = 7  # cells with npf >= 7 share one married-share estimate


@dataclass(frozen=True)
class AcsCalibration:
    """The derived calibration tables (see the module docstring for their meaning)."""

    family_cells: pd.DataFrame
    group_quarters: pd.DataFrame
    ages: pd.DataFrame
    race_ethnicity: pd.DataFrame
    scalars: pd.DataFrame


TABLE_FILES: dict[str, str] = {
    "family_cells": "acs2019_family_cells.csv",
    "group_quarters": "acs2019_group_quarters.csv",
    "ages": "acs2019_ages.csv",
    "race_ethnicity": "acs2019_race_ethnicity.csv",
    "scalars": "acs2019_scalars.csv",
}


def read_acs_records(path: Path | str) -> pd.DataFrame:
    """Read a NIST ACS excerpt CSV (``N`` = null) keeping the columns in :data:`ACS_COLUMNS`."""
    path = Path(path)
    if not path.is_file():
        raise ValidationError(f"ACS excerpt file not found: {path}")
    frame = pd.read_csv(path, na_values="N", keep_default_na=False)
    missing = [c for c in ACS_COLUMNS if c not in frame.columns]
    if missing:
        raise ValidationError(
            f"{path}: missing ACS columns {missing}; expected {list(ACS_COLUMNS)}"
        )
    return frame.loc[:, list(ACS_COLUMNS)]


def _weighted_shares(keys: pd.Series, weights: pd.Series) -> pd.Series:
    totals = weights.groupby(keys).sum()
    return totals / totals.sum()


def derive_calibration(records: pd.DataFrame) -> AcsCalibration:
    """Derive every calibration table from ACS person records (PWGTP-weighted)."""
    weight = records["PWGTP"].astype(float)
    total = float(weight.sum())
    if total <= 0:
        raise ValidationError("ACS records have no positive person weight")
    housing = records["HOUSING_TYPE"] == 1
    hu = records.loc[housing]
    hu_weight = weight.loc[housing]
    npf = hu["NPF"].fillna(0).astype(int)
    noc = hu["NOC"].fillna(0).astype(int)

    cell_weight = hu_weight.groupby([npf.rename("npf"), noc.rename("noc")]).sum()
    owners = (hu["OWN_RENT"] == 1).astype(float) * hu_weight
    owner_weight = owners.groupby([npf.rename("npf"), noc.rename("noc")]).sum()

    married = (hu["MSP"] == 1).astype(float) * hu_weight
    pool_npf = npf.clip(upper=_MARRIED_POOL_NPF).rename("pool_npf")
    has_children = (noc > 0).rename("has_children")
    pooled = (
        married.groupby([pool_npf, has_children]).sum()
        / hu_weight.groupby([pool_npf, has_children]).sum()
    )

    cells = cell_weight.rename("weight").reset_index()
    cells["person_share"] = cells["weight"] / total
    cells["owner_share"] = (
        owner_weight.reindex(pd.MultiIndex.from_frame(cells[["npf", "noc"]])).to_numpy()
        / cells["weight"].to_numpy()
    )
    married_rate = np.array(
        [
            pooled.get((min(k, _MARRIED_POOL_NPF), c > 0), 0.0)
            for k, c in zip(cells["npf"], cells["noc"], strict=True)
        ]
    )
    married_share = np.clip(cells["npf"].to_numpy() * married_rate / 2.0, 0.0, 1.0)
    no_room = (cells["npf"].to_numpy() < 2) | (
        cells["noc"].to_numpy() >= cells["npf"].to_numpy() - 1
    )
    married_share[no_room] = 0.0
    cells["married_share"] = married_share
    family_cells = cells.loc[:, ["npf", "noc", "person_share", "married_share", "owner_share"]]

    gq_types = {2: "institutional", 3: "noninstitutional"}
    group_quarters = pd.DataFrame(
        {
            "gq_type": list(gq_types.values()),
            "person_share": [
                float(weight[records["HOUSING_TYPE"] == code].sum()) / total for code in gq_types
            ],
        }
    )

    ages = _age_table(records, weight)

    race = records["RAC1P"].map(RAC1P_TO_CENRACE)
    if race.isna().any():
        raise ValidationError("ACS records contain RAC1P codes outside 1-9")
    hisp = np.where(records["HISP"] > 0, 2, 1)
    race_shares = _weighted_shares(
        pd.Series(list(zip(race, hisp, strict=True)), index=records.index), weight
    )
    race_ethnicity = pd.DataFrame(
        {
            "race": [k[0] for k in race_shares.index],
            "cenhisp": [int(k[1]) for k in race_shares.index],
            "person_share": race_shares.to_numpy(),
        }
    )

    nonfamily_adults = housing & records["NPF"].isna() & (records["AGEP"] >= 15)
    female_share = float(
        weight[nonfamily_adults & (records["SEX"] == 2)].sum() / weight[nonfamily_adults].sum()
    )
    scalars = pd.DataFrame(
        {
            "name": ["nonfamily_female_share"],
            "value": [female_share],
            "description": [
                "PWGTP-weighted female share of persons >= 15 not in a family household"
            ],
        }
    )
    return AcsCalibration(family_cells, group_quarters, ages, race_ethnicity, scalars)


def _age_table(records: pd.DataFrame, weight: pd.Series) -> pd.DataFrame:
    age = records["AGEP"].clip(upper=MAX_ACS_AGE)
    housing = records["HOUSING_TYPE"] == 1
    noc = records["NOC"].fillna(0)
    masks = {
        "own_child": housing & (noc > 0) & (age < 18),
        "parent_adult": housing & (noc > 0) & (age >= 18),
        "family_adult": housing & records["NPF"].notna() & (noc == 0) & (age >= 18),
        "nonfamily_adult": housing & records["NPF"].isna() & (age >= 15),
        "gq_institutional": records["HOUSING_TYPE"] == 2,
        "gq_noninstitutional": records["HOUSING_TYPE"] == 3,
    }
    table = pd.DataFrame({"age": np.arange(MAX_ACS_AGE + 1)})
    for name, mask in masks.items():
        counts = np.bincount(age[mask].to_numpy(), weights=weight[mask].to_numpy(), minlength=100)
        if counts.sum() <= 0:
            raise ValidationError(f"ACS records have no persons in age group {name!r}")
        table[name] = counts / counts.sum()
    return table


def write_calibration(calibration: AcsCalibration, out_dir: Path | str) -> list[Path]:
    """Write the tables as CSV files (fixed float precision) into ``out_dir``; return the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for attr, file_name in TABLE_FILES.items():
        path = out / file_name
        getattr(calibration, attr).to_csv(
            path, index=False, float_format="%.10g", lineterminator="\n"
        )
        written.append(path)
    return written


def load_calibration(directory: Path | str = CALIBRATION_DIR) -> AcsCalibration:
    """Read the shipped calibration tables (default: ``engine/data/calibration``)."""
    directory = Path(directory)
    tables = {}
    for attr, file_name in TABLE_FILES.items():
        path = directory / file_name
        if not path.is_file():
            raise ValidationError(
                f"calibration table missing: {path}; regenerate it with "
                "`python -m engine.data.synthetic_calibration <national2019.csv> <dir>`"
            )
        dtype = {"race": str} if attr == "race_ethnicity" else None
        tables[attr] = pd.read_csv(path, dtype=dtype, keep_default_na=False)
    return AcsCalibration(**tables)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: derive the tables from a NIST ACS excerpt CSV and write them to a directory."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("acs_csv", type=Path, help="NIST ACS excerpt, e.g. national2019.csv")
    parser.add_argument("out_dir", type=Path, nargs="?", default=CALIBRATION_DIR)
    args = parser.parse_args(argv)
    for path in write_calibration(derive_calibration(read_acs_records(args.acs_csv)), args.out_dir):
        print(path)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
