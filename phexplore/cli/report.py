"""``phexplore report``: write the self-contained HTML session report.

Each ``--results`` must be a run's metrics.json (a verified run folder, a metrics.json inside one, or
a standalone one downloaded from the app) whose recorded budget is its run's own
(:func:`engine.runs.provenance.check_reported_run`) and this scenario's; anything else is refused
before the report is built.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from engine.core.errors import ValidationError
from engine.core.manifest import check_result_file
from engine.core.output_folder import atomic_file, check_target
from engine.core.strict_json import load_json_object


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
    p.add_argument(
        "--compare-with",
        default=None,
        metavar="PRESET_OR_SCENARIO",
        help="a second scenario (JSON) or preset of the same kind: the report says what changed "
        "from it and, for TopDown, shows both budgets' published-count error by geolevel",
    )
    p.add_argument("--out", type=Path, required=True, help="output HTML file (written atomically)")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier PHExplore report at --out (any other file is never replaced)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build and write the report (temp file + rename; results checked against their manifest)."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from phexplore.app.report import build_report_html
    from phexplore.planning.scenarios import Scenario, scenario_from_preset

    results = [check_result_file(path) for path in args.results]
    inputs = {
        "scenario": args.scenario,
        "results": [str(p) for p in results],
        **({"compare_with": str(args.compare_with)} if args.compare_with else {}),
    }
    # Check --out before the (slow) build, then write it atomically under the lock.
    check_target(args.out, overwrite=args.overwrite, inputs=inputs, kind="file")
    scenario = Scenario.load(args.scenario) if args.scenario else scenario_from_preset(args.preset)
    from engine.runs.provenance import check_reported_run

    for path in results:
        metrics = check_reported_run(load_json_object(path), f"--results {path}")
        recorded = metrics.get("budget_fingerprint")
        if metrics.get("engine") != scenario.kind:
            raise ValidationError(
                f"--results {path}: a {metrics.get('engine')} run cannot belong to a "
                f"{scenario.kind} scenario; give the metrics.json of a {scenario.kind} run"
            )
        if recorded and not scenario.is_mine(metrics):
            raise ValidationError(
                f"--results {path}: made with budget {recorded[:12]}, not with this scenario's "
                f"({scenario.fingerprint()[:12]}); report it with the scenario it was run with"
            )
        scenario = scenario.with_result(metrics)
    other = None
    if args.compare_with is not None:
        path = Path(args.compare_with)
        other = Scenario.load(path) if path.is_file() else scenario_from_preset(args.compare_with)
        if other.kind != scenario.kind:
            raise ValidationError(
                f"--compare-with {args.compare_with}: a {other.kind} scenario cannot be compared "
                f"with this {scenario.kind} one; give a {scenario.kind} scenario or preset"
            )
    page = build_report_html(scenario, keep_unrecorded=True, compare_with=other)
    with atomic_file(args.out, overwrite=args.overwrite, inputs=inputs) as tmp:
        tmp.write_text(page, encoding="utf-8")
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB)")
    return 0
