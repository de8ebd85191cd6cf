"""Small family problems on a 24-cell HHGQ-like schema and an independent per-family cvxpy model of
TDA eq. 7.5 with every constraint written out (for the family solvers' tests)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from engine.topdown.family import ChildBounds, FamilyBatch, QuerySpec

N_CELLS = 24  # HHGQ-like (3) × VOTINGAGE (2) × RACE (4)


def _specs() -> tuple[QuerySpec, ...]:
    cells = np.arange(N_CELLS)
    return (
        QuerySpec("TOTAL", np.zeros(N_CELLS, dtype=np.int64), 1),
        QuerySpec("HHGQ", cells // 8, 3),
        QuerySpec("VOTINGAGE*RACE", cells % 8, 8),
        QuerySpec("DETAILED", cells, N_CELLS),
    )


def family_batch(seed: int, *, bounds: bool = False, n_families: int = 3) -> FamilyBatch:
    """Families of 3–7 children whose parents leave some cells empty; with ``bounds``, HHGQ
    structural zeros (a type absent from a child) and GQ lower bounds (≥ 1 per facility)."""
    rng = np.random.default_rng(seed)
    specs = _specs()
    sizes = rng.integers(3, 8, size=n_families)
    k = int(sizes.sum())
    truth = rng.poisson(rng.choice([0.0, 0.4, 3.0, 15.0], size=(k, N_CELLS)))
    hhgq = specs[1]
    lower = np.full((k, 3), -np.inf)
    upper = np.full((k, 3), np.inf)
    if bounds:
        absent = rng.random((k, 3)) < 0.3
        absent[:, 0] &= rng.random(k) < 0.3
        truth[absent[:, hhgq.cell_index]] = 0
        upper[absent] = 0.0
        answers = hhgq.answer(truth)
        has = (answers >= 2) & ~absent
        lower[has] = np.floor(answers[has] / 2)
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    parent = np.add.reduceat(truth, ptr[:-1], axis=0).astype(float)
    sd = np.array([6.0, 3.0, 2.0, 1.2])
    noisy = tuple(s.answer(truth) + rng.normal(0, sd[j], (k, s.size)) for j, s in enumerate(specs))
    return FamilyBatch(
        queries=specs,
        parent=parent,
        child_ptr=ptr,
        noisy=noisy,
        weight=np.tile(1.0 / sd**2, (k, 1)),
        invariant=(None,) * 4,
        family_id=tuple(f"f{i}" for i in range(n_families)),
        child_id=tuple(f"c{i}" for i in range(k)),
        bounds=(ChildBounds(hhgq, lower, upper),) if bounds else (),
    )


def cvxpy_objective(batch: FamilyBatch, f: int, queries, bands) -> float:
    """TDA eq. 7.5 for family ``f``: dense matrices, every constraint written out (Clarabel)."""
    lo, hi = batch.child_ptr[f], batch.child_ptr[f + 1]
    x = cp.Variable((hi - lo, batch.n_cells), nonneg=True)
    terms = []
    for q in queries:
        a = batch.queries[q].matrix().toarray()
        w = batch.weight[lo:hi, q]
        terms.append(cp.sum(cp.multiply(w[:, None], cp.square(x @ a.T - batch.noisy[q][lo:hi]))))
    constraints = [cp.sum(x, axis=0) == batch.parent[f]]
    for bound in batch.bounds:
        a = bound.spec.matrix().toarray()
        answers = x @ a.T
        low, up = bound.lower[lo:hi], bound.upper[lo:hi]
        for c, j in zip(*np.nonzero(np.isfinite(low)), strict=True):
            constraints.append(answers[c, j] >= low[c, j])
        for c, j in zip(*np.nonzero(np.isfinite(up)), strict=True):
            constraints.append(answers[c, j] <= up[c, j])
    for band in bands:
        a = batch.queries[band.query].matrix().toarray()
        constraints.append(cp.abs(x @ a.T - band.target[lo:hi]) <= band.tol[f])
    problem = cp.Problem(cp.Minimize(sum(terms)), constraints)
    problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return float(problem.value)
