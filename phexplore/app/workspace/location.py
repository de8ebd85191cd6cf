"""Where the workspace lives: ``--workspace DIR``, else ``$PHEXPLORE_WORKSPACE``, else the user's
data directory (docs/app.md, "Workspace").

The default is ``phexplore/workspace`` under the platform's user data directory
(:func:`platformdirs.user_data_path`: ``~/.local/share`` on Linux, or ``$XDG_DATA_HOME``;
``~/Library/Application Support`` on macOS; ``%LOCALAPPDATA%`` on Windows). Light: the CLI's
``--help`` imports this module.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import platformdirs

WORKSPACE_ENV = "PHEXPLORE_WORKSPACE"
"""Environment variable naming the workspace folder (``phexplore app --workspace`` sets it for the
server)."""


def default_location() -> Path:
    """The workspace folder used when none is named: ``<user data dir>/phexplore/workspace``."""
    return platformdirs.user_data_path("phexplore", appauthor=False) / "workspace"


def workspace_location(
    explicit: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Path:
    """The workspace folder: ``explicit`` (``--workspace``), else ``$PHEXPLORE_WORKSPACE``, else
    :func:`default_location`; absolute, with ``~`` expanded."""
    env = os.environ if environ is None else environ
    chosen = explicit if explicit not in (None, "") else env.get(WORKSPACE_ENV) or None
    path = Path(chosen).expanduser() if chosen is not None else default_location()
    return Path(os.path.abspath(path))
