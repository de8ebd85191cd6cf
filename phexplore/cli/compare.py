"""``phexplore compare``: the committee's table — predicted error of the published TopDown counts of
two budgets by geolevel (TOTAL, VOTINGAGE, HISPANIC, race), with ρ, ε and the differences.

The same rows as the TopDown planner's table and the report's (:mod:`phexplore.planning.committee`;
docs/science.md §7 for the prediction). ``--scale -30`` answers "what if we cut the budget by 30%?"
without hand arithmetic.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.core.errors import ValidationError
from engine.core.numbers import option_type
from engine.dp.conversions import CONVERSIONS, DEFAULT_DELTA

if TYPE_CHECKING:
    from engine.dp.budget import TopDownAllocation

DEFAULT_BASELINE = "topdown-2020-production"


def register(subparsers: Any) -> None:
    """Add ``compare``."""
    p = subparsers.add_parser(
        "compare",
        help="the committee's table: published-count error of two TopDown budgets by geolevel",
        description=(
            "Predicted error of the published TopDown counts (after least squares, "
            "non-negativity and rounding; docs/prediction.md) of a baseline and a working budget, "
            "by geolevel for TOTAL, VOTINGAGE, HISPANIC and the race query, with total ρ and ε and "
            "the differences (working − baseline). Example: phexplore compare --scale -30"
        ),
    )
    p.add_argument(
        "--baseline",
        default=DEFAULT_BASELINE,
        metavar="PRESET_OR_FILE",
        help=f"the reference budget: a TopDown preset, a scenario JSON or an allocation JSON "
        f"(default {DEFAULT_BASELINE})",
    )
    p.add_argument(
        "--working",
        default=None,
        metavar="PRESET_OR_FILE",
        help="the budget compared with it (default: the baseline, e.g. with --scale)",
    )
    p.add_argument(
        "--scale",
        default="0",
        metavar="PCT",
        help="scale the working persons run's total ρ by PCT percent, e.g. -30 (−99 … 900)",
    )
    p.add_argument(
        "--scale-level",
        action="append",
        default=[],
        metavar="LEVEL=PCT",
        help="scale one geolevel's budget of the working persons run, e.g. County=-30 (repeatable)",
    )
    p.add_argument(
        "--measure",
        choices=("rmse", "moe90"),
        default="rmse",
        help="RMSE (default) or 90%% MOE of the published counts",
    )
    p.add_argument(
        "--delta",
        type=option_type("real", "delta", "--delta"),
        default=DEFAULT_DELTA,
        help="δ at which ε is reported, 0 < δ < 1 (1e-10)",
    )
    p.add_argument(
        "--conversion",
        choices=CONVERSIONS,
        default="cks",
        help="ρ → ε conversion of the ε row (cks, as the production certificates)",
    )
    p.add_argument(
        "--format",
        choices=("table", "json", "csv"),
        default="table",
        help="a readable table (default), JSON for scripts, or CSV (long form, one row a number)",
    )
    p.add_argument("--out", type=Path, default=None, help="write the CSV or JSON to this file")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier PHExplore output at --out (any other file is never replaced)",
    )
    p.set_defaults(func=run)


def load_budget(spec: str, option: str) -> tuple[str, dict[str, TopDownAllocation]]:
    """``(label, runs)`` of a preset name, a scenario JSON or an allocation JSON."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.core.strict_json import load_json_object
    from engine.dp.presets import list_presets, load_topdown_preset, topdown_from_dict
    from phexplore.planning.scenarios import SCHEMA, Scenario

    path = Path(spec)
    if path.is_file():
        data = load_json_object(path, allow_infinity=True)
        if data.get("schema") == SCHEMA:
            scenario = Scenario.load(path)
            if scenario.kind != "topdown" or not scenario.topdown:
                raise ValidationError(
                    f"{option} {spec}: “{scenario.name}” is a {scenario.kind} scenario; the "
                    "committee's table compares TopDown budgets (compare PHSafe scenarios on the "
                    "app's Scenarios page)"
                )
            return scenario.name, dict(scenario.topdown)
        return path.name, topdown_from_dict(data)
    names = {p.name for p in list_presets("topdown")}
    if spec not in names:
        raise ValidationError(
            f"{option} {spec!r} is neither a file nor a TopDown preset; presets: "
            f"{', '.join(sorted(names))}"
        )
    return spec, load_topdown_preset(spec)


def _level_scales(specs: list[str]) -> dict[str, str]:
    out = {}
    for spec in specs:
        level, sep, value = spec.partition("=")
        if not sep or not level.strip():
            raise ValidationError(f"--scale-level {spec!r} must look like County=-30")
        out[level.strip()] = value.strip()
    return out


def run(args: argparse.Namespace) -> int:
    """Build the committee's rows and print or write them."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    import pandas as pd

    from engine.core.output_folder import atomic_file, check_target
    from phexplore.cli._output import dumps_json
    from phexplore.planning.changes import change_sentence
    from phexplore.planning.committee import committee_rows, persons_run, published_rows
    from phexplore.planning.scaling import format_percent, percent_factor, scale_topdown_runs
    from phexplore.planning.scenarios import Scenario

    total = percent_factor(args.scale, where="--scale")
    levels = _level_scales(args.scale_level)
    for level, pct in levels.items():
        percent_factor(pct, where=f"--scale-level {level}")
    a_label, a_runs = load_budget(args.baseline, "--baseline")
    b_label, b_runs = (
        load_budget(args.working, "--working") if args.working else (a_label, dict(a_runs))
    )
    if total != 1 or levels:
        person, _ = persons_run(b_runs)
        b_runs = scale_topdown_runs(b_runs, args.scale, levels, only=person)
        scaled = [f"total ρ {format_percent(100 * (total - 1))}"] * (total != 1)
        scaled += [
            f"{lv} {format_percent(100 * (percent_factor(p) - 1))}" for lv, p in levels.items()
        ]
        b_label = f"{b_label} ({', '.join(scaled)})"
    if a_label == b_label:
        b_label = f"{b_label} (working)"
    if args.out is not None:
        if args.format == "table":
            raise ValidationError("--out writes CSV or JSON: add --format csv or --format json")
        check_target(args.out, overwrite=args.overwrite, kind="file")
    a_rows, a_notes = published_rows(a_runs)
    b_rows, b_notes = published_rows(b_runs)
    rows = committee_rows(
        a_runs, a_rows, b_runs, b_rows, delta=args.delta, conversion=args.conversion,
        measure=args.measure,
    )  # fmt: skip
    changes = change_sentence(
        Scenario(name=a_label, kind="topdown", topdown=a_runs),
        Scenario(name=b_label, kind="topdown", topdown=b_runs),
    )
    summary = {"baseline": a_label, "working": b_label, "measure": args.measure,
               "changes": changes, "notes": {"baseline": a_notes, "working": b_notes}}  # fmt: skip
    if args.format == "json":
        text = dumps_json({"rows": rows, "summary": summary})
    elif args.format == "csv":
        from engine.core.csv_cells import frame_to_csv

        text = frame_to_csv(pd.DataFrame(rows), index=False)
    else:
        print(_table(rows, a_label, b_label, summary))
        return 0
    if args.out is None:
        print(text, end="" if text.endswith("\n") else "\n")
        return 0
    with atomic_file(args.out, overwrite=args.overwrite) as tmp:
        tmp.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


def _cell(row: dict[str, Any]) -> str:
    from phexplore.planning.committee import HELD_EXACT

    if row["a_note"] == HELD_EXACT and row["b_note"] == HELD_EXACT:
        return "exact"
    a, b = _number(row["a"]), _number(row["b"])
    rel = "" if row["relative"] is None else f" ({row['relative'] * 100:+.1f}%)"
    if a == b == "< 0.01":
        rel = " (≈ 0)"  # a percentage of two rounding-level numbers is no change to weigh
    flag = " †" if row["a_note"] or row["b_note"] else ""
    return f"{a} → {b}{rel}{flag}"


def _number(value: float | None) -> str:
    if value is None:
        return "—"
    return "< 0.01" if 0 < abs(value) < 0.005 else f"{value:.3g}"


def _table(rows: list[dict[str, Any]], a_label: str, b_label: str, summary: dict) -> str:
    """The wide table a committee reads: privacy lines, then geolevels × queries."""
    import pandas as pd

    from phexplore.planning.committee import table_queries

    lines = [f"{a_label} → {b_label}", summary["changes"], ""]
    for r in rows:
        if r["section"] == "privacy":
            rel = "" if r["relative"] is None else f" ({r['relative'] * 100:+.1f}%)"
            lines.append(f"{r['quantity']}: {r['a']:.6g} → {r['b']:.6g}{rel}")
    errors = [r for r in rows if r["section"] != "privacy"]
    if errors:
        lines += ["", errors[0]["quantity"] + ":"]
        frame = pd.DataFrame(
            [{"geolevel": r["geolevel"], "query": r["query"], "cell": _cell(r)} for r in errors]
        )
        wide = frame.pivot(index="geolevel", columns="query", values="cell")
        wide = wide.reindex(index=list(dict.fromkeys(frame["geolevel"])),
                            columns=table_queries(errors))  # fmt: skip
        with pd.option_context("display.width", 200, "display.max_columns", 20):
            lines.append(wide.fillna("not measured").to_string())
        flagged = sorted({n for r in errors for n in (r["a_note"], r["b_note"]) if n})
        lines += [f"† {n}" for n in flagged]
    for side, notes in summary["notes"].items():
        lines += [f"Note ({side}): {n}" for n in notes]
    return "\n".join(lines)
