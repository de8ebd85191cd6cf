"""PHSafe through the run pipeline: keyed noise per (seed, level, geounit, table), any executor."""

from __future__ import annotations

import numpy as np
import pytest

from engine.core.executors import ProcessExecutor
from engine.phsafe.join import prepare_extract
from engine.phsafe.release import measure_all, run_phsafe, tabulate_all
from engine.runs.data_source import DataSource
from engine.runs.pipeline import execute
from engine.runs.spec import RunSpec

SAMPLE = "phsafe_synthetic_us"


def _spec(**changes) -> RunSpec:
    from engine.phsafe.config import preset

    config = preset("phsafe-2020").to_dict()
    config["state_filter"] = ["44"]
    base = {"engine": "phsafe", "data": DataSource(source=SAMPLE), "config": config, "seed": 11}
    return RunSpec(**{**base, **changes})


@pytest.fixture(scope="module")
def extract():
    from engine.runs.phsafe import load

    return load(_spec())


def test_pipeline_run_records_the_noise_and_the_spec(extract) -> None:
    out = execute(_spec(), data=extract)
    assert out.metrics["engine"] == "phsafe" and out.metrics["noise"]["method"] == "fast"
    assert out.metrics["run"]["fingerprint"] == out.spec.fingerprint()
    assert out.spec.replace(data=_spec().data) == _spec()  # the spec, with its inputs' hashes
    assert set(out.spec.data.inputs) == {
        "data/persons.csv.gz",
        "data/units.csv.gz",
        "data/geo.csv.gz",
    }
    again = execute(_spec(), data=extract)
    assert out.result.measurements.equals(again.result.measurements)


def test_a_table_keeps_its_noise_when_other_tables_are_left_out(extract) -> None:
    spec = _spec()
    from engine.runs.phsafe import config_of

    config = config_of(spec)
    prepared = prepare_extract(extract, config.state_filter)
    tabs = tabulate_all(prepared, config)
    every = measure_all(tabs, config, trials=2, rng=None, seed=5)
    some = measure_all({"PH3": tabs["PH3"]}, config, trials=2, rng=None, seed=5)
    by_key = {(m.counts.table, m.counts.level): m.noise for m in every}
    assert some and all(
        np.array_equal(m.noise, by_key[(m.counts.table, m.counts.level)]) for m in some
    )


def test_one_or_two_workers_give_the_same_numbers(extract) -> None:
    from engine.runs.phsafe import config_of

    config = config_of(_spec())
    local = run_phsafe(extract, config, seed=3)
    with ProcessExecutor(2) as pool:
        pooled = run_phsafe(extract, config, seed=3, executor=pool)
    assert local.measurements.equals(pooled.measurements)
