"""The names of the least-squares routes, importable without NumPy (for ``--solver``'s choices).

The routing table itself is :data:`engine.topdown.qp.route.ROUTES` (same names, same order; a
test holds them equal); docs/topdown.md "Choosing the least-squares route" says what each does.
"""

from __future__ import annotations

ROUTE_NAMES: tuple[str, ...] = (
    "total",
    "total_bounds",
    "projected_cg",
    "admm",
    "piqp",
    "clarabel",
)
"""Every route of the table, in order."""

SOLVER_CHOICES: tuple[str, ...] = ("auto", *ROUTE_NAMES)
"""``auto`` (the table decides per family) or one route (it where it applies, clarabel elsewhere)."""


def check_solver(name: object) -> str:
    """``name`` if it is a solver choice, else a ValueError that lists the choices."""
    if name not in SOLVER_CHOICES:
        raise ValueError(f"solver must be one of {', '.join(SOLVER_CHOICES)}; got {name!r}")
    return str(name)
