"""What a run's spine options resolve to: the built spine, its entity sets and special areas (SPN §1, §4–§7).

:func:`plan_spine` builds the spine named (conventional, AIAN-style or optimized) on a block
histogram and loads the off-spine entity sets; :class:`SpinePlan` gives the keyword arguments of the
estimation (tree, node budgets, invariant options) and :meth:`SpinePlan.summary`, the ``spine``
section of metrics.json. The ``conventional_mae`` / ``entity_mae`` / ``osed`` sections are the run
pipeline's metrics stage (:mod:`engine.runs.spine`, with :mod:`engine.metrics.spine`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from engine.core.errors import ValidationError
from engine.topdown.options import TopDownOptions
from engine.topdown.plan import run_query_names
from engine.topdown.spine.options import DATA_PLACES, DEFAULT_FANOUT_CUTOFF, SPINE_KINDS

if TYPE_CHECKING:
    import numpy as np

    from engine.data.histogram import BlockHistogram
    from engine.dp.budget import TopDownAllocation
    from engine.topdown.spine.build import BuiltSpine
    from engine.topdown.spine.entities import EntitySet

NO_SPECIAL_AREAS = "none"


def spine_options(built: BuiltSpine, options: TopDownOptions | None = None) -> TopDownOptions:
    """``options`` (default settings if None) with the spine's invariants (the root's total and
    every state total, a split state's as the sum of its branches, TDA §5.2, §7.4)."""
    base = options or TopDownOptions()
    return replace(
        base,
        invariants={k: tuple(v) for k, v in built.invariants.items()},
        invariant_sums=built.invariant_sums,
    )


@dataclass(frozen=True)
class SpinePlan:
    """What the spine options resolve to for one run."""

    built: BuiltSpine
    entity_sets: tuple[EntitySet, ...]
    special_areas: str | None

    def run_kwargs(
        self, allocation: TopDownAllocation, options: TopDownOptions | None = None
    ) -> dict[str, Any]:
        """``tree``, ``node_budgets`` and ``options`` for :func:`engine.topdown.plan.plan_run`."""
        run_options = spine_options(self.built, options)
        return {
            "tree": self.built.tree,
            "node_budgets": self.built.budget(allocation, run_query_names(allocation, run_options)),
            "options": run_options,
        }

    def summary(self) -> dict[str, Any]:
        """The metrics.json ``spine`` section: the built spine, its special areas, the entity sets."""
        return {
            **self.built.summary(),
            "special_areas": self.special_areas,
            "entity_sets": {s.name: s.n_entities for s in self.entity_sets},
        }


def plan_spine(
    hist: BlockHistogram,
    allocation: TopDownAllocation,
    spine: str = "conventional",
    entities: Sequence[str] = (),
    *,
    special_areas: str | None = None,
    fanout_cutoff: float = DEFAULT_FANOUT_CUTOFF,
    tract_groups: bool = False,
    bypass: bool | None = None,
) -> SpinePlan:
    """Build the :class:`SpinePlan` of one run: the spine ``spine`` on ``hist`` and the ``entities``.

    The plain-argument form of the spine options, used by the run pipeline
    (:func:`engine.runs.topdown.spine_plan_of`). ``entities`` and ``special_areas`` are entity
    sources (a shipped name such as ``providence-wards``, ``places`` — the data's own places — or a
    block → entity CSV); ``special_areas`` ``None`` or ``"none"`` means no AIAN-style branch (the default, SPN §6:
    branches only for areas the user names; required for the AIAN-style spine).
    """
    # Imported on use: the CLI imports this module to parse the spine options (see run_kwargs).
    import numpy as np

    from engine.topdown.spine.build import build_spine
    from engine.topdown.spine.entities import block_ids_of

    kind = spine or "conventional"
    if kind not in SPINE_KINDS:
        raise ValidationError(f"unknown spine {kind!r}; expected one of {', '.join(SPINE_KINDS)}")
    block_ids = block_ids_of(hist.geography, hist.levels[-1])
    entity_sets = _load_all(list(entities), block_ids, hist)
    names = [s.name for s in entity_sets]
    if len(set(names)) != len(names):
        raise ValidationError(f"entity set names repeat across --entities: {names}")
    special: np.ndarray | None = None
    special_label: str | None = None
    if kind in ("aian", "optimized"):
        if special_areas is None or special_areas.lower() == NO_SPECIAL_AREAS:
            # No AIAN-style branch unless the user names its areas (SPN §6: the branch is for the
            # AIAN areas; an entity set is a target of the optimized block groups, not a branch).
            if kind == "aian":
                raise ValidationError(
                    "--spine aian needs --special-areas NAME|CSV: the areas of the inside/outside "
                    "branch (e.g. --special-areas providence-wards); --entities are only reported"
                )
        else:
            areas = _load_all([special_areas], block_ids, hist)
            special = np.logical_or.reduce([s.union() for s in areas])
            special_label = special_areas
    elif special_areas is not None:
        raise ValidationError("--special-areas applies to --spine aian or optimized only")
    if tract_groups and kind != "optimized":
        raise ValidationError("--tract-groups applies to --spine optimized only")
    built = build_spine(
        hist,
        kind,
        allocation,
        special_areas=special,
        entities=entity_sets,
        fanout_cutoff=fanout_cutoff,
        tract_groups_enabled=tract_groups,
        bypass=bypass,
    )
    return SpinePlan(built=built, entity_sets=tuple(entity_sets), special_areas=special_label)


def _load_all(
    sources: Sequence[str], block_ids: np.ndarray, hist: BlockHistogram
) -> list[EntitySet]:
    # imported on use: the CLI imports this module to parse the spine options (see plan_spine)
    from engine.topdown.spine.entities import load_entities, places_entity_set

    out: list[EntitySet] = []
    for source in sources:
        if source == DATA_PLACES:
            out.append(places_entity_set(hist))
        else:
            out.extend(load_entities(source, block_ids))
    return out
