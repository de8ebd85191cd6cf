"""``phexplore --help`` and every ``phexplore <command> … --help`` load none of the heavy libraries.

Help is what a user types first and most often; it must answer at once. Each command module imports
NumPy, pandas, SciPy, pyarrow and Plotly (through the library) only inside its handler. Checked in a
fresh interpreter per command path, on the real entry point.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from phexplore.cli import build_parser

HEAVY = ("numpy", "pandas", "scipy", "pyarrow", "plotly", "streamlit", "cvxpy")

PROBE = """
import sys
from phexplore.cli import main
try:
    main({argv!r})
except SystemExit:
    pass
print("LOADED", " ".join(m for m in {heavy!r} if m in sys.modules))
"""


def _command_paths(
    parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    paths = [prefix]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                paths += _command_paths(sub, (*prefix, name))
    return paths


PATHS = _command_paths(build_parser())


def test_every_command_is_probed() -> None:
    names = {" ".join(p) for p in PATHS}
    assert {"", "run topdown", "run phsafe", "run replay", "moe phsafe", "presets list"} <= names


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "phexplore")
def test_help_imports_no_heavy_library(path: tuple[str, ...]) -> None:
    code = PROBE.format(argv=[*path, "--help"], heavy=HEAVY)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "usage: phexplore" in done.stdout
    loaded = done.stdout.rsplit("LOADED", 1)[1].split()
    assert loaded == [], f"phexplore {' '.join(path)} --help imported {loaded}"
