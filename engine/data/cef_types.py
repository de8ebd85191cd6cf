"""The in-memory form of a PHSafe CEF extract: three tables, persons, units and geo.

The column names, their order and their code formats follow the official PHSafe 3.0.0 input layout
(U.S. Census Bureau ``DAS_2020_SDHC_Production_Code``, ``phsafe/resources/schema`` and the end-to-end
fixtures ``e2e_test1/{persons,units,geo}.csv``; summarised in ``/work/shared/data/README.md``,
"PHSafe input record layouts"). Every value is held as a string exactly as written in the files
(e.g. ``CENRACE`` ``"01"``, ``MAFID`` nine digits, ``TABBLKCOU`` ``"055"``), so the CEF reader
(:mod:`engine.data.cef`) and the synthetic generator (:mod:`engine.data.synthetic`) produce the same
type and :mod:`engine.data.cef_writer` writes either back byte-for-byte in the official layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

#: Person-file columns, in file order (PHSafe schema ``persons.json``).
PERSON_COLUMNS: tuple[str, ...] = ("RTYPE", "MAFID", "QAGE", "CENHISP", "CENRACE", "RELSHIP")

#: Unit-file columns, in file order (PHSafe schema ``units.json``).
UNIT_COLUMNS: tuple[str, ...] = (
    "RTYPE",
    "MAFID",
    "FINAL_POP",
    "NPF",
    "HHSPAN",
    "HHRACE",
    "TEN",
    "HHT",
    "HHT2",
    "CPLT",
)

#: Geo-file columns, in file order (PHSafe schema ``geo.json``).
GEO_COLUMNS: tuple[str, ...] = (
    "RTYPE",
    "MAFID",
    "TABBLKST",
    "TABBLKCOU",
    "TABTRACTCE",
    "TABBLK",
    "TABBLKGRPCE",
    "REGIONCE",
    "DIVISIONCE",
    "PLACEFP",
    "AIANNHCE",
)

#: File names of the three tables inside an extract directory (optionally with ``.gz``).
CEF_FILE_NAMES: dict[str, str] = {
    "persons": "persons.csv",
    "units": "units.csv",
    "geo": "geo.csv",
}


@dataclass(frozen=True)
class CefExtract:
    """A PHSafe input extract: ``persons``, ``units`` and ``geo`` with the official columns.

    All columns are strings (pandas ``object`` or ``string`` dtype) holding the codes exactly as in
    the official files; numbers such as ``QAGE`` or ``FINAL_POP`` are unpadded decimal strings.
    """

    persons: pd.DataFrame
    units: pd.DataFrame
    geo: pd.DataFrame

    @property
    def n_persons(self) -> int:
        """Number of person records."""
        return len(self.persons)

    @property
    def n_units(self) -> int:
        """Number of unit records (housing units and group-quarters facilities)."""
        return len(self.units)
