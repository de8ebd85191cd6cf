"""The one typed exception every data loader raises, carrying a list of located problems.

The UI renders :attr:`DataValidationError.problems` as a readable list; the CLI prints them one per
line. Loaders collect as many problems as they can (up to a cap) before raising, so a user fixes a
file in one pass rather than one error at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

from phexplore.errors import PHExploreError


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
