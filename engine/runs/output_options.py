"""The choices of a run's output tables: file format and dense or sparse estimates (docs/topdown.md "Outputs").

Plain constants with no heavy import, so the CLI's ``--help`` can offer them without loading NumPy,
pandas or pyarrow; :mod:`engine.runs.table_files` and :mod:`engine.runs.writers` act on them.
"""

from __future__ import annotations

FORMATS: tuple[str, ...] = ("auto", "csv", "parquet")
"""Values of ``--output-format``."""
AUTO_CSV_MAX_ROWS = 1_000_000
"""``auto`` writes CSV when the dense estimates table has at most this many rows, else Parquet."""
ESTIMATE_CHOICES: tuple[str, ...] = ("auto", "dense", "sparse")
"""Values of ``--estimates``: ``auto`` = sparse for Parquet, dense for CSV."""
