"""The S-DHC table shells PH1–PH8: data-cell numbering, basis cells, totals and cell mappings.

PHS §2.4 prints the eight table shells; the measured *basis* cells are the bold, disjoint ones and
the remaining cells are totals derived from them. Data cells are numbered from 1 = Total in shell
order, as in the official outputs (``<T>_DATA_CELL``; ``/work/shared/data/README.md``, "outputs").
Each measured table also has a universe filter and a record → basis-cell map (the function *f* of
PHS Algorithm 1–2, Table 9), vectorised here over NumPy arrays of integer codes. The codes follow the
CEF extract: RELSHIP 20–38, HHT 0–7, HHT2 0–12, CPLT 0–5, TEN 0–4 (README "PHSafe input record
layouts"); the rules are those of the PHSafe 3.0.0 production code (``private_tabulations.py``).

A record that satisfies its table's universe filter but matches no basis cell (e.g. an own child in
a household whose HHT2 says "no own children") is inconsistent input; it gets cell −1, is left out of
the counts and is reported as "unmapped" by the join.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

Records = Mapping[str, np.ndarray]
"""Column name → integer codes of the joined records (person and/or unit attributes)."""


@dataclass(frozen=True)
class TableShell:
    """One published table's cells: labels (cell 1 = Total), basis cells and derived totals."""

    name: str
    labels: tuple[str, ...]
    basis: tuple[int, ...]
    totals: Mapping[int, tuple[int, ...]]
    """Derived cell → the basis cells it sums (e.g. PH2 cell 2 = cells 3 + 4)."""

    @property
    def cells(self) -> tuple[int, ...]:
        return tuple(range(1, len(self.labels) + 1))

    def label(self, cell: int) -> str:
        return self.labels[cell - 1]


@dataclass(frozen=True)
class MeasuredTable:
    """A measured run (PHS §3.2): its shell, algorithm, iteration source and record → cell map."""

    name: str
    shell: TableShell
    algorithm: int
    """1 = filter-truncate-join-measure (Δ = 2τ+2); 2 = units only (Δ = 2)."""
    person_iteration: bool
    """True when iterated by the person's race (PH3), else by the householder's."""
    person_filter: Callable[[Records], np.ndarray] | None
    unit_filter: Callable[[Records], np.ndarray]
    cell_of: Callable[[Records], np.ndarray]

    @property
    def basis(self) -> tuple[int, ...]:
        return self.shell.basis


def _ranges(*pairs: tuple[int, tuple[int, ...]]) -> dict[int, tuple[int, ...]]:
    return dict(pairs)


PH1_SHELL = TableShell("PH1", ("Total", "Under 18 years", "18 years and over"), (2, 3), {1: (2, 3)})
PH2_SHELL = TableShell(
    "PH2",
    (
        "Total",
        "In married couple household",
        "Opposite-sex married couple",
        "Same-sex married couple",
        "In cohabiting couple family",
        "Opposite-sex cohabiting couple",
        "Same-sex cohabiting couple",
        "Male householder, no spouse or partner present",
        "Male householder: living alone",
        "Male householder: living with others",
        "Female householder, no spouse or partner present",
        "Female householder: living alone",
        "Female householder: living with others",
    ),
    (3, 4, 6, 7, 9, 10, 12, 13),
    _ranges(
        (1, (3, 4, 6, 7, 9, 10, 12, 13)), (2, (3, 4)), (5, (6, 7)), (8, (9, 10)), (11, (12, 13))
    ),
)
PH3_SHELL = TableShell(
    "PH3",
    (
        "Total",
        "Householder, spouse, unmarried partner, or nonrelative",
        "Own child",
        "Own child: in married couple family",
        "Own child: in cohabiting couple family",
        "Own child: in male householder, no spouse or partner present family",
        "Own child: in female householder, no spouse or partner present family",
        "Other relatives",
        "Other relatives: grandchild",
        "Other relatives: other relatives",
    ),
    (2, 4, 5, 6, 7, 9, 10),
    _ranges((1, (2, 4, 5, 6, 7, 9, 10)), (3, (4, 5, 6, 7)), (8, (9, 10))),
)
PH4_SHELL = TableShell("PH4", ("Total", "Under 18 years", "18 years and over"), (2, 3), {1: (2, 3)})
_PH6_FAMILIES = ("Married couple", "Cohabiting couple", "Male householder", "Female householder")
_PH6_AGES = ("under 4 years", "4 and 5 years", "6 to 11 years", "12 to 17 years")
PH6_SHELL = TableShell(
    "PH6",
    ("Total",)
    + tuple(
        label
        for family in _PH6_FAMILIES
        for label in (f"{family} family", *(f"{family} family: {a}" for a in _PH6_AGES))
    ),
    (3, 4, 5, 6, 8, 9, 10, 11, 13, 14, 15, 16, 18, 19, 20, 21),
    _ranges(
        (1, (3, 4, 5, 6, 8, 9, 10, 11, 13, 14, 15, 16, 18, 19, 20, 21)),
        (2, (3, 4, 5, 6)),
        (7, (8, 9, 10, 11)),
        (12, (13, 14, 15, 16)),
        (17, (18, 19, 20, 21)),
    ),
)
PH7_SHELL = TableShell(
    "PH7",
    ("Total", "Owned with a mortgage or a loan", "Owned free and clear", "Renter occupied"),
    (2, 3, 4),
    {1: (2, 3, 4)},
)
PH8_SHELL = TableShell("PH8", ("Total", "Owner occupied", "Renter occupied"), (2, 3), {1: (2, 3)})
HOUSEHOLDS_SHELL = TableShell("households", ("Total",), (1,), {})

# ---- universe filters and cell maps (codes as integers) ------------------------------------------

FAMILY_RELSHIP = np.array([20, 21, 23, 25, 26, 27, 28, 29, 30, 31, 32, 33])
"""Householder and relatives: the population in families (PH4)."""
OWN_CHILD_RELSHIP = np.array([25, 26, 27])
_PH3_SELF_PARTNER_NONREL = np.array([20, 21, 22, 23, 24, 34, 35, 36])
_PH3_OTHER_RELATIVES = np.array([28, 29, 31, 32, 33])


def _in_household(r: Records) -> np.ndarray:
    return r["p_rtype"] == 3


def _all_units(r: Records) -> np.ndarray:
    return np.ones(r["u_rtype"].shape, dtype=bool)


def _occupied_housing_unit(r: Records) -> np.ndarray:
    return (r["u_rtype"] == 2) & (r["u_hht"] != 0)


def _family_household(r: Records) -> np.ndarray:
    return (r["u_hht"] >= 1) & (r["u_hht"] <= 3)


def _age_cell(r: Records) -> np.ndarray:
    return np.where(r["p_age"] < 18, 2, 3).astype(np.int64)


def _ph2_cell(r: Records) -> np.ndarray:
    hht2, cplt = r["u_hht2"], r["u_cplt"]
    married = (hht2 == 1) | (hht2 == 2)
    cohabiting = (hht2 == 3) | (hht2 == 4)
    conditions = [
        married & (cplt == 1),
        married & (cplt == 2),
        cohabiting & (cplt == 3),
        cohabiting & (cplt == 4),
        hht2 == 9,
        (hht2 >= 10) & (hht2 <= 12),
        hht2 == 5,
        (hht2 >= 6) & (hht2 <= 8),
    ]
    return np.select(conditions, [3, 4, 6, 7, 9, 10, 12, 13], default=-1).astype(np.int64)


def _ph3_cell(r: Records) -> np.ndarray:
    rel, hht2 = r["p_relship"], r["u_hht2"]
    own_child = np.isin(rel, OWN_CHILD_RELSHIP)
    conditions = [
        np.isin(rel, _PH3_SELF_PARTNER_NONREL),
        own_child & (hht2 == 1),
        own_child & (hht2 == 3),
        own_child & (hht2 == 10),
        own_child & (hht2 == 6),
        rel == 30,
        np.isin(rel, _PH3_OTHER_RELATIVES),
    ]
    return np.select(conditions, [2, 4, 5, 6, 7, 9, 10], default=-1).astype(np.int64)


def _ph6_cell(r: Records) -> np.ndarray:
    hht2, age = r["u_hht2"], r["p_age"]
    family_base = np.select(
        [hht2 == 1, hht2 == 3, hht2 == 10, hht2 == 6], [3, 8, 13, 18], default=-1
    )
    age_offset = np.select([age < 4, age < 6, age < 12, age < 18], [0, 1, 2, 3], default=-1)
    ok = (family_base > 0) & (age_offset >= 0)
    return np.where(ok, family_base + age_offset, -1).astype(np.int64)


def _ph7_cell(r: Records) -> np.ndarray:
    ten = r["u_ten"]
    return np.select([ten == 1, ten == 2, (ten == 3) | (ten == 4)], [2, 3, 4], default=-1).astype(
        np.int64
    )


def _ph8_cell(r: Records) -> np.ndarray:
    ten = r["u_ten"]
    return np.select([(ten == 1) | (ten == 2), (ten == 3) | (ten == 4)], [2, 3], default=-1).astype(
        np.int64
    )


def _one(r: Records) -> np.ndarray:
    return np.ones(r["u_rtype"].shape, dtype=np.int64)


MEASURED: dict[str, MeasuredTable] = {
    "PH1_num": MeasuredTable("PH1_num", PH1_SHELL, 1, False, _in_household, _all_units, _age_cell),
    "PH1_denom": MeasuredTable(
        "PH1_denom", HOUSEHOLDS_SHELL, 2, False, None, _occupied_housing_unit, _one
    ),
    "PH2": MeasuredTable("PH2", PH2_SHELL, 1, False, _in_household, _all_units, _ph2_cell),
    "PH3": MeasuredTable(
        "PH3",
        PH3_SHELL,
        1,
        True,
        lambda r: _in_household(r) & (r["p_age"] < 18),
        _all_units,
        _ph3_cell,
    ),
    "PH4": MeasuredTable(
        "PH4",
        PH4_SHELL,
        1,
        False,
        lambda r: np.isin(r["p_relship"], FAMILY_RELSHIP),
        _family_household,
        _age_cell,
    ),
    "PH5_denom": MeasuredTable(
        "PH5_denom", HOUSEHOLDS_SHELL, 2, False, None, _family_household, _one
    ),
    "PH6": MeasuredTable(
        "PH6",
        PH6_SHELL,
        1,
        False,
        lambda r: (r["p_age"] < 18) & np.isin(r["p_relship"], OWN_CHILD_RELSHIP),
        _all_units,
        _ph6_cell,
    ),
    "PH7": MeasuredTable("PH7", PH7_SHELL, 1, False, _in_household, _all_units, _ph7_cell),
    "PH8_denom": MeasuredTable(
        "PH8_denom", PH8_SHELL, 2, False, None, _occupied_housing_unit, _ph8_cell
    ),
}
"""The nine measured runs, in the official order."""

OUTPUT_TABLES: tuple[str, ...] = (
    "PH1_num",
    "PH1_denom",
    "PH2",
    "PH3",
    "PH4",
    "PH5_num",
    "PH5_denom",
    "PH6",
    "PH7",
    "PH8_num",
    "PH8_denom",
)
"""The eleven official output files (the nine runs plus derived PH5_num and PH8_num)."""

OUTPUT_SHELLS: dict[str, TableShell] = {
    "PH1_num": PH1_SHELL,
    "PH1_denom": PH1_SHELL,
    "PH2": PH2_SHELL,
    "PH3": PH3_SHELL,
    "PH4": PH4_SHELL,
    "PH5_num": PH4_SHELL,
    "PH5_denom": PH4_SHELL,
    "PH6": PH6_SHELL,
    "PH7": PH7_SHELL,
    "PH8_num": PH8_SHELL,
    "PH8_denom": PH8_SHELL,
}
"""The shell whose cell numbers each output file uses (denominators share their numerator's)."""

PH8_NUM_FROM_PH7: dict[int, tuple[int, ...]] = {2: (2, 3), 3: (4,)}
"""PH8_num owner = PH7 mortgage + free and clear; renter = PH7 renter (PHS §3.2, §6.4.1)."""

ITERATION_CODES: dict[str, tuple[str, ...]] = {
    "*": ("*",),
    "A-G": ("A", "B", "C", "D", "E", "F", "G"),
    "H,I": ("H", "I"),
}
"""Iteration codes of each iteration level (PHS §2.2)."""


def iteration_index(level: str, race: np.ndarray, hispanic: np.ndarray) -> np.ndarray:
    """Index of each record's iteration code within ``level``; −1 when it has none.

    ``race`` is CENRACE/HHRACE as an integer (1–6 one race alone, 7–63 two or more, 0 = none) and
    ``hispanic`` CENHISP/HHSPAN (1 not Hispanic, 2 Hispanic). A-G: White alone … Two or more races;
    H,I: Hispanic, or White alone not Hispanic (PHS §2.2).
    """
    if level == "*":
        return np.zeros(race.shape, dtype=np.int64)
    if level == "A-G":
        return np.select([race < 1, race >= 7], [-1, 6], default=race - 1).astype(np.int64)
    if level == "H,I":
        return np.select([hispanic == 2, (race == 1) & (hispanic == 1)], [0, 1], default=-1).astype(
            np.int64
        )
    raise ValueError(f"unknown iteration level {level!r}")
