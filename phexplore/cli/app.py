"""``phexplore app``: serve the Streamlit app on 127.0.0.1, answering loopback Host names only.

The server runs ``serve.py`` (the app script ``app.py`` wrapped with a Host check,
:mod:`phexplore.app.hosts`): every HTTP request and WebSocket whose ``Host`` is not ``127.0.0.1``,
``localhost`` or ``[::1]`` — or a name given with ``--allow-host`` (or in
``$PHEXPLORE_ALLOWED_HOSTS``) — is refused, so a web page using DNS rebinding cannot drive a running
app. ``--host`` chooses the address to listen on (default 127.0.0.1); pass another only if you
understand that the app then serves anyone who can reach that address, and name it with
``--allow-host`` when users reach it by another name.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.core.errors import ValidationError
from phexplore.app.hosts import HOSTS_ENV, allowed_hosts, streamlit_host_names
from phexplore.app.workspace.index import prepare_folder
from phexplore.app.workspace.location import WORKSPACE_ENV, workspace_location

ROOT = Path(__file__).resolve().parents[2]
APP_SCRIPT = ROOT / "app.py"
SERVE_SCRIPT = ROOT / "serve.py"
"""The launcher ``streamlit run`` serves: ``app.py`` behind the Host check."""


def register(subparsers: Any) -> None:
    """Add ``app``."""
    p = subparsers.add_parser(
        "app",
        help="start the PHExplore web app (Streamlit) on 127.0.0.1",
        description=(
            "Start the PHExplore Streamlit app on the shipped samples and presets. It answers only "
            "requests whose Host is 127.0.0.1, localhost, [::1] or a name given with --allow-host "
            "(DNS-rebinding protection)."
        ),
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8501, help="port to listen on (default 8501)")
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests addressed to NAME (a host name or address as the browser's "
        "address bar shows it, without port; repeatable; also $PHEXPLORE_ALLOWED_HOSTS, "
        "comma-separated). Loopback names are always answered",
    )
    p.add_argument(
        "--workspace",
        default=None,
        metavar="DIR",
        help="the workspace folder where the app keeps scenarios, runs, uploads and generated "
        "populations (made when new or empty; default: $PHEXPLORE_WORKSPACE, else "
        "phexplore/workspace in your user data directory)",
    )
    p.add_argument(
        "--print-command",
        action="store_true",
        help="print the streamlit command instead of running it",
    )
    p.set_defaults(func=run)


def configured_hosts(host: str, extra: Sequence[str], environ: Any = None) -> list[str]:
    """Host names to answer: loopback, the ``--host`` address (unless a wildcard), ``extra``
    (``--allow-host``) and ``$PHEXPLORE_ALLOWED_HOSTS``; each checked."""
    env = os.environ if environ is None else environ
    from_env = [part for part in env.get(HOSTS_ENV, "").split(",") if part.strip()]
    return allowed_hosts([*extra, *from_env], bind_address=host)


def streamlit_command(
    host: str, port: int, script: Path = SERVE_SCRIPT, hosts: Sequence[str] | None = None
) -> list[str]:
    """The command line that serves ``script`` headless on ``host:port`` (no usage statistics),
    with Streamlit's own WebSocket Host check set to ``hosts`` (default: the loopback names)."""
    if not script.is_file():
        raise ValidationError(
            f"the app script {script} is missing; run `phexplore app` from a source checkout "
            "(pip install -e .)"
        )
    if not (0 < port < 65536):
        raise ValidationError(f"--port must be between 1 and 65535; got {port}")
    names = streamlit_host_names(hosts if hosts is not None else allowed_hosts())
    command = [sys.executable, "-m", "streamlit", "run", str(script)]
    command += ["--server.address", host, "--server.port", str(port)]
    command += ["--server.headless", "true", "--browser.gatherUsageStats", "false"]
    for name in names:
        command += ["--server.allowedHosts", name]
    return command


def run(args: argparse.Namespace) -> int:
    """Run (or print) the streamlit command; returns its exit code."""
    hosts = configured_hosts(args.host, args.allow_host)
    cmd = streamlit_command(args.host, args.port, hosts=hosts)
    workspace = workspace_location(args.workspace)
    env = {**os.environ, HOSTS_ENV: ",".join(hosts), WORKSPACE_ENV: str(workspace)}
    if args.print_command:
        print(
            f"{HOSTS_ENV}={shlex.quote(env[HOSTS_ENV])} "
            f"{WORKSPACE_ENV}={shlex.quote(str(workspace))} {shlex.join(cmd)}"
        )
        return 0
    prepare_folder(workspace)  # made when new or empty; an unusable folder: one clear line
    print(
        f"PHExplore: serving on http://{args.host}:{args.port} for {', '.join(hosts)} "
        f"(Ctrl+C to stop); workspace {workspace}",
        flush=True,
    )
    return subprocess.call(cmd, cwd=str(ROOT), env=env)
