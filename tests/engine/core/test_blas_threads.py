"""engine.core.blas_threads: one BLAS thread inside, the previous limits restored after."""

from __future__ import annotations

from threadpoolctl import threadpool_info

from engine.core.blas_threads import one_blas_thread, single_blas_thread


def _blas_threads() -> list[int]:
    return [int(p["num_threads"]) for p in threadpool_info() if p["user_api"] == "blas"]


def test_single_blas_thread_limits_and_restores() -> None:
    before = _blas_threads()
    assert before, "numpy loads a BLAS library"
    with single_blas_thread():
        assert _blas_threads() == [1] * len(before)
    assert _blas_threads() == before


def test_decorator_runs_the_function_with_one_thread() -> None:
    @one_blas_thread
    def inside(x: int) -> tuple[int, list[int]]:
        return x + 1, _blas_threads()

    value, threads = inside(1)
    assert value == 2
    assert set(threads) == {1}
    assert inside.__name__ == "inside"
