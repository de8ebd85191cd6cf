"""Executors: units of work in process or in a spawn pool give the same results, in order."""

from __future__ import annotations

from functools import partial

import pytest

from engine.core.errors import RunCancelled, ValidationError
from engine.core.executors import InProcessExecutor, ProcessExecutor, make_executor

# A spawn worker imports the function it runs by module name; the tests package is not importable
# there (pytest's importlib mode puts no project root on the workers' path), so use a built-in.
_square = partial(pow, exp=2)


def test_in_process_and_pool_agree_in_unit_order() -> None:
    units = list(range(12))
    seen: list[int] = []
    local = InProcessExecutor().map(_square, units, done=lambda i, r: seen.append(i))
    with ProcessExecutor(2) as pool:
        pooled = pool.map(_square, units)
        assert pool.map(_square, []) == []
    assert local == pooled == [u * u for u in units]
    assert seen == units


def test_cancel_stops_before_the_next_unit() -> None:
    calls: list[int] = []

    def record(x: int) -> int:
        calls.append(x)
        return x

    with pytest.raises(RunCancelled):
        InProcessExecutor().map(record, [1, 2, 3], cancel=lambda: len(calls) >= 2)
    assert calls == [1, 2]
    with ProcessExecutor(2) as pool, pytest.raises(RunCancelled):
        pool.map(_square, [1, 2], cancel=lambda: True)


def test_make_executor_and_its_errors() -> None:
    assert isinstance(make_executor("local", 1), InProcessExecutor)
    assert isinstance(make_executor("local", 2), ProcessExecutor)
    assert isinstance(make_executor("processes", 1), ProcessExecutor)
    with pytest.raises(ValidationError, match="unknown backend 'cluster'"):
        make_executor("cluster", 1)
    with pytest.raises(ValidationError, match="workers must be a whole number from 1 to 256"):
        make_executor("local", 0)
