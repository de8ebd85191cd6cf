"""``phexplore presets``: list the shipped presets, or print one as JSON."""

from __future__ import annotations

import argparse
from typing import Any

from phexplore.cli._output import add_format_option, dumps_json, print_rows


def register(subparsers: Any) -> None:
    """Add ``presets list`` and ``presets show NAME``."""
    p = subparsers.add_parser(
        "presets",
        help="list or show the shipped budget presets",
        description="Shipped budget presets (JSON data in engine/dp/presets/, each with a citation).",
    )
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    pl = sub.add_parser("list", help="list presets with their citation")
    add_format_option(pl)
    pl.set_defaults(func=run_list)
    ps = sub.add_parser("show", help="print one preset (validated) as JSON")
    ps.add_argument("name", help="preset name, as listed by 'phexplore presets list'")
    ps.set_defaults(func=run_show)
    p.set_defaults(func=run_list, format="table")


def run_list(args: argparse.Namespace) -> int:
    """Print the preset list."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.dp.presets import list_presets

    rows = [{"name": p.name, "kind": p.kind, "title": p.title} for p in list_presets()]
    if args.format == "json":
        rows = [{**r, "citation": p.citation} for r, p in zip(rows, list_presets(), strict=True)]
    print_rows(rows, None, args.format)
    return 0


def run_show(args: argparse.Namespace) -> int:
    """Print a preset in PHExplore's JSON scenario form."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.dp.presets import load_phsafe_preset, load_topdown_preset, preset_info

    info = preset_info(args.name)
    if info.kind == "phsafe":
        payload: Any = load_phsafe_preset(args.name).to_dict()
    else:
        payload = {
            "name": info.name,
            "kind": "topdown",
            "citation": info.citation,
            "notes": list(info.notes),
            "runs": {k: v.to_dict() for k, v in load_topdown_preset(args.name).items()},
        }
    print(dumps_json(payload))
    return 0
