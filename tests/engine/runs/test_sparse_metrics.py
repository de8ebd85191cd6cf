"""The sparse metrics stage (issue 17): metrics.json from the sparse histograms, zeros counted.

The sparse path (the CLI's, ``tables=False``) must give the dense path's metrics.json (the app's,
``tables=True``, built on ``result.to_tidy()``): MAE, median AE and n_cells exactly, EPL and its
bootstrap interval to 1e-12, Blau bias exactly; and it must never build a geounits × cells table.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from engine.metrics.counted import counted_error_summary, counted_residuals
from engine.metrics.epl import epl_details, epl_details_counted
from engine.runs import RunSpec, execute
from engine.runs import topdown as stages
from engine.topdown.result import TopDownResult
from phexplore.presets import load_topdown_preset

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


def _metrics_both_ways(spec: RunSpec, hist: Any) -> tuple[dict, dict, Any]:
    output = execute(spec, data=hist, metrics=False)
    result, measured = output.result, stages.measure(spec, hist, stages.RunControl())
    dense = stages.metrics(spec, result, hist, measured, tables=True)
    sparse = stages.metrics(spec, result, hist, measured, tables=False)
    assert sparse.tidy is None and dense.tidy is not None
    return dense.payload, sparse.payload, result


STANDARD = (
    "mae",
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
        data={"source": "ri2010", "filter": {"level": "County", "units": ["44005"]}},
        config=allocation.to_dict(),
        seed=7,
        options={"microdata": False, "epl_boot": 25},
    )
    hist = stages.filter_blocks(load_topdown_sample("ri2010"), "County", ["44005"])
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
        data={"source": "generated"},
        config=allocation.to_dict(),
        seed=3,
        options={"microdata": False, "epl_boot": epl_boot},
    )


def test_generated_production_sparse_equals_dense(generated) -> None:
    dense, sparse, result = _metrics_both_ways(_production_spec(20), generated)
    _assert_same(dense, sparse)
    levels = result.tree.levels
    assert set(sparse["mae"]) == set(map(str, levels))
    # DETAILED residuals are mostly zeros: the counted sets hold far fewer values than cells
    residuals = stages.sparse_residuals(result)
    block = residuals[(str(levels[-1]), "DETAILED")]
    assert block.values.size < block.n / 100


def test_sparse_path_never_builds_the_dense_table(generated, monkeypatch) -> None:
    """The CLI path at production shape: to_tidy of anything but TOTAL is refused, and every
    array the residuals hold is far smaller than geounits × cells."""
    spec = _production_spec(5)
    output = execute(spec, data=generated, metrics=False)
    result = output.result
    cells = result.tree.n_nodes * result.schema.size
    original = TopDownResult.to_tidy

    def guarded(self, queries=None):  # only the n_nodes-row TOTAL table is allowed
        if tuple(queries or ()) != ("TOTAL",):
            raise AssertionError(f"dense tidy table built for {queries!r}")
        return original(self, queries)

    monkeypatch.setattr(TopDownResult, "to_tidy", guarded)
    monkeypatch.setattr(TopDownResult, "estimates", property(lambda self: 1 / 0))
    measured = stages.measure(spec, generated, stages.RunControl())
    computed = stages.metrics(spec, result, generated, measured, tables=False)
    assert computed.tidy is None and computed.payload["mae"]
    for part in stages.sparse_residuals(result).values():
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
