"""TopDown's constrained least squares: the multi-pass non-negative weighted least squares of each family.

TDA §7.2 (eq. 7.5–7.6): each family of children of a fixed parent is estimated by passes of
weighted least squares under non-negativity, the parent's totals and the invariants, each pass
holding the queries of the earlier passes within a band (:class:`~.problem.Band`).
:mod:`.least_squares` drives the passes and routes each batch of families to a solver
(:mod:`.total_pass`, :mod:`.family_batch`, :mod:`.batched_qp`, :mod:`.family_admm`,
:mod:`.family_projected_cg`, Clarabel as the fallback); docs/topdown.md "Production scale" gives the
measurements behind each route.
"""
