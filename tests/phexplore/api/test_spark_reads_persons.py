"""The Run page's TopDown runs on Spark read person records on the executors, as the CLI does
(docs/spark.md): a shipped PPMF sample or a generated folder is read again by Spark, never an upload."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.dp.presets import load_topdown_preset
from engine.runs.options import BackendOptions
from engine.runs.provenance import Provenance
from phexplore import api as R
from phexplore.api.run_choices import SPARK_MASTER_ENV, SPARK_REMOTE_ENV
from phexplore.api.runs import execute_topdown, spark_reads_persons

PROVENANCE = Provenance("0" * 64, "test", data="ppmf_perry_al")


def _spec(monkeypatch: pytest.MonkeyPatch, sample: str, backend: str, source: bool = True):
    from engine.data.samples import load_topdown_sample

    monkeypatch.setenv(SPARK_MASTER_ENV, "local[2]")
    monkeypatch.delenv(SPARK_REMOTE_ENV, raising=False)
    hist = load_topdown_sample(sample)
    spec = R.RunSpec(
        engine="topdown",
        data=R.app_data_source(sample, sample=sample if source else None, hist=hist),
        config=load_topdown_preset("topdown-2020-production")["persons"].to_dict(),
        seed=3,
        **R.app_backend(backend),
    )
    return spec, hist


def test_which_runs_read_persons_on_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pyspark")
    spec, _ = _spec(monkeypatch, "ppmf_perry_al", "spark")
    assert spark_reads_persons(spec)
    assert not spark_reads_persons(_spec(monkeypatch, "ppmf_perry_al", "local")[0])
    assert not spark_reads_persons(_spec(monkeypatch, "ri2010", "spark")[0])  # block counts
    upload = _spec(monkeypatch, "ppmf_perry_al", "spark", source=False)[0]
    assert upload.data.upload and not spark_reads_persons(upload)  # only in the session


@pytest.mark.spark
def test_run_page_spark_run_reads_on_executors(
    spark, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import engine.data.inputs

    spec, hist = _spec(monkeypatch, "ppmf_perry_al", "spark")
    local = execute_topdown(
        spec.replace(backend="local", backend_options=BackendOptions()),
        R.RunJob(engine="topdown", label="local"),
        hist,
        PROVENANCE,
    )

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the person records were loaded in the app's process")

    monkeypatch.setattr(engine.data.inputs, "load_topdown_input", refuse)
    remote = execute_topdown(spec, R.RunJob(engine="topdown", label="spark"), hist, PROVENANCE)
    a, b = local.result.estimates_sparse, remote.result.estimates_sparse
    assert a.shape == b.shape and (a != b).nnz == 0
    np.testing.assert_array_equal(remote.data.sparse_counts.toarray(), hist.sparse_counts.toarray())
    assert remote.metrics["mae"] == local.metrics["mae"]
