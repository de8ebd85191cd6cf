"""``phexplore scenarios list|show|export``: the scenarios saved in the app's workspace.

Reads the same store the app writes (:mod:`phexplore.app.workspace`): ``--workspace DIR``, else
``$PHEXPLORE_WORKSPACE``, else the user's data directory (``phexplore/workspace``). Never creates
or changes a workspace. ``export`` writes a scenario's ``phexplore-scenario/1`` JSON — the file the
app's "Download JSON" gives — for ``phexplore report --scenario`` or another workspace.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from phexplore.cli._output import add_format_option, dumps_json, print_rows

WORKSPACE_HELP = (
    "the workspace folder (default: $PHEXPLORE_WORKSPACE, else phexplore/workspace in your "
    "user data directory — where `phexplore app` keeps its work)"
)


def register(subparsers: Any) -> None:
    """Add ``scenarios list``, ``scenarios show NAME`` and ``scenarios export NAME --out FILE``."""
    p = subparsers.add_parser(
        "scenarios",
        help="list, show or export the scenarios saved in the app's workspace",
        description=(
            "The scenarios saved in the app's workspace (the same store `phexplore app` uses): "
            "list them, show one (budget, fingerprint, what differs from its preset, ρ and ε, "
            "attached runs) or export one as a scenario JSON file."
        ),
    )
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    pl = sub.add_parser("list", help="list the saved scenarios")
    pl.add_argument("--workspace", default=None, help=WORKSPACE_HELP)
    add_format_option(pl)
    pl.set_defaults(func=run_list)
    ps = sub.add_parser("show", help="show one saved scenario")
    ps.add_argument("name", help="the scenario's name (or id), as listed")
    ps.add_argument("--workspace", default=None, help=WORKSPACE_HELP)
    add_format_option(ps)
    ps.set_defaults(func=run_show)
    pe = sub.add_parser("export", help="write one saved scenario as a scenario JSON file")
    pe.add_argument("name", help="the scenario's name (or id), as listed")
    pe.add_argument(
        "--out", type=Path, required=True, help="the JSON file to write (must not exist)"
    )
    pe.add_argument("--workspace", default=None, help=WORKSPACE_HELP)
    pe.set_defaults(func=run_export)
    p.set_defaults(func=run_list, format="table", workspace=None)


def _workspace(args: argparse.Namespace) -> Any:
    """The existing workspace the arguments name (never created here)."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from phexplore.app.workspace.index import prepare_folder
    from phexplore.app.workspace.location import workspace_location
    from phexplore.app.workspace.store import open_workspace

    root = workspace_location(args.workspace)
    prepare_folder(root, create=False)  # a missing or unusable workspace: one clear line
    return open_workspace(root)


def run_list(args: argparse.Namespace) -> int:
    """Print the saved scenarios: name, kind, budget origin, fingerprint, ρ, runs, last saved."""
    workspace = _workspace(args)
    scenarios, problems = workspace.scenarios()
    rows = []
    for entry in workspace.scenario_entries():
        scenario = scenarios.get(entry.name)
        if scenario is None:
            continue
        head = scenario.headline()
        rows.append(
            {
                "name": entry.name,
                "kind": entry.kind,
                "budget": entry.origin,
                "fingerprint": entry.fingerprint[:12],
                "rho": round(float(head["rho"]), 6),
                "runs": len(scenario.results),
                "saved": entry.updated,
            }
        )
    if args.format == "json":
        print(dumps_json({"workspace": str(workspace.root), "rows": rows, "problems": problems}))
        return 0
    print(f"workspace: {workspace.root}")
    if rows:
        print_rows(rows, None, "table")
    else:
        print("no scenarios saved yet (save one on the app's Scenarios page)")
    for line in problems:
        print(f"warning: {line}")
    return 0


def run_show(args: argparse.Namespace) -> int:
    """Print one scenario: its budget's origin, fingerprint and changes, ρ and ε, attached runs."""
    workspace = _workspace(args)
    scenario = workspace.load_scenario(args.name)
    origin = scenario.describe_origin()
    head = scenario.headline()
    runs = [
        {
            "run": m.get("run_id"),
            "engine": m.get("engine"),
            "data": m.get("data"),
            "seed": m.get("seed"),
            "budget_fingerprint": str(m.get("budget_fingerprint") or "not recorded")[:12],
        }
        for m in scenario.results
    ]
    payload = {
        "name": scenario.name,
        "kind": scenario.kind,
        "budget_origin": origin.label,
        "budget_fingerprint": scenario.fingerprint(),
        "budget_changes": [c.as_dict() for c in origin.changes],
        "rho": head["rho"],
        "rho_label": head["rho_label"],
        "epsilon": head["epsilon"],
        "conversion": scenario.conversion,
        "delta": scenario.delta,
        "spine": scenario.spine,
        "notes": scenario.notes,
        "runs": runs,
    }
    if args.format == "json":
        print(dumps_json(payload))
        return 0
    print(f"{scenario.name} ({'PHSafe' if scenario.kind == 'phsafe' else 'TopDown'} scenario)")
    print(f"  budget: {origin.label} (fingerprint {scenario.fingerprint()[:12]})")
    for change in origin.changes:
        print(f"    {change.text()}")
    print(
        f"  {head['rho_label']} = {head['rho']:.6g}; ε = {head['epsilon']:.3f} at δ = "
        f"{scenario.delta:g} ({scenario.conversion}); spine {scenario.spine}"
    )
    if scenario.notes:
        print(f"  notes: {scenario.notes}")
    print(f"  attached runs: {len(runs)}")
    for run in runs:
        print(
            f"    #{run['run']} {run['engine']} on {run['data']}, seed {run['seed']}, budget "
            f"{run['budget_fingerprint']}"
        )
    return 0


def run_export(args: argparse.Namespace) -> int:
    """Write one scenario's JSON to ``--out`` (atomically; an existing file is never replaced)."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.core.output_folder import atomic_file

    workspace = _workspace(args)
    scenario = workspace.load_scenario(args.name)
    with atomic_file(args.out, overwrite=False, inputs={}) as tmp:
        tmp.write_text(scenario.to_json(), encoding="utf-8")
    print(f"wrote {args.out} (scenario “{scenario.name}”, budget {scenario.fingerprint()[:12]})")
    return 0
