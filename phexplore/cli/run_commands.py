"""``phexplore run ENGINE``: run a full engine on a sample or an uploaded file.

The engine-specific options live in :mod:`phexplore.cli.run_topdown` and
:mod:`phexplore.cli.run_phsafe`; each exposes ``register(subparsers)``.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

ENGINE_MODULES: tuple[str, ...] = ("run_topdown", "run_phsafe", "run_replay")


def register(subparsers: Any) -> None:
    """Add ``run`` with one sub-subcommand per engine."""
    parser = subparsers.add_parser(
        "run",
        help="run a full engine (topdown, phsafe) and write its outputs and metrics.json",
        description="Run a full disclosure-avoidance engine on a shipped sample or your own file.",
    )
    engines = parser.add_subparsers(dest="engine", metavar="ENGINE")
    for name in ENGINE_MODULES:
        importlib.import_module(f"phexplore.cli.{name}").register(engines)
    parser.set_defaults(func=lambda args: _no_engine(parser, args))


def _no_engine(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    parser.print_help()
    return 2
