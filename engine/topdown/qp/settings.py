"""Every threshold and tuning constant of the least-squares stack in one frozen object, and the
routes' names (this module imports no NumPy: ``--solver``'s choices come from here).

:data:`SETTINGS` is the production value; the routing table (:mod:`.route`) and every solver read
their numbers from a :class:`QPSettings`, so two solvers can no longer hold different numbers
under one name. docs/topdown.md "Production scale" records the measurement behind each value.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QPSettings:
    """The numbers of the routing table and of the solvers (docs/topdown.md "Production scale")."""

    # ---- the pass structure (TDA eq. 7.5–7.6)
    pass_tolerance: float = 0.1
    """Added to the solved slack τ̂ when an earlier pass is held (slack + 0.1)."""

    # ---- routing thresholds (:mod:`.route`)
    piqp_max_variables: float = 3_000.0
    """Families of more children × populated cells than this go to ADMM even in a held pass (a
    county's tracts: 3,400–33,000 at 1M persons, where ADMM + polish was 5–50× faster than PIQP
    one family at a time; the block families of a generated 1M-person state stay below it)."""
    large_persons_per_child: float = 50_000.0
    """Families whose children average more persons than this (a state's counties) go to
    projected CG first (ADMM needed hundreds of iterations there)."""
    heavy_polish_work: float = 3e9
    """Families whose dense polish costs more than this (children × populated cells³) try
    projected CG's first polish before ADMM."""
    cg_admm_max_work: float = 1e8
    """Above this children × populated cells², projected CG's first polish only (a 10M state)."""
    faer_min_variables: int = 10_000
    """Clarabel uses its supernodal faer factorisation (one thread) from this many variables."""
    piqp_eps_abs: float = 1e-9
    piqp_eps_rel: float = 1e-10
    """PIQP's tolerances on the general model (objectives within 1e-9 of a tight Clarabel solve
    on the recorded families, ``benchmarks/qp_solvers.py``)."""

    spd_lapack_from: int = 16
    """Smallest order :func:`~.kkt.spd_inverse` inverts by LAPACK potrf/potri (below: LU)."""

    # ---- ADMM (:mod:`.family_admm`, the OSQP splitting)
    admm_sigma: float = 1e-6
    admm_rho: float = 0.05
    """ADMM's cell penalty (weights normalised to a largest of 1) for tract and block families."""
    admm_row_penalty_ratio: float = 1.0
    """ADMM's row penalty ÷ its cell penalty."""
    admm_alpha: float = 1.6
    admm_polish_at: tuple[int, ...] = (50, 100, 200, 400, 800)
    admm_early_polish_at: tuple[int, ...] = (1, 5, 10, 25)
    admm_early_max_cells: int = 2_000
    """Families of at most this many (child, free cell) pairs get the early polishes too (after 1
    step the active-set steps verify the same solutions as after 10, in less CPU:
    ``benchmarks/admm_polish_schedule.py``)."""
    admm_active_set_steps: int = 12
    release_by_surplus: bool = True
    """A dependent TOTAL row is released on the side the bounds' surplus points to."""
    kkt_tol: float = 1e-9
    """Relative tolerance of the verified KKT conditions (ADMM and projected CG)."""

    # ---- projected CG (:mod:`.projected_cg`)
    cg_rho: float = 0.5
    """ADMM's cell penalty when it refines projected CG's guess (a state's counties)."""
    cg_check_every: int = 10
    cg_settled_fraction: float = 0.03
    cg_min_gap: int = 20
    cg_polish_every: int = 200
    cg_max_admm_iterations: int = 2_000
    cg_max_polishes: int = 40
    cg_active_set_steps: int = 40
    cg_max_iterations: int = 500
    cg_tol: float = 1e-13

    # ---- closed-form TOTAL pass under bounds (:mod:`.closed_form`)
    fit_iterations: int = 1_000
    fit_tol: float = 1e-9


SETTINGS = QPSettings()
"""The production settings."""


ROUTE_NAMES: tuple[str, ...] = ("closed_form", "projected_cg", "admm", "piqp", "clarabel")
"""Every route of the table, in order."""

SOLVER_CHOICES: tuple[str, ...] = ("auto", *ROUTE_NAMES)
"""``auto`` (the table decides per family) or one route (it where it applies, clarabel elsewhere)."""


def check_solver(name: object) -> str:
    """``name`` if it is a solver choice, else a ValueError that lists the choices."""
    if name not in SOLVER_CHOICES:
        raise ValueError(f"solver must be one of {', '.join(SOLVER_CHOICES)}; got {name!r}")
    return str(name)
