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

from phexplore.errors import PHExploreError

# Subcommand modules, in the order they appear in ``phexplore --help``. To add a command, write
# ``phexplore/cli/<name>.py`` with ``register(subparsers)`` and add its module name here.
COMMAND_MODULES: tuple[str, ...] = (
    "privacy",
    "moe",
    "presets",
    "samples",
    "generate",
    "run",
    "experiment",
    "plan",
    "report",
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
    """Entry point of the ``phexplore`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except PHExploreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into e.g. `head`
        sys.stderr.close()
        return 0
    except OSError as exc:  # a file or folder the user named cannot be read or written
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
