"""Controlled rounding's passes as min-cost flows (engine/topdown/rounding_flow.py) against the
LP of the same pass (HiGHS) on the same inputs: the same L1 objective, integral, every constraint
held; and the batches that are not networks (the root, invariants, held sums) go to the LP."""

from __future__ import annotations

import numpy as np
import pytest

from engine.topdown import rounding, rounding_flow
from engine.topdown.family import ChildSum, FamilyBatch, QuerySpec
from engine.topdown.qp.route import solve_pass
from tests.engine.topdown.family_models import N_CELLS, family_batch


def _chain(batch: FamilyBatch) -> tuple[QuerySpec, ...]:
    """TOTAL → HHGQ → DETAILED (nested; the structural bounds are on HHGQ)."""
    return (batch.queries[0], batch.queries[1], batch.queries[3])


def _x_tilde(batch: FamilyBatch) -> np.ndarray:
    return solve_pass(batch, [0, 1, 2, 3]).x


def _l1(spec: QuerySpec, x_tilde: np.ndarray, x_hat: np.ndarray) -> float:
    return float(np.abs(spec.answer(x_tilde) - spec.answer(x_hat.astype(float))).sum())


@pytest.mark.parametrize("seed", [41, 42, 43, 44])
@pytest.mark.parametrize("bounds", [False, True])
def test_each_flow_pass_has_the_lp_optimum_on_the_same_inputs(seed, bounds, monkeypatch):
    batch = family_batch(seed, bounds=bounds, n_families=4)
    chain = _chain(batch)
    x_tilde = _x_tilde(batch)
    assert rounding_flow.network_of(batch, chain) is not None
    original = rounding_flow.solve_pass
    compared = []

    def both(net, batch_, chain_, k, child, cell, residual, answers, frac, frozen):
        y = original(net, batch_, chain_, k, child, cell, residual, answers, frac, frozen)
        assert y is not None and np.array_equal(y, np.round(y))  # integral
        n = batch_.n_cells
        spec = chain_[k]
        keys = child * spec.size + spec.cell_index[cell]
        previous = []
        if frozen is not None:
            prev = chain_[k - 1]
            previous = [(child * prev.size + prev.cell_index[cell], frozen)]
        fixed = rounding._fixed_rows(batch_, n, child * n + cell, residual, answers)
        y_lp, _milp = rounding._lp_pass(
            rounding._solver(), fixed, previous, spec, keys, frac, answers
        )
        base = answers(spec, False).reshape(-1)
        fractional = answers(spec, True).reshape(-1)
        objective = [
            np.abs(base + np.bincount(keys, weights=v, minlength=base.size) - fractional).sum()
            for v in (y, y_lp)
        ]
        assert objective[0] == pytest.approx(objective[1], rel=1e-9, abs=1e-9)
        compared.append(spec.name)
        return y

    monkeypatch.setattr(rounding_flow, "solve_pass", both)
    x_hat, milp = rounding.round_batch(batch, x_tilde, chain)
    assert compared == [spec.name for spec in chain] and milp == 0
    assert np.array_equal(np.add.reduceat(x_hat, batch.child_ptr[:-1], axis=0), batch.parent)
    assert x_hat.min() >= 0 and np.all(np.abs(x_hat - x_tilde) < 1.0 + 1e-9)
    for bound in batch.bounds:
        answers = bound.spec.answer(x_hat.astype(float))
        assert np.all(answers <= bound.upper) and np.all(answers >= bound.lower - 1e-9)


def test_flow_and_lp_round_to_the_same_objectives_pass_by_pass(monkeypatch):
    """The whole rounding with the flow and with the LP alone: the first pass has one optimum
    value; later passes depend on ties broken earlier, so only the first pass is compared."""
    batch = family_batch(45, bounds=True, n_families=5)
    chain = _chain(batch)
    x_tilde = _x_tilde(batch)
    flow, _ = rounding.round_batch(batch, x_tilde, chain)
    monkeypatch.setattr(rounding_flow, "network_of", lambda *_args: None)
    lp, _ = rounding.round_batch(batch, x_tilde, chain)
    assert _l1(chain[0], x_tilde, flow) == pytest.approx(_l1(chain[0], x_tilde, lp), abs=1e-9)
    for x_hat in (flow, lp):
        assert np.array_equal(np.add.reduceat(x_hat, batch.child_ptr[:-1], axis=0), batch.parent)


def test_batches_that_are_not_networks_go_to_the_lp():
    batch = family_batch(46, n_families=2)
    chain = _chain(batch)
    root = FamilyBatch(**{**batch.__dict__, "parent": None})
    assert rounding_flow.network_of(root, chain) is None
    invariant = np.full((batch.n_children, 1), np.nan)
    invariant[0, 0] = 3.0
    with_invariant = FamilyBatch(**{**batch.__dict__, "invariant": (invariant, None, None, None)})
    assert rounding_flow.network_of(with_invariant, chain) is None
    held = ChildSum(0, np.array([0, 1]), np.array([4.0]))
    assert (
        rounding_flow.network_of(FamilyBatch(**{**batch.__dict__, "sums": (held,)}), chain) is None
    )
    # A chain that is not nested (HHGQ, then VOTINGAGE × RACE) is not a tree per child.
    crossed = (batch.queries[0], batch.queries[1], batch.queries[2], batch.queries[3])
    assert rounding_flow.network_of(batch, crossed) is None
    # … and still rounds, by the LP, to a consistent integer answer.
    x_hat, _ = rounding.round_batch(batch, _x_tilde(batch), crossed)
    assert np.array_equal(np.add.reduceat(x_hat, batch.child_ptr[:-1], axis=0), batch.parent)
    assert x_hat.shape == (batch.n_children, N_CELLS)
