"""``phexplore app``: start the Streamlit app (``app.py`` at the repository root) on 127.0.0.1.

The app opens on the shipped samples and presets with no further step. The server listens on the
loopback interface by default; pass ``--host`` only if you understand that the app then serves
anyone who can reach that address.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from engine.core.errors import ValidationError

APP_SCRIPT = Path(__file__).resolve().parents[2] / "app.py"


def register(subparsers: Any) -> None:
    """Add ``app``."""
    p = subparsers.add_parser(
        "app",
        help="start the PHExplore web app (Streamlit) on 127.0.0.1",
        description="Start the PHExplore Streamlit app on the shipped samples and presets.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8501, help="port to listen on (default 8501)")
    p.add_argument(
        "--print-command",
        action="store_true",
        help="print the streamlit command instead of running it",
    )
    p.set_defaults(func=run)


def streamlit_command(host: str, port: int, script: Path = APP_SCRIPT) -> list[str]:
    """The command line that serves ``script`` headless on ``host:port`` (no usage statistics)."""
    if not script.is_file():
        raise ValidationError(
            f"the app script {script} is missing; run `phexplore app` from a source checkout "
            "(pip install -e .)"
        )
    if not (0 < port < 65536):
        raise ValidationError(f"--port must be between 1 and 65535; got {port}")
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(script),
        "--server.address",
        host,
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
    ]


def run(args: argparse.Namespace) -> int:
    """Run (or print) the streamlit command; returns its exit code."""
    cmd = streamlit_command(args.host, args.port)
    if args.print_command:
        print(shlex.join(cmd))
        return 0
    print(f"PHExplore: serving on http://{args.host}:{args.port} (Ctrl+C to stop)", flush=True)
    return subprocess.call(cmd, cwd=str(APP_SCRIPT.parent))
