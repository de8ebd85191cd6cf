"""``phexplore plan phsafe|topdown``: the least ρ that meets accuracy targets (TDA §6.3, PHS §7)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from engine.core.errors import ValidationError
from engine.core.numbers import option_type
from engine.core.strict_json import load_json_object
from phexplore.cli._output import add_format_option, print_rows
from phexplore.planning.objectives import OBJECTIVES


def register(subparsers: Any) -> None:
    """Add ``plan phsafe`` and ``plan topdown``."""
    p = subparsers.add_parser(
        "plan",
        help="solve for the smallest ρ meeting MOE/σ targets (PHSafe) or per-query σ (TopDown)",
        description="Target-driven planning: minimal privacy loss for given accuracy targets.",
    )
    sub = p.add_subparsers(dest="engine", metavar="ENGINE")
    ps = sub.add_parser(
        "phsafe",
        help="ρ per (table, level) from MOE targets and τ; optionally under a total cap",
        description=(
            "--targets is a preset name (its MOE targets and τ, e.g. phsafe-2020) or a JSON file "
            '{"tau": {"PH1_num": 10, ...}, "moe_targets": {"PH1_num": {"usa_*": 500, ...}}, '
            '"confidence": 0.9}.'
        ),
    )
    ps.add_argument("--targets", required=True, help="preset name or targets JSON file")
    ps.add_argument(
        "--rho-cap",
        type=option_type("real", "rho", "--rho-cap"),
        help="total unbounded ρ cap, 0 < ρ ≤ 10^6; best allocation under it",
    )
    ps.add_argument(
        "--objective", choices=OBJECTIVES, default="max-ratio", help="objective under a cap"
    )
    add_format_option(ps)
    ps.set_defaults(func=run_phsafe)
    pt = sub.add_parser(
        "topdown",
        help="minimal total ρ and shares from per-query σ (or MOE) targets",
        description=(
            "--targets is a preset name (the σ its allocation implies) or a JSON file "
            '{"runs": {"persons": {"geolevels": [...], "sigma": {"County": {"TOTAL": 2.17}}}}} '
            '(use "moe90" instead of "sigma" for 90% MOE targets).'
        ),
    )
    pt.add_argument("--targets", help="preset name or targets JSON file (σ / MOE targets)")
    pt.add_argument(
        "--published",
        action="append",
        default=[],
        metavar="LEVEL:QUERY=VALUE",
        help="target on the accuracy of the published (post-processed) count, e.g. "
        "Block:TOTAL=10 (repeatable): the least total ρ keeping --shares' shares (docs/prediction.md)",
    )
    pt.add_argument(
        "--published-measure",
        choices=("rmse", "moe90"),
        default="rmse",
        help="what --published VALUEs are: RMSE (default) or 90%% MOE, in persons",
    )
    pt.add_argument(
        "--shares",
        default="topdown-2020-production",
        help="with --published: preset or allocation JSON whose shares are kept "
        "(default topdown-2020-production)",
    )
    pt.add_argument(
        "--data",
        default=None,
        metavar="SAMPLE_OR_FILE",
        help="with --published: predict on this data's spine and counts (default: the shipped "
        "Rhode Island 2010 profile)",
    )
    pt.add_argument(
        "--denominator",
        type=option_type("whole", "denominator", "--denominator"),
        help="round shares to this denominator, 1 – 10^9 (e.g. 4097)",
    )
    add_format_option(pt)
    pt.set_defaults(func=run_topdown)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _read_targets(spec: str) -> dict[str, Any] | None:
    path = Path(spec)
    if path.suffix != ".json":
        return None
    return load_json_object(path, label=spec, allow_infinity=True)


def run_phsafe(args: argparse.Namespace) -> int:
    """Print the PHSafe plan."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.dp.presets import load_phsafe_preset, phsafe_from_dict
    from phexplore.planning.target_files import phsafe_targets_budget
    from phexplore.planning.targets import plan_phsafe

    data = _read_targets(args.targets)
    if data is None:
        budget = load_phsafe_preset(args.targets)
    else:
        budget = phsafe_from_dict(phsafe_targets_budget(data, args.targets), name=args.targets)
    plan = plan_phsafe(budget, rho_cap=args.rho_cap, objective=args.objective)
    print_rows(plan["rows"], plan["summary"], args.format)
    return 0


def run_topdown_published(args: argparse.Namespace) -> int:
    """Least ρ meeting published-count targets with fixed shares (docs/science.md §7)."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.dp.presets import load_topdown_preset, topdown_from_dict
    from engine.prediction import shipped_profile_for
    from phexplore.planning.targets import parse_published_targets, plan_topdown_published

    data = _read_targets(args.shares)
    runs = load_topdown_preset(args.shares) if data is None else topdown_from_dict(data)
    persons = [a for a in runs.values() if a.universe == "persons"]
    if not persons:
        raise ValidationError(f"--shares {args.shares}: no persons allocation")
    alloc = persons[0]
    if args.data is None:
        profile = shipped_profile_for(alloc)
    else:
        from engine.data.inputs import load_topdown_input
        from engine.topdown.profile import spine_profile

        profile = spine_profile(load_topdown_input(args.data), alloc, name=str(args.data))
    plan = plan_topdown_published(
        alloc,
        parse_published_targets(args.published),
        profile,
        measure=args.published_measure,
        max_units=None if profile.n_units(len(profile.levels) - 1) <= 2000 else 2000,
    )
    print_rows(plan["rows"], plan["summary"], args.format)
    return 0


def run_topdown(args: argparse.Namespace) -> int:
    """Print the TopDown plan."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.dp.moe import z_for_confidence
    from engine.dp.presets import load_topdown_preset, preset_info
    from phexplore.planning.target_files import topdown_targets
    from phexplore.planning.targets import plan_topdown, sigma_targets_of

    if args.published:
        if args.targets:
            raise ValidationError("give either --targets (σ/MOE targets) or --published, not both")
        return run_topdown_published(args)
    if not args.targets:
        raise ValidationError(
            "plan topdown needs --targets (σ / MOE targets) or --published LEVEL:QUERY=VALUE"
        )
    data = _read_targets(args.targets)
    geolevels = None
    if data is None:
        if preset_info(args.targets).kind != "topdown":
            raise ValidationError(f"{args.targets} is not a TopDown preset")
        runs = load_topdown_preset(args.targets)
        targets = sigma_targets_of(runs)
        geolevels = {k: a.geolevels for k, a in runs.items()}
    else:
        targets, geolevels = topdown_targets(data, args.targets, z_for_confidence(0.90))
    plan = plan_topdown(targets, geolevels=geolevels, denominator=args.denominator)
    rows = plan["rows"]
    for row in rows:
        alloc = plan["allocations"][row["run"]]
        row["share_level_exact"] = str(alloc.level_shares[row["geolevel"]])
        row["share_query_exact"] = str(alloc.query_share(row["geolevel"], row["query"]))
    print_rows(rows, plan["summary"], args.format)
    return 0
