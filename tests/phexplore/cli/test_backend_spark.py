"""``--backend spark`` gives the same numbers as the local backend (docs/science.md §8, docs/spark.md).

Through the real CLI, in this process, so the runs reuse the tests' one ``local[2]`` session:
TopDown on one county of Rhode Island (estimates, measurements and microdata byte-identical) and
PHSafe on an official fixture (official tables byte-identical) for the same seed. Bad backend
arguments fail with one clear line before any work.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phexplore.cli import main

SPARK = ["--backend", "spark", "--spark-master", "local[2]"]


def _same_files(local: Path, spark: Path, names: list[str]) -> None:
    for name in names:
        assert (spark / name).read_bytes() == (local / name).read_bytes(), name


def _topdown_both_backends(args: list[str], tmp_path: Path) -> Path:
    """Run ``args`` locally and on Spark (checkpointed); the estimates, measurements and
    microdata must be byte-identical. Returns the checkpoint folder."""
    assert main([*args, "--out", str(tmp_path / "local")]) == 0
    checkpoint = tmp_path / "checkpoint"
    assert (
        main([*args, *SPARK, "--spark-checkpoint", str(checkpoint), "--out", str(tmp_path / "s")])
        == 0
    )
    _same_files(
        tmp_path / "local", tmp_path / "s", ["estimates.csv", "measurements.csv", "microdata.csv"]
    )
    return checkpoint


@pytest.mark.spark
def test_topdown_county_same_outputs_on_spark(spark, tmp_path: Path) -> None:
    args = ["run", "topdown", "--data", "ri2010", "--preset", "ri2010-production-like"]
    args += ["--filter", "County=44001", "--seed", "3"]
    checkpoint = _topdown_both_backends(args, tmp_path)
    # one Parquet checkpoint per estimated level below the root
    assert len(list(checkpoint.glob("*.parquet"))) >= 3


def _persons_not_loaded_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail if the driver loads the input itself (the Spark run must read it on the executors)."""
    import engine.data.inputs

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the person records were loaded on the driver")

    monkeypatch.setattr(engine.data.inputs, "load_topdown_input", refuse)


@pytest.mark.spark
def test_topdown_ppmf_county_read_on_executors(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Perry County, AL person records (2,016 cells): read and recoded by Spark, same files."""
    args = ["run", "topdown", "--data", "ppmf_perry_al", "--preset", "topdown-2020-production"]
    args += ["--seed", "4", "--output-format", "csv"]
    assert main([*args, "--out", str(tmp_path / "local")]) == 0
    _persons_not_loaded_here(monkeypatch)
    assert main([*args, *SPARK, "--out", str(tmp_path / "s")]) == 0
    _same_files(
        tmp_path / "local", tmp_path / "s", ["estimates.csv", "measurements.csv", "microdata.csv"]
    )


@pytest.mark.spark
def test_topdown_generated_population_read_on_executors(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A generated 5,000-person population (2,016 cells, structural zeros from its block frame)."""
    from engine.data.population import generate_population

    folder = tmp_path / "pop"
    generate_population(5_000, seed=2, out_dir=folder, states=["RI"])
    args = ["run", "topdown", "--data", str(folder), "--preset", "topdown-2020-production"]
    args += ["--seed", "6", "--output-format", "parquet"]
    assert main([*args, "--out", str(tmp_path / "local")]) == 0
    _persons_not_loaded_here(monkeypatch)
    assert main([*args, *SPARK, "--out", str(tmp_path / "s")]) == 0
    names = sorted(p.name for p in (tmp_path / "local").glob("*.parquet"))
    assert "estimates.parquet" in names and "measurements.parquet" in names
    _same_files(tmp_path / "local", tmp_path / "s", names)


@pytest.mark.spark
def test_topdown_bad_ppmf_same_error_on_spark(
    spark, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from engine.data.samples import samples_dir

    lines = (samples_dir() / "ppmf_perry_al" / "ppmf_perry_al_persons.csv").read_text().split("\n")
    lines[12] = lines[12].rsplit(",", 1)[0] + ",99"
    data = tmp_path / "bad.csv"
    data.write_text("\n".join(lines))
    args = ["run", "topdown", "--data", str(data), "--preset", "topdown-2020-production"]
    assert main([*args, "--out", str(tmp_path / "local")]) != 0
    local = capsys.readouterr().err
    assert main([*args, *SPARK, "--out", str(tmp_path / "s")]) != 0
    remote = capsys.readouterr().err
    assert "bad.csv, row 12, column 'CENRACE': unknown code '99'" in local
    assert remote == local and "Traceback" not in remote


@pytest.mark.spark
def test_topdown_in_many_small_slices_same_outputs(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kent County, every unit of work sent as its own slice (``PHEXPLORE_SPARK_SLICE_BYTES=1``: one
    createDataFrame and one Spark job per family batch, two at a time) changes no byte."""
    args = ["run", "topdown", "--data", "ri2010", "--preset", "ri2010-production-like"]
    args += ["--filter", "County=44003", "--seed", "4"]
    monkeypatch.setenv("PHEXPLORE_SPARK_SLICE_BYTES", "1")  # read by the Spark executor only
    checkpoint = _topdown_both_backends(args, tmp_path)
    # one checkpoint per slice, here per family batch: Kent County's county, tract and block
    # group levels are one batch each, its blocks two
    metrics = json.loads((tmp_path / "s" / "metrics.json").read_text())
    assert metrics["run"]["backend"] == "spark"
    assert len(list(checkpoint.glob("*.parquet"))) == 4


@pytest.mark.spark
def test_phsafe_fixture_same_tables_on_spark(spark, tmp_path: Path) -> None:
    """The official e2e_test1 extract, non-private (the engine tests cover private runs)."""
    data = Path(__file__).resolve().parents[2] / "fixtures" / "phsafe_official" / "e2e_test1"
    args = ["run", "phsafe", "--data", str(data), "--seed", "5", "--non-private"]
    assert main([*args, "--out", str(tmp_path / "local")]) == 0
    assert main([*args, *SPARK, "--out", str(tmp_path / "s")]) == 0
    tables = sorted(p.name for p in (tmp_path / "local").glob("PH*.csv"))
    assert len(tables) == 11
    _same_files(tmp_path / "local", tmp_path / "s", tables)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--backend", "spark"], "needs --spark-master"),
        (["--spark-master", "local[2]"], "only with --backend spark"),
        (["--backend", "spark", "--spark-master", "locl[2]"], "is not a Spark master URL"),
        (["--backend", "spark", "--spark-remote", "http://x"], "not a Spark Connect address"),
        (
            ["--backend", "spark", "--spark-master", "local[2]", "--spark-driver-memory", "100m"],
            "out of range; give 512m to 1t",
        ),
        (
            ["--backend", "spark", "--spark-master", "local[2]", "--spark-driver-memory", "8"],
            "is not a memory size",
        ),
        (
            ["--backend", "spark", "--spark-remote", "sc://h:15002", "--spark-driver-memory", "8g"],
            "applies to --spark-master only",
        ),
        (["--spark-driver-memory", "8g"], "--spark-driver-memory apply only with --backend spark"),
    ],
)
def test_bad_backend_arguments_fail_clearly(
    extra: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", "phsafe", "--data", "phsafe_synthetic_us", *extra, "--out", str(tmp_path)])
    assert code != 0
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
