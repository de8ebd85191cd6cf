"""The sparse metrics stage: metrics.json from the sparse histograms, zeros counted.

The sparse path (the CLI's, ``tables=False``, and the app's, ``tables=True``) must give the old
dense path's metrics.json and app tables (built on ``result.to_tidy()``): MAE, median AE and n_cells exactly, EPL and its
bootstrap interval to 1e-12, Blau bias exactly; and it must never build a geounits × cells table.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from engine.dp.presets import load_topdown_preset
from engine.metrics.counted import counted_error_summary, counted_residuals
from engine.metrics.epl import epl_details, epl_details_counted
from engine.runs import topdown as stages
from engine.runs import topdown_metrics as metrics_stage
from engine.runs.control import RunControl
from engine.runs.data_source import BlockFilter, DataSource
from engine.runs.options import TopDownRunOptions
from engine.runs.pipeline import execute
from engine.runs.spec import RunSpec
from engine.topdown.result import TopDownResult

TRACTS = ["44007001000", "44007001100"]


def _close(a: Any, b: Any, path: str = "") -> None:
    """Equal JSON-like trees; floats to 1e-12 relative (NaN equals NaN)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), path
        for key in a:
            _close(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, float) and isinstance(b, float):
        assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-12, abs=0), path
    else:
        assert a == b, path


def _dense_reference(spec: RunSpec, result: Any, hist: Any, measured: Any) -> tuple[dict, dict]:
    """The old dense path (before the metrics were computed from sparse histograms): metrics.json
    and the app's tables computed from the whole tidy table ``result.to_tidy()``, its block rows
    restricted to the error universe (the blocks with housing units or GQ where the data carry a
    unit frame); the prediction's measured RMSE over every block."""
    from engine.metrics.epl import epl_table
    from engine.metrics.error_tables import mae_table
    from engine.metrics.prediction import prediction_table
    from engine.metrics.universe import block_universe
    from engine.prediction import RUN_TABLE_MAX_UNITS
    from engine.topdown.profile import tree_profile

    every_block = result.to_tidy()
    universe = block_universe(hist, spec.options.error_universe)
    tidy = universe.restrict(every_block, hist.geography["Block"].to_numpy())
    epl_boot = spec.options.epl_boot
    settings = metrics_stage.epl_settings_of(spec)
    tables = {"mae": mae_table(tidy)}
    _, blau_bias = metrics_stage.blau_bias_of(result, tidy, hist, universe)
    if blau_bias is not None:
        tables["blau_bias"] = blau_bias
    tables["epl"] = epl_table(
        tidy, n_boot=epl_boot, rng=metrics_stage.bootstrap_rng(spec.seed), settings=settings
    )
    profile, _ = tree_profile(result.tree, hist, "run")
    # the app's sample of families per level (RUN_TABLE_MAX_UNITS), so the tables compare
    predicted = prediction_table(
        profile, measured.allocation, every_block, max_units=RUN_TABLE_MAX_UNITS
    )
    if predicted is not None:
        tables["prediction"] = predicted
    payload = metrics_stage.metrics_payload(
        result,
        {},
        tidy=every_block,
        noise_method=spec.noise_method,
        epl_boot=epl_boot,
        epl_settings=settings,
        hist=hist,
        universe=universe,
    )
    return payload, tables


def _metrics_both_ways(spec: RunSpec, hist: Any) -> tuple[dict, dict, Any]:
    output = execute(spec, data=hist, outputs="result")
    result, measured = output.result, stages.measure(spec, hist, RunControl())
    dense, dense_tables = _dense_reference(spec, result, hist, measured)
    app = metrics_stage.metrics(spec, result, hist, measured, tables=True)
    sparse = metrics_stage.metrics(spec, result, hist, measured, tables=False)
    assert sparse.tidy is None and app.tidy is not None
    assert app.queries_left_out == ()
    pd.testing.assert_frame_equal(app.tidy, result.to_tidy())
    # the app's tables from the counted residuals equal the old dense path's, value for value
    assert set(app.tables) == set(dense_tables)
    for name, table in dense_tables.items():
        pd.testing.assert_frame_equal(app.tables[name], table, check_exact=True, obj=name)
    assert app.tables["epl"].attrs == dense_tables["epl"].attrs
    for payload in (app.payload, sparse.payload):
        _assert_same(dense, payload)
    pd.testing.assert_frame_equal(  # NaN ratios where the measured RMSE is 0
        pd.DataFrame(app.payload["prediction"]),
        pd.DataFrame(
            dense_tables["prediction"][metrics_stage.PREDICTION_COLUMNS].to_dict("records")
        ),
        check_exact=True,
    )
    return dense, sparse.payload, result


STANDARD = (
    "mae",
    "tda_mae",
    "error_universe",
    "median_ae",
    "n_cells",
    "epl",
    "epl_settings",
    "blau_bias",
    "blau_bias_geography",
)


def _assert_same(dense: dict, sparse: dict) -> None:
    for key in STANDARD:
        assert (key in dense) == (key in sparse), key
        if key in dense:
            _close(dense[key], sparse[key], key)
    # exact where the numbers are integers or sums of integers
    assert dense["mae"] == sparse["mae"] and dense["n_cells"] == sparse["n_cells"]
    assert dense["median_ae"] == sparse["median_ae"]


def test_ri_county_sparse_equals_dense() -> None:
    from engine.data.samples import load_topdown_sample

    allocation = load_topdown_preset("ri2010-production-like")["persons"].with_rho(2)
    spec = RunSpec(
        engine="topdown",
        data=DataSource(source="ri2010", filter=BlockFilter("County", ("44005",))),
        config=allocation.to_dict(),
        seed=7,
        options=TopDownRunOptions(microdata=False, epl_boot=25),
    )
    hist = stages.filter_blocks(load_topdown_sample("ri2010"), BlockFilter("County", ("44005",)))
    dense, sparse, _ = _metrics_both_ways(spec, hist)
    _assert_same(dense, sparse)
    assert "blau_bias" in sparse  # the RI sample schema has RACEETH


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """A generated 3,000-person RI on the 2,016-cell production schema."""
    from engine.data.generated import load_generated_population
    from engine.data.population import generate_population

    out = tmp_path_factory.mktemp("population")
    generate_population(3_000, seed=2, states=["RI"], out_dir=out)
    return load_generated_population(out)


def _production_spec(epl_boot: int) -> RunSpec:
    allocation = load_topdown_preset("topdown-2020-production")["persons"]
    return RunSpec(
        engine="topdown",
        data=DataSource(source="generated"),
        config=allocation.to_dict(),
        seed=3,
        # the conventional spine (the prediction's; the preset's default on these data, which
        # carry places, is the optimized one)
        options=TopDownRunOptions(microdata=False, epl_boot=epl_boot, spine="conventional"),
    )


def test_generated_production_sparse_equals_dense(generated) -> None:
    dense, sparse, result = _metrics_both_ways(_production_spec(20), generated)
    _assert_same(dense, sparse)
    # on data with a unit frame the block figures cover the blocks with housing units or GQ
    universe = sparse["error_universe"]
    assert universe["universe"] == "housed" and universe["blocks_left_out"] > 0
    assert sparse["n_cells"]["Block"]["TOTAL"] == universe["blocks"]
    assert (
        "tda_mae" in sparse
        and sparse["tda_mae"]["Block"]["TOTAL"] == sparse["mae"]["Block"]["TOTAL"]
    )
    levels = result.tree.levels
    assert set(sparse["mae"]) == set(map(str, levels))
    # DETAILED residuals are mostly zeros: the counted sets hold far fewer values than cells
    residuals = metrics_stage.sparse_residuals(result)
    block = residuals[(str(levels[-1]), "DETAILED")]
    assert block.values.size < block.n / 100


def test_sparse_path_never_builds_the_dense_table(generated, monkeypatch) -> None:
    """The CLI path at production shape: to_tidy of anything but TOTAL is refused, and every
    array the residuals hold is far smaller than geounits × cells."""
    spec = _production_spec(5)
    output = execute(spec, data=generated, outputs="result")
    result = output.result
    cells = result.tree.n_nodes * result.schema.size
    original = TopDownResult.to_tidy

    def guarded(self, queries=None):  # only the n_nodes-row TOTAL table is allowed
        if tuple(queries or ()) != ("TOTAL",):
            raise AssertionError(f"dense tidy table built for {queries!r}")
        return original(self, queries)

    monkeypatch.setattr(TopDownResult, "to_tidy", guarded)
    monkeypatch.setattr(TopDownResult, "estimates", property(lambda self: 1 / 0))
    measured = stages.measure(spec, generated, RunControl())
    computed = metrics_stage.metrics(spec, result, generated, measured, tables=False)
    assert computed.tidy is None and computed.payload["mae"]
    for part in metrics_stage.sparse_residuals(result).values():
        assert part.values.size * 50 < cells


def test_counted_residuals_match_the_dense_statistics() -> None:
    rng = np.random.default_rng(0)
    dense = rng.integers(-4, 5, size=(40, 30)) * (rng.random((40, 30)) < 0.2)
    counted = counted_residuals(sp.csr_matrix(dense))
    flat = dense.ravel().astype(np.float64)
    assert counted.n == flat.size
    summary = counted_error_summary(counted)
    assert summary["mae"] == np.abs(flat).mean()
    assert summary["median_ae"] == np.median(np.abs(flat))
    a = epl_details(flat, n_boot=30, rng=5)
    b = epl_details_counted(counted.values, counted.counts, n_boot=30, rng=5)
    assert (a.value, a.low, a.high, a.n) == (b.value, b.low, b.high, b.n)
    # odd and even sample sizes, and no zero at all
    for shape in ((1, 7), (2, 4)):
        values = rng.integers(1, 9, size=shape)
        summary = counted_error_summary(counted_residuals(sp.csr_matrix(values)))
        assert summary["median_ae"] == np.median(values)


def test_the_cli_path_never_densifies_the_block_histogram(generated, monkeypatch, tmp_path):
    """Load (sparse), measure, estimate, metrics.json and the output files of a production run
    with any dense block histogram refused (blocks × 2,016 cells are never held dense)."""
    from engine.data import histogram as histogram_module
    from engine.runs.pipeline import write

    assert generated.is_sparse
    monkeypatch.setattr(histogram_module, "MAX_DENSE_BLOCK_CELLS", 0)
    output = execute(_production_spec(5), data=generated)
    paths = write(output, tmp_path / "run")
    assert output.metrics["mae"] and paths["estimates"].exists()
    structural = output.result.diagnostics["structural"]
    assert structural["structural_zeros_held"] and structural["bound_violations"] == 0


def test_the_app_path_reads_a_shared_read_only_sparse_histogram(generated, monkeypatch):
    """The app caches one read-only histogram for every session; its run with the app's tables
    (MAE, EPL, prediction) neither writes to it nor densifies the blocks."""
    from engine.data import histogram as histogram_module

    shared = generated.replace()
    shared.set_read_only()
    monkeypatch.setattr(histogram_module, "MAX_DENSE_BLOCK_CELLS", 0)
    output = execute(_production_spec(5), data=shared, tables=True)
    assert "prediction" in output.tables and not shared.sparse_counts.data.flags.writeable
