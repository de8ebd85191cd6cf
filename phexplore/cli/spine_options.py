"""The spine and entity options of ``phexplore run topdown`` (SPN §1, §4–§7).

``add_spine_arguments(parser)`` adds::

    --spine preset|conventional|aian|optimized
                                          the spine TopDown measures on (default preset: the
                                          allocation's own, resolved on the data)
    --entities NAME|CSV                   off-spine entity sets to report (repeatable);
                                          NAME: providence-wards (the shipped sample), places
                                          (a generated population's places), or a
                                          block → entity CSV (columns GEOID, entity[, entity_set])
    --special-areas NAME|CSV|none         the areas of the AIAN-style branch (required for aian;
                                          default none: no branch, SPN §6)
    --fanout-cutoff X                     optimized block groups/tract groups hold ≤ √n + X units
    --tract-groups                        add Algorithm 2's greedy tract groups (optimized only)
    --bypass / --no-bypass                bypass single-child parents (default: optimized only)

``phexplore run topdown`` puts them in its :class:`~engine.runs.options.TopDownRunOptions`; the run
pipeline resolves them (:func:`engine.runs.spine_choice.resolve_spine`,
:func:`engine.runs.topdown.spine_plan_of`) into a :class:`~engine.topdown.spine.plan.SpinePlan`.
Without any spine option the run's ``spine`` is ``preset``; a spine option without ``--spine``
keeps the conventional spine, as before ``preset`` existed.
"""

from __future__ import annotations

import argparse

from engine.core.numbers import option_type
from engine.runs.options import PRESET_SPINE, SPINE_CHOICES
from engine.topdown.spine.options import DEFAULT_FANOUT_CUTOFF


def add_spine_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the spine/entity options to ``phexplore run topdown``."""
    group = parser.add_argument_group("geographic spine (SPN)")
    group.add_argument(
        "--spine",
        choices=SPINE_CHOICES,
        default=None,
        help="spine TopDown measures on: preset (the default) = the spine the allocation's preset "
        "ran on — topdown-2020-production: optimized block groups around the data's places where "
        "the data carry them (generated populations), else conventional; conventional tabulation "
        "spine; AIAN-style inside/outside branch of --special-areas; or optimized block groups "
        "around the --entities. Another spine option without --spine keeps the conventional "
        "spine. An SPN spine adds conventional_mae, entity_mae and osed to metrics.json; "
        "metrics.json spine_used says which spine ran and why",
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
    """Whether any option of :func:`add_spine_arguments` differs from its default (``--spine
    preset`` is the default)."""
    return bool(
        args.spine not in (None, PRESET_SPINE)
        or args.entities
        or args.special_areas is not None
        or args.tract_groups
        or args.bypass is not None
        or args.fanout_cutoff != DEFAULT_FANOUT_CUTOFF
    )
