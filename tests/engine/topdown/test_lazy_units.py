"""A level's units of work are built one at a time, as the executor takes them.

:class:`~engine.topdown.estimation.LevelUnits` builds chunk ``k``'s batch on ``units[k]``; a run
whose executor first builds every unit (the old behaviour) gives the same estimates, and the
in-process executor holds one built unit at a time. The Spark executor's counterpart is in
``tests/engine/spark/test_lazy_units.py``.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Sequence

import numpy as np
import pytest

from engine.core.executors import InProcessExecutor
from engine.dp.presets import load_topdown_preset
from engine.topdown.estimation import LevelUnits
from engine.topdown.options import TopDownOptions
from tests.engine.topdown.helpers import engine_run, ri_subset


class Payload:
    """A unit that can be tracked with a weak reference (and pickled)."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.values = np.arange(k, k + 100)


def payload_sum(unit: Payload) -> int:
    return int(unit.values.sum())


class TrackedUnits(Sequence[Payload]):
    """Builds unit ``k`` on demand; records how many were built and how many are still alive."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.built = 0
        self._alive: list[weakref.ref[Payload]] = []

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, k: int) -> Payload:  # type: ignore[override]
        if not 0 <= k < self.n:
            raise IndexError(k)
        self.built += 1
        unit = Payload(k)
        self._alive.append(weakref.ref(unit))
        return unit

    def alive(self) -> int:
        gc.collect()
        return sum(r() is not None for r in self._alive)


def test_in_process_executor_holds_one_built_unit_at_a_time() -> None:
    units = TrackedUnits(6)
    seen: list[tuple[int, int, int]] = []
    got = InProcessExecutor().map(
        payload_sum, units, done=lambda i, _: seen.append((i, units.built, units.alive()))
    )
    assert got == [payload_sum(Payload(k)) for k in range(6)]
    assert [(i, built) for i, built, _ in seen] == [(i, i + 1) for i in range(6)]
    assert max(alive for _, _, alive in seen) <= 1


class EagerExecutor(InProcessExecutor):
    """The behaviour without lazy units: every unit of a level built before the first runs."""

    def __init__(self) -> None:
        self.levels: list[int] = []

    def map(self, fn, units, **kwargs):  # type: ignore[no-untyped-def]
        assert isinstance(units, LevelUnits)
        built = list(units)
        self.levels.append(len(built))
        return super().map(fn, built, **kwargs)


class LazyCounting(InProcessExecutor):
    """In process, noting how many units each level had and that they came lazily."""

    def __init__(self) -> None:
        self.levels: list[int] = []

    def map(self, fn, units, **kwargs):  # type: ignore[no-untyped-def]
        assert isinstance(units, LevelUnits)
        self.levels.append(len(units))
        return super().map(fn, units, **kwargs)


def test_lazy_units_give_the_estimates_of_units_built_up_front() -> None:
    hist = ri_subset()
    allocation = load_topdown_preset("ri2010-production-like")["persons"]
    options = TopDownOptions(chunk_cells=16 * 7)
    eager, lazy = EagerExecutor(), LazyCounting()
    a = engine_run(hist, allocation, seed=11, options=options, executor=eager)
    b = engine_run(hist, allocation, seed=11, options=options, executor=lazy)
    assert eager.levels == lazy.levels and sum(lazy.levels) > len(lazy.levels)  # several a level
    assert (a.estimates_sparse != b.estimates_sparse).nnz == 0


def test_level_units_build_nothing_until_indexed() -> None:
    chunks = [np.array([0]), np.array([1])]

    def frame(c: np.ndarray) -> tuple[object, object]:
        raise AssertionError(f"chunk {c} built")

    units = LevelUnits(chunks, [[[0]], [[1]]], frame, ())  # type: ignore[arg-type]
    assert len(units) == 2 and bool(units)
    with pytest.raises(IndexError, match="unit 2 of 2"):
        units[2]
    with pytest.raises(TypeError, match="indexed by one int"):
        units[0:1]  # type: ignore[index]
    with pytest.raises(ValueError, match="2 chunks but 1 pass lists"):
        LevelUnits(chunks, [[[0]]], frame, ())  # type: ignore[arg-type]
