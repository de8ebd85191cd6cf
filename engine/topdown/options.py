"""Settings and control of a TopDown run (docs/science.md §4, §8).

:class:`TopDownOptions` holds the estimation settings, whose defaults follow production: the
least-squares passes of TDA §8.1–8.2, the rounder's nested marginals (TDA eq. 7.7), the invariants
(TDA §5.2) and invariant sums of sibling nodes (TDA §7.4), the noise method and the size of the
units of work and the least-squares route (``solver``). ``Progress`` is the
``progress(message, fraction)`` callback of a run; a ``True`` answer of its ``cancel()`` raises
:class:`engine.core.errors.RunCancelled`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from engine.core.errors import ValidationError
from engine.topdown.measure import DEFAULT_INVARIANTS, InvariantSum
from engine.topdown.qp.settings import check_solver

Progress = Callable[[str, float], None]


@dataclass(frozen=True)
class TopDownOptions:
    """Estimation settings; the defaults follow production (docs/science.md §4).

    ``ls_passes``: query names of each least-squares pass, used at every level (default, as in
    production, TDA §8.1–8.2: one pass with every query for the root and for the block level, and
    two passes — TOTAL, then every other measured query — for the levels in between).
    ``rounder_chain``: nested marginals of the rounder (default:
    :func:`~engine.topdown.queries.rounder_chain`). ``invariants``: level → exact queries.
    ``invariant_sums``: answers held exact for single nodes or for the sum of sibling nodes of the
    run's tree (TDA §7.4: a split state's two branches), set by the spine builder.
    """

    invariants: Mapping[str, Sequence[str]] = field(
        default_factory=lambda: dict(DEFAULT_INVARIANTS)
    )
    invariant_sums: tuple[InvariantSum, ...] = ()
    ls_passes: tuple[tuple[str, ...], ...] | None = None
    rounder_chain: tuple[str, ...] | None = None
    noise_method: str = "fast"
    chunk_cells: int | None = None
    """Families of one depth are cut into units of work of about this many variables (children ×
    histogram cells); ``None``: :func:`unit_variables` (at least 60,000, and at least
    :data:`UNIT_CHILDREN` children of a large schema)."""
    structural_zeros: bool = True
    """Hold structural zeros and GQ/occupied-unit lower bounds where the data carry a unit frame
    (:mod:`engine.topdown.constraints`; TDA §5.3, docs/science.md §6)."""
    solver: str = "auto"
    """The least-squares route (:mod:`engine.topdown.qp.route`): ``auto`` (the routing table
    decides per family) or one of :data:`engine.topdown.qp.settings.ROUTE_NAMES` (that route where
    it applies, ``clarabel`` — the general model — for every other family). Every route solves the
    same problem to the same optimum (within solver tolerance); recorded in ``metrics.json``
    ``diagnostics.routes``."""

    def __post_init__(self) -> None:
        try:
            check_solver(self.solver)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None


UNIT_CHILDREN = 120
"""With the default ``chunk_cells``, a unit of work holds at least this many children, so that a
unit's fixed costs (rounding set-up, batch frames, one solver call per route) are shared by
many small families of a large schema; small schemas keep 60,000 variables (thousands of children
per unit). Why 120: docs/topdown.md, "Where it stands" (the paragraph on batching)."""


def unit_variables(options: TopDownOptions, n_cells: int) -> int:
    """Variables (children × cells) per unit of work: ``options.chunk_cells`` when set, else the
    larger of 60,000 and :data:`UNIT_CHILDREN` × ``n_cells``."""
    if options.chunk_cells is not None:
        return options.chunk_cells
    return max(60_000, UNIT_CHILDREN * n_cells)
