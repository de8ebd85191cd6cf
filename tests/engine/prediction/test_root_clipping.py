"""The root's lifted empty cells (engine.prediction.root_clipping) against Monte Carlo of the
engine's own non-negative least squares of a root: one geounit, a TOTAL invariant, a few
populated cells with counts large enough that non-negativity binds only on the empty ones; and
the root's rounding model against the engine's controlled rounding."""

from __future__ import annotations

import numpy as np

from engine.dp.presets import load_topdown_preset
from engine.prediction import predict_topdown, shipped_profile
from engine.prediction.least_squares import LevelDesign
from engine.prediction.root_clipping import RootClipping, chain_rounding, root_clipping
from engine.prediction.support import answer_indices
from engine.prediction.support_family import child_support_covariances
from engine.schema.attributes import Attribute, Schema
from engine.topdown.family import FamilyBatch, QuerySpec
from engine.topdown.qp.route import multipass_least_squares
from engine.topdown.queries import query_group
from engine.topdown.rounding import round_batch

SCHEMA = Schema(
    "toy",
    (
        Attribute("VOTINGAGE", ("a", "b")),
        Attribute("HISPANIC", ("h", "n")),
        Attribute("RACEETH", ("w", "x", "y", "z", "v", "u")),
    ),
)
ATTRS = tuple((a.name, a.levels) for a in SCHEMA.attributes)
MEASURED = ("VOTINGAGE", "HISPANIC", "RACEETH", "VOTINGAGE*RACEETH", "DETAILED")
QUERIES = ("TOTAL", *MEASURED)
WEIGHTS = {"VOTINGAGE": 0.05, "HISPANIC": 0.05, "RACEETH": 0.1, "VOTINGAGE*RACEETH": 0.2}
WEIGHTS["DETAILED"] = 0.5
POPULATED = np.array([0, 3, 7, 12, 13, 20])  # 6 of 24 cells; the other 18 are empty


def _design() -> LevelDesign:
    return LevelDesign(
        weight=dict(WEIGHTS),
        noise_variance={q: 1.0 / w for q, w in WEIGHTS.items()},
        invariants=("TOTAL",),
        passes=(MEASURED,),
    )


def _monte_carlo(reps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Errors (reps, cells) of the engine's least squares of the root (no rounding), truth."""
    rng = np.random.default_rng(seed)
    specs = tuple(
        QuerySpec(g.name, g.cell_index, g.size) for g in (query_group(SCHEMA, q) for q in QUERIES)
    )
    truth = np.zeros(SCHEMA.size)
    truth[POPULATED] = rng.integers(2_000, 5_000, size=POPULATED.size)
    roots = np.tile(truth, (reps, 1))
    noisy, weight = [], np.zeros((reps, len(specs)))
    for j, spec in enumerate(specs):
        answer = spec.answer(roots)
        if spec.name == "TOTAL":
            noisy.append(answer)
            continue
        w = WEIGHTS[spec.name]
        weight[:, j] = w
        noisy.append(answer + rng.normal(0.0, np.sqrt(1.0 / w), answer.shape))
    invariant: list[np.ndarray | None] = [None] * len(specs)
    invariant[0] = roots.sum(axis=1, keepdims=True)
    batch = FamilyBatch(
        queries=specs,
        parent=None,
        child_ptr=np.arange(reps + 1),
        noisy=tuple(noisy),
        weight=weight,
        invariant=tuple(invariant),
        family_id=tuple(str(i) for i in range(reps)),
        child_id=tuple(str(i) for i in range(reps)),
    )
    est, _ = multipass_least_squares(batch, [[QUERIES.index(q) for q in MEASURED]])
    return est - roots, truth


def _answers(err: np.ndarray, index: np.ndarray) -> np.ndarray:
    size = int(index.max()) + 1
    rows = np.zeros((index.size, size))
    rows[np.arange(index.size), index] = 1.0
    return err @ rows


def test_lifted_empty_cells_match_the_engine_root() -> None:
    err, truth = _monte_carlo(reps=400, seed=5)
    index = answer_indices(ATTRS, QUERIES)
    sizes = {q: int(index[q].max()) + 1 for q in QUERIES}
    term = root_clipping(_design(), index, truth, None, sizes)
    empty = np.flatnonzero(truth == 0)
    assert term.empty_cells == empty.size
    lifted = err[:, empty].sum(axis=1)
    assert err[:, empty].min() > -1e-6  # an empty cell is never below 0
    # the expected mass moved into the empty cells, within the mean-field approximation (±15%)
    assert abs(term.lifted_mass - lifted.mean()) < 0.15 * lifted.mean() + 4 * lifted.std(
        ddof=1
    ) / np.sqrt(lifted.size)
    (linear,) = child_support_covariances(
        (POPULATED,), None, None, _design(), {q: index[q] for q in QUERIES}
    )
    cells = np.zeros((POPULATED.size, SCHEMA.size))
    cells[np.arange(POPULATED.size), POPULATED] = 1.0
    without_rounding = RootClipping(
        term.bias, term.variance, {q: np.zeros(v) for q, v in sizes.items()}, 0, 0
    )
    for q in MEASURED:
        answers = _answers(err, index[q])
        measured_bias = answers.mean(axis=0)
        # the bias of every answer cell, within 15% of the largest and 4 standard errors
        se = answers.std(axis=0, ddof=1) / np.sqrt(answers.shape[0])
        slack = 0.15 * np.abs(measured_bias).max() + 4 * se
        assert np.all(np.abs(term.bias[q] - measured_bias) <= slack), (q, term.bias[q])
        # mean squared error: the support model's linear part plus the term (no rounding here)
        a = _answers(cells, index[q])
        linear_mse = float(np.mean(np.diag(a.T @ linear @ a)))
        predicted = linear_mse + without_rounding.added_mse(q, None)
        sq = (answers**2).mean(axis=1)
        measured = float(sq.mean())
        assert abs(predicted / measured - 1) < 0.2, (q, predicted, measured)
        # the model without the term under-predicts by more than that wherever lifts matter
        if np.abs(measured_bias).max() > 4 * se.max():
            assert linear_mse / measured < 0.8, (q, linear_mse, measured)


def test_the_term_scales_with_the_design_and_vanishes_without_empty_cells() -> None:
    index = answer_indices(ATTRS, QUERIES)
    sizes = {q: int(index[q].max()) + 1 for q in QUERIES}
    truth = np.zeros(SCHEMA.size)
    truth[POPULATED] = 1000.0
    base = root_clipping(_design(), index, truth, None, sizes)
    design = _design()
    doubled = LevelDesign(
        {q: 4 * w for q, w in design.weight.items()},
        {q: v / 4 for q, v in design.noise_variance.items()},
        design.invariants,
        design.passes,
    )
    direct = root_clipping(doubled, index, truth, None, sizes)
    rescaled = base.scaled(4.0)
    for q in QUERIES:
        np.testing.assert_allclose(direct.bias[q], rescaled.bias[q], rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(direct.variance[q], rescaled.variance[q], rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(direct.rounding[q], rescaled.rounding[q], rtol=1e-6, atol=1e-9)
    assert abs(rescaled.lifted_mass - base.lifted_mass / 2) < 1e-9
    # TOTAL is invariant: the lifted mass comes out of the populated cells exactly
    np.testing.assert_allclose(base.bias["TOTAL"], 0.0, atol=1e-9)
    full = root_clipping(_design(), index, np.full(SCHEMA.size, 50.0), None, sizes)
    assert full.empty_cells == 0 and full.lifted_mass == 0.0
    # structural zeros have no variable: never lifted
    zero = truth == 0
    none = root_clipping(_design(), index, truth, zero, sizes)
    assert none.empty_cells == 0
    assert all(np.all(v == 0) for v in none.bias.values())


def test_chain_rounding_matches_the_engine_rounder() -> None:
    """The controlled rounding (engine.topdown.rounding.round_batch) of 300 roots with random
    fractional cells (a quarter of them integral) along the chain TOTAL → VOTINGAGE →
    VOTINGAGE*HISPANIC → DETAILED, against :func:`chain_rounding` (nearest rounding of each
    chain answer the query coarsens) and the correction's cell-by-cell p/6."""
    chain = ("TOTAL", "VOTINGAGE", "VOTINGAGE*HISPANIC", "DETAILED")
    queries = ("TOTAL", "VOTINGAGE", "HISPANIC", "RACEETH", "VOTINGAGE*HISPANIC", "DETAILED")
    specs = tuple(
        QuerySpec(g.name, g.cell_index, g.size) for g in (query_group(SCHEMA, q) for q in queries)
    )
    rng = np.random.default_rng(1)
    k = 300
    x = rng.uniform(0.0, 20.0, size=(k, SCHEMA.size))
    x = np.where(rng.random(x.shape) < 0.25, np.round(x), x)
    total = np.round(x.sum(axis=1, keepdims=True))
    x *= total / x.sum(axis=1, keepdims=True)
    invariant: list[np.ndarray | None] = [None] * len(specs)
    invariant[0] = total
    batch = FamilyBatch(
        queries=specs,
        parent=None,
        child_ptr=np.arange(k + 1),
        noisy=tuple(np.zeros((k, s.size)) for s in specs),
        weight=np.zeros((k, len(specs))),
        invariant=tuple(invariant),
        family_id=tuple(str(i) for i in range(k)),
        child_id=tuple(str(i) for i in range(k)),
    )
    rounded, _ = round_batch(batch, x, [specs[queries.index(c)] for c in chain])
    err = rounded - x
    fractional = (np.abs(x - np.round(x)) > 1e-6).astype(float)
    for spec in specs[1:]:
        measured = float((spec.answer(err) ** 2).mean())
        predicted = float(
            np.mean(
                [
                    chain_rounding(ATTRS, chain, fractional[i], [spec.name])[spec.name]
                    for i in range(k)
                ]
            )
        )
        by_cell = float((spec.answer(fractional) / 6.0).mean())
        assert 0.6 < predicted / measured < 1.6, (spec.name, predicted, measured)
        assert by_cell / measured > 2.0, (spec.name, by_cell, measured)
    total = chain_rounding(ATTRS, chain, fractional[0], ["TOTAL", "VOTINGAGE"], exact=("TOTAL",))
    assert np.all(total["TOTAL"] == 0) and np.all(total["VOTINGAGE"] > 0)


def test_a_one_county_state_predicts_state_and_county_alike() -> None:
    """The shipped production profile (a generated RI: one county) publishes the County as a copy
    of the State; with the root term both rows are predicted alike, larger than without it at
    the marginals the lifted cells bias (HHINSTLEVELS, HHGQ), and County TOTAL stays exact."""
    alloc = load_topdown_preset("topdown-2020-production")["persons"]
    profile = shipped_profile("generated-ri-100k")
    with_term = predict_topdown(alloc, profile, max_families=4)
    without = predict_topdown(alloc, profile, max_families=4, root_empty_cells=False)
    for q in ("CENRACE", "HISPANIC", "VOTINGAGE", "HHINSTLEVELS", "HHGQ", "DETAILED"):
        state, county = with_term.row("State", q), with_term.row("County", q)
        assert abs(state.post_processed_rmse - county.post_processed_rmse) < 1e-9, q
    for q in ("HHINSTLEVELS", "HHGQ"):
        assert (
            with_term.row("State", q).post_processed_rmse
            > 2 * without.row("State", q).post_processed_rmse
        )
    assert with_term.row("County", "TOTAL").post_processed_rmse < 1e-3


def test_low_rank_factors_reproduce_the_dense_coupling() -> None:
    """[H_SE; C_E] = L R and H_SS (the root term's solve against L's few hundred columns
    instead of every empty cell) equal the dense Gram blocks exactly."""
    from engine.prediction.root_clipping import (
        _constraint_rows,
        _coupling_factors,
        _gram,
        _indicators,
        _populated_gram,
    )

    rng = np.random.default_rng(3)
    n_cells = 60
    cells = np.arange(n_cells)
    answer_index = {
        "TOTAL": np.zeros(n_cells, dtype=np.int64),
        "A": cells % 3,
        "B": cells // 6,
        "AB": (cells % 3) * 10 + cells // 6,
        "DETAILED": cells,
    }
    populated = np.sort(rng.choice(n_cells, 25, replace=False))
    empty = np.setdiff1d(cells, populated)
    weight = {"A": 0.7, "B": 1.9, "AB": 0.3, "DETAILED": 2.5}
    parts = {q: _indicators(answer_index[q], populated, empty) for q in weight}
    cons_s, cons_e = _constraint_rows(["TOTAL"], answer_index, populated, empty)
    left, right = _coupling_factors(parts, weight, cons_e, answer_index, populated, empty)
    dense = np.vstack([_gram(parts, weight, "SE"), cons_e])
    np.testing.assert_allclose((left @ right).toarray(), dense, rtol=1e-15, atol=0)
    assert left.shape[1] < empty.size  # DETAILED couples nothing: fewer columns than cells
    np.testing.assert_array_equal(
        _populated_gram([answer_index[q][populated] for q in weight], weight.values()),
        _gram(parts, weight, "SS"),
    )
    assert cons_s.shape[0] == 1
