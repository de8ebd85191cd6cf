"""The spine and entity options of ``phexplore run topdown`` (SPN §1, §4–§7).

``add_spine_arguments(parser)`` adds::

    --spine conventional|aian|optimized   the spine TopDown measures on (default conventional)
    --entities NAME|CSV                   off-spine entity sets to report (repeatable);
                                          NAME: providence-wards (the shipped sample), or a
                                          block → entity CSV (columns GEOID, entity[, entity_set])
    --special-areas NAME|CSV|none         the areas of the AIAN-style branch (required for aian;
                                          default none: no branch, SPN §6)
    --fanout-cutoff X                     optimized block groups/tract groups hold ≤ √n + X units
    --tract-groups                        add Algorithm 2's greedy tract groups (optimized only)
    --bypass / --no-bypass                bypass single-child parents (default: optimized only)

``apply_spine_options(args, hist, allocation)`` returns a :class:`SpinePlan` (through
:func:`plan_spine`, the same resolution with plain arguments, which the app calls): the built spine,
the keyword arguments for :func:`engine.topdown.run.run_topdown` (tree, node budgets, invariant
options) and :meth:`SpinePlan.summary`, the ``spine`` section of metrics.json. The
``conventional_mae`` / ``entity_mae`` / ``osed`` sections are the run pipeline's metrics stage
(:mod:`engine.runs.spine`, with :mod:`engine.metrics.spine`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.topdown.spine.options import DEFAULT_FANOUT_CUTOFF, SPINE_KINDS
from phexplore.errors import ValidationError
from phexplore.parsing import option_type

if TYPE_CHECKING:
    import numpy as np

    from engine.data.histogram import BlockHistogram
    from engine.topdown.run import TopDownOptions
    from engine.topdown.spine.build import BuiltSpine
    from engine.topdown.spine.entities import EntitySet
    from phexplore.budget import TopDownAllocation

NO_SPECIAL_AREAS = "none"


def add_spine_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the spine/entity options to ``phexplore run topdown``."""
    group = parser.add_argument_group("geographic spine (SPN)")
    group.add_argument(
        "--spine",
        choices=SPINE_KINDS,
        default=None,
        help="spine TopDown measures on: conventional tabulation spine, AIAN-style inside/outside "
        "branch of --special-areas, or optimized block groups around the --entities (default "
        "conventional); any spine option adds conventional_mae, entity_mae and osed to "
        "metrics.json",
    )
    group.add_argument(
        "--entities",
        action="append",
        default=[],
        metavar="NAME|CSV",
        help="off-spine entity sets whose MAE and OSED are reported and that the optimized spine "
        "targets: 'providence-wards' (shipped: the city of Providence and its 15 wards, ODbL) or "
        "a block → entity CSV with columns GEOID, entity[, entity_set]; repeatable",
    )
    group.add_argument(
        "--special-areas",
        default=None,
        metavar="NAME|CSV|none",
        help="areas of the AIAN-style inside/outside branch (same formats as --entities; their "
        "union is used); required for --spine aian. Default: none, no branch (SPN §6: the branch "
        "is only for areas you name; the --entities are targets, not branches)",
    )
    group.add_argument(
        "--fanout-cutoff",
        type=option_type("real", "fanout", "--fanout-cutoff"),
        default=DEFAULT_FANOUT_CUTOFF,
        metavar="X",
        help=f"optimized block groups hold at most sqrt(n) + X blocks of their tract (default "
        f"{DEFAULT_FANOUT_CUTOFF}, the DAS default)",
    )
    group.add_argument(
        "--tract-groups",
        action="store_true",
        help="optimized spine: add greedy tract groups between county and tract (SPN Algorithm 2)",
    )
    group.add_argument(
        "--bypass",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="bypass single-child parents, moving their budget to the child (SPN Algorithm 3); "
        "default: on for the optimized spine only, as in SPN §7",
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
        """``tree``, ``node_budgets`` and ``options`` for :func:`engine.topdown.run.run_topdown`."""
        from engine.topdown.spine.runner import run_query_names, spine_options

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


def spine_options_given(args: argparse.Namespace) -> bool:
    """Whether any option of :func:`add_spine_arguments` differs from its default."""
    return bool(
        args.spine is not None
        or args.entities
        or args.special_areas is not None
        or args.tract_groups
        or args.bypass is not None
        or args.fanout_cutoff != DEFAULT_FANOUT_CUTOFF
    )


def apply_spine_options(
    args: argparse.Namespace, hist: BlockHistogram, allocation: TopDownAllocation
) -> SpinePlan:
    """Resolve the parsed spine options on ``hist`` into a :class:`SpinePlan` (see :func:`plan_spine`)."""
    return plan_spine(
        hist,
        allocation,
        args.spine or "conventional",
        args.entities,
        special_areas=args.special_areas,
        fanout_cutoff=args.fanout_cutoff,
        tract_groups=args.tract_groups,
        bypass=args.bypass,
    )


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

    The plain-argument form of the spine options, used by the CLI (through
    :func:`apply_spine_options`) and by the app. ``entities`` and ``special_areas`` are entity
    sources (a shipped name such as ``providence-wards`` or a block → entity CSV);
    ``special_areas`` ``None`` or ``"none"`` means no AIAN-style branch (the default, SPN §6:
    branches only for areas the user names; required for the AIAN-style spine).
    """
    import numpy as np

    from engine.topdown.spine.build import build_spine
    from engine.topdown.spine.entities import block_ids_of

    kind = spine or "conventional"
    if kind not in SPINE_KINDS:
        raise ValidationError(f"unknown spine {kind!r}; expected one of {', '.join(SPINE_KINDS)}")
    block_ids = block_ids_of(hist.geography, hist.levels[-1])
    entity_sets = _load_all(list(entities), block_ids)
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
            areas = _load_all([special_areas], block_ids)
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


def _load_all(sources: Sequence[str], block_ids: np.ndarray) -> list[EntitySet]:
    from engine.topdown.spine.entities import load_entities

    out: list[EntitySet] = []
    for source in sources:
        out.extend(load_entities(source, block_ids))
    return out
