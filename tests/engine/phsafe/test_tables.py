"""Table shells and record → basis-cell maps (PHS §2.4; official PHSafe 3.0.0 rules)."""

from __future__ import annotations

import numpy as np

from engine.phsafe.tables import MEASURED, OUTPUT_SHELLS, iteration_index


def _arr(*v: int) -> np.ndarray:
    return np.array(v, dtype=np.int64)


def test_every_shell_partitions_its_total_by_its_basis() -> None:
    for name, shell in OUTPUT_SHELLS.items():
        if name in ("PH1_denom", "PH5_denom"):
            continue
        assert shell.totals[1] == shell.basis, name
        derived = set(shell.totals)
        assert derived.isdisjoint(shell.basis)
        assert derived | set(shell.basis) == set(shell.cells), name


def test_ph2_cells_from_hht2_and_cplt() -> None:
    recs = {
        "u_hht2": _arr(1, 2, 3, 4, 9, 10, 5, 8, 1, 0),
        "u_cplt": _arr(1, 2, 3, 4, 5, 5, 5, 5, 3, 0),
    }
    assert MEASURED["PH2"].cell_of(recs).tolist() == [3, 4, 6, 7, 9, 10, 12, 13, -1, -1]


def test_ph3_cells_from_relationship_and_family_type() -> None:
    recs = {
        "p_relship": _arr(20, 36, 25, 26, 27, 25, 30, 28, 33, 25),
        "u_hht2": _arr(1, 1, 1, 3, 10, 6, 1, 1, 1, 2),
    }
    assert MEASURED["PH3"].cell_of(recs).tolist() == [2, 2, 4, 5, 6, 7, 9, 10, 10, -1]


def test_ph6_cells_from_family_type_and_age() -> None:
    recs = {"u_hht2": _arr(1, 1, 1, 1, 3, 10, 6, 2), "p_age": _arr(0, 4, 11, 17, 5, 12, 3, 5)}
    assert MEASURED["PH6"].cell_of(recs).tolist() == [3, 4, 5, 6, 9, 16, 18, -1]


def test_tenure_cells() -> None:
    ten = {"u_ten": _arr(1, 2, 3, 4, 0)}
    assert MEASURED["PH7"].cell_of(ten).tolist() == [2, 3, 4, 4, -1]
    assert MEASURED["PH8_denom"].cell_of(ten).tolist() == [2, 2, 3, 3, -1]


def test_universes() -> None:
    persons = {
        "p_rtype": _arr(3, 5, 3, 3),
        "p_age": _arr(10, 10, 30, 17),
        "p_relship": _arr(25, 25, 34, 26),
    }
    assert MEASURED["PH1_num"].person_filter(persons).tolist() == [True, False, True, True]
    assert MEASURED["PH3"].person_filter(persons).tolist() == [True, False, False, True]
    assert MEASURED["PH4"].person_filter(persons).tolist() == [True, True, False, True]
    units = {"u_rtype": _arr(2, 2, 4, 2), "u_hht": _arr(1, 0, 1, 5)}
    assert MEASURED["PH1_denom"].unit_filter(units).tolist() == [True, False, False, True]
    assert MEASURED["PH5_denom"].unit_filter(units).tolist() == [True, False, True, False]


def test_iteration_codes() -> None:
    race = _arr(1, 2, 6, 7, 63, 1, 0)
    hisp = _arr(1, 1, 2, 1, 2, 2, 0)
    assert iteration_index("A-G", race, hisp).tolist() == [0, 1, 5, 6, 6, 0, -1]
    assert iteration_index("H,I", race, hisp).tolist() == [1, -1, 0, -1, 0, 0, -1]
    assert iteration_index("*", race, hisp).tolist() == [0] * 7
