"""Fixtures for the PHSafe tests: hand-built CEF extracts (official layout, string codes)."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

import pandas as pd
import pytest

from engine.data.cef_types import GEO_COLUMNS, PERSON_COLUMNS, UNIT_COLUMNS, CefExtract


def person(mafid: int, age: int, relship: int, *, race: str = "01", hisp: int = 1, rtype: int = 3):
    return {
        "RTYPE": str(rtype),
        "MAFID": str(mafid),
        "QAGE": str(age),
        "CENHISP": str(hisp),
        "CENRACE": race,
        "RELSHIP": str(relship),
    }


def unit(
    mafid: int,
    *,
    final_pop: int,
    hht: int = 1,
    hht2: str = "01",
    cplt: int = 1,
    ten: int = 1,
    race: str = "01",
    hisp: int = 1,
    rtype: int = 2,
):
    return {
        "RTYPE": str(rtype),
        "MAFID": str(mafid),
        "FINAL_POP": str(final_pop),
        "NPF": "0",
        "HHSPAN": str(hisp),
        "HHRACE": race,
        "TEN": str(ten),
        "HHT": str(hht),
        "HHT2": hht2,
        "CPLT": str(cplt),
    }


def geo(mafid: int, state: str, *, rtype: int = 2):
    return {
        "RTYPE": str(rtype),
        "MAFID": str(mafid),
        "TABBLKST": state,
        "TABBLKCOU": "001",
        "TABTRACTCE": "000100",
        "TABBLK": "1001",
        "TABBLKGRPCE": "1",
        "REGIONCE": "1",
        "DIVISIONCE": "1",
        "PLACEFP": "99999",
        "AIANNHCE": "9999",
    }


def extract(persons: Sequence[dict], units: Sequence[dict], geos: Sequence[dict]) -> CefExtract:
    return CefExtract(
        persons=pd.DataFrame(list(persons), columns=list(PERSON_COLUMNS)),
        units=pd.DataFrame(list(units), columns=list(UNIT_COLUMNS)),
        geo=pd.DataFrame(list(geos), columns=list(GEO_COLUMNS)),
    )


def household(mafid: int, ages: Sequence[int], state: str = "44", **unit_kwargs):
    """A married-couple owner household: householder, spouse, then biological children."""
    rels = [20, 21] + [25] * (len(ages) - 2)
    persons = [person(mafid, a, r) for a, r in zip(ages, rels[: len(ages)], strict=True)]
    return persons, unit(mafid, final_pop=len(ages), **unit_kwargs), geo(mafid, state)


@pytest.fixture
def cef() -> SimpleNamespace:
    """Builders of hand-made extracts: ``person``, ``unit``, ``geo``, ``household``, ``extract``."""
    return SimpleNamespace(person=person, unit=unit, geo=geo, household=household, extract=extract)


@pytest.fixture(scope="session")
def cef_builders() -> SimpleNamespace:
    """Session-scoped twin of ``cef`` (for Hypothesis tests, which reject function-scoped fixtures)."""
    return SimpleNamespace(person=person, unit=unit, geo=geo, household=household, extract=extract)
