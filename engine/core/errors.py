"""Typed errors shared by the library, the CLI and the app.

Every error a user can cause derives from :class:`PHExploreError`; its message says what is wrong,
where, and how to fix it. The CLI prints it without a traceback; the app renders it in place.
Data loaders raise :class:`DataValidationError`, carrying a list of located :class:`Problem` s (file,
row, column, what to do): the UI renders them as a list, the CLI one per line, and loaders collect as
many as they can (up to a cap) before raising, so a user fixes a file in one pass. Output folders
raise :class:`OutputError`; an interrupt (Ctrl-C, SIGTERM) while writing is :class:`Interrupted`.

Two ways a run stops early, kept apart on purpose: :class:`RunCancelled` — a face asked the run to
stop (the app's Cancel button, an experiment's cancel) and the engines stop between units of work,
keeping nothing; :class:`Interrupted` — the process itself is being stopped (SIGTERM; Ctrl-C is
Python's KeyboardInterrupt): it derives from KeyboardInterrupt so no ``except Exception`` swallows it,
cleanup runs, and the CLI exits 130/143. A cancel is an ordinary outcome of a run; an interrupt ends
the process.
"""

from __future__ import annotations

from dataclasses import dataclass


class PHExploreError(Exception):
    """Base class of every user-facing error."""


class ValidationError(PHExploreError, ValueError):
    """A parameter, allocation or configuration is invalid (the message names the offending item)."""


@dataclass(frozen=True)
class Problem:
    """One problem in an input file: where it is and what to do about it.

    ``row`` is the 1-based data row (the header is row 0) or ``None`` for whole-file problems;
    ``column`` is the column name or ``None``.
    """

    file: str
    message: str
    row: int | None = None
    column: str | None = None

    def __str__(self) -> str:
        where = self.file
        if self.row is not None:
            where += f", row {self.row}"
        if self.column is not None:
            where += f", column {self.column!r}"
        return f"{where}: {self.message}"


class DataValidationError(PHExploreError, ValueError):
    """Raised by every loader when its input is unusable; ``problems`` lists each located problem."""

    def __init__(self, problems: list[Problem], *, summary: str | None = None) -> None:
        if not problems:
            raise ValueError("DataValidationError needs at least one problem")
        self.problems = list(problems)
        head = summary or f"{len(self.problems)} problem(s) in the input data"
        shown = "\n".join(f"  - {p}" for p in self.problems[:20])
        more = f"\n  … and {len(self.problems) - 20} more" if len(self.problems) > 20 else ""
        super().__init__(f"{head}:\n{shown}{more}")


class OutputError(ValidationError):
    """An output target cannot be used, or an output folder/file is not a complete PHExplore output."""


class RunCancelled(PHExploreError):
    """A run was cancelled on request (a face's Cancel, an experiment's cancel): raised between
    units of work by every engine and by the run pipeline; nothing of the run is kept."""


class Interrupted(PHExploreError, KeyboardInterrupt):
    """SIGTERM received while writing: the partial output was removed, the previous one kept."""
