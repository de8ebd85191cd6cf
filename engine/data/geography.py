"""Block geography of the loaders: full geounit ids on the conventional spine (SPN §3; Census GEOIDs).

A 2010/2020 tabulation block id (GEOID) has 15 digits: state (2), county (3), tract (6), block (4);
the block group is the first digit of the block number (Census Bureau geographic identifiers, as in
``/work/shared/data/README.md``). Every loader returns one string column per geolevel of
:data:`BLOCK_LEVELS` holding the FULL id at that level, e.g. ``State="44"``, ``County="44007"``,
``Tract="44007000100"``, ``Block_Group="440070001001"``, ``Block="440070001001000"``.

Ids built from prefixes nest by construction; the checks here report the inputs that cannot nest:
malformed ids, a block group code that differs from the block's first digit, a full id that does not
start with its parent's id, and repeated blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from engine.core.errors import Problem
from engine.data.validate import MAX_PROBLEMS_PER_CHECK, CsvTable, clip, explain_value

BLOCK_LEVELS: tuple[str, ...] = ("State", "County", "Tract", "Block_Group", "Block")
"""Geolevel column names of every BlockHistogram, root (state) first."""

ID_LENGTHS: dict[str, int] = {"State": 2, "County": 5, "Tract": 11, "Block_Group": 12, "Block": 15}
"""Length of the full geounit id at each level."""

COMPONENT_WIDTHS: dict[str, int] = {
    "State": 2,
    "County": 3,
    "Tract": 6,
    "Block_Group": 1,
    "Block": 4,
}
"""Width of each level's own code (``TABBLKST``, ``TABBLKCOU``, ``TABTRACTCE``, ``TABBLKGRPCE``,
``TABBLK``)."""


def geography_from_block_ids(block_ids: Sequence[str] | np.ndarray) -> pd.DataFrame:
    """The five geolevel columns of valid 15-digit block ids (prefixes 2, 5, 11, 12, 15).

    The prefixes are cut from a fixed-width ``'U'`` array and go straight into pandas' Arrow-backed
    strings (pandas ≥ 3); with object strings, each level's distinct ids become Python strings once,
    not once a block (the peak memory of large files).
    """
    ids = np.asarray(block_ids)
    if ids.dtype.kind != "U":
        ids = pd.Series(ids, dtype=object).astype(str).to_numpy(dtype=str)
    text = pd.Series(np.array([""], dtype=object)).dtype  # pandas' default dtype of strings
    if isinstance(text, pd.StringDtype) and text.storage == "pyarrow":  # pandas ≥ 3
        return pd.DataFrame(  # straight from the fixed-width text to Arrow: no str per block
            {
                level: pd.array(pa.array(ids.astype(f"U{ID_LENGTHS[level]}")), dtype=text)
                for level in BLOCK_LEVELS
            }
        )
    columns: dict[str, np.ndarray] = {}
    for level in BLOCK_LEVELS:
        prefixes = ids.astype(f"U{ID_LENGTHS[level]}", copy=False)
        if level == BLOCK_LEVELS[-1]:
            columns[level] = prefixes.astype(object)  # blocks are (nearly) all distinct
            continue
        distinct, codes = np.unique(prefixes, return_inverse=True)
        columns[level] = distinct.astype(object)[codes.reshape(-1)]
    return pd.DataFrame(columns)


def block_id_problems(table: CsvTable, column: str, ids: np.ndarray) -> list[Problem]:
    """Problems for values of ``ids`` that are not 15-digit block ids, and for repeated blocks."""
    if _all_distinct_block_ids(ids):
        return []  # checked on the fixed-width text, without a Python string per block
    series = pd.Series(ids, dtype=object).astype(str)
    bad = ~series.str.fullmatch(r"[0-9]{15}").to_numpy(dtype=bool)
    name = table.found.get(column, column)
    problems = _capped(
        table,
        name,
        bad,
        lambda i: (
            f"{clip(series.iloc[i])!r} is not a 15-digit block id "
            "(state 2 + county 3 + tract 6 + block 4 digits)" + explain_value(series.iloc[i])
        ),
        "with malformed block ids",
    )
    problems += repeated_block_problems(table, name, series.to_numpy(dtype=object), ~bad)
    return problems


def _all_distinct_block_ids(ids: np.ndarray) -> bool:
    """True when ``ids`` is a ``'U'`` array of 15 ASCII digits each, with no id repeated."""
    if not isinstance(ids, np.ndarray) or ids.dtype.kind != "U" or ids.ndim != 1:
        return False
    width = ids.dtype.itemsize // 4
    if width < 15:
        return False
    chars = np.ascontiguousarray(ids).view(np.uint32).reshape(ids.size, width)
    if chars[:, 15:].any():
        return False  # longer than 15 characters
    chars = chars[:, :15]
    if not ((chars >= ord("0")) & (chars <= ord("9"))).all():
        return False  # a short id is padded with NUL, which fails too
    as_int = np.zeros(ids.size, dtype=np.int64)  # 15 digits fit in int64
    for k in range(15):
        as_int = as_int * 10 + (chars[:, k] - ord("0"))
    return not pd.Series(as_int).duplicated().any()


def repeated_block_problems(
    table: CsvTable, column: str, ids: np.ndarray, valid: np.ndarray | None = None
) -> list[Problem]:
    """One problem per row that repeats an earlier row's block id."""
    series = pd.Series(ids, dtype=object)
    dup = series.duplicated(keep="first").to_numpy()
    if valid is not None:
        dup = dup & valid
    if not dup.any():
        return []
    first: dict[str, int] = {}
    for v, r in zip(series.tolist(), table.rows.tolist(), strict=True):
        first.setdefault(v, r)
    return _capped(
        table,
        column,
        dup,
        lambda i: (
            f"block {series.iloc[i]} appears more than once (first in row {first[series.iloc[i]]})"
        ),
        "repeating a block",
    )


def geography_from_components(
    table: CsvTable, names: dict[str, str], *, unique_blocks: bool = True
) -> tuple[pd.DataFrame, list[Problem]]:
    """Full ids from per-level codes (``names`` maps each level of :data:`BLOCK_LEVELS` to a column).

    Codes shorter than their width are zero-padded (spreadsheets drop leading zeros); non-digits,
    over-long codes, and block groups that differ from the block number's first digit are problems;
    with ``unique_blocks`` (one row per block), so is a repeated block.
    """
    problems: list[Problem] = []
    parts: dict[str, pd.Series] = {}
    ok = np.ones(table.n_rows, dtype=bool)
    for level in BLOCK_LEVELS:
        column = names[level]
        width = COMPONENT_WIDTHS[level]
        raw = pd.Series(table.columns[column], dtype=object).astype(str)
        good = raw.str.fullmatch(rf"[0-9]{{1,{width}}}").to_numpy(dtype=bool)
        problems += _capped(
            table,
            table.found.get(column, column),
            ~good,
            lambda i, raw=raw, width=width, level=level: (
                f"{clip(raw.iloc[i])!r} is not a {level} code of at most {width} digit(s)"
            ),
            f"with malformed {level} codes",
        )
        ok &= good
        parts[level] = raw.str.zfill(width)
    bg_mismatch = ok & (parts["Block_Group"] != parts["Block"].str.slice(0, 1)).to_numpy()
    problems += _capped(
        table,
        table.found.get(names["Block_Group"], names["Block_Group"]),
        bg_mismatch,
        lambda i: (
            f"block {parts['Block'].iloc[i]} does not nest in block group "
            f"{parts['Block_Group'].iloc[i]}: a block's number starts with its block group digit"
        ),
        "whose block does not nest in its block group",
    )
    block_ids = parts["State"] + parts["County"] + parts["Tract"] + parts["Block"]
    if unique_blocks:
        problems += repeated_block_problems(
            table,
            table.found.get(names["Block"], names["Block"]),
            block_ids.to_numpy(dtype=object),
            ok,
        )
    return geography_from_block_ids(block_ids.to_numpy(dtype=object)), problems


def _capped(
    table: CsvTable, column: str, mask: np.ndarray, describe: Callable[[int], str], what: str
) -> list[Problem]:
    """Problems for the rows selected by ``mask`` (``describe`` gets the row index), capped."""
    hits = np.flatnonzero(mask)
    out = [
        Problem(table.file, describe(int(i)), int(table.rows[i]), column)
        for i in hits[:MAX_PROBLEMS_PER_CHECK]
    ]
    if hits.size > MAX_PROBLEMS_PER_CHECK:
        out.append(
            Problem(
                table.file,
                f"… and {hits.size - MAX_PROBLEMS_PER_CHECK:,} more row(s) {what}",
                None,
                column,
            )
        )
    return out


def geography_from_level_columns(
    table: CsvTable, names: dict[str, str]
) -> tuple[pd.DataFrame, list[Problem]]:
    """Full ids from one column per level holding either the full id or the level's own code.

    A value as long as the level's full id (:data:`ID_LENGTHS`) is taken as the full id and must
    start with its parent's id; a shorter all-digit value is the level's own code (zero-padded to
    :data:`COMPONENT_WIDTHS`) appended to the parent's id. A block must also lie in its block group
    (the block number starts with the block group digit) and appear once.
    """
    problems: list[Problem] = []
    full: dict[str, pd.Series] = {}
    ok = np.ones(table.n_rows, dtype=bool)
    parent: pd.Series | None = None
    parent_level = ""
    for level in BLOCK_LEVELS:
        column = names[level]
        shown = table.found.get(column, column)
        raw = pd.Series(table.columns[column], dtype=object).astype(str)
        is_full = raw.str.fullmatch(rf"[0-9]{{{ID_LENGTHS[level]}}}").to_numpy(dtype=bool)
        is_code = raw.str.fullmatch(rf"[0-9]{{1,{COMPONENT_WIDTHS[level]}}}").to_numpy(dtype=bool)
        bad = ~(is_full | is_code)
        problems += _capped(
            table,
            shown,
            bad,
            lambda i, raw=raw, level=level: (
                f"{clip(raw.iloc[i])!r} is neither a full {level} id "
                f"({ID_LENGTHS[level]} digits) nor a {level} code (at most {COMPONENT_WIDTHS[level]} "
                "digits)"
            ),
            f"with malformed {level} values",
        )
        if parent is None:
            ids = raw.str.zfill(COMPONENT_WIDTHS[level])
        else:
            # a block number extends the tract (its first digit is the block group)
            base = full["Tract"] if level == "Block" else parent
            ids = raw.where(is_full, base + raw.str.zfill(COMPONENT_WIDTHS[level]))
            starts = np.fromiter(
                (c.startswith(p) for c, p in zip(ids.tolist(), parent.tolist(), strict=True)),
                dtype=bool,
                count=len(ids),
            )
            outside = is_full & ok & ~starts
            problems += _capped(
                table,
                shown,
                outside,
                lambda i, ids=ids, parent=parent, level=level, parent_level=parent_level: (
                    f"{level} {ids.iloc[i]} does not nest in {parent_level} {parent.iloc[i]} "
                    f"(its id must start with the {parent_level} id)"
                ),
                f"whose {level} does not nest",
            )
            ok &= ~outside
        ok &= ~bad
        full[level] = ids
        parent, parent_level = ids, level
    block, group = full["Block"], full["Block_Group"]
    mismatch = ok & (block.str.slice(0, 12) != group).to_numpy()
    problems += _capped(
        table,
        table.found.get(names["Block"], names["Block"]),
        mismatch,
        lambda i: (
            f"block {block.iloc[i]} does not nest in block group {group.iloc[i]}: a block's "
            "number starts with its block group digit"
        ),
        "whose block does not nest in its block group",
    )
    problems += repeated_block_problems(
        table, table.found.get(names["Block"], names["Block"]), block.to_numpy(dtype=object), ok
    )
    return pd.DataFrame({lv: full[lv].to_numpy(dtype=object) for lv in BLOCK_LEVELS}), problems
