"""State totals stay invariant on every spine (TDA §5.2, §7.4): with an AIAN-style branch in only
some states, every whole state's total is held and a split state's two branches are measured with
noise but hold their sum (a two-state case: one county relabelled as a second state)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from engine.data.histogram import BlockHistogram
from engine.topdown.spine.build import build_spine
from tests.engine.topdown.helpers import spine_run

_spec = importlib.util.spec_from_file_location(
    "spine_toy", Path(__file__).with_name("spine_toy.py")
)
_toy = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_toy)  # type: ignore[union-attr]


def two_state_histogram() -> BlockHistogram:
    """The toy state with county 44003 relabelled as a second state, 45 (no special area)."""
    hist = _toy.toy_histogram()
    geography = hist.geography.copy()
    geography.loc[geography["County"] == "44003", "State"] = "45"
    return BlockHistogram(hist.schema, hist.levels, geography, hist.counts)


def state_totals(result, hist: BlockHistogram) -> dict[str, tuple[int, int]]:
    """{state: (estimate, truth)} of the total population, summed from the block estimates."""
    est = result.block_histogram().sum(axis=1)
    truth = hist.counts.sum(axis=1)
    state = hist.geography["State"].to_numpy()
    return {s: (int(est[state == s].sum()), int(truth[state == s].sum())) for s in np.unique(state)}


@pytest.mark.parametrize("kind", ["aian", "optimized"])
def test_every_state_total_holds_when_only_one_state_is_split(kind):
    hist = two_state_histogram()
    allocation = _toy.ALLOCATION.with_rho("1/100")  # little budget: noisy totals would drift
    extra = {"entities": [_toy.CITY, _toy.WARDS]} if kind == "optimized" else {}
    built = build_spine(hist, kind, allocation, special_areas=_toy.CITY, **extra)
    ids = built.tree.node_id
    held = {tuple(sorted(ids[n] for n in s.nodes)) for s in built.invariant_sums}
    if kind == "aian":
        assert held == {("44|inside", "44|outside"), ("45",)}
    else:  # bypass: each state is held on the nodes that took its place (its only county, …)
        assert len(held) == 2 and {len(h) for h in held} == {1, 2}
    for seed in range(6):
        result = spine_run(hist, allocation, built, seed=seed)
        totals = state_totals(result, hist)
        assert set(totals) == {"44", "45"}
        for state, (estimate, truth) in totals.items():
            assert estimate == truth, f"seed {seed}: state {state} drifted"
        # a whole state is invariant (no noise); the branches are measured (TDA §7.4)
        variance = result.measurements.query("query == 'TOTAL'")
        by_unit = dict(zip(variance["geounit"], variance["variance"], strict=True))
        for held_sum in built.invariant_sums:
            units = [ids[n] for n in held_sum.nodes]
            if len(units) == 1:
                assert by_unit[units[0]] == 0.0
            else:
                assert all(by_unit[u] > 0 for u in units)
        # every parent still equals the sum of its children
        tree = result.tree
        sums = np.zeros_like(result.estimates)
        np.add.at(sums, tree.parent[1:], result.estimates[1:])
        parents = np.unique(tree.parent[1:])
        assert np.array_equal(sums[parents], result.estimates[parents])


def test_a_one_state_branch_holds_the_state_total_through_the_root():
    hist = _toy.toy_histogram()
    built = build_spine(hist, "aian", _toy.ALLOCATION, special_areas=_toy.CITY)
    # the two branches are the root's only children: their sum is the root's invariant
    ids = built.tree.node_id
    assert {tuple(sorted(ids[n] for n in s.nodes)) for s in built.invariant_sums} == {
        ("44|inside", "44|outside")
    }
    result = spine_run(hist, _toy.ALLOCATION.with_rho("1/100"), built, seed=3)
    assert state_totals(result, hist)["44"] == (int(hist.counts.sum()),) * 2


def test_split_branches_spend_the_state_total_share():
    # TDA Table 7 note: the State TOTAL share pays for the branches' totals in split states, so
    # an AIAN-style run spends more than a conventional one at the same nominal ρ.
    hist = _toy.toy_histogram()
    conventional = spine_run(
        hist, _toy.ALLOCATION, build_spine(hist, "conventional", _toy.ALLOCATION), seed=1
    )
    aian = build_spine(hist, "aian", _toy.ALLOCATION, special_areas=_toy.CITY)
    split = spine_run(hist, _toy.ALLOCATION, aian, seed=1)
    rho = float(_toy.ALLOCATION.rho)
    assert conventional.rho_spent < split.rho_spent < rho
