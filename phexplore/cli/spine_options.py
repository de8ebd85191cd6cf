"""The spine and entity options of ``phexplore run topdown`` (SPN §1, §4–§7).

``add_spine_arguments(parser)`` adds::

    --spine conventional|aian|optimized   the spine TopDown measures on (default: the preset's)
    --entities NAME|CSV                   off-spine entity sets to report (repeatable);
                                          NAME: providence-wards (the shipped sample), places
                                          (a generated population's places), or a
                                          block → entity CSV (columns GEOID, entity[, entity_set])
    --special-areas NAME|CSV|none         the areas of the AIAN-style branch (required for aian;
                                          default none: no branch, SPN §6)
    --fanout-cutoff X                     optimized block groups/tract groups hold ≤ √n + X units
    --tract-groups                        add Algorithm 2's greedy tract groups (optimized only)
    --bypass / --no-bypass                bypass single-child parents (default: optimized only)

``apply_spine_options(args, hist, allocation)`` resolves them through
:func:`engine.topdown.spine.plan.plan_spine` into a :class:`~engine.topdown.spine.plan.SpinePlan`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.data.histogram import BlockHistogram
    from engine.dp.budget import TopDownAllocation
    from engine.topdown.spine.plan import SpinePlan

import argparse

from engine.core.numbers import option_type
from engine.topdown.spine.options import DEFAULT_FANOUT_CUTOFF, SPINE_KINDS


def add_spine_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the spine/entity options to ``phexplore run topdown``."""
    group = parser.add_argument_group("geographic spine (SPN)")
    group.add_argument(
        "--spine",
        choices=SPINE_KINDS,
        default=None,
        help="spine TopDown measures on: conventional tabulation spine, AIAN-style inside/outside "
        "branch of --special-areas, or optimized block groups around the --entities (default: "
        "the preset's — topdown-2020-production runs on optimized block groups around the data's "
        "places where the data carry them, production's spine; else conventional); a spine "
        "other than conventional adds conventional_mae, entity_mae and osed to metrics.json",
    )
    group.add_argument(
        "--entities",
        action="append",
        default=[],
        metavar="NAME|CSV",
        help="off-spine entity sets whose MAE and OSED are reported and that the optimized spine "
        "targets: 'providence-wards' (shipped: the city of Providence and its 15 wards, ODbL), "
        "'places' (the places of a generated population) or a block → entity CSV with columns "
        "GEOID, entity[, entity_set]; repeatable",
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
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.topdown.spine.plan import plan_spine

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
