"""``phexplore report``: write the self-contained HTML session report (issue 10)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from phexplore.errors import ValidationError
from phexplore.parsing import load_json_object
from phexplore.report import build_report_html
from phexplore.scenarios import Scenario, scenario_from_preset


def register(subparsers: Any) -> None:
    """Add ``report``."""
    p = subparsers.add_parser(
        "report",
        help="write a self-contained HTML report of a scenario (parameters, MOE, ρ/ε, runs)",
        description=(
            "Write one self-contained HTML file (opens offline) with the scenario's parameters, its "
            "MOE table, total ρ and ε with the conversion named, the (ε, δ) curve, the results of "
            "any runs given with --results, and a provenance block."
        ),
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--scenario", type=Path, help="scenario JSON saved from the app")
    src.add_argument("--preset", help="a shipped preset, e.g. phsafe-2020")
    p.add_argument(
        "--results",
        type=Path,
        action="append",
        default=[],
        help="metrics.json of a run to include (repeatable)",
    )
    p.add_argument("--out", type=Path, required=True, help="output HTML file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build and write the report."""
    scenario = Scenario.load(args.scenario) if args.scenario else scenario_from_preset(args.preset)
    for path in args.results:
        scenario = scenario.with_result(load_json_object(path))
    if args.out.is_dir():
        raise ValidationError(f"--out {args.out}: is a folder; give the HTML file to write")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(build_report_html(scenario), encoding="utf-8")
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB)")
    return 0
