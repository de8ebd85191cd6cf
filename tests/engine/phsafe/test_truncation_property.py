"""Property: truncation keeps min(size, τ) persons per household whatever the file order."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.phsafe.join import prepare_extract, truncate_and_join
from engine.phsafe.tables import MEASURED


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=14), min_size=1, max_size=12),
    tau=st.integers(min_value=1, max_value=12),
    seed=st.integers(min_value=0, max_value=2**31),
)
def test_kept_per_household_is_min_size_tau_and_order_free(cef_builders, sizes, tau, seed) -> None:
    persons, units, geos = [], [], []
    rng = np.random.default_rng(seed)
    for h, n in enumerate(sizes):
        ages = rng.integers(0, 90, size=n).tolist()
        ages[0] = 40
        p, u, g = cef_builders.household(100_000_001 + h, ages)
        persons += p
        units.append(u)
        geos.append(g)
    ex = cef_builders.extract(persons, units, geos)
    shuffled = type(ex)(
        persons=ex.persons.iloc[rng.permutation(len(ex.persons))].reset_index(drop=True),
        units=ex.units,
        geo=ex.geo,
    )
    kept_sets = []
    for extract in (ex, shuffled):
        prepared = prepare_extract(extract, ["44"])
        joined = truncate_and_join(prepared, MEASURED["PH7"], tau)
        kept = joined.person_index[joined.kept]
        mafid = prepared.persons["p_mafid"][kept]
        per_household = np.bincount(mafid - 100_000_001, minlength=len(sizes))
        assert per_household.tolist() == [min(n, tau) for n in sizes]
        records = np.stack([prepared.persons[k][kept] for k in ("p_mafid", "p_age", "p_relship")])
        kept_sets.append(sorted(map(tuple, records.T.tolist())))
    assert kept_sets[0] == kept_sets[1]
