"""``phexplore data check PATH``: what an input is and every problem a run on it would hit.

Run it before a long run: it reads the input with the run's own loaders and checks
(:func:`engine.runs.data_check.check_data`), says what the input is — format, rows read, schema,
blocks, persons, geography, states, structural zeros / unit frame, declared scale — lists every
problem (all files, all stages), sorted by file and row, and how many seconds reading and checking
took (``load_s``). Exit status 0 when a run would read the input, 1 when it has problems.

This module imports nothing heavy at the top (``phexplore data check --help`` stays fast): the
engine is imported inside the handler.
"""

from __future__ import annotations

import argparse
from typing import Any

from phexplore.cli._options import add_data_format_option, add_max_bytes_option


def register(subparsers: Any) -> None:
    """Add ``data check PATH``."""
    parser = subparsers.add_parser(
        "data",
        help="check an input before a run: what it is and every problem a run would hit",
        description="Check your data before a run (docs/data.md).",
    )
    sub = parser.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    check = sub.add_parser(
        "check",
        help="read and check an input; list what it is and every problem",
        description=(
            "Read PATH with the loaders and checks of `run topdown` / `run phsafe` and report what "
            "it is (format, rows, schema, geography, states, structural zeros / unit frame, "
            "scale), every problem a run would hit (every file and stage, sorted by file and "
            "row) and the seconds it took. Exit status 1 when there are problems."
        ),
    )
    check.add_argument(
        "path",
        metavar="PATH",
        help="a file, a folder (CEF extract, generated population, P.L. 94-171 set) or a "
        "sample name (see 'phexplore samples list')",
    )
    check.add_argument(
        "--engine",
        choices=("topdown", "phsafe"),
        default=None,
        help="the engine the run is for (default: from the input; both for a generated population)",
    )
    check.add_argument(
        "--format",
        choices=("table", "json"),
        default="table",
        help="output format: a readable report (default) or JSON for scripts",
    )
    add_data_format_option(check)
    check.add_argument(
        "--mapping", default=None, help="the mapping JSON of a block CSV (TopDown; docs/data.md)"
    )
    check.add_argument(
        "--config",
        default=None,
        help="PHSafe: a config.json or preset whose state_filter the run uses (default: the "
        "folder's config.json, else every state)",
    )
    add_max_bytes_option(check)
    check.set_defaults(func=_check)
    parser.set_defaults(func=lambda args: _usage(parser))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _check(args: argparse.Namespace) -> int:
    # Imported here, not at the top: the engine (NumPy, pandas, pyarrow) is only needed to check.
    from engine.core.strict_json import dumps_json
    from engine.data.sources import DEFAULT_MAX_BYTES
    from engine.runs.data_check import check_data

    result = check_data(
        args.path,
        engine=args.engine,
        data_format=args.data_format,
        mapping=args.mapping,
        config=args.config,
        max_bytes=args.max_bytes or DEFAULT_MAX_BYTES,
    )
    if args.format == "json":
        print(dumps_json(result.to_json()))
        return 0 if result.ok else 1
    summary = result.summary()
    print(f"{result.path}: {summary[0]}")
    for line in summary[1:]:
        print(f"  {line}")
    lines = result.problem_lines()
    if lines:
        print(f"{len(lines)} problem(s) a run would hit:")
        for line in lines:
            print(f"  - {line}")
    else:
        print("no problems: a run would read this input")
    print(f"read and checked in {result.load_s:.2f} s")
    return 0 if result.ok else 1
