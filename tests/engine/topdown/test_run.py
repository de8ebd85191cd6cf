"""End-to-end TopDown runs: consistency, invariants, determinism, cancel, errors, error vs ρ."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pytest

from engine.core.errors import RunCancelled, ValidationError
from engine.data.histogram import BlockHistogram
from engine.dp.budget import TopDownAllocation
from engine.dp.presets import load_topdown_preset
from engine.topdown.estimation import estimate_batch
from engine.topdown.family import FamilyBatch, QuerySpec
from engine.topdown.feasibility import TopDownInfeasible, check_batch
from engine.topdown.geography import GeoTree
from engine.topdown.options import TopDownOptions
from tests.engine.topdown.helpers import engine_run, ri_subset, tiny_allocation, tiny_histogram


@pytest.fixture(scope="module")
def ri_small():
    return ri_subset(n_tracts_per_county=2, counties=2)


@pytest.fixture(scope="module")
def ri_allocation():
    return load_topdown_preset("ri2010-production-like")["persons"]


@pytest.fixture(scope="module")
def ri_result(ri_small, ri_allocation):
    return engine_run(ri_small, ri_allocation, seed=7)


def assert_consistent(result):
    est = result.estimates
    assert est.dtype == np.int64 and np.all(est >= 0)
    ptr, idx = result.tree.children_ptr
    for node in range(result.tree.n_nodes):
        kids = idx[ptr[node] : ptr[node + 1]]
        if kids.size:
            assert np.array_equal(est[kids].sum(axis=0), est[node]), result.tree.node_id[node]


def test_ri_subset_is_consistent_with_exact_state_total(ri_result, ri_small):
    assert_consistent(ri_result)
    assert ri_result.estimates[0].sum() == ri_small.total  # state total invariant
    assert ri_result.block_histogram().shape == ri_small.counts.shape
    assert ri_result.block_histogram().sum() == ri_small.total
    assert set(ri_result.timings) >= {"measurement", "County", "Tract", "Block_Group", "Block"}
    assert ri_result.diagnostics["milp_fallbacks"] == 0


def test_tidy_and_measurement_tables(ri_result):
    tidy = ri_result.to_tidy(["TOTAL", "RACEETH"])
    assert list(tidy.columns) == ["geolevel", "geounit", "query", "cell", "true", "estimate"]
    state = tidy[(tidy.geolevel == "State") & (tidy["query"] == "TOTAL")]
    assert (state["true"] == state["estimate"]).all()
    meas = ri_result.measurements
    assert list(meas.columns) == ["geolevel", "geounit", "query", "cell", "noisy", "variance"]
    state_total = meas[(meas.geolevel == "State") & (meas["query"] == "TOTAL")]
    assert (state_total["variance"] == 0).all()
    block_detail = meas[(meas.geolevel == "Block") & (meas["query"] == "DETAILED")]
    # σ² = 1/(ρ c d): ρ 2.56, Block share 165/4099, DETAILED 4042/4097 (docs/science.md §1, §4).
    expected = 1.0 / (2.56 * 165 / 4099 * 4042 / 4097)
    assert block_detail["variance"].iloc[0] == pytest.approx(expected, rel=1e-9)


def test_run_is_deterministic_for_a_seed_and_independent_of_workers(ri_small, ri_allocation):
    one = engine_run(ri_small, ri_allocation, seed=3)
    again = engine_run(ri_small, ri_allocation, seed=3)
    other = engine_run(ri_small, ri_allocation, seed=4)
    assert np.array_equal(one.estimates, again.estimates)
    assert not np.array_equal(one.estimates, other.estimates)
    small_chunks = TopDownOptions(chunk_cells=2000)
    serial = engine_run(ri_small, ri_allocation, seed=3, options=small_chunks)
    parallel = engine_run(ri_small, ri_allocation, seed=3, workers=2, options=small_chunks)
    assert np.array_equal(serial.estimates, parallel.estimates)
    assert_consistent(parallel)


def test_progress_and_cancel(ri_small, ri_allocation):
    seen: list[float] = []
    engine_run(ri_small, ri_allocation, seed=1, progress=lambda msg, frac: seen.append(frac))
    assert seen[-1] == 1.0 and seen == sorted(seen)
    calls = {"n": 0}

    def cancel_after_two() -> bool:
        calls["n"] += 1
        return calls["n"] > 2

    with pytest.raises(RunCancelled):
        engine_run(ri_small, ri_allocation, seed=1, cancel=cancel_after_two)


def test_tiny_run_and_level_rules():
    hist = tiny_histogram()
    result = engine_run(hist, tiny_allocation(), seed=0)
    assert_consistent(result)
    assert result.estimates[0].sum() == 21
    # An allocation with a US root is bypassed into the single state (SPN Algorithm 3).
    with_us = tiny_allocation(levels=("US", "State", "County", "Block"))
    assert_consistent(engine_run(hist, with_us, seed=0))
    # A level the data lack, below the root, is an error naming it.
    with_tract = tiny_allocation(levels=("State", "County", "Tract", "Block"))
    with pytest.raises(ValidationError, match="Tract"):
        engine_run(hist, with_tract, seed=0)
    # A spine level without a share is an error.
    tree = GeoTree.from_histogram(hist, ("State", "County", "Block"))
    with pytest.raises(ValidationError, match="no share"):
        engine_run(hist, tiny_allocation(levels=("State", "Block")), seed=0, tree=tree)


def test_county_invariants_propagate_up_and_negative_counts_are_rejected():
    hist = tiny_histogram()
    allocation = tiny_allocation()
    options = TopDownOptions(invariants={"County": ("TOTAL",)})
    result = engine_run(hist, allocation, seed=0, options=options)
    assert result.estimates[1].sum() == 11 and result.estimates[2].sum() == 10
    assert result.estimates[0].sum() == 21  # held at the state too (summed up the tree)
    hacked = hist.counts.copy()
    hacked[0] = [-3, 1]
    broken = BlockHistogram(hist.schema, hist.levels, hist.geography, hacked)
    with pytest.raises(ValidationError, match="negative"):
        engine_run(broken, allocation, seed=0)


def two_by_two_batch(parent, invariant_va, invariant_r) -> FamilyBatch:
    cells = np.arange(4)
    specs = (
        QuerySpec("VOTINGAGE", cells // 2, 2),
        QuerySpec("RACE", cells % 2, 2),
        QuerySpec("DETAILED", cells, 4),
    )
    return FamilyBatch(
        queries=specs,
        parent=np.array([parent], dtype=float),
        child_ptr=np.array([0, 2]),
        noisy=(np.zeros((2, 2)), np.zeros((2, 2)), np.ones((2, 4))),
        weight=np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]),
        invariant=(np.array(invariant_va, float), np.array(invariant_r, float), None),
        family_id=("4400100",),
        child_id=("440010001", "440010002"),
        family_level="Tract",
        child_level="Block",
    )


def test_infeasible_families_are_named_in_words():
    # Children's invariants sum to more than the parent's estimate.
    batch = two_by_two_batch([1, 0, 0, 1], [[1, 0], [1, 1]], [[np.nan, np.nan], [np.nan, np.nan]])
    problems = check_batch(batch)
    assert problems and "Tract 4400100" in problems[0] and "VOTINGAGE" in problems[0]
    # Marginals consistent, but no non-negative split exists (a 3-way transportation problem):
    # child 1 needs cell (VA0, R1), which the parent does not have.
    batch = two_by_two_batch([1, 0, 0, 1], [[1, 0], [0, 1]], [[0, 1], [1, 0]])
    assert check_batch(batch) == []
    with pytest.raises(
        TopDownInfeasible, match="Tract 4400100.*infeasible|infeasible.*Tract 4400100"
    ):
        estimate_batch(batch, [[2]], (batch.queries[2],))


def test_pure_dp_geometric_run():
    allocation = TopDownAllocation(
        name="pure",
        universe="persons",
        rho=Fraction(4),
        geolevels=("State", "County", "Block"),
        level_shares={lv: Fraction(1, 3) for lv in ("State", "County", "Block")},
        query_shares={lv: {"DETAILED": Fraction(1)} for lv in ("State", "County", "Block")},
        mechanism="puredp",
    )
    result = engine_run(tiny_histogram(), allocation, seed=2)
    assert_consistent(result)
    meas = result.measurements
    county = meas[(meas.geolevel == "County")]
    z = 4 / 3 / 2
    assert county["variance"].iloc[0] == pytest.approx(2 * np.exp(-z) / (1 - np.exp(-z)) ** 2)


def test_error_falls_as_rho_grows(ri_allocation):
    hist = ri_subset(n_tracts_per_county=2, counties=5)
    levels = ("County", "Tract", "Block_Group")
    mae = {}
    for rho in ("1/10", "1", "10"):
        per_seed = []
        for seed in (0, 1):
            res = engine_run(hist, ri_allocation.with_rho(rho), seed=seed)
            tidy = res.to_tidy(["TOTAL"])
            err = (tidy["estimate"] - tidy["true"]).abs()
            per_seed.append(err.groupby(tidy["geolevel"]).mean())
        mae[rho] = sum(per_seed) / len(per_seed)
    for level in levels:
        assert mae["1/10"][level] > mae["1"][level] > mae["10"][level], (level, mae)
    high = engine_run(hist, ri_allocation.with_rho(1000), seed=0).to_tidy(["TOTAL"])
    high_mae = (high["estimate"] - high["true"]).abs().groupby(high["geolevel"]).mean()
    for level in levels:
        assert high_mae[level] < 0.5, (level, high_mae)


@pytest.mark.slow
def test_full_rhode_island_run_meets_the_acceptance_properties(ri_allocation):
    from engine.data.samples import load_topdown_sample

    hist = load_topdown_sample("ri2010")
    result = engine_run(hist, ri_allocation, seed=11)
    assert_consistent(result)
    assert result.estimates[0].sum() == hist.total == 1_052_567
    assert result.block_histogram().shape == (25_181, 16)
    tidy = result.to_tidy(["TOTAL"])
    mae = (tidy["estimate"] - tidy["true"]).abs().groupby(tidy["geolevel"]).mean()
    assert mae["State"] == 0 and mae["County"] < 10 and mae["Tract"] < 5


def test_state_only_and_county_rooted_spines():
    hist = tiny_histogram()
    state_only = engine_run(hist, tiny_allocation(levels=("State",)), seed=0)
    assert state_only.tree.n_nodes == 1 and state_only.estimates[0].sum() == 21
    with pytest.raises(ValidationError, match="stops above the block level"):
        state_only.block_histogram()
    one_county = BlockHistogram(
        hist.schema, hist.levels, hist.geography.iloc[:2].reset_index(drop=True), hist.counts[:2]
    )
    tree = GeoTree.from_histogram(one_county, ("County", "Block"))
    rooted = engine_run(one_county, tiny_allocation(), seed=0, tree=tree)
    assert_consistent(rooted)
    # The county root is not invariant (only US/State totals are): its total is noisy.
    assert rooted.tree.node_id[0] == "44001"
    assert rooted.block_histogram().sum() == rooted.estimates[0].sum()
    assert abs(int(rooted.estimates[0].sum()) - 11) <= 12


def test_run_query_names_is_the_budget_array_order():
    from dataclasses import replace

    from engine.topdown.plan import run_query_names
    from engine.topdown.spine import plan as spine_plan

    assert spine_plan.run_query_names is run_query_names  # one copy, shared by the spine plan
    hist = tiny_histogram()
    levels = ("State", "County", "Block")
    allocation = replace(
        tiny_allocation(levels=levels), query_shares={lv: {"TOTAL": Fraction(1)} for lv in levels}
    )
    options = TopDownOptions(invariants={"County": ("DETAILED",)})
    names = run_query_names(allocation, options)
    assert names == ["TOTAL", "DETAILED"]
    result = engine_run(hist, allocation, seed=0, options=options)
    assert list(result.query_names) == names
    assert result.measured.budget.shape[1] == len(names)


def test_a_bypassed_allocation_root_lends_its_query_shares_to_the_single_state():
    # SPN §5: the state that takes the bypassed US root's budget is measured with the US level's
    # query proportions, at the summed level share.
    from engine.topdown.measure import node_query_budget
    from engine.topdown.plan import default_tree

    hist = tiny_histogram()
    base = tiny_allocation(levels=("US", "State", "County", "Block"))
    shares = dict(base.query_shares)
    shares["US"] = {"TOTAL": Fraction(1, 5), "DETAILED": Fraction(4, 5)}
    with_us = dataclasses.replace(base, query_shares=shares)
    tree = default_tree(hist, with_us)
    names = list(with_us.all_queries())
    budget = node_query_budget(tree, with_us, names)
    c = with_us.level_shares["US"] + with_us.level_shares["State"]
    for j, q in enumerate(names):
        expected = with_us.rho * c * with_us.query_share("US", q)
        assert budget[0, j] == pytest.approx(float(expected), rel=1e-12)


def test_rho_spent_leaves_out_the_invariant_shares():
    # TDA §5.2: the State TOTAL is held exact, so its share is not spent (RI: 2.56 → 1.728);
    # the engine's path sum agrees with the analytic core's number.
    from engine.dp.budget import budget_use

    allocation = load_topdown_preset("ri2010-production-like")["persons"].with_rho("2.56")
    result = engine_run(ri_subset(1, 1), allocation, seed=3)
    assert result.rho == pytest.approx(2.56)
    assert result.rho_spent == pytest.approx(float(budget_use(allocation, 1).spent), rel=1e-12)
    assert result.rho_spent == pytest.approx(1.72832, abs=1e-5)
