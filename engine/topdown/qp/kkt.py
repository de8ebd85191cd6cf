"""The one KKT verifier, the one active-set step and the one SPD inverse of the family solvers.

The hand-written family solvers (:mod:`.family_admm`, :mod:`.projected_cg`) end alike: a guessed
active set (cells at 0, rows at a bound) is solved exactly as an equality-constrained QP and
accepted only when the KKT conditions of TDA eq. 7.5 hold (Nocedal & Wright §16.4) —
:func:`violations`; :func:`step` is the primal–dual active-set correction (Hintermüller, Ito &
Kunisch 2002); :func:`spd_inverse` inverts the symmetric positive definite matrices they factor."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import numpy as np
from scipy.linalg import lapack

from engine.core.blas_threads import blas_libraries, single_blas_thread
from engine.topdown.qp.problem import Family
from engine.topdown.qp.settings import SETTINGS


@dataclass(frozen=True)
class Violations:
    """Per child and cell / row, what the active-set guess got wrong (all ``(K, ·)`` bool)."""

    negative: np.ndarray  # a free cell below 0
    released: np.ndarray  # a cell held at 0 whose multiplier says it should rise
    over: np.ndarray  # a free row above its upper bound
    under: np.ndarray  # a free row below its lower bound
    wrong_hi: np.ndarray  # a row held at its upper bound with a multiplier of the wrong sign
    wrong_lo: np.ndarray  # … at its lower bound
    off: np.ndarray  # a row held at a bound that does not sit on it (left out of the solve)

    def per_child(self) -> np.ndarray:
        """``(K,)``: any violation in the child."""
        parts = (self.negative, self.released, self.over, self.under)
        rows = (self.wrong_hi, self.wrong_lo, self.off)
        return np.any([p.any(axis=1) for p in parts + rows], axis=0)


def violations(
    fam: Family,
    x: np.ndarray,
    grad: np.ndarray,
    nu: np.ndarray,
    active: tuple[np.ndarray, np.ndarray, np.ndarray],
    p_tol: float,
    d_tol: float,
) -> Violations:
    """The KKT test of a solution ``x`` ``(K, n)`` of family ``fam``'s equality-constrained QP on
    the guessed active set ``active`` = (cells held at 0, rows at their lower, at their upper
    bound). ``grad``: the full gradient ∇f + coupling + Cᵀν (the multipliers of the cells at 0);
    ``nu`` ``(K, m)``: the row multipliers; ``p_tol``/``d_tol``: primal and dual tolerances. A
    structural zero is never released; a row with equal bounds takes a multiplier of either sign.
    """
    zero, at_lo, at_hi = active
    lo, hi = fam.lower, fam.upper
    bx = x @ fam.rows.T
    equal = lo == hi
    return Violations(
        negative=~zero & (x < -p_tol),
        released=zero & ~fam.zero & (grad < -d_tol),
        over=~at_hi & (bx > hi + p_tol),
        under=~at_lo & (bx < lo - p_tol),
        wrong_hi=at_hi & ~equal & (nu < -d_tol),
        wrong_lo=at_lo & ~equal & (nu > d_tol),
        off=(at_hi & (np.abs(bx - hi) > p_tol)) | (at_lo & (np.abs(bx - lo) > p_tol)),
    )


def step(
    v: Violations, zero: np.ndarray, at_lo: np.ndarray, at_hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The next active set (zero cells, rows at the lower / upper bound) after :func:`violations`."""
    zero = (zero & ~v.released) | v.negative
    at_hi = (at_hi & ~v.wrong_hi & ~v.off) | v.over
    at_lo = (at_lo & ~v.wrong_lo & ~v.off) | (v.under & ~at_hi)
    return zero, at_lo, at_hi


def one_blas_thread() -> AbstractContextManager[None]:
    """One BLAS thread around per-matrix LAPACK calls, unless the caller already set it (with
    several threads each small call pays their start-up: 4× slower on two busy cores)."""
    if all(lib.num_threads == 1 for lib in blas_libraries().lib_controllers):
        return nullcontext()
    return single_blas_thread()


def spd_inverse(a: np.ndarray, lapack_from: int = SETTINGS.spd_lapack_from) -> np.ndarray:
    """Batched inverse of symmetric positive definite matrices ``(K, n, n)``.

    Per matrix, LAPACK's Cholesky factorisation and inverse from it (``dpotrf`` + ``dpotri``,
    Golub & Van Loan §4.2: n³ flops against LU's ≈ 2n³ in ``np.linalg.inv``), in place on one copy
    of the batch, one triangle mirrored by one batched pass (1.2–2.2× faster than
    ``np.linalg.inv`` per matrix from order 24: docs/topdown.md, "Small families together", the
    bullet on batched inverses). Only the lower triangle is read; the result is exactly symmetric.
    A matrix that is not numerically positive definite is inverted by ``np.linalg.inv`` (which
    raises ``np.linalg.LinAlgError`` if it is singular), as are all matrices of order below
    ``lapack_from`` (there LU's one batched call is faster).
    """
    k, n, _ = a.shape
    if n < lapack_from or k == 0:
        return np.linalg.inv(a)
    out = np.array(a, dtype=np.float64, order="C", copy=True)
    failed = []
    potrf, potri = lapack.dpotrf, lapack.dpotri
    with one_blas_thread():
        for i in range(k):
            # out[i].T is Fortran-ordered and, out[i] being symmetric, the same matrix: LAPACK's
            # upper triangle of it is out[i]'s lower one. clean=1 zeroes out[i]'s strict upper one.
            block = out[i].T
            factor, info = potrf(block, lower=0, clean=1, overwrite_a=1)
            if info == 0:
                factor, info = potri(factor, lower=0, overwrite_c=1)
            if info != 0:
                failed.append(i)
            elif not np.may_share_memory(factor, block):
                block[...] = factor  # f2py made a copy after all
    diag = np.arange(n)
    diagonal = out[:, diag, diag]
    out += out.swapaxes(1, 2)  # lower + (zero upper) mirrored; NumPy buffers the overlap
    out[:, diag, diag] = diagonal
    for i in failed:
        out[i] = np.linalg.inv(a[i])
    return out
