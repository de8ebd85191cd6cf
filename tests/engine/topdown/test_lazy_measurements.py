"""Lazy keyed measurements, sparse histograms and streamed outputs give the numbers of
the whole-draw, dense path — and the run holds no ``(n_nodes × n_cells)`` array (asserted on sizes).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from engine.core.errors import ValidationError
from engine.core.executors import InProcessExecutor
from engine.dp.presets import load_topdown_preset
from engine.noise.keyed import geounit_hashes
from engine.topdown import measurement as measurement_module
from engine.topdown import sparse_histograms
from engine.topdown.estimation import estimate
from engine.topdown.measure import measure
from engine.topdown.measurement import KeyedMeasurements, measure_plan
from engine.topdown.options import TopDownOptions
from engine.topdown.plan import plan_run
from engine.topdown.result import result_of
from engine.topdown.sparse_histograms import SparseRows, aggregate_sparse
from tests.engine.topdown.helpers import ri_subset


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """A generated 4,000-person RI on the 2,016-cell schema, with its unit frame."""
    from engine.data.generated import load_generated_population
    from engine.data.population import generate_population

    out = tmp_path_factory.mktemp("population")
    generate_population(4_000, seed=5, states=["RI"], out_dir=out)
    return load_generated_population(out)


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Categorical text columns as plain objects (chunks concatenate to object columns)."""
    return frame.astype({c: object for c in frame.columns if frame[c].dtype == "category"})


class RecordingExecutor(InProcessExecutor):
    """In process, keeping every unit of work it was given."""

    def __init__(self) -> None:
        self.units: list[object] = []

    def map(self, fn, units, **kwargs):  # type: ignore[no-untyped-def]
        self.units += list(units)
        return super().map(fn, units, **kwargs)


def _both_paths(hist, preset: str, seed: int, chunk_cells: int = 60_000):
    """(lazy result, whole-draw result, recorded units of the lazy run)."""
    allocation = load_topdown_preset(preset)["persons"]
    plan = plan_run(hist, allocation, options=TopDownOptions(chunk_cells=chunk_cells))
    truth = aggregate_sparse(plan.tree, hist.counts)
    lazy = measure_plan(plan, truth, seed)
    assert isinstance(lazy, KeyedMeasurements)
    whole = measure(
        truth.toarray(),
        plan.queries,
        plan.budget,
        plan.invariant,
        allocation.mechanism,
        None,
        seed=seed,
        geounit_hash=geounit_hashes(plan.tree.level_names, plan.tree.node_id),
    )
    results = []
    recorder = RecordingExecutor()
    for measured, executor in ((lazy, recorder), (whole, None)):
        estimation = estimate(plan, measured, truth, executor=executor)
        results.append(
            result_of(
                plan,
                hist,
                truth,
                measured,
                estimation,
                seed=seed,
                runtime_s=0.0,
                timings={},
                workers=1,
            )
        )
    return results[0], results[1], recorder.units


@pytest.mark.parametrize("where", ["ri", "generated"])
def test_lazy_path_gives_the_whole_draw_numbers(where, generated):
    hist, preset = (
        (ri_subset(), "ri2010-production-like")
        if where == "ri"
        else (generated, "topdown-2020-production")
    )
    lazy, whole, _ = _both_paths(hist, preset, seed=7)
    assert (lazy.estimates_sparse != whole.estimates_sparse).nnz == 0
    np.testing.assert_array_equal(lazy.estimates, whole.estimates)
    pd.testing.assert_frame_equal(lazy.measurements, whole.measurements)
    pd.testing.assert_frame_equal(lazy.to_tidy(), whole.to_tidy())


def test_lazy_run_holds_no_dense_node_by_cell_array(generated):
    lazy, _, units = _both_paths(generated, "topdown-2020-production", seed=3, chunk_cells=8_000)
    n_nodes, n_cells = lazy.tree.n_nodes, lazy.schema.size
    dense = n_nodes * n_cells
    measured = lazy.measured
    assert isinstance(measured, KeyedMeasurements) and "noisy" not in measured.__dict__
    for name, value in vars(measured).items():  # budgets etc. are (n_nodes × n_queries)
        if isinstance(value, np.ndarray):
            assert value.size < dense / 50, name
    assert sp.issparse(measured.truth) and measured.truth.nnz < dense / 50
    assert sp.issparse(lazy.estimates_sparse) and lazy.estimates_sparse.nnz < dense / 50
    assert "estimates" not in lazy.__dict__ and "truth" not in lazy.__dict__
    assert len(units) >= 3
    for batch, answers, _passes, _chain, _solver in units:
        assert batch.noisy == ()  # answers are drawn in the unit of work
        assert sp.issparse(answers.truth)
        assert batch.parent.size < dense / 50
    # streaming: every frame is bounded, and together they are the whole table
    frames = list(lazy.iter_measurement_frames(rows=50_000))
    assert len(frames) > 1 and max(len(f) for f in frames) <= 50_000 + n_cells
    pd.testing.assert_frame_equal(
        _plain(pd.concat(frames, ignore_index=True)), _plain(lazy.measurements)
    )
    frames = list(lazy.iter_estimate_frames(rows=50_000))
    assert max(len(f) for f in frames) <= 50_000 + n_cells


def test_units_draw_only_the_answers_their_families_need(generated, monkeypatch):
    from engine import noise

    drawn = []
    original = noise.keyed_discrete_gaussian

    def counting(sigma2, keys, index):
        out = original(sigma2, keys, index)
        drawn.append(out.size)
        return out

    monkeypatch.setattr(noise, "keyed_discrete_gaussian", counting)
    lazy, _, _ = _both_paths(generated, "topdown-2020-production", seed=3)
    during_run = sum(drawn)
    all_answers = int(
        np.isfinite(lazy.measured.variance).sum(axis=0) @ [q.size for q in lazy.queries]
    )
    # the whole-draw path of the helper drew every answer once; the lazy run only a fraction
    assert during_run - all_answers < all_answers / 10


def test_exact_noise_is_refused_above_its_size(monkeypatch):
    hist = ri_subset()
    allocation = load_topdown_preset("ri2010-production-like")["persons"]
    plan = plan_run(hist, allocation, options=TopDownOptions(noise_method="exact"))
    truth = aggregate_sparse(plan.tree, hist.counts)
    monkeypatch.setattr(measurement_module, "MAX_EXACT_CELLS", 100)
    with pytest.raises(ValidationError, match="exact .*fast"):
        measure_plan(plan, truth, 1)


def test_dense_views_are_refused_for_very_large_runs(monkeypatch):
    lazy, _, _ = _both_paths(ri_subset(), "ri2010-production-like", seed=2)
    monkeypatch.setattr(sparse_histograms, "MAX_DENSE_CELLS", 10)
    with pytest.raises(ValidationError, match="iter_estimate_frames"):
        _ = lazy.estimates
    assert lazy.block_histogram_sparse().shape == (lazy.tree.n_blocks, lazy.schema.size)


def test_sparse_aggregate_and_rows_match_the_dense_ones():
    hist = ri_subset()
    allocation = load_topdown_preset("ri2010-production-like")["persons"]
    tree = plan_run(hist, allocation).tree
    sparse = aggregate_sparse(tree, hist.counts)
    np.testing.assert_array_equal(sparse.toarray(), tree.aggregate(hist.counts))
    rows = SparseRows(tree.n_nodes, hist.schema.size)
    dense = sparse.toarray()
    order = np.random.default_rng(0).permutation(tree.n_nodes)
    for part in np.array_split(order, 5):
        rows.set(part, dense[part])
    pick = order[:17][::-1]
    np.testing.assert_array_equal(rows.dense(pick), dense[pick])
    np.testing.assert_array_equal(rows.matrix().toarray(), dense)
    with pytest.raises(ValueError, match="never set"):
        SparseRows(3, 2).matrix()


def test_answers_equal_the_query_matrices(generated):
    """The relabelled sparse sums (true answers, needed answers) and the non-zero-column product
    of ``QuerySpec.answer`` give exactly what the whole query matrix gives."""
    import scipy.sparse as sp

    from engine.topdown.batch_answers import true_answers

    allocation = load_topdown_preset("topdown-2020-production")["persons"]
    plan = plan_run(generated, allocation)
    rng = np.random.default_rng(1)
    x = rng.integers(0, 3, size=(5, generated.schema.size)) * (rng.random((5, 2016)) < 0.05)
    # estimates before rounding: arbitrary doubles, sparse (the fast path) and dense (the other)
    sparse_real = rng.normal(size=(7, 2016)) * (rng.random((7, 2016)) < 0.1)
    dense_real = rng.normal(size=(7, 2016))
    for spec in plan.specs:
        whole = spec.matrix()
        np.testing.assert_array_equal(true_answers(spec, sp.csr_matrix(x)), (whole @ x.T).T)
        for real in (sparse_real, dense_real):
            assert np.array_equal(spec.answer(real), np.asarray(whole @ real.T).T)
