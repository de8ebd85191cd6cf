"""Turn anything that escapes a command or an app callback into one readable line and a log file.

The CLI (:func:`phexplore.cli.main`) and the app (``app.py`` and the run jobs of
``phexplore.api``) call :func:`describe_failure`: a user error
(:class:`~engine.core.errors.PHExploreError`) is shown as is; anything else is explained in words —
numerical failures as the budget or data problem they usually are, out-of-memory as a size problem —
and its traceback goes to a log file (``$PHEXPLORE_LOG``, else
``$XDG_CACHE_HOME/phexplore/errors.log``, else ``~/.cache/phexplore/errors.log``) whose path the line
names. The screen never shows a traceback.
"""

from __future__ import annotations

import datetime as _dt
import os
import tempfile
import traceback
from pathlib import Path

from engine.core.errors import PHExploreError

LOG_ENV = "PHEXPLORE_LOG"


def log_path() -> Path:
    """Where tracebacks are appended (see the module docstring)."""
    explicit = os.environ.get(LOG_ENV)
    if explicit:
        return Path(explicit).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "phexplore" / "errors.log"


def write_log(exc: BaseException, context: str) -> Path | None:
    """Append ``exc``'s traceback to the log (falling back to the temp folder); its path or None."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    stamp = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    entry = f"=== {stamp} pid {os.getpid()} {context}\n{text}\n"
    for path in (log_path(), Path(tempfile.gettempdir()) / "phexplore-errors.log"):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(entry)
            return path
        except OSError:
            continue
    return None


def _where(exc: BaseException) -> str:
    """``file.py:line in function`` of the innermost frame of the project (or the last frame)."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    ours = [
        f
        for f in frames
        if ("/phexplore/" in f.filename or "/engine/" in f.filename) and "/tests/" not in f.filename
    ]
    frame = (ours or frames)[-1]
    parts = Path(frame.filename).parts
    for anchor in ("phexplore", "engine", "pages"):
        if anchor in parts:
            short = "/".join(parts[len(parts) - 1 - parts[::-1].index(anchor) :])
            break
    else:
        short = Path(frame.filename).name
    return f"{short}:{frame.lineno} in {frame.name}"


def explain(exc: BaseException) -> str:
    """What went wrong, in words a user can act on (without the traceback)."""
    name = type(exc).__name__
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    if isinstance(exc, MemoryError):
        return (
            "ran out of memory; use a smaller extract (--filter/--within), fewer workers or "
            "trials, or a machine with more memory"
        )
    if isinstance(exc, RecursionError):
        return "an input is nested too deeply to process"
    if name == "LinAlgError" or name == "SolverError" or isinstance(exc, FloatingPointError):
        return (
            f"a numerical failure ({name}: {text}); this usually means a budget so small (ρ or a "
            "share near 0) that the noise swamps the counts, or so large that the solver loses "
            "precision — check the budget before anything else"
        )
    if isinstance(exc, ZeroDivisionError):
        return (
            "a division by zero: some budget share, count or level is zero where a positive value "
            "is needed"
        )
    if isinstance(exc, OverflowError):
        return f"a number too large to compute with ({text}); check budgets and counts for absurd values"
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        return f"{where}{exc.strerror or text or name}"
    return (
        f"an unexpected internal error ({name}: {text})" if text else f"an internal error ({name})"
    )


def describe_failure(exc: BaseException, context: str) -> str:
    """One line for the screen; unexpected failures also get their traceback logged (path named)."""
    if isinstance(exc, PHExploreError):
        return str(exc)
    message = f"{context} failed: {explain(exc)}"
    where = _where(exc)
    if where and not isinstance(exc, OSError | MemoryError):
        message += f" [at {where}]"
    log = write_log(exc, context)
    if log is not None and not isinstance(exc, OSError):
        message += f"; the details are in {log}"
    return message
