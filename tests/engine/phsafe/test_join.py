"""Truncate-and-join (PHS Algorithm 3): exactly τ persons kept, chosen by hash, non-unique units dropped."""

from __future__ import annotations

import numpy as np
import pandas as pd

from engine.phsafe.join import prepare_extract, record_hash, tabulate_table, truncate_and_join
from engine.phsafe.tables import MEASURED

AGES = [40, 38, 17, 15, 13, 11, 9, 7, 5, 3, 1]  # householder, spouse, nine children


def _big_household_extract(cef, n_households: int = 1):
    persons, units, geos = [], [], []
    for h in range(n_households):
        p, u, g = cef.household(100_000_001 + h, AGES)
        persons += p
        units.append(u)
        geos.append(g)
    return cef.extract(persons, units, geos)


def test_household_larger_than_tau_keeps_exactly_tau(cef) -> None:
    prepared = prepare_extract(_big_household_extract(cef), ["44"])
    for tau in (1, 3, 6, 10, 11, 20):
        joined = truncate_and_join(prepared, MEASURED["PH1_num"], tau)
        assert joined.person_index.size == len(AGES)
        assert int(joined.kept.sum()) == min(tau, len(AGES))
    counts = tabulate_table(prepared, "PH1_num", 3, ["usa_*"]).levels["usa_*"]
    assert int(counts.true_truncated.sum()) == 3
    assert int(counts.true_full.sum()) == len(AGES)


def _kept_ages(cef, persons_order: list[int], tau: int) -> list[tuple[int, ...]]:
    """Ages kept per household when the person file is written in ``persons_order``."""
    ex = _big_household_extract(cef, n_households=40)
    ex = type(ex)(
        persons=ex.persons.iloc[persons_order].reset_index(drop=True), units=ex.units, geo=ex.geo
    )
    prepared = prepare_extract(ex, ["44"])
    joined = truncate_and_join(prepared, MEASURED["PH1_num"], tau)
    kept = joined.person_index[joined.kept]
    mafid = prepared.persons["p_mafid"][kept]
    age = prepared.persons["p_age"][kept]
    frame = pd.DataFrame({"mafid": mafid, "age": age}).sort_values(["mafid", "age"])
    return [tuple(g["age"]) for _, g in frame.groupby("mafid")]


def test_truncation_is_by_hash_not_by_order_or_attributes(cef) -> None:
    n = 40 * len(AGES)
    tau = 3
    in_order = _kept_ages(cef, list(range(n)), tau)
    shuffled = _kept_ages(cef, list(np.random.default_rng(7).permutation(n)), tau)
    reversed_ = _kept_ages(cef, list(range(n))[::-1], tau)
    # the same persons are kept whatever the file order
    assert in_order == shuffled == reversed_
    # ... and they are neither the first τ in file order (householder, spouse, eldest child) nor the
    # youngest/oldest τ: the selection varies between households with identical members
    first_in_file = tuple(sorted(AGES[:tau]))
    assert any(kept != first_in_file for kept in in_order)
    assert any(kept != tuple(sorted(AGES)[:tau]) for kept in in_order)
    assert any(kept != tuple(sorted(AGES)[-tau:]) for kept in in_order)
    assert len(set(in_order)) > 5


def test_identical_records_get_distinct_hashes() -> None:
    persons = {
        "p_mafid": np.array([5, 5, 5, 6]),
        "p_rtype": np.array([3, 3, 3, 3]),
        "p_age": np.array([7, 7, 7, 7]),
        "p_hisp": np.array([1, 1, 1, 1]),
        "p_race": np.array([1, 1, 1, 1]),
        "p_relship": np.array([25, 25, 25, 25]),
    }
    h = record_hash(persons)
    assert np.unique(h).size == 4


def test_non_unique_units_are_dropped_and_unmatched_persons_leave(cef) -> None:
    p1, u1, g1 = cef.household(100_000_001, [40, 38])
    p2, u2, g2 = cef.household(100_000_002, [30, 29, 3])
    ex = cef.extract(p1 + p2, [u1, u2, dict(u2)], [g1, g2])
    prepared = prepare_extract(ex, ["44"])
    joined = truncate_and_join(prepared, MEASURED["PH7"], 10)
    # household 2 has two unit rows with its MAFID: both dropped, so only household 1 joins
    assert sorted(prepared.persons["p_mafid"][joined.person_index]) == [100_000_001] * 2


def test_group_quarters_geography_and_other_states_are_excluded(cef) -> None:
    p1, u1, g1 = cef.household(100_000_001, [40, 38], state="44")
    p2, u2, g2 = cef.household(100_000_002, [30, 29], state="06")
    gq_person = cef.person(100_000_003, 20, 38, rtype=5)
    gq_unit = cef.unit(
        100_000_003, final_pop=1, hht=0, hht2="00", cplt=0, ten=0, race="00", hisp=0, rtype=4
    )
    gq_geo = cef.geo(100_000_003, "44", rtype=4)
    ex = cef.extract(p1 + p2 + [gq_person], [u1, u2, gq_unit], [g1, g2, gq_geo])
    prepared = prepare_extract(ex, ["44"])
    assert prepared.states == ("44",)
    assert set(prepared.units["u_mafid"]) == {100_000_001}
    counts = tabulate_table(prepared, "PH1_denom", None, ["state_*"]).levels["state_*"]
    assert counts.true_full.tolist() == [[[1]]]


def test_truncation_statistics_curve_is_monotone(cef) -> None:
    prepared = prepare_extract(_big_household_extract(cef, 3), ["44"])
    stats = tabulate_table(prepared, "PH7", 6, ["usa_*"]).truncation
    assert stats is not None
    assert stats.persons_joined == 3 * len(AGES)
    assert stats.persons_dropped == 3 * (len(AGES) - 6)
    assert stats.households_over_tau == 3
    curve = [stats.share_dropped_by_tau[t] for t in sorted(stats.share_dropped_by_tau)]
    assert all(a >= b for a, b in zip(curve, curve[1:], strict=False))
    assert stats.share_dropped_by_tau[6] == stats.share_dropped
    assert stats.share_dropped_by_tau[11] == 0.0
