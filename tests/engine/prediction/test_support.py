"""Least squares on the cells a family populates (engine.prediction.support) and what it needs.

The per-child covariance is checked against Monte Carlo of the engine's own least squares
(:func:`engine.topdown.qp.route.multipass_least_squares`) on a family whose parent is 0 in
some cells (no variables there) and whose children are held at 0 outside their own cells by
structural-zero bounds — the support model's active set made exact; counts are large so that
non-negativity never binds otherwise. With every cell populated it reduces to the dense formula
Cov = Cov(D_p)/n² + (1 − 1/n) K_level of :mod:`engine.prediction.least_squares`.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine.prediction import predict_topdown, profile_for, shipped_profile
from engine.prediction.algebra import cell_algebra, to_dense
from engine.prediction.least_squares import LevelDesign, level_covariance
from engine.prediction.predict import level_budgets
from engine.prediction.spine import SpineProfile, aggregate_counts, aggregate_zeros
from engine.prediction.support import SupportAlgebra, SupportCache, answer_indices
from engine.prediction.support_family import child_support_covariances, prepare_child_covariances
from engine.prediction.support_freed import freed_cell_variances
from engine.schema.attributes import Attribute, Schema
from engine.topdown.family import ChildBounds, FamilyBatch, QuerySpec
from engine.topdown.qp.route import multipass_least_squares
from engine.topdown.queries import query_group

SCHEMA = Schema("toy", (Attribute("VOTINGAGE", ("a", "b")), Attribute("RACEETH", ("x", "y", "z"))))
ATTRS = tuple((a.name, a.levels) for a in SCHEMA.attributes)
QUERIES = ("TOTAL", "VOTINGAGE", "RACEETH", "DETAILED")
WEIGHTS = {"TOTAL": 0.5, "VOTINGAGE": 0.05, "RACEETH": 0.08, "DETAILED": 0.1}
PARENT_SUPPORT = np.array([0, 1, 2, 4])  # cells 3 and 5 are empty in the parent
CHILD_SUPPORTS = (np.array([0, 1, 2, 4]), np.array([0, 2]), np.array([1, 2, 4]))


def _design(passes: tuple[tuple[str, ...], ...]) -> LevelDesign:
    return LevelDesign(
        weight=dict(WEIGHTS),
        noise_variance={q: 1.0 / w for q, w in WEIGHTS.items()},
        invariants=(),
        passes=passes,
    )


def _parent_cov() -> np.ndarray:
    a = np.array([[2.0, 0.5, 0.0, 0.3], [0.5, 1.5, 0.2, 0.0], [0.0, 0.2, 3.0, 0.4]])
    return a.T @ a + np.eye(4)


def _monte_carlo(passes: tuple[tuple[str, ...], ...], reps: int, seed: int) -> np.ndarray:
    """Errors (reps, children, cells) of the engine's least squares on the toy family."""
    rng = np.random.default_rng(seed)
    specs = tuple(
        QuerySpec(g.name, g.cell_index, g.size) for g in (query_group(SCHEMA, q) for q in QUERIES)
    )
    n_kids = len(CHILD_SUPPORTS)
    truth = np.zeros((n_kids, SCHEMA.size))
    for c, cells in enumerate(CHILD_SUPPORTS):
        truth[c, cells] = rng.integers(3_000, 6_000, size=cells.size)
    parent_truth = truth.sum(axis=0)
    chol = np.linalg.cholesky(_parent_cov())
    parents = np.repeat(parent_truth[None, :], reps, axis=0)
    parents[:, PARENT_SUPPORT] += rng.standard_normal((reps, PARENT_SUPPORT.size)) @ chol.T
    kids = np.tile(truth, (reps, 1))
    noisy, weight = [], np.zeros((kids.shape[0], len(specs)))
    for j, spec in enumerate(specs):
        w = WEIGHTS[spec.name]
        weight[:, j] = w
        answer = spec.answer(kids)
        noisy.append(answer + rng.normal(0.0, np.sqrt(1.0 / w), answer.shape))
    detailed = specs[QUERIES.index("DETAILED")]
    upper = np.where(kids > 0, np.inf, 0.0)
    batch = FamilyBatch(
        queries=specs,
        parent=parents,
        child_ptr=np.arange(reps + 1) * n_kids,
        noisy=tuple(noisy),
        weight=weight,
        invariant=(None,) * len(specs),
        family_id=tuple(str(i) for i in range(reps)),
        child_id=tuple(str(i) for i in range(kids.shape[0])),
        bounds=(ChildBounds(detailed, np.full(kids.shape, -np.inf), upper),),
    )
    index = [[QUERIES.index(q) for q in p] for p in passes]
    est, _ = multipass_least_squares(batch, index)
    return (est - kids).reshape(reps, n_kids, SCHEMA.size)


@pytest.mark.parametrize(
    "passes",
    [
        (("TOTAL", "VOTINGAGE", "RACEETH", "DETAILED"),),
        (("TOTAL",), ("VOTINGAGE", "RACEETH", "DETAILED")),
    ],
)
def test_child_support_covariance_matches_the_engine(passes: tuple[tuple[str, ...], ...]) -> None:
    index = answer_indices(ATTRS, QUERIES)
    covs = child_support_covariances(
        CHILD_SUPPORTS, PARENT_SUPPORT, _parent_cov(), _design(passes), index
    )
    err = _monte_carlo(passes, reps=500, seed=3)
    for c, cells in enumerate(CHILD_SUPPORTS):
        outside = np.setdiff1d(np.arange(SCHEMA.size), cells)
        assert np.abs(err[:, c, outside]).max() < 1e-6  # held at 0 (true count 0)
        algebra = SupportAlgebra(cells, index)
        for q in QUERIES:
            size = int(index[q].max()) + 1
            predicted = algebra.answer_variances(covs[c], q, size).sum()
            rows = np.zeros((cells.size, size))
            rows[np.arange(cells.size), index[q][cells]] = 1.0
            sq = ((err[:, c, cells] @ rows) ** 2).sum(axis=1)
            se = sq.std(ddof=1) / np.sqrt(sq.size)
            assert abs(predicted - sq.mean()) < 4 * se, (c, q, predicted, sq.mean(), se)


def test_full_supports_reduce_to_the_dense_formula() -> None:
    passes = (("TOTAL",), ("VOTINGAGE", "RACEETH", "DETAILED"))
    full = np.arange(SCHEMA.size)
    rng = np.random.default_rng(0)
    a = rng.normal(size=(SCHEMA.size, SCHEMA.size))
    parent = a @ a.T
    covs = child_support_covariances(
        (full,) * 3, full, parent, _design(passes), answer_indices(ATTRS, QUERIES)
    )
    algebra = cell_algebra(ATTRS, QUERIES)
    k = to_dense(algebra, level_covariance(algebra, _design(passes)))
    expected = parent / 9 + (1 - 1 / 3) * k
    for cov in covs:
        np.testing.assert_allclose(cov, expected, rtol=1e-7, atol=1e-8)


def test_a_bypassed_root_is_measured_with_its_query_proportions() -> None:
    """As engine/topdown/measure.node_query_budget: both level shares, the US's query shares."""
    from engine.dp.presets import load_topdown_preset

    alloc = load_topdown_preset("topdown-2020-production")["persons"]
    budgets = level_budgets(alloc, ("State", "County", "Tract", "Block_Group", "Block"))
    share = alloc.level_shares["US"] + alloc.level_shares["State"]
    expected = float(alloc.rho * share * alloc.query_share("US", "DETAILED"))
    assert budgets["State"]["DETAILED"] == pytest.approx(expected)
    assert "TOTAL" not in budgets["State"]  # the US asks no TOTAL (it is invariant)


def test_sparse_profile_round_trip_and_schema_choice() -> None:
    attrs = (("A", tuple(f"a{i}" for i in range(10))), ("B", tuple(f"b{i}" for i in range(10))))
    fanouts = (np.array([1]), np.array([2]))
    leaf = np.zeros((2, 100), dtype=np.int64)
    leaf[0, 3], leaf[1, 97] = 5, 2
    zero = np.zeros((2, 10), dtype=bool)
    zero[0, 5:], zero[1, :5] = True, True  # answers of B held at 0 (structural zeros)
    profile = SpineProfile(
        "s",
        ("R", "L"),
        fanouts,
        attrs,
        aggregate_counts(fanouts, leaf),
        zero_query="B",
        zero_answers=aggregate_zeros(fanouts, zero),
    )
    data = profile.to_json()
    assert "leaf_counts_sparse" in data
    back = SpineProfile.from_json(data)
    np.testing.assert_array_equal(back.unit_counts(1), leaf)
    np.testing.assert_array_equal(back.unit_counts(0), leaf.sum(axis=0, keepdims=True))
    np.testing.assert_array_equal(back.unit_cells(1, 1), [97])
    np.testing.assert_array_equal(back.zero_answers[-1], zero)
    np.testing.assert_array_equal(back.zero_answers[0][0], zero[0] & zero[1])
    cells = back.zero_cells(1, np.array([0]), attrs)
    assert cells.shape == (1, 100)
    assert not cells[0, 3] and cells[0, 5] and cells[0, 95] and not cells[0, 90]
    assert profile_for(["VOTINGAGE*HISPANIC*CENRACE", "HHGQ"]).name == "generated-us-20m"
    one_state = profile_for(["VOTINGAGE*HISPANIC*CENRACE", "HHGQ"], national=False)
    assert one_state.name == "generated-us-20m: KY" and one_state.levels[0] == "State"
    assert profile_for(["VOTINGAGE", "RACEETH"]).name == "ri2010"


def test_generated_profile_and_the_support_model_on_the_production_schema() -> None:
    from engine.dp.presets import load_topdown_preset

    profile = shipped_profile("generated-ri-100k")
    assert [profile.n_units(k) for k in range(5)] == [1, 1, 26, 69, 2386]
    assert int(profile.counts[0].sum()) == 100_000
    assert "CC BY-SA" in profile.licence
    assert profile.zero_query == "HHGQ" and profile.zero_answers[-1][:, 1:].mean() > 0.9
    alloc = load_topdown_preset("topdown-2020-production")["persons"]
    dense = predict_topdown(alloc, profile, support=False, max_units=300)
    restricted = predict_topdown(alloc, profile, max_units=300, max_families=4)
    # Zero cells act like structural zeros: the marginals' least squares is more precise.
    for level, q in (("Tract", "VOTINGAGE"), ("Block", "TOTAL"), ("Block_Group", "HISPANIC")):
        assert restricted.row(level, q).ls_rmse < 0.8 * dense.row(level, q).ls_rmse
    # A new total ρ with the same shares reuses the cached covariances: exact 1/ρ scaling.
    doubled = predict_topdown(alloc.with_rho(2 * alloc.rho), profile, max_units=300, max_families=4)
    for level in ("Tract", "Block"):
        ratio = restricted.row(level, "DETAILED").ls_rmse / doubled.row(level, "DETAILED").ls_rmse
        assert ratio == pytest.approx(np.sqrt(2.0), rel=1e-6)


def _large_family_profile(tracts: int = 90, seed: int = 5) -> SpineProfile:
    """A one-county state whose county has ``tracts`` tracts of ~55 populated cells each on the
    2,016-cell schema: one family of more than 4,000 variables (as a 1,000,000-person county)."""
    from engine.schema.attributes import REDISTRICTING_SCHEMA

    rng = np.random.default_rng(seed)
    attrs = tuple((a.name, a.levels) for a in REDISTRICTING_SCHEMA.attributes)
    pool = rng.choice(REDISTRICTING_SCHEMA.size, size=400, replace=False)
    blocks_per_tract = 6
    leaf = np.zeros((tracts * blocks_per_tract, REDISTRICTING_SCHEMA.size), dtype=np.int64)
    for t in range(tracts):
        cells = rng.choice(pool, size=55, replace=False)
        for b in range(blocks_per_tract):
            leaf[t * blocks_per_tract + b, cells] = rng.integers(0, 12, size=cells.size)
    fanouts = (
        np.array([1]),
        np.array([1]),
        np.array([tracts]),
        np.full(tracts, 2),
        np.full(2 * tracts, blocks_per_tract // 2),
    )
    import scipy.sparse as sp

    return SpineProfile(
        "large-family",
        ("State", "County", "Tract", "Block_Group", "Block"),
        fanouts,
        attrs,
        aggregate_counts(fanouts, sp.csr_matrix(leaf)),
    )


def test_a_family_of_more_than_4000_variables_keeps_the_support_model() -> None:
    """Before, a family of more than 4,000 variables switched the whole prediction to the dense
    model (which mis-states errors 2–3× where cells are empty) with only a note; the last pass
    is now computed child by child, so any family size is modelled exactly."""
    from engine.dp.presets import load_topdown_preset
    from engine.prediction.support_family import GENERAL_PATH_MAX_VARIABLES

    profile = _large_family_profile()
    assert profile.largest_family > GENERAL_PATH_MAX_VARIABLES
    alloc = load_topdown_preset("topdown-2020-production")["persons"]
    pred = predict_topdown(alloc, profile, max_families=None)
    assert pred.model == "support"
    assert not any("dense model" in n for n in pred.notes)
    dense = predict_topdown(alloc, profile, support=False)
    tract = pred.row("Tract", "HHGQ").ls_rmse
    assert tract < 0.8 * dense.row("Tract", "HHGQ").ls_rmse  # the zero cells re-estimate it


def test_the_block_path_matches_the_general_path_on_any_family() -> None:
    """The last pass child by child (with the discrete Gaussian's smaller noise variance, Δ ≠ 0)
    gives the numbers of the dense general path: a third pass of DETAILED alone, after a pass
    whose DETAILED answers it holds, changes nothing, and there the second pass runs on the
    general path."""
    index = answer_indices(ATTRS, QUERIES)
    passes = (("TOTAL",), ("VOTINGAGE", "RACEETH", "DETAILED"))
    weights = dict(WEIGHTS)
    variances = {q: 0.6 / w for q, w in WEIGHTS.items()}
    two = LevelDesign(weights, variances, (), passes)
    three = LevelDesign(weights, variances, (), (*passes, ("DETAILED",)))
    blocks = child_support_covariances(CHILD_SUPPORTS, PARENT_SUPPORT, _parent_cov(), two, index)
    general = child_support_covariances(CHILD_SUPPORTS, PARENT_SUPPORT, _parent_cov(), three, index)
    for a, b in zip(blocks, general, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


def test_a_family_too_large_for_the_general_path_is_flagged_on_every_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Custom passes of three (a pass before the last that is not TOTAL alone) need the dense
    general path; beyond its size the prediction uses the dense model and every row below the
    root says it does not hold, with the reason."""
    from engine.dp.presets import load_topdown_preset
    from engine.prediction import support_family

    monkeypatch.setattr(support_family, "GENERAL_PATH_MAX_VARIABLES", 200)
    profile = shipped_profile("generated-ri-100k")
    alloc = load_topdown_preset("topdown-2020-production")["persons"]
    passes = [["TOTAL"], ["HHGQ", "VOTINGAGE"], [q for q in alloc.all_queries()]]
    pred = predict_topdown(alloc, profile, max_units=300, ls_passes=passes)
    assert pred.model.startswith("dense model: a family too large")
    assert any("too large for the exact support model" in n for n in pred.notes)
    for row in pred.rows:
        if not row.invariant:
            assert row.model_holds is False and "too large" in (row.validity or ""), row


def test_sampling_limits_are_validated() -> None:
    from engine.core.errors import ValidationError
    from engine.dp.presets import load_topdown_preset

    alloc = load_topdown_preset("ri2010-production-like")["persons"]
    with pytest.raises(ValidationError, match="max_families must be a whole number"):
        predict_topdown(alloc, shipped_profile("ri2010"), max_families=0)


@pytest.mark.parametrize("passes", [(tuple(QUERIES),), (("TOTAL",), tuple(QUERIES[1:]))])
def test_an_only_child_copies_its_parent(passes: tuple[tuple[str, ...], ...]) -> None:
    """A family of one child on its parent's cells is fixed by summing to the parent: its
    covariance is the parent's (the shortcut), as the general path says for the same child with
    an empty sibling (no variables, so nothing changes but the route through the algebra)."""
    design = _design(passes)
    index = answer_indices(ATTRS, QUERIES)
    parent_cov = _parent_cov()
    alone = child_support_covariances((PARENT_SUPPORT,), PARENT_SUPPORT, parent_cov, design, index)
    general = child_support_covariances(
        (PARENT_SUPPORT, np.zeros(0, dtype=np.int64)), PARENT_SUPPORT, parent_cov, design, index
    )
    np.testing.assert_array_equal(alone[0], parent_cov)
    np.testing.assert_allclose(general[0], parent_cov, rtol=1e-10, atol=1e-12)
    assert general[1].shape == (0, 0)


@pytest.mark.parametrize(
    "passes",
    [
        (tuple(QUERIES),),
        (("TOTAL",), tuple(QUERIES[1:])),
        (("TOTAL", "VOTINGAGE"), ("RACEETH", "DETAILED")),
    ],
)
def test_prepared_family_reused_with_a_new_parent_covariance(
    passes: tuple[tuple[str, ...], ...],
) -> None:
    """What a family's covariances need besides its parent's covariance is prepared once and
    reused when only the parent's covariance changes (an edit of the level above): the same
    numbers as the whole computation, also through the cache (which rescales the design)."""
    index = answer_indices(ATTRS, QUERIES)
    design = _design(passes)
    prepared = prepare_child_covariances(CHILD_SUPPORTS, PARENT_SUPPORT, True, design, index)
    assert prepared.nbytes > 0
    cache = SupportCache(index)
    scaled = LevelDesign(
        {q: 3.0 * w for q, w in design.weight.items()},
        {q: v / 3.0 for q, v in design.noise_variance.items()},
        design.invariants,
        design.passes,
    )
    for factor in (1.0, 0.3, 2.7):
        parent_cov = _parent_cov() * factor + np.diag([0.0, 0.1, 0.0, 0.2]) * (factor - 1.0)
        whole = child_support_covariances(CHILD_SUPPORTS, PARENT_SUPPORT, parent_cov, design, index)
        cached, _, _ = cache.child_covariances(scaled, CHILD_SUPPORTS, PARENT_SUPPORT, parent_cov)
        direct = child_support_covariances(
            CHILD_SUPPORTS, PARENT_SUPPORT, parent_cov, scaled, index
        )
        for a, b, c, d in zip(whole, prepared.finish(parent_cov), cached, direct, strict=True):
            np.testing.assert_array_equal(a, b)
            np.testing.assert_allclose(c, d, rtol=1e-12, atol=1e-14)
        freed = freed_cell_variances(
            PARENT_SUPPORT, CHILD_SUPPORTS, scaled, index, np.diag(parent_cov)
        )
        kept, _ = cache.freed_cell_variances(
            PARENT_SUPPORT, CHILD_SUPPORTS, scaled, np.diag(parent_cov)
        )
        for a, b in zip(freed, kept, strict=True):
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=0)
        assert any(np.any(a > 0) for a in freed)
    assert len(cache.prepared) == 2  # one family's covariances and freed cells, reused
