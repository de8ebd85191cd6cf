"""Feasibility diagnostics for the parent→children problems (TDA §6.2, §7.3; docs/science.md §4).

Every TopDown subproblem must admit a non-negative histogram for each child such that the children
sum to the (already rounded) parent cell by cell and every invariant holds (including the sums of
siblings held exact, e.g. a split state's two branches, TDA §7.4). Invariants derived from
the same data are consistent once their right-hand sides are summed up the tree (an invariant at a
level is also held at every level above it, docs/science.md §4), but a hand-made tree, an allocation
with invariants below noisy levels or a corrupt input can break this. :func:`check_batch` tests the
necessary conditions *before* solving and reports, in words, which geounit and which constraint
fails; :func:`describe_family_failure` turns a solver failure into such a sentence by re-testing
each family with a small feasibility LP. Users never see a bare solver trace.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from engine.core.errors import PHExploreError
from engine.topdown.family import FamilyBatch

MAX_REPORTED = 5
_TOL = 1e-6


class TopDownInfeasible(PHExploreError):
    """A parent→children problem has no solution; the message names the geounit and constraint."""


def _family_name(batch: FamilyBatch, f: int) -> str:
    level = batch.family_level or "geounit"
    if batch.parent is None:
        return f"the root {level} {batch.family_id[f]}"
    return f"the {batch.child_level or 'child'} geounits of {level} {batch.family_id[f]}"


def check_batch(batch: FamilyBatch) -> list[str]:
    """Necessary conditions for feasibility of every family; one sentence per violation."""
    problems: list[str] = []
    if batch.parent is not None:
        parent = batch.parent
        if np.any(parent < 0) or np.any(np.abs(parent - np.round(parent)) > _TOL):
            f = int(
                np.flatnonzero(
                    np.any((parent < 0) | (np.abs(parent - np.round(parent)) > _TOL), axis=1)
                )[0]
            )
            problems.append(
                f"{batch.family_level} {batch.family_id[f]}: its estimate must be a non-negative "
                "integer histogram before its children are estimated"
            )
    for q, target in enumerate(batch.invariant):
        if target is None:
            continue
        spec = batch.queries[q]
        if np.any(target[np.isfinite(target)] < 0):
            k = int(np.flatnonzero(np.any(np.nan_to_num(target, nan=0.0) < 0, axis=1))[0])
            problems.append(
                f"{batch.child_level} {batch.child_id[k]}: invariant {spec.name} is negative, "
                "but counts are non-negative"
            )
        if batch.parent is None:
            continue
        parent_answer = spec.answer(batch.parent)
        fixed = np.isfinite(target)
        sums = np.zeros((batch.n_families, spec.size))
        np.add.at(sums, batch.child_family, np.where(fixed, target, 0.0))
        n_fixed = np.zeros((batch.n_families, spec.size), dtype=np.int64)
        np.add.at(n_fixed, batch.child_family, fixed.astype(np.int64))
        all_fixed = n_fixed == np.diff(batch.child_ptr)[:, None]
        too_big = sums > parent_answer + _TOL
        unequal = all_fixed & (np.abs(sums - parent_answer) > _TOL)
        for f, a in np.argwhere(too_big | unequal)[:MAX_REPORTED]:
            relation = "equal" if all_fixed[f, a] else "be at most"
            problems.append(
                f"{_family_name(batch, int(f))}: their invariant {spec.name} "
                f"[{a}] sums to {sums[f, a]:g}, but it must {relation} the parent's estimate "
                f"{parent_answer[f, a]:g} (children sum to the parent)"
            )
    problems += _bound_problems(batch)
    for held in batch.sums:
        spec = batch.queries[held.query]
        names = " + ".join(batch.child_id[r] for r in held.rows)
        if np.any(held.target < 0):
            problems.append(
                f"{batch.child_level} {names}: the invariant sum of {spec.name} is negative, "
                "but counts are non-negative"
            )
        if batch.parent is None:
            continue
        f = int(batch.child_family[held.rows[0]])
        if np.any(batch.child_family[held.rows] != f):
            problems.append(f"{names}: an invariant sum must join siblings (one parent)")
            continue
        parent_answer = spec.answer(batch.parent[f : f + 1])[0]
        over = np.flatnonzero(held.target > parent_answer + _TOL)
        for a in over[:MAX_REPORTED]:
            problems.append(
                f"{_family_name(batch, f)}: the invariant {spec.name} [{a}] of {names} sums to "
                f"{held.target[a]:g}, more than the parent's estimate {parent_answer[a]:g}"
            )
    return problems[: 4 * MAX_REPORTED]


def _bound_label(name: str, a: int) -> str:
    if name == "TOTAL":
        return "persons"
    if name == "HHGQ":
        return "household persons" if a == 0 else f"persons in GQ type {a}"
    return f"{name}[{a}]"


def _bound_problems(batch: FamilyBatch) -> list[str]:
    """The parent's answer must lie within the children's summed bounds (docs/science.md §4, §6)."""
    problems: list[str] = []
    for bound in batch.bounds:
        lower = np.where(np.isfinite(bound.lower), bound.lower, 0.0)
        if np.any(lower > bound.upper + _TOL):
            k, a = np.argwhere(lower > bound.upper + _TOL)[0]
            problems.append(
                f"{batch.child_level} {batch.child_id[k]}: its lower bound on "
                f"{_bound_label(bound.spec.name, int(a))} ({lower[k, a]:g}) exceeds its upper bound "
                f"({bound.upper[k, a]:g})"
            )
        if batch.parent is None:
            continue
        parent = bound.spec.answer(batch.parent)
        low = np.zeros_like(parent)
        high = np.zeros_like(parent)
        np.add.at(low, batch.child_family, lower)
        np.add.at(high, batch.child_family, bound.upper)
        for f, a in np.argwhere(parent < low - _TOL)[:MAX_REPORTED]:
            problems.append(
                f"{_family_name(batch, int(f))}: their GQ facilities and occupied units need at "
                f"least {low[f, a]:g} {_bound_label(bound.spec.name, int(a))}, but the parent's "
                f"estimate has {parent[f, a]:g} (bounds must be summed up the tree)"
            )
        for f, a in np.argwhere(parent > high + _TOL)[:MAX_REPORTED]:
            problems.append(
                f"{_family_name(batch, int(f))}: their units allow at most {high[f, a]:g} "
                f"{_bound_label(bound.spec.name, int(a))} (structural zeros), but the parent's "
                f"estimate has {parent[f, a]:g}"
            )
    return problems


def family_is_feasible(batch: FamilyBatch, f: int) -> bool:
    """Whether family ``f`` alone admits x ≥ 0 with children summing to the parent and invariants."""
    one = batch.subset([f])
    n_cells, k = one.n_cells, one.n_children
    rows: list[sp.spmatrix] = []
    rhs: list[np.ndarray] = []
    if one.parent is not None:
        rows.append(sp.hstack([sp.identity(n_cells)] * k, format="csr"))
        rhs.append(one.parent[0].astype(np.float64))
    for q, target in enumerate(one.invariant):
        if target is None:
            continue
        flat = target.reshape(-1)
        fixed = np.flatnonzero(np.isfinite(flat))
        if fixed.size:
            stacked = sp.kron(sp.identity(k), one.queries[q].matrix(), format="csr")[fixed]
            rows.append(stacked)
            rhs.append(flat[fixed])
    for held in one.sums:
        rows.append(one.sum_matrix(held))
        rhs.append(np.asarray(held.target, dtype=np.float64))
    ub_rows: list[sp.spmatrix] = []
    ub_rhs: list[np.ndarray] = []
    for bound in one.bounds:
        stacked = sp.kron(sp.identity(k), bound.spec.matrix(), format="csr")
        upper, lower = bound.upper.reshape(-1), bound.lower.reshape(-1)
        up, low = np.flatnonzero(np.isfinite(upper)), np.flatnonzero(np.isfinite(lower))
        ub_rows += [stacked[up], -stacked[low]]
        ub_rhs += [upper[up], -lower[low]]
    if not rows and not ub_rows:
        return True
    result = linprog(
        np.zeros(k * n_cells),
        A_ub=sp.vstack(ub_rows, format="csr") if ub_rows else None,
        b_ub=np.concatenate(ub_rhs) if ub_rows else None,
        A_eq=sp.vstack(rows, format="csr") if rows else None,
        b_eq=np.concatenate(rhs) if rows else None,
        bounds=(0, None),
        method="highs",
    )
    return result.status != 2


def describe_family_failure(batch: FamilyBatch, what: str, status: str) -> str:
    """A sentence explaining a failed solve of ``what`` for ``batch`` (which family, which rule)."""
    bad = [f for f in range(batch.n_families) if not family_is_feasible(batch, f)]
    if bad:
        names = "; ".join(_family_name(batch, f) for f in bad[:MAX_REPORTED])
        more = f" (and {len(bad) - MAX_REPORTED} more)" if len(bad) > MAX_REPORTED else ""
        return (
            f"{what} is infeasible for {names}{more}: no non-negative histogram lets the children "
            "sum to the parent while meeting their invariants. Check that invariants are held at "
            "every level above the one where they are set."
        )
    return (
        f"{what} failed numerically (solver status {status}) for {batch.n_families} "
        f"famil{'y' if batch.n_families == 1 else 'ies'} under {batch.family_level} "
        f"{batch.family_id[0]}…; the constraints are feasible, so retry with fewer workers or "
        "report the input that triggers it"
    )
