"""Settings and control of a TopDown run (SPEC §4, §8).

:class:`TopDownOptions` holds the estimation settings, whose defaults follow production: the
least-squares passes of TDA §8.1–8.2, the rounder's nested marginals (TDA eq. 7.7), the invariants
(TDA §5.2) and invariant sums of sibling nodes (TDA §7.4), the noise method and the size of the
units of work. ``Progress`` is the ``progress(message, fraction)`` callback of a run;
:class:`RunCancelled` is what a ``True`` answer of its ``cancel()`` raises.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from engine.topdown.measure import DEFAULT_INVARIANTS, InvariantSum
from phexplore.errors import PHExploreError

Progress = Callable[[str, float], None]


class RunCancelled(PHExploreError):
    """The user cancelled a TopDown run (raised between chunks; no partial result)."""


@dataclass(frozen=True)
class TopDownOptions:
    """Estimation settings; the defaults follow production (SPEC §4).

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
    chunk_cells: int = 60_000
    structural_zeros: bool = True
    """Hold structural zeros and GQ/occupied-unit lower bounds where the data carry a unit frame
    (:mod:`engine.topdown.constraints`; TDA §5.3, SPEC §6)."""
