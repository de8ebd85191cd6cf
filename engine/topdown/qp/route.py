"""The routing table of the least-squares passes, and the passes themselves (TDA eq. 7.5–7.6).

Pass k of a family solves eq. 7.5 — the weighted least squares of the pass's queries under x ≥ 0,
children summing to the parent (cell by cell), invariants, and every earlier pass j held within
τ̂^(j) + 0.1 (τ̂ from the LP of eq. 7.6; 0 for pass 1, which attains it). The root (eq. 7.1) has
no parent constraint. Production: pass 1 = TOTAL, pass 2 = every other query (TDA §8.1–8.2).

**The routing table** (:data:`ROUTES`, like scikit-learn's ``solver="auto"``): an ordered list of
(name, predicate, solver). :func:`plan` — a pure function of the pass and a
:class:`~.settings.QPSettings` — gives each route the families it is offered; :func:`solve_pass`
hands each route the families no earlier route solved, and every solver answers per family with
its solution or "not mine" (``solved`` False: not verified, not covered, not solved). ``solver``
names one route instead of ``"auto"``: that route for every family it can take, ``clarabel`` for
the rest. docs/topdown.md "The least-squares routes" has the measurements behind each entry
(``benchmarks/qp_solvers.py``: well-kept solvers side by side with the hand-written ones on the
real families of RI 2010 and a generated 1M-person state):

================  ===============================================================================
``closed_form``   a TOTAL-only pass: water filling + proportional fit (:mod:`.closed_form`)
``projected_cg``  families of large children (a state's counties) or of heavy dense polishes, above
                  ``piqp_max_variables``: projected-CG active-set solves (:mod:`.projected_cg`),
                  13× PIQP on a 1M state's counties (RI 2010's 5 counties on 16 cells: PIQP)
``admm``          a block group's blocks (the single pass, 1.6× PIQP) and families of more than
                  ``piqp_max_variables`` (a county's tracts, 16×): ADMM + exact polish
                  (:mod:`.family_admm`)
``piqp``          every other family — a tract's block groups, the tracts of RI 2010, the root,
                  invariants and sums of siblings below the parent: the general model
                  (:mod:`.general`) by PIQP
``clarabel``      what PIQP does not solve, and a state's counties projected CG does not verify
                  (10M OH: PIQP ≈ 30 min, Clarabel 35–57 s): the general model by Clarabel
================  ===============================================================================
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass

import numpy as np

from engine.topdown.family import FamilyBatch, QuerySpec
from engine.topdown.feasibility import TopDownInfeasible
from engine.topdown.qp import closed_form, family_admm, general, problem, projected_cg
from engine.topdown.qp.problem import Band
from engine.topdown.qp.settings import ROUTE_NAMES, SETTINGS, QPSettings, check_solver

PASS_TOLERANCE = SETTINGS.pass_tolerance


@dataclass(frozen=True)
class Pass:
    """One least-squares pass of the families of a batch: the problem every route is handed."""

    batch: FamilyBatch
    queries: tuple[int, ...]
    bands: tuple[Band, ...] = ()

    def subset(self, families: np.ndarray) -> Pass:
        """The pass of ``families`` (indices, in order) alone."""
        rows = _child_rows(self.batch, families)
        bands = tuple(Band(b.query, b.target[rows], b.tol[families]) for b in self.bands)
        return Pass(self.batch.subset(families), self.queries, bands)


@dataclass(frozen=True)
class Solved:
    """A solver's answer: ``x`` ``(K, n_cells)`` and, per family, whether its rows are its
    solution (``False``: "not mine" — the next route takes it)."""

    x: np.ndarray
    solved: np.ndarray


@dataclass(frozen=True)
class PassSolution:
    """Solution of one pass: ``x`` ``(K, n_cells)`` and the objective of each family ``(F,)``."""

    x: np.ndarray
    objective: np.ndarray


Predicate = Callable[[Pass, QPSettings], np.ndarray]
"""``(F,)`` bool: the families a route may take (a pure function of the pass and settings)."""
Solver = Callable[[Pass, QPSettings], Solved]


@dataclass(frozen=True)
class Route:
    """One entry of the table: ``takes`` says which families the route can solve; ``prefers``
    which of those ``auto`` gives it (the measured choice; a named ``--solver`` ignores it)."""

    name: str
    takes: Predicate
    solve: Solver
    prefers: Predicate | None = None


# ---------------------------------------------------------------- predicates (pure)
def _everyone(p: Pass, value: bool = True) -> np.ndarray:
    return np.full(p.batch.n_families, value, dtype=bool)


def _closed_form(p: Pass, s: QPSettings) -> np.ndarray:
    return _everyone(p, closed_form.applies(p.batch, p.queries, p.bands))


def _covered(p: Pass, s: QPSettings) -> np.ndarray:
    """What the family solvers need (:func:`~.problem.covered`): a parent, no invariants or held
    sums below it, DETAILED measured for every child in the pass."""
    return _everyone(p, problem.covered(p.batch, p.queries))


def _sizes(p: Pass) -> tuple[np.ndarray, np.ndarray]:
    """(children, populated parent cells) per family."""
    b = p.batch
    cells = np.count_nonzero(b.parent > 0, axis=1).astype(np.float64)
    return np.diff(b.child_ptr).astype(np.float64), cells


def _large(p: Pass, s: QPSettings) -> np.ndarray:
    """Children of more than ``large_persons_per_child`` persons on average (a state's counties)."""
    b = p.batch
    return b.parent.sum(axis=1) / np.maximum(np.diff(b.child_ptr), 1) > s.large_persons_per_child


def _heavy(p: Pass, s: QPSettings) -> np.ndarray:
    """A dense polish of more than ``heavy_polish_work`` (children × populated cells³)."""
    children, cells = _sizes(p)
    return children * cells**3 > s.heavy_polish_work


def _big(p: Pass, s: QPSettings) -> np.ndarray:
    """More than ``piqp_max_variables`` children × populated cells (a county's tracts)."""
    if p.batch.parent is None:
        return _everyone(p, False)
    children, cells = _sizes(p)
    return children * cells > s.piqp_max_variables


def _cg(p: Pass, s: QPSettings) -> np.ndarray:
    return (
        _covered(p, s) & (_large(p, s) | _heavy(p, s))
        if p.batch.parent is not None
        else _everyone(p, False)
    )


def _admm(p: Pass, s: QPSettings) -> np.ndarray:
    return _covered(p, s) & ~_large(p, s) if p.batch.parent is not None else _everyone(p, False)


def _admm_prefers(p: Pass, s: QPSettings) -> np.ndarray:
    """The single pass of a block group's blocks (no earlier pass held: ADMM 1.6× PIQP on the
    blocks of RI 2010 and of a generated 1M-person state) and families above
    ``piqp_max_variables`` (a county's tracts: 16×). In a held pass the TOTAL rows of every child
    repeat the coupling and ADMM's polish slows down: PIQP is 3–13× faster there."""
    return _big(p, s) | (not p.bands)


def _piqp_prefers(p: Pass, s: QPSettings) -> np.ndarray:
    """Not the families projected CG is offered: a state's counties its first polish leaves
    unverified go to Clarabel (faer), as before — PIQP took ≈ 30 min of a loaded machine on the
    88 counties (≈ 130,000 variables) of a 10M-person OH, where Clarabel took 35–57 s."""
    return ~(_cg(p, s) & _big(p, s))


# ---------------------------------------------------------------- solvers
def _solve_closed_form(p: Pass, s: QPSettings) -> Solved:
    x, solved = closed_form.solve_total_pass(p.batch, p.queries[0], s)
    return Solved(x, solved)


def _solve_cg(p: Pass, s: QPSettings) -> Solved:
    heavy = _heavy(p, s) & ~_large(p, s)
    x, solved = projected_cg.solve_families(p.batch, p.queries, p.bands, heavy, s)
    return Solved(x, solved)


def _solve_admm(p: Pass, s: QPSettings) -> Solved:
    x, solved = family_admm.solve_families(p.batch, p.queries, p.bands, s)
    return Solved(x, solved)


def _solve_piqp(p: Pass, s: QPSettings) -> Solved:
    model = general.build(p.batch, p.queries, p.bands)
    raw = general.solve_piqp(model, s)
    if raw is None:
        return Solved(np.zeros((p.batch.n_children, p.batch.n_cells)), _everyone(p, False))
    return Solved(model.to_x(raw), _everyone(p))


def _solve_clarabel(p: Pass, s: QPSettings) -> Solved:
    return Solved(general.solve(p.batch, p.queries, p.bands, s), _everyone(p))


ROUTES: tuple[Route, ...] = (
    Route("closed_form", _closed_form, _solve_closed_form),
    Route("projected_cg", _cg, _solve_cg, _big),
    Route("admm", _admm, _solve_admm, _admm_prefers),
    Route("piqp", lambda p, s: _everyone(p), _solve_piqp, _piqp_prefers),
    Route("clarabel", lambda p, s: _everyone(p), _solve_clarabel),
)
"""The routing table, in order (see the module doc)."""

if tuple(r.name for r in ROUTES) != ROUTE_NAMES:  # the CLI's choices come from names.py
    raise RuntimeError("engine.topdown.qp.settings.ROUTE_NAMES must list ROUTES' names in order")


def plan(p: Pass, settings: QPSettings = SETTINGS, solver: str = "auto") -> dict[str, np.ndarray]:
    """Per route name, in table order, the families ``(F,)`` bool it is offered: with ``auto``
    those its predicate takes and prefers; with one route named, that route (every family it
    can take) and ``clarabel`` for the rest. Pure: solves nothing."""
    check_solver(solver)
    out = {}
    for r in ROUTES:
        if solver == "auto":
            mask = r.takes(p, settings)
            if r.prefers is not None:
                mask = mask & r.prefers(p, settings)
            out[r.name] = mask
        elif r.name in (solver, "clarabel"):
            out[r.name] = r.takes(p, settings)
    return out


def solve_pass(
    batch: FamilyBatch,
    pass_queries: Sequence[int],
    bands: Sequence[Band] = (),
    *,
    solver: str = "auto",
    settings: QPSettings = SETTINGS,
    routes: MutableMapping[str, int] | None = None,
    objective: bool = True,
) -> PassSolution:
    """One least-squares pass (TDA eq. 7.5) for every family of ``batch``, route by route
    (:func:`plan`); ``routes`` (if given) counts the families each route solved; without
    ``objective`` the objectives are NaN (not computed: a run does not use them)."""
    p = Pass(batch, tuple(pass_queries), tuple(bands))
    x = np.zeros((batch.n_children, batch.n_cells))
    done = np.zeros(batch.n_families, dtype=bool)
    table = {r.name: r for r in ROUTES}
    for name, takes in plan(p, settings, solver).items():
        todo = np.flatnonzero(takes & ~done)
        if not todo.size:
            continue
        part = p if todo.size == batch.n_families else p.subset(todo)
        answer = table[name].solve(part, settings)
        mine = todo[answer.solved]
        if mine.size:
            x[_child_rows(batch, mine)] = answer.x[
                _child_rows(part.batch, np.flatnonzero(answer.solved))
            ]
            done[mine] = True
            if routes is not None:
                routes[name] = routes.get(name, 0) + int(mine.size)
    if not objective:
        return PassSolution(x=x, objective=np.full(batch.n_families, np.nan))
    return PassSolution(x=x, objective=family_objective(batch, x, pass_queries))


def multipass_least_squares(
    batch: FamilyBatch,
    passes: Sequence[Sequence[int]],
    *,
    solver: str = "auto",
    settings: QPSettings = SETTINGS,
    routes: MutableMapping[str, int] | None = None,
    objectives: bool = True,
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Run the passes of TDA eq. 7.5–7.6; return x̃^(K) ``(K, n_cells)`` and each pass's objective
    (NaN without ``objectives``).

    Passes whose queries have no noisy answers in this batch are skipped. The answers of every
    earlier pass are held within τ̂ + 0.1 (τ̂ from eq. 7.6; 0 for the first pass, which attains it).
    """
    held: list[list[Band]] = []  # bands of each solved pass, in order
    x: np.ndarray | None = None
    objectives: list[np.ndarray] = []
    tolerance = settings.pass_tolerance
    measured_passes = [[q for q in qs if np.any(batch.weight[:, q] > 0)] for qs in passes]
    measured_passes = [m for m in measured_passes if m]
    for i, measured in enumerate(measured_passes):
        if len(held) >= 2:
            # τ̂ of the latest pass from eq. 7.6 (over all passes so far); pass 1's is 0.
            exact = [Band(b.query, b.target, np.zeros(batch.n_families)) for p in held for b in p]
            tau = general.minimal_slack(batch, exact)
            held[-1] = [Band(b.query, b.target, tau + tolerance) for b in held[-1]]
        bands = [b for p in held for b in p]
        solution = solve_pass(
            batch,
            measured,
            bands,
            solver=solver,
            settings=settings,
            routes=routes,
            objective=objectives,
        )
        x = solution.x
        objectives.append(solution.objective)
        if i < len(measured_passes) - 1:  # the last pass's answers are held by no later pass
            held.append(
                [
                    Band(q, batch.queries[q].answer(x), np.full(batch.n_families, tolerance))
                    for q in measured
                ]
            )
    if x is None:
        x = _split_parent_evenly(batch)
    return x, objectives


def _split_parent_evenly(batch: FamilyBatch) -> np.ndarray:
    """Without any noisy answer the children share the parent equally (any split is optimal)."""
    if batch.parent is None:
        raise TopDownInfeasible(
            "the root geounit has no noisy measurement and no invariant to estimate it from; "
            "give its level a positive share"
        )
    sizes = np.diff(batch.child_ptr)
    return batch.parent[batch.child_family] / sizes[batch.child_family, None]


def _partition_answer(spec: QuerySpec, x: np.ndarray) -> np.ndarray:
    """``spec.answer(x)`` summed over the columns of ``x`` that hold a non-zero (sorted by answer
    cell, summed in runs): no sparse matrix, and a block family's x̃ is non-zero on a few dozen of
    the 2,016 cells."""
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros((x.shape[0], spec.size))
    cols = np.flatnonzero(np.any(x != 0.0, axis=0))
    if cols.size == 0:
        return out
    labels = spec.cell_index[cols]
    order = np.argsort(labels, kind="stable")
    labels = labels[order]
    starts = np.flatnonzero(np.concatenate([[True], labels[1:] != labels[:-1]]))
    out[:, labels[starts]] = np.add.reduceat(x[:, cols[order]], starts, axis=1)
    return out


def family_objective(batch: FamilyBatch, x: np.ndarray, pass_queries: Sequence[int]) -> np.ndarray:
    """Σ_c Σ_q w_{c,q} ‖A_q x_c − m̃_{c,q}‖² of each family (the objective of eq. 7.5)."""
    per_child = np.zeros(batch.n_children)
    for q in pass_queries:
        w = batch.weight[:, q]
        if not np.any(w > 0):
            continue
        resid = _partition_answer(batch.queries[q], x) - batch.noisy[q]
        per_child += w * np.sum(resid**2, axis=1)
    return np.bincount(batch.child_family, weights=per_child, minlength=batch.n_families)


def _child_rows(batch: FamilyBatch, families: np.ndarray) -> np.ndarray:
    if not len(families):
        return np.zeros(0, dtype=np.int64)
    return np.concatenate([np.arange(batch.child_ptr[f], batch.child_ptr[f + 1]) for f in families])
