"""Driver memory for a Spark session (docs/spark.md "Settings that matter"): a JVM size from 512m
to 1t, from the option, else ``PHEXPLORE_SPARK_DRIVER_MEMORY``, else a quarter of this machine's
memory (1–8 GiB) for local masters; refused for Spark Connect, whose server sets its own.

Pure functions: no Spark session is started (the tests' shared session is already running, and a
running JVM keeps its heap).
"""

from __future__ import annotations

import pytest

from engine.core.errors import ValidationError
from engine.spark.session import (
    DRIVER_MEMORY_ENV,
    check_driver_memory,
    default_local_driver_memory,
    driver_memory_setting,
)


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        ("512m", "512m"),
        ("4g", "4g"),
        ("6144M", "6144m"),
        (" 8G ", "8g"),
        ("1t", "1t"),
        ("2gb", "2g"),
    ],
)
def test_driver_memory_accepts_jvm_sizes(size: str, expected: str) -> None:
    assert check_driver_memory(size) == expected


@pytest.mark.parametrize(
    ("size", "message"),
    [
        ("511m", "out of range"),
        ("524287k", "out of range"),
        ("2t", "out of range"),
        ("8", "not a memory size"),
        ("eight gigs", "not a memory size"),
        ("-4g", "not a memory size"),
        ("4.5g", "not a memory size"),
    ],
)
def test_driver_memory_refuses_bad_sizes(size: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message) as caught:
        check_driver_memory(size)
    assert "512m to 1t" in str(caught.value)


def test_default_local_driver_memory_is_a_quarter_of_ram_within_1_to_8_gib() -> None:
    text = default_local_driver_memory()
    assert text.endswith("m")
    assert 1024 <= int(text[:-1]) <= 8192


def test_driver_memory_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DRIVER_MEMORY_ENV, raising=False)
    assert driver_memory_setting("local[2]", None) == default_local_driver_memory()
    assert driver_memory_setting("yarn", None) is None  # the cluster's own setting
    assert driver_memory_setting("yarn", None, "16g") == "16g"
    monkeypatch.setenv(DRIVER_MEMORY_ENV, "3g")
    assert driver_memory_setting("local[2]", None) == "3g"
    assert driver_memory_setting("spark://h:7077", None) == "3g"
    assert driver_memory_setting("local[2]", None, "2g") == "2g"  # the option wins
    assert driver_memory_setting(None, "sc://h:15002") is None  # the server's own setting
    monkeypatch.setenv(DRIVER_MEMORY_ENV, "lots")
    with pytest.raises(ValidationError, match=DRIVER_MEMORY_ENV):
        driver_memory_setting("local[2]", None)


def test_driver_memory_is_refused_over_spark_connect() -> None:
    with pytest.raises(ValidationError, match="applies to --spark-master only"):
        driver_memory_setting(None, "sc://h:15002", "8g")
