"""The ``phexplore`` command line: one argparse parser, one module per subcommand.

Each subcommand module in :mod:`phexplore.cli` exposes ``register(subparsers)``, which adds its
parser and sets ``func`` (a callable taking the parsed namespace and returning an exit code). This
package is the one place in :mod:`phexplore` that wires the engines; the analytic modules never
import :mod:`engine`. The app and the CLI call the same functions.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from engine.core.errors import Interrupted, PHExploreError
from phexplore.failures import describe_failure

# Subcommand modules, in the order they appear in ``phexplore --help``. To add a command, write
# ``phexplore/cli/<name>.py`` with ``register(subparsers)`` and add its module name here.
COMMAND_MODULES: tuple[str, ...] = (
    "privacy",
    "moe",
    "presets",
    "samples",
    "data",
    "generate",
    "run_commands",
    "experiment",
    "plan",
    "compare",
    "report",
    "scenarios",
    "app",
)


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with every available subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="phexplore",
        description="PHExplore: plan and test differential-privacy budgets for census data.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"phexplore.cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``phexplore`` console script.

    Whatever escapes a command becomes one line on stderr naming what failed and where, with a
    non-zero exit status; unexpected failures have their traceback written to a log file
    (:mod:`phexplore.failures`), never to the screen.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except PHExploreError as exc:  # an option's value refused by its type (engine.core.strict_json)
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    context = "phexplore " + " ".join(
        str(v)
        for v in (args.command, getattr(args, "engine", None), getattr(args, "kind", None))
        if v
    )
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM while an output was being written
        what = "terminated" if isinstance(exc, Interrupted) else "interrupted"
        print(f"{what}: nothing was written; any earlier output is unchanged", file=sys.stderr)
        return 143 if isinstance(exc, Interrupted) else 130
    except PHExploreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # output piped into e.g. `head`
        sys.stderr.close()
        return 0
    except Exception as exc:  # anything else: one line, the traceback in the log
        print(f"error: {describe_failure(exc, context)}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
