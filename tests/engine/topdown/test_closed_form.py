"""The closed-form TOTAL pass under structural bounds (engine/topdown/qp/closed_form.py) against an
independent cvxpy model of TDA eq. 7.5 (TOTAL only, structural zeros, GQ lower bounds)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engine.topdown.qp import closed_form
from engine.topdown.qp.route import solve_pass
from engine.topdown.qp.settings import SETTINGS
from tests.engine.topdown.family_models import cvxpy_objective, family_batch


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_total_pass_matches_cvxpy_under_bounds(seed):
    batch = family_batch(seed, bounds=True)
    assert closed_form.applies(batch, [0], [])
    x, solved = closed_form.solve_total_pass(batch, 0)
    auto = solve_pass(batch, [0])
    for f in range(batch.n_families):
        expected = cvxpy_objective(batch, f, [0], [])
        assert auto.objective[f] == pytest.approx(expected, rel=1e-6, abs=1e-6)
    # Every family the closed form solved holds every constraint.
    rows = np.repeat(solved, np.diff(batch.child_ptr))
    sums = np.add.reduceat(x, batch.child_ptr[:-1], axis=0)
    assert np.abs(sums - batch.parent)[solved].max(initial=0.0) < 1e-6
    assert x.min() >= 0
    bound = batch.bounds[0]
    answers = bound.spec.answer(x)[rows]
    assert np.all(answers >= bound.lower[rows] - 1e-6)
    assert np.all(answers[bound.upper[rows] == 0] == 0)


def test_water_fill_within_boxes():
    m = np.array([5.0, -2.0, 9.0])
    w = np.array([1.0, 2.0, 0.5])
    ptr = np.array([0, 3])
    lower, upper = np.array([0.0, 1.0, 0.0]), np.array([4.0, 9.0, 9.0])
    t, ok = closed_form.water_fill_families(m, w, lower, upper, np.array([10.0]), ptr)
    assert ok[0] and t.sum() == pytest.approx(10)
    # t_1 is held at its lower bound; the others share λ: 5 − λ/2 + 9 − λ = 9 → λ = 10/3.
    assert t == pytest.approx([10 / 3, 1.0, 17 / 3])
    _t, ok = closed_form.water_fill_families(
        m, w, np.ones(3) * 4, np.ones(3) * 9, np.array([10.0]), ptr
    )
    assert not ok[0]


def test_unfittable_families_go_to_clarabel():
    batch = family_batch(14, bounds=True)
    never = replace(SETTINGS, fit_iterations=0)  # the fit never meets the totals
    _x, solved = closed_form.solve_total_pass(batch, 0, never)
    assert not solved.any()
    routes: dict[str, int] = {}
    auto = solve_pass(batch, [0], settings=never, routes=routes)
    assert routes == {"piqp": batch.n_families}  # the general model
    reference = solve_pass(batch, [0], solver="clarabel")
    assert auto.objective == pytest.approx(reference.objective, rel=1e-6, abs=1e-6)
