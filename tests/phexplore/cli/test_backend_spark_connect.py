"""``--spark-remote sc://…`` gives the local backend's numbers over a real Spark Connect server
(docs/spark.md: the DataFrame/Arrow path runs over Spark Connect; docs/science.md §8).

The server is the session-scoped :func:`tests.conftest.spark_connect` fixture: pyspark 4's own
Spark Connect server in ``local[2]`` on 127.0.0.1. The Connect runs are the real CLI in a child
process (a Connect client puts its whole Python process into Connect mode, which the tests'
classic session must not see); the local runs are the CLI in this process. The data paths are
given relative to this checkout, as a user types them, while the server runs in another folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from phexplore.cli import main

ROOT = Path(__file__).resolve().parents[3]
CLIENT_TIMEOUT_S = 600


def _run_over_connect(args: list[str], remote: str, **env_vars: str) -> None:
    """The CLI in a child process with ``--backend spark --spark-remote remote`` (and ``env_vars``
    in its environment); fails with its output unless it exits 0."""
    env = dict(os.environ) | env_vars
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    code = "import sys; from phexplore.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-c", code, *args, "--backend", "spark", "--spark-remote", remote],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]


def _same_files(local: Path, remote: Path, names: list[str]) -> None:
    for name in names:
        assert (remote / name).read_bytes() == (local / name).read_bytes(), name


@pytest.mark.spark
def test_topdown_county_same_outputs_over_spark_connect(spark_connect: str, tmp_path: Path) -> None:
    """Every family batch sent as its own slice (``PHEXPLORE_SPARK_SLICE_BYTES=1``: one local
    relation and one Connect job each, two at a time) — the numbers of the local run."""
    args = ["run", "topdown", "--data", "ri2010", "--preset", "ri2010-production-like"]
    args += ["--filter", "County=44003", "--seed", "11"]
    assert main([*args, "--out", str(tmp_path / "local")]) == 0
    checkpoint = tmp_path / "checkpoint"
    _run_over_connect(
        [*args, "--spark-checkpoint", str(checkpoint), "--out", str(tmp_path / "connect")],
        spark_connect,
        PHEXPLORE_SPARK_SLICE_BYTES="1",
    )
    assert len(list(checkpoint.glob("*.parquet"))) == 4  # one per family batch
    _same_files(
        tmp_path / "local",
        tmp_path / "connect",
        ["estimates.csv", "measurements.csv", "microdata.csv"],
    )


@pytest.mark.spark
def test_topdown_ppmf_read_by_the_connect_server(spark_connect: str, tmp_path: Path) -> None:
    """Person records (the Perry County, AL PPMF, 2,016 cells) read and recoded by the server's
    executors, by a relative path: the same files as the local run."""
    data = "data/samples/ppmf_perry_al/ppmf_perry_al_persons.csv"
    args = ["run", "topdown", "--data", data, "--preset", "topdown-2020-production"]
    args += ["--seed", "12", "--output-format", "csv", "--no-measurements"]
    cwd = Path.cwd()
    try:
        os.chdir(ROOT)
        assert main([*args, "--out", str(tmp_path / "local")]) == 0
    finally:
        os.chdir(cwd)
    _run_over_connect([*args, "--out", str(tmp_path / "connect")], spark_connect)
    _same_files(tmp_path / "local", tmp_path / "connect", ["estimates.csv", "microdata.csv"])


@pytest.mark.spark
def test_phsafe_fixture_same_tables_over_spark_connect(spark_connect: str, tmp_path: Path) -> None:
    """The official e2e_test2 extract, private (noise drawn with the keyed generator), given as a
    path relative to the checkout: the Connect server must read the user's file."""
    data = "tests/fixtures/phsafe_official/e2e_test2"
    assert (ROOT / data).is_dir()
    args = ["run", "phsafe", "--data", data, "--seed", "5"]
    local = tmp_path / "local"
    cwd = Path.cwd()
    try:
        os.chdir(ROOT)
        assert main([*args, "--out", str(local)]) == 0
    finally:
        os.chdir(cwd)
    _run_over_connect([*args, "--out", str(tmp_path / "connect")], spark_connect)
    tables = sorted(p.name for p in local.glob("PH*.csv"))
    assert len(tables) == 11
    _same_files(local, tmp_path / "connect", tables)
