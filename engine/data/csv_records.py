"""What the one reader hands back: a batch of records, a whole file's table, and the count of
records each file held (docs/data.md "How files are read").

:class:`~engine.data.csv_reader.CsvReader` yields :class:`CsvBatch` es and joins them into a
:class:`CsvTable`; :func:`records_read` collects how many records every file read inside it held
(what ``phexplore data check`` reports as ``rows``).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa

from engine.core.errors import Problem

RECORD_COUNTS: contextvars.ContextVar[dict[str, int] | None] = contextvars.ContextVar(
    "records_read", default=None
)


@contextlib.contextmanager
def records_read() -> Iterator[dict[str, int]]:
    """The records every file read inside the ``with`` block held, by file name (what
    ``phexplore data check`` reports; a file read twice counts once, its last read)."""
    counts: dict[str, int] = {}
    token = RECORD_COUNTS.set(counts)
    try:
        yield counts
    finally:
        RECORD_COUNTS.reset(token)


@dataclass
class CsvBatch:
    """One batch of records: text columns (Arrow strings, blanks stripped), typed columns (NumPy:
    int64 whole numbers, int16 code indices; 0 where invalid) with their ``valid`` masks (None:
    all valid), and each record's row number."""

    text: dict[str, pa.Array]
    values: dict[str, np.ndarray]
    valid: dict[str, np.ndarray | None]
    rows: np.ndarray

    @property
    def n_rows(self) -> int:
        return int(self.rows.size)


@dataclass(frozen=True)
class CsvTable:
    """The requested columns of a whole file: ``text`` (Arrow, blanks stripped), ``values``
    (typed, NumPy) with ``invalid`` masks for the typed columns that had bad values, ``rows``
    (each record's row number) and the ``problems`` found while reading and typing."""

    file: str
    delimiter: str
    header: tuple[str, ...]
    found: dict[str, str]
    rows: np.ndarray
    text: dict[str, pa.ChunkedArray] = field(default_factory=dict)
    values: dict[str, np.ndarray] = field(default_factory=dict)
    invalid: dict[str, np.ndarray] = field(default_factory=dict)
    problems: tuple[Problem, ...] = ()

    @property
    def n_rows(self) -> int:
        return int(self.rows.size)

    def ok(self, key: str) -> np.ndarray:
        """True where the typed column ``key`` holds a valid value."""
        bad = self.invalid.get(key)
        return np.ones(self.n_rows, dtype=bool) if bad is None else ~bad

    def strings(self, key: str) -> np.ndarray:
        """A text column as a NumPy array of ``str`` (for small tables)."""
        return np.asarray(self.text[key].to_numpy(zero_copy_only=False), dtype=object)

    def column(self, key: str) -> str:
        """The header name of ``key`` (what messages call the column)."""
        return self.found.get(key, key)

    def subset(self, mask: np.ndarray) -> CsvTable:
        """The records selected by the boolean ``mask`` (row numbers kept, no problems)."""
        keep = pa.array(np.asarray(mask, dtype=bool))
        return replace(
            self,
            rows=self.rows[mask],
            text={k: v.filter(keep) for k, v in self.text.items()},
            values={k: v[mask] for k, v in self.values.items()},
            invalid={k: v[mask] for k, v in self.invalid.items()},
            problems=(),
        )
