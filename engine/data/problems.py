"""Located problems gathered check by check: the first few of each, then how many more.

Every loader reports what is wrong with a file as :class:`~engine.core.errors.Problem` s (file,
row, column, what to do) and raises them together in one
:class:`~engine.core.errors.DataValidationError`, so a user fixes a file in one pass
(docs/data.md "What is checked"). A check — one kind of problem in one column, e.g. the values of
``pop_white`` that are not whole numbers — lists at most :data:`MAX_PROBLEMS_PER_CHECK` rows and
then says how many more rows have the same problem. :class:`Problems` keeps that count across the
batches of a file read in pieces: only the listed rows' values ever become Python objects.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable

import numpy as np

from engine.core.errors import DataValidationError, Problem

MAX_PROBLEMS_PER_CHECK = 10
"""A check reports at most this many rows, then one summary problem with the remaining count."""


def clip(value: str, limit: int = 40) -> str:
    """``value`` cut to ``limit`` characters (with an ellipsis) for quoting in a problem message."""
    return value if len(value) <= limit else value[: limit - 1] + "…"


def more(file: str, n: int, column: str | None, what: str) -> Problem:
    """The summary problem of a check: ``n`` more rows ``what`` (e.g. "with a negative count")."""
    return Problem(file, f"… and {n:,} more row(s) {what}", None, column)


class Problems:
    """Problems in the order their checks first report, each check capped (module docstring)."""

    def __init__(self, cap: int = MAX_PROBLEMS_PER_CHECK) -> None:
        self.cap = cap
        self._items: list[Problem | Hashable] = []
        self._checks: dict[Hashable, tuple[list[Problem], list[int], str, str | None, str]] = {}

    def add(
        self,
        key: Hashable,
        file: str,
        column: str | None,
        rows: np.ndarray,
        messages: Callable[[np.ndarray], Iterable[str]],
        what: str,
        *,
        located: bool = True,
    ) -> None:
        """Rows ``rows`` (in file order) fail check ``key``; ``messages(i)`` words the problems of
        the hits ``i`` (indices into ``rows``), called only for the hits still listed; ``what``
        ends the summary line ("… and N more row(s) <what>"). With ``located`` False the
        problems name no row (``rows`` then only counts them)."""
        rows = np.asarray(rows)
        if rows.size == 0:
            return
        if key not in self._checks:
            self._checks[key] = ([], [0], file, column, what)
            self._items.append(key)
        listed, count, *_ = self._checks[key]
        room = max(self.cap - len(listed), 0)
        if room:
            take = np.arange(min(room, rows.size))
            for i, message in zip(take.tolist(), messages(take), strict=True):
                row = int(rows[i]) if located else None
                listed.append(Problem(file, message, row, column))
        count[0] += int(rows.size)

    def append(self, problem: Problem) -> None:
        """One problem, never capped (e.g. a whole-file problem)."""
        self._items.append(problem)

    def extend(self, problems: Iterable[Problem]) -> None:
        for problem in problems:
            self.append(problem)

    def __bool__(self) -> bool:
        return bool(self._items)

    def count(self, key: Hashable) -> int:
        """How many rows failed check ``key`` so far."""
        return self._checks[key][1][0] if key in self._checks else 0

    def result(self) -> list[Problem]:
        """Every problem: the whole-file ones, then each check's listed rows and its summary when
        rows were left out, checks in the order of their first row (whatever the batches)."""
        plain = [item for item in self._items if isinstance(item, Problem)]
        groups = []
        for key in self._items:
            if isinstance(key, Problem):
                continue
            listed, count, file, column, what = self._checks[key]
            group = list(listed)
            if count[0] > len(listed):
                group.append(more(file, count[0] - len(listed), column, what))
            rows = [p.row for p in listed if p.row is not None]
            groups.append((min(rows) if rows else float("inf"), len(groups), group))
        out = list(plain)
        for _, _, group in sorted(groups, key=lambda g: (g[0], g[1])):
            out += group
        return out


def raise_if(problems: list[Problem] | Problems, summary: str | None = None) -> None:
    """Raise :class:`DataValidationError` when ``problems`` is non-empty."""
    found = problems.result() if isinstance(problems, Problems) else problems
    if found:
        raise DataValidationError(found, summary=summary)
