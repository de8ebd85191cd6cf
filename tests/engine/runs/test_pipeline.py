"""The one run pipeline: a run is data, and the numbers do not depend on where it runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from engine.core.errors import RunCancelled, ValidationError
from engine.data.histogram import subset_histogram
from engine.data.samples import load_topdown_sample
from engine.dp.presets import load_topdown_preset
from engine.runs import topdown as stages
from engine.runs.control import RunControl
from engine.runs.data_source import BlockFilter, DataSource
from engine.runs.options import TopDownRunOptions
from engine.runs.pipeline import execute, write
from engine.runs.spec import RunSpec
from engine.topdown.options import TopDownOptions
from tests.engine.topdown.helpers import engine_run

TRACTS = ["44007001000", "44007001100"]


@pytest.fixture(scope="module")
def ri2010():
    return load_topdown_sample("ri2010")


@pytest.fixture(scope="module")
def small(ri2010):
    return subset_histogram(ri2010, "Tract", TRACTS)


def _spec(**changes) -> RunSpec:
    allocation = load_topdown_preset("ri2010-production-like")["persons"].with_rho(2)
    base = {
        "engine": "topdown",
        "data": DataSource(source="ri2010", filter=BlockFilter("Tract", tuple(TRACTS))),
        "config": allocation.to_dict(),
        "seed": 4,
        "options": TopDownRunOptions(microdata=False, epl_boot=10),
    }
    return RunSpec(**{**base, **changes})


def test_spec_round_trip_and_fingerprint() -> None:
    spec = _spec()
    again = RunSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec and again.fingerprint() == spec.fingerprint()
    assert len(spec.fingerprint()) == 64
    # Where it runs does not change the numbers, so not the fingerprint either.
    assert _spec(workers=2, backend="processes").fingerprint() == spec.fingerprint()
    assert _spec(seed=5).fingerprint() != spec.fingerprint()
    assert spec.with_option(epl_boot=11).fingerprint() != spec.fingerprint()
    tampered = {**spec.to_dict(), "seed": 9}
    with pytest.raises(ValidationError, match="fingerprint does not match"):
        RunSpec.from_dict(tampered)
    with pytest.raises(TypeError):
        spec.config["seed"] = 1  # type: ignore[index]
    with pytest.raises(AttributeError):
        spec.options.seed = 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"engine": "spark"}, "unknown engine"),
        ({"seed": -1}, "seed: -1 is out of range"),
        ({"data": {"source": "ri2010"}}, "must be a DataSource"),
        ({"backend": "cluster"}, "unknown backend"),
        ({"workers": 0}, "workers: 0 is out of range"),
        ({"options": {"noise_method": "fast"}}, "takes TopDownRunOptions"),
    ],
)
def test_bad_specs_are_refused(changes, message) -> None:
    with pytest.raises(ValidationError, match=message):
        _spec(**changes)
    with pytest.raises(ValidationError, match="noise_method: the text 'secure' is not one of"):
        TopDownRunOptions(noise_method="secure")
    with pytest.raises(ValidationError, match="source: expected a non-empty text"):
        DataSource(source="")


def test_workers_do_not_change_the_outputs(tmp_path: Path) -> None:
    """1 vs 2 worker processes: byte-identical estimates, measurements and metrics numbers."""
    one = execute(_spec())
    two = execute(_spec(workers=2))
    a = write(one, tmp_path / "one")
    b = write(two, tmp_path / "two")
    for key in ("estimates", "measurements"):
        assert a[key].read_bytes() == b[key].read_bytes()
    ma, mb = (json.loads(p["metrics"].read_text()) for p in (a, b))
    assert ma["mae"] == mb["mae"] and ma["epl"] == mb["epl"]
    assert ma["noise"]["method"] == "fast" and "keyed" in ma["noise"]["sampler"]
    assert ma["run"]["fingerprint"] == mb["run"]["fingerprint"] == one.spec.fingerprint()
    # the pipeline records the content hash of every input file (the sample's) in the spec
    assert one.spec.data.inputs and ma["run"]["data"]["inputs"] == dict(one.spec.data.inputs)
    assert two.result.diagnostics["workers"] == 2


def test_chunking_does_not_change_the_estimates(small) -> None:
    allocation = load_topdown_preset("ri2010-production-like")["persons"].with_rho(2)
    big = engine_run(small, allocation, seed=3)
    tiny = engine_run(small, allocation, seed=3, options=TopDownOptions(chunk_cells=50))
    assert np.array_equal(big.estimates, tiny.estimates)
    assert big.measurements.equals(tiny.measurements)


def test_a_geounit_gets_the_same_noise_whatever_else_is_in_the_run(ri2010) -> None:
    """Measured alone or with a neighbour, a tract's blocks get the same noisy answers."""
    spec = _spec()
    alone = subset_histogram(ri2010, "Tract", TRACTS[:1])
    both = subset_histogram(ri2010, "Tract", TRACTS)
    frames = []
    for hist in (alone, both):
        m = stages.measure(spec, hist, RunControl())
        plan, measured = m.plan, m.measured
        ids = np.asarray(plan.tree.node_id, dtype=object)
        blocks = np.flatnonzero(plan.tree.level_names == "Block")
        j = plan.names.index("DETAILED")
        frames.append(dict(zip(ids[blocks], measured.noisy[j][blocks].tolist(), strict=True)))
    shared = set(frames[0]) & set(frames[1])
    assert len(shared) == len(frames[0]) > 10
    assert all(frames[0][b] == frames[1][b] for b in shared)


def test_progress_and_cancel_go_through_the_control() -> None:
    seen: list[tuple[str, float]] = []
    control = RunControl(lambda message, fraction: seen.append((message, fraction)))
    execute(_spec(), control=control)
    fractions = [f for _, f in seen]
    assert fractions[-1] == 1.0 and control.fraction == 1.0
    assert any(m.startswith("Estimating") for m, _ in seen)
    stop = RunControl()
    stop.cancel()
    with pytest.raises(RunCancelled):
        execute(_spec(), control=stop)


def test_exact_mechanism_is_recorded() -> None:
    out = execute(_spec(options=TopDownRunOptions(noise_method="exact", epl_boot=0)))
    assert out.metrics["noise"]["method"] == "exact"
    assert out.metrics["run"]["options"]["noise_method"] == "exact"


def test_experiments_build_grids_of_run_specs() -> None:
    from engine.runs.experiments import grid_specs

    base = _spec()
    specs = grid_specs(base, [0.5, 4.0], [1, 2])
    assert [(s.config["rho"], s.seed) for s in specs] == [
        ("1/2", 1),
        ("1/2", 2),
        ("4", 1),
        ("4", 2),
    ]
    assert len({s.fingerprint() for s in specs}) == 4
    assert all(s.data == base.data and s.options == base.options for s in specs)
    control = RunControl()
    control.cancel()
    with pytest.raises(RunCancelled):  # one cancel, whoever asks: the grid stops
        from engine.runs.experiments import run_experiment

        run_experiment("topdown", "ri2010", [1.0], [1], n_boot=0, control=control)


def test_filter_subsets_the_unit_frame_like_the_app(tmp_path) -> None:
    """``--filter`` (and a replay's recorded filter) keep the housing units and GQ facilities of
    the kept blocks only — the same data as the app's subset, so a replay of an app run on a
    generated population's tract holds the same structural zeros (TDA §5.3)."""
    import numpy as np

    from engine.data.generated import load_generated_population
    from engine.data.histogram import subset_histogram
    from engine.data.population import generate_population
    from engine.runs.topdown import filter_blocks

    folder = tmp_path / "pop"
    generate_population(5_000, seed=2, states=["RI"], out_dir=folder)
    hist = load_generated_population(folder)
    tract = str(hist.geography["Tract"].iloc[0])
    cli = filter_blocks(hist, BlockFilter("Tract", (tract,)))
    app = subset_histogram(hist, "Tract", [tract])
    assert cli.n_blocks < hist.n_blocks
    for key, value in app.extra.items():
        if isinstance(value, np.ndarray):
            assert np.array_equal(cli.extra[key], value), key
            assert len(cli.extra[key]) == cli.n_blocks, key


def test_a_run_without_metrics_keeps_only_the_tidy_rows_asked_for(small):
    whole = execute(_spec(), data=small, outputs="tidy")
    n_nodes = whole.result.tree.n_nodes
    bounded = execute(_spec(), data=small, outputs="tidy", max_tidy_rows=3 * n_nodes)
    assert set(bounded.tidy["query"]) == {"TOTAL", "VOTINGAGE"}  # 1 + 2 cells per geounit
    assert bounded.extra["queries_left_out"] == ["RACEETH", "DETAILED"]
    kept = whole.tidy[whole.tidy["query"].isin(["TOTAL", "VOTINGAGE"])].reset_index(drop=True)
    assert bounded.tidy.reset_index(drop=True).astype(str).equals(kept.astype(str))
    assert (bounded.result.estimates_sparse != whole.result.estimates_sparse).nnz == 0


def test_an_engine_result_alone_builds_no_table(small):
    out = execute(_spec(), data=small, outputs="result")
    assert out.tidy is None and out.metrics == {} and out.result.tree.n_blocks == small.n_blocks
    with pytest.raises(ValidationError, match="outputs must be one of"):
        execute(_spec(), data=small, outputs="everything")
