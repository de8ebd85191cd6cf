"""``phexplore report``: write the self-contained HTML session report (issue 10)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from phexplore.errors import ValidationError
from phexplore.report import build_report_html
from phexplore.scenarios import Scenario, scenario_from_preset


def register(subparsers: Any) -> None:
    """Add ``report``."""
    p = subparsers.add_parser(
        "report",
        help="write a self-contained HTML report of a scenario (parameters, MOE, ρ/ε, runs)",
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
        try:
            scenario = scenario.with_result(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise ValidationError(f"{path}: metrics file not found") from None
        except json.JSONDecodeError as exc:
            raise ValidationError(f"{path}: not valid JSON (line {exc.lineno})") from None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(build_report_html(scenario), encoding="utf-8")
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB)")
    return 0
