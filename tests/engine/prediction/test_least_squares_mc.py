"""The exact least-squares covariance against Monte Carlo of the engine's least squares
(docs/science.md §7).

Small trees with large counts (non-negativity never binds), continuous Gaussian noise, no rounding:
the engine's :func:`engine.topdown.qp.route.multipass_least_squares` is run top-down exactly as
``engine/topdown/plan.py`` orders its passes (root and leaf families one pass, TOTAL-then-rest in
between, invariants exact), replicates batched as independent families. The predicted mean squared
error per level × query must match the Monte Carlo one to sampling precision (4 standard errors).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from engine.dp.budget import TopDownAllocation
from engine.prediction import predict_topdown
from engine.prediction.spine import SpineProfile
from engine.schema.attributes import Attribute, Schema
from engine.topdown.family import FamilyBatch, QuerySpec
from engine.topdown.qp.route import multipass_least_squares
from engine.topdown.queries import query_group

SCHEMA = Schema("toy", (Attribute("VOTINGAGE", ("a", "b")), Attribute("RACEETH", ("x", "y", "z"))))
ATTRS = tuple((a.name, a.levels) for a in SCHEMA.attributes)
QUERIES = ("TOTAL", "VOTINGAGE", "RACEETH", "DETAILED")
LEVELS = ("Root", "Mid", "Leaf")
FANOUTS = (np.array([1]), np.array([3]), np.array([2, 3, 4]))


def _allocation(invariant_root: bool) -> TopDownAllocation:
    root_shares = {"TOTAL": Fraction(1, 4), "VOTINGAGE": Fraction(1, 4), "RACEETH": Fraction(1, 4)}
    root_shares["DETAILED"] = Fraction(1, 4)
    mid = {"TOTAL": Fraction(1, 2), "VOTINGAGE": Fraction(1, 8)}
    mid |= {"RACEETH": Fraction(1, 8), "DETAILED": Fraction(1, 4)}
    leaf = {"TOTAL": Fraction(1, 10), "VOTINGAGE": Fraction(1, 10)}
    leaf |= {"RACEETH": Fraction(1, 5), "DETAILED": Fraction(3, 5)}
    return TopDownAllocation(
        name="toy",
        universe="persons",
        rho=Fraction(1, 4),
        geolevels=LEVELS,
        level_shares={"Root": Fraction(1, 5), "Mid": Fraction(3, 10), "Leaf": Fraction(1, 2)},
        query_shares={"Root": root_shares, "Mid": mid, "Leaf": leaf},
    )


def _specs() -> tuple[QuerySpec, ...]:
    groups = [query_group(SCHEMA, q) for q in QUERIES]
    return tuple(QuerySpec(g.name, g.cell_index, g.size) for g in groups)


def _batch(
    specs: tuple[QuerySpec, ...],
    truth: np.ndarray,
    budgets: dict[str, float],
    parent: np.ndarray | None,
    child_ptr: np.ndarray,
    rng: np.random.Generator,
    exact: tuple[str, ...],
) -> FamilyBatch:
    k = truth.shape[0]
    noisy, weight, invariant = [], np.zeros((k, len(specs))), []
    for j, spec in enumerate(specs):
        answer = spec.answer(truth)
        if spec.name in exact:
            noisy.append(answer.copy())
            invariant.append(answer.copy())
            continue
        b = budgets.get(spec.name, 0.0)
        weight[:, j] = b
        noisy.append(answer + rng.normal(0.0, np.sqrt(1.0 / b), answer.shape) if b else answer)
        invariant.append(None)
    return FamilyBatch(
        queries=specs,
        parent=parent,
        child_ptr=child_ptr,
        noisy=tuple(noisy),
        weight=weight,
        invariant=tuple(invariant),
        family_id=tuple(str(i) for i in range(child_ptr.size - 1)),
        child_id=tuple(str(i) for i in range(k)),
    )


def _monte_carlo(
    alloc: TopDownAllocation, exact_root: tuple[str, ...], reps: int, seed: int
) -> dict[tuple[str, str], np.ndarray]:
    """Squared errors per (level, query): one array of per-replicate mean-cell squared errors."""
    rng = np.random.default_rng(seed)
    specs = _specs()
    names = [s.name for s in specs]
    leaf_truth = rng.integers(2_000, 6_000, size=(9, SCHEMA.size)).astype(np.float64)
    mid_truth = np.stack([leaf_truth[0:2].sum(0), leaf_truth[2:5].sum(0), leaf_truth[5:9].sum(0)])
    root_truth = mid_truth.sum(0, keepdims=True)
    budgets = {lv: {q: alloc.query_budget(lv, q) for q in alloc.queries(lv)} for lv in LEVELS}
    # Root: one family per replicate, no parent, single pass with every query (TDA eq. 7.1).
    root_batch = _batch(
        specs,
        np.repeat(root_truth, reps, 0),
        budgets["Root"],
        None,
        np.arange(reps + 1),
        rng,
        exact_root,
    )
    root_passes = [[j for j, n in enumerate(names) if n not in exact_root]]
    root_est, _ = multipass_least_squares(root_batch, root_passes)
    # Mid: TOTAL, then the rest (engine default between root and leaves).
    mid_batch = _batch(
        specs,
        np.tile(mid_truth, (reps, 1)),
        budgets["Mid"],
        root_est,
        np.arange(reps + 1) * 3,
        rng,
        (),
    )
    mid_est, _ = multipass_least_squares(mid_batch, [[0], [1, 2, 3]])
    sizes = np.tile([2, 3, 4], reps)
    leaf_batch = _batch(
        specs,
        np.tile(leaf_truth, (reps, 1)),
        budgets["Leaf"],
        mid_est,
        np.concatenate([[0], np.cumsum(sizes)]),
        rng,
        (),
    )
    leaf_est, _ = multipass_least_squares(leaf_batch, [[0, 1, 2, 3]])
    out: dict[tuple[str, str], np.ndarray] = {}
    for level, est, truth, per in (
        ("Root", root_est, root_truth, 1),
        ("Mid", mid_est, mid_truth, 3),
        ("Leaf", leaf_est, leaf_truth, 9),
    ):
        err = est - np.tile(truth, (reps, 1))
        for spec in specs:
            sq = spec.answer(err) ** 2  # (reps*per, size)
            out[(level, spec.name)] = sq.reshape(reps, per * spec.size).mean(axis=1)
    return out


@pytest.mark.parametrize("invariant_root", [True, False])
def test_exact_covariance_matches_monte_carlo(invariant_root: bool) -> None:
    alloc = _allocation(invariant_root)
    exact_root = ("TOTAL",) if invariant_root else ()
    profile = SpineProfile("toy", LEVELS, FANOUTS, ATTRS)
    pred = predict_topdown(
        alloc,
        profile,
        queries=QUERIES,
        invariants={"Root": exact_root},
        correct=False,
    )
    mc = _monte_carlo(alloc, exact_root, reps=600, seed=7)
    for level in LEVELS:
        for q in QUERIES:
            row = pred.row(level, q)
            sq = mc[(level, q)]
            if level == "Root" and q in exact_root:
                assert row.ls_rmse == 0.0
                assert sq.mean() < 1e-8
                continue
            se = sq.std(ddof=1) / np.sqrt(sq.size)
            assert abs(row.ls_rmse**2 - sq.mean()) < 4 * se + 1e-9, (
                level,
                q,
                row.ls_rmse**2,
                sq.mean(),
                se,
            )
