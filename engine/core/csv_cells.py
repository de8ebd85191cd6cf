"""Text cells a spreadsheet would run as a formula, made inert in every CSV PHExplore writes.

Level, geounit, query and cell names can come from a user's mapping or data (``=HYPERLINK("http://…"
&A2,"open")``, ``@SUM(1+1)``). Opened in a spreadsheet, a CSV cell starting with ``=``, ``+``,
``-`` or ``@`` (or a tab or carriage return, which some spreadsheets strip before looking) is
evaluated as a formula — on a colleague's machine, with their rights. Every CSV writer of PHExplore
goes through :func:`frame_to_csv` (or :func:`neutralise_frame`), which prefixes such a text cell
with an apostrophe, the mark spreadsheets read as "this is text" (the OWASP "CSV injection"
recommendation): ``=HYPERLINK(…)`` is written ``'=HYPERLINK(…)``.

Left alone, so real identifiers and numbers are unchanged: every numeric column (negative counts
and errors, ``-149``), and in text columns a cell that is a plain decimal number (``-1``, ``+2.5``,
``1e-3``: a spreadsheet reads it as that number, never as a formula) or that starts with any other
character (GEOIDs with leading zeros, ``18+``, ``usa_*``). Column names are treated like cells.
Why this rather than refusing such names at input: see docs/reliability.md ("Spreadsheet formulas").
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas as pd

FORMULA_STARTS = frozenset("=+-@\t\r")
"""First characters that make a spreadsheet evaluate a cell (OWASP's list)."""
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def is_formula_like(text: str) -> bool:
    """True when a spreadsheet would evaluate ``text`` as a formula: it starts with one of
    :data:`FORMULA_STARTS` and is not a plain decimal number."""
    return bool(text) and text[0] in FORMULA_STARTS and not _PLAIN_NUMBER.fullmatch(text)


def neutralise_cell(value: Any) -> Any:
    """``value`` with an apostrophe in front when it is formula-like text; anything else as is."""
    if isinstance(value, str) and is_formula_like(value):
        return "'" + value
    return value


def neutralise_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every formula-like text cell and column name neutralised (a new frame when
    anything changes; ``frame`` itself otherwise). Numeric columns are never touched.

    Cost: one pass over each text column's distinct values (categorical columns: their
    categories); rows are rewritten only in a column that holds such a value.
    """
    import pandas as pd

    changed: dict[Any, pd.Series] = {}
    for name, column in frame.items():
        dtype = column.dtype
        if isinstance(dtype, pd.CategoricalDtype):
            categories = list(dtype.categories)
            fixed = [neutralise_cell(c) for c in categories]
            if fixed != categories:
                changed[name] = pd.Series(
                    [neutralise_cell(v) for v in column.to_numpy(dtype=object)],
                    index=column.index,
                    dtype=object,
                )
        elif pd.api.types.is_object_dtype(dtype) or isinstance(dtype, pd.StringDtype):
            values = column.to_numpy(dtype=object)
            risky = {
                v: "'" + v for v in pd.unique(values) if isinstance(v, str) and is_formula_like(v)
            }
            if risky:
                changed[name] = pd.Series(
                    [risky.get(v, v) if isinstance(v, str) else v for v in values],
                    index=column.index,
                    dtype=dtype,
                )
    out = frame
    if changed:
        out = frame.copy()
        for name, series in changed.items():
            out[name] = series
    renamed = {c: neutralise_cell(c) for c in out.columns if neutralise_cell(c) != c}
    return out.rename(columns=renamed) if renamed else out


def frame_to_csv(frame: pd.DataFrame, target: Any = None, **options: Any) -> Any:
    """``frame.to_csv(target, index=False, **options)`` after :func:`neutralise_frame`: the one way
    PHExplore writes a table as CSV (returns the text when ``target`` is None, like pandas)."""
    options.setdefault("index", False)
    return neutralise_frame(frame).to_csv(target, **options)
