"""One BLAS thread around small dense linear algebra (a performance setting, no science).

The family solvers (:mod:`engine.topdown.qp.family_admm`) and the support-restricted prediction
(:mod:`engine.prediction.support`) factorise many small matrices (tens to a few thousand rows).
There BLAS threads only add synchronisation, and on a loaded 2-core machine OpenBLAS's spinning
threads cost several times the CPU of one thread (docs/prediction.md §2b, docs/topdown.md "Family
solvers at production scale"). One thread also makes floating-point results independent of the
machine's thread count, so every backend computes the same numbers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

import numpy  # noqa: F401  (loads NumPy's BLAS before the libraries are listed)
import scipy.linalg  # noqa: F401  (SciPy's wheels bring their own OpenBLAS)
from threadpoolctl import ThreadpoolController

_P = ParamSpec("_P")
_R = TypeVar("_R")


@functools.cache
def blas_libraries() -> ThreadpoolController:
    """The process's BLAS libraries, found once: a fresh ``threadpool_limits`` scans the loaded
    libraries on every call, which costs far more than applying a limit with a known list
    (measured: docs/topdown.md, "Family solvers at production scale"). NumPy's and SciPy's BLAS
    are imported by this module, so both are in the list."""
    return ThreadpoolController()


@contextmanager
def single_blas_thread() -> Iterator[None]:
    """Run the enclosed block with one BLAS thread (the previous limits are restored after).

    The limit is process-wide: two threads of one process (two Streamlit sessions) can overlap, so
    one may restore the default while the other still runs — that changes speed, never results
    of a single-threaded caller."""
    with blas_libraries().limit(limits=1, user_api="blas"):
        yield


def one_blas_thread(func: Callable[_P, _R]) -> Callable[_P, _R]:
    """Decorator: run ``func`` inside :func:`single_blas_thread`."""

    @functools.wraps(func)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with single_blas_thread():
            return func(*args, **kwargs)

    return wrapper
