"""Every threshold and tuning constant of the least-squares stack, in one frozen object.

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
    dense_max_cells: int = 64
    """Schemas of at most this many cells use the batched interior point on whole histograms."""
    dense_max_count: float = 20_000.0
    """… for parents of at most this many persons in a cell (larger: the general model)."""
    dense_group_children: int = 400
    """Children per interior-point call on whole histograms (the worst family sets the count)."""
    small_max_variables: int = 1_000
    """A small family: children × populated parent cells at most this (a tract's block groups)."""
    small_max_children: int = 8
    """… with at most this many children (a Newton matrix per child per iteration)."""
    small_held_passes_only: bool = True
    """Small families go to the interior point only in passes that hold an earlier pass."""
    large_persons_per_child: float = 50_000.0
    """Families whose children average more persons than this (a state's counties) go to
    projected CG first (ADMM needed hundreds of iterations there)."""
    heavy_polish_work: float = 3e9
    """Families whose dense polish costs more than this (children × populated cells³) try
    projected CG's first polish before ADMM."""
    cg_admm_max_work: float = 2e7
    """Above this children × populated cells², projected CG gets its first polish only."""
    faer_min_variables: int = 10_000
    """Clarabel uses its supernodal faer factorisation (one thread) from this many variables."""

    # ---- the batched interior point (:mod:`.interior_point`)
    ipm_polish_from: float = 1e-5
    """Interior-point accuracy from which whole-histogram groups are polished."""
    small_polish_from: float = 1e-3
    """… and groups of small families (each iterate, with :attr:`small_polish_steps`)."""
    small_polish_steps: int = 3
    small_tolerance: float = 1e-9
    """Small families: relative gap and feasibility the interior point stops at."""
    small_group_children: int = 128
    small_group_spread: float = 1.25
    """A group's largest family has at most this many times its smallest one's cells."""
    dual_start: float = 3.0
    """The inequality duals start at this multiple of the Hessian's largest entry."""
    cell_ratio: float = 6.0
    """The polish holds a cell at 0 where its dual exceeds this many times its slack."""
    row_ratio: float = 2.0
    """… and a row at a bound where its dual exceeds this many times its slack."""
    tiny_weight: float = 1e-100
    """Barrier weights below this are flushed to 0."""
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
    admm_early_polish_at: tuple[int, ...] = (10, 25)
    admm_early_max_cells: int = 2_000
    """Families of at most this many (child, free cell) pairs get the early polishes too."""
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
