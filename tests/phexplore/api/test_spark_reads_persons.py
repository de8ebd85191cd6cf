"""The Run page's TopDown runs on Spark read person records on the executors, as the CLI does
(issue 18): a shipped PPMF sample or a generated folder is read again by Spark, never an upload."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.dp.presets import load_topdown_preset
from phexplore import api as R
from phexplore.api.runs import (
    SPARK_MASTER_ENV,
    SPARK_REMOTE_ENV,
    execute_topdown,
    spark_reads_persons,
)


def _spec(monkeypatch: pytest.MonkeyPatch, sample: str, backend: str, source: bool = True):
    from engine.data.samples import load_topdown_sample

    monkeypatch.setenv(SPARK_MASTER_ENV, "local[2]")
    monkeypatch.delenv(SPARK_REMOTE_ENV, raising=False)
    hist = load_topdown_sample(sample)
    spec = R.topdown_spec(
        data_label=sample,
        hist=hist,
        allocation=load_topdown_preset("topdown-2020-production")["persons"],
        seed=3,
        workers=1,
        spine="conventional",
        entities=[],
        backend=backend,
        source=R.data_source(sample=sample) if source else None,
    )
    return spec, hist


def test_which_runs_read_persons_on_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pyspark")
    spec, _ = _spec(monkeypatch, "ppmf_perry_al", "spark")
    assert spark_reads_persons(spec)
    assert not spark_reads_persons(_spec(monkeypatch, "ppmf_perry_al", "local")[0])
    assert not spark_reads_persons(_spec(monkeypatch, "ri2010", "spark")[0])  # block counts
    upload = spec.replace(data={**spec.data, "source": "ppmf_perry_al_persons.csv"})
    assert not spark_reads_persons(upload)  # an upload's name: only in the session


@pytest.mark.spark
def test_run_page_spark_run_reads_on_executors(
    spark, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import engine.data.inputs

    spec, hist = _spec(monkeypatch, "ppmf_perry_al", "spark")
    local = execute_topdown(
        spec.replace(backend="local", backend_options={}),
        R.RunJob(engine="topdown", label="local"),
        hist,
        "ppmf_perry_al",
        "conventional",
        {},
    )

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the person records were loaded in the app's process")

    monkeypatch.setattr(engine.data.inputs, "load_topdown_input", refuse)
    remote = execute_topdown(
        spec, R.RunJob(engine="topdown", label="spark"), hist, "ppmf_perry_al", "conventional", {}
    )
    a, b = local.result.estimates_sparse, remote.result.estimates_sparse
    assert a.shape == b.shape and (a != b).nnz == 0
    np.testing.assert_array_equal(remote.data.sparse_counts.toarray(), hist.sparse_counts.toarray())
    assert remote.metrics["mae"] == local.metrics["mae"]
