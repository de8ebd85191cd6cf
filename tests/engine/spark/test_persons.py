"""Person records read and recoded on the Spark executors (``engine.spark.persons``).

The histogram the driver builds from the executors' ``groupBy(block, cell)`` counts equals the
local loader's (PPMF sample, generated population, with and without ``--filter``), Spark's true
histograms from the cells left in Spark equal the tree's sums, and bad input gets the local
loader's messages — also at the right row when the file is read in many splits.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.core.errors import DataValidationError, PHExploreError
from engine.data.samples import samples_dir
from engine.runs.data_source import DataSource
from engine.runs.spec import RunSpec
from engine.runs.topdown import load

PERRY = samples_dir() / "ppmf_perry_al" / "ppmf_perry_al_persons.csv"


class _Spark:
    """The executor interface :func:`engine.runs.topdown.load` reads: a name and a session."""

    name = "spark"

    def __init__(self, session: Any) -> None:
        self.session = session


def _spec(source: Path | str, **data: Any) -> RunSpec:
    from engine.dp.presets import load_topdown_preset

    allocation = load_topdown_preset("topdown-2020-production")["persons"]
    return RunSpec(
        engine="topdown",
        data=DataSource.from_json({"source": str(source), **data}),
        config=allocation.to_dict(),
        seed=1,
    )


def _same_histogram(local: Any, spark: Any) -> None:
    from engine.spark.persons import SPARK_CELLS

    held = spark.extra.pop(SPARK_CELLS, None)
    assert held is not None
    held.release()  # unpersist: the tests share one session
    assert spark.geography.equals(local.geography)
    assert list(spark.geography.dtypes) == list(local.geography.dtypes)
    assert spark.is_sparse and (spark.sparse_counts != local.sparse_counts).nnz == 0
    assert spark.source == local.source and spark.licence == local.licence
    assert set(spark.extra) == set(local.extra)
    for key, value in local.extra.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(spark.extra[key], value, err_msg=key)
        else:
            assert spark.extra[key] == value, key


def _message(fn: Any) -> str:
    with pytest.raises(PHExploreError) as caught:
        fn()
    return f"{type(caught.value).__name__}: {caught.value}"


@pytest.fixture(scope="module")
def population(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from engine.data.population import generate_population

    folder = tmp_path_factory.mktemp("spark-persons") / "pop"
    generate_population(20_000, seed=3, out_dir=folder, states=["RI"])
    return folder


@pytest.mark.spark
@pytest.mark.parametrize("source", ["ppmf_perry_al", PERRY])
def test_ppmf_sample_same_histogram(spark, source: Any) -> None:
    spec = _spec(source)
    _same_histogram(load(spec), load(spec, _Spark(spark)))


@pytest.mark.spark
@pytest.mark.parametrize(
    "block_filter",
    [None, {"level": "County", "units": ["44001"]}, {"level": "Tract", "units": ["44001000100"]}],
)
def test_generated_population_same_histogram(spark, population: Path, block_filter: Any) -> None:
    spec = _spec(population, **({"filter": block_filter} if block_filter else {}))
    _same_histogram(load(spec), load(spec, _Spark(spark)))


@pytest.mark.spark
def test_truth_summed_from_the_cells_in_spark(spark, population: Path) -> None:
    """The spine's true histograms from the recoded cells left in Spark = the tree's sums."""
    from engine.runs.topdown import true_histograms
    from engine.topdown.geography import GeoTree
    from engine.topdown.sparse_histograms import aggregate_sparse

    spec = _spec(population, filter={"level": "Tract", "units": ["44001000100", "44001000300"]})
    hist = load(spec, _Spark(spark))
    tree = GeoTree.from_histogram(hist, ["State", "County", "Tract", "Block_Group", "Block"])

    class Plan:
        pass

    plan = Plan()
    plan.tree = tree  # type: ignore[attr-defined]
    truth = true_histograms(plan, hist, _Spark(spark))  # type: ignore[arg-type]
    expected = aggregate_sparse(tree, load(spec).sparse_counts)
    assert (truth != expected).nnz == 0
    assert truth.dtype == np.int64


def _bad_copy(tmp_path: Path, name: str, edit: Any) -> Path:
    lines = PERRY.read_text().splitlines()
    edit(lines)
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def _set_field(lines: list[str], row: int, index: int, value: str) -> None:
    fields = lines[row].split(",")
    fields[index] = value
    lines[row] = ",".join(fields)


BAD_PPMF = {
    "unknown_race": lambda ls: _set_field(ls, 5, 11, "99"),
    "missing_column": lambda ls: ls.__setitem__(0, ls[0].replace("CENHISP", "HISP")),
    "ragged_row": lambda ls: ls.__setitem__(7, ls[7] + ",extra"),
    "rtype_without_gq": lambda ls: _set_field(ls, 9, 7, "5"),
    "header_again": lambda ls: ls.__setitem__(20, ls[0]),
    "bad_block_group": lambda ls: _set_field(ls, 30, 5, "x"),
    "header_only": lambda ls: ls.__delitem__(slice(1, None)),
}


@pytest.mark.spark
@pytest.mark.parametrize("case", sorted(BAD_PPMF))
def test_bad_ppmf_same_messages(spark, tmp_path: Path, case: str) -> None:
    spec = _spec(_bad_copy(tmp_path, f"{case}.csv", BAD_PPMF[case]))
    local = _message(lambda: load(spec))
    assert "row" in local or case == "header_only"
    assert _message(lambda: load(spec, _Spark(spark))) == local


@pytest.mark.spark
def test_row_numbers_right_across_many_splits(spark, tmp_path: Path) -> None:
    """A file read in ~20 splits (64 KB each): problems come back at the file's row numbers."""
    path = _bad_copy(tmp_path, "late.csv", lambda ls: _set_field(ls, 9_876, 11, "64"))
    spec = _spec(path)
    local = _message(lambda: load(spec))
    assert "row 9876" in local
    previous = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(64 * 1024))
    try:
        assert _message(lambda: load(spec, _Spark(spark))) == local
        good = _spec(PERRY)
        _same_histogram(load(good), load(good, _Spark(spark)))
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", previous)


@pytest.mark.spark
def test_problems_in_several_batches_say_so(spark, tmp_path: Path) -> None:
    def edit(lines: list[str]) -> None:
        _set_field(lines, 3, 11, "7x")
        _set_field(lines, 10_500, 11, "77")  # beyond the first batch of 10,000 rows

    with pytest.raises(DataValidationError) as caught:
        load(_spec(_bad_copy(tmp_path, "two.csv", edit)), _Spark(spark))
    text = str(caught.value)
    assert "row 3, column 'CENRACE': unknown code '7x'" in text
    assert "problems in 1 later batch" in text and "--backend local" in text


@pytest.mark.spark
@pytest.mark.parametrize(
    ("row", "index", "value"),
    [(15_000, 10, "64"), (12_345, 5, "5"), (17, 10, "x")],
)
def test_bad_generated_population_messages(
    spark, population: Path, tmp_path: Path, row: int, index: int, value: str
) -> None:
    folder = tmp_path / "pop"
    shutil.copytree(population, folder)
    lines = (folder / "ppmf.csv").read_text().splitlines()
    _set_field(lines, row, index, value)
    (folder / "ppmf.csv").write_text("\n".join(lines) + "\n")
    spec = _spec(folder)
    spark_message = _message(lambda: load(spec, _Spark(spark)))
    assert f"ppmf.csv, row {row}, column" in spark_message
    assert spark_message == _message(lambda: load(spec))  # the local loader's located message
