"""Shared output helpers for CLI subcommands: JSON for scripts, a readable table by default; the
``--out``/``--overwrite`` options of commands writing an output folder, and their progress line."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.core.output_folder import OutputFolder
from engine.core.strict_json import dumps_json as dumps_json  # re-export for the subcommands


def add_format_option(parser: Any) -> None:
    """Add the shared ``--format table|json`` option."""
    parser.add_argument(
        "--format",
        choices=("table", "json"),
        default="table",
        help="output format: a readable table (default) or JSON for scripts",
    )


def print_rows(
    rows: Sequence[Mapping[str, Any]], summary: Mapping[str, Any] | None, fmt: str
) -> None:
    """Print ``{"rows": rows, "summary": summary}`` as JSON or as a table plus a summary block."""
    if fmt == "json":
        print(dumps_json({"rows": list(rows), "summary": summary or {}}))
        return
    if rows:
        import pandas as pd  # heavy: only when a table is printed, so `--help` stays light

        frame = pd.DataFrame(list(rows)).convert_dtypes()
        with pd.option_context("display.max_rows", None, "display.width", 200):
            print(frame.to_string(index=False))
    if summary:
        print()
        _print_mapping(summary)


def _print_mapping(mapping: Mapping[str, Any], indent: int = 0) -> None:
    pad = "  " * indent
    for key, value in mapping.items():
        if isinstance(value, Mapping):
            print(f"{pad}{key}:")
            _print_mapping(value, indent + 1)
        else:
            print(f"{pad}{key}: {value}")


def add_overwrite_option(parser: Any, what: str = "folder") -> None:
    """Add ``--overwrite``: replace an earlier PHExplore output at ``--out`` (never anything else)."""
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help=f"replace an earlier PHExplore output {what} at --out (the whole {what} is replaced; "
        "a folder or file not written by PHExplore is never replaced)",
    )


OUT_FOLDER_HELP = "output folder (written atomically, with manifest.json)"


def add_output_folder_options(parser: Any, help: str = OUT_FOLDER_HELP, **out_kwargs: Any) -> None:
    """Add the required ``--out`` output folder and ``--overwrite`` (see :func:`open_output`)."""
    parser.add_argument("--out", required=True, help=help, **out_kwargs)
    add_overwrite_option(parser)


def progress_line(enabled: bool, width: int = 40) -> Callable[[str, float], None]:
    """A progress callback rewriting one stderr line ``[ 42.0%] message`` (silent when disabled)."""

    def progress(message: str, fraction: float) -> None:
        if enabled:
            print(f"\r[{fraction:6.1%}] {message:<{width}}", end="", file=sys.stderr, flush=True)

    return progress


def end_progress_line(enabled: bool) -> None:
    """End the line :func:`progress_line` rewrote (when it was enabled)."""
    if enabled:
        print(file=sys.stderr)


def input_location(value: str | os.PathLike[str] | None) -> str | None:
    """A data argument as a path for the manifest: a path as given, a sample name as its folder."""
    if value is None:
        return None
    if Path(value).exists():
        return str(value)
    try:
        from engine.data.samples import get_sample  # heavy (pandas): at run time, not for `--help`

        return str(get_sample(str(value)).path)
    except Exception:  # not a sample name either: recorded by name
        return str(value)


def open_output(args: Any, command: str, inputs: Mapping[str, Any], seed: int | None = None) -> Any:
    """The :class:`~engine.core.output_folder.OutputFolder` of a command's ``--out``/``--overwrite``."""
    return OutputFolder(
        args.out,
        command=command,
        inputs={k: v for k, v in inputs.items() if v is not None},
        seed=seed,
        overwrite=bool(getattr(args, "overwrite", False)),
    )
