"""Block geography of the loaders: full geounit ids on the conventional spine (SPN §3; Census GEOIDs).

A 2010/2020 tabulation block id (GEOID) has 15 digits: state (2), county (3), tract (6), block (4);
the block group is the first digit of the block number (Census Bureau geographic identifiers, as in
``/work/shared/data/README.md``). Every loader returns one string column per geolevel of
:data:`BLOCK_LEVELS` holding the FULL id at that level, e.g. ``State="44"``, ``County="44007"``,
``Tract="44007000100"``, ``Block_Group="440070001001"``, ``Block="440070001001000"``.

Ids built from prefixes nest by construction; the checks here report the inputs that cannot nest:
malformed ids, a block group code that differs from the block's first digit, a full id that does not
start with its parent's id, and repeated blocks. They run on whole Arrow columns (a column of codes
is dictionary-encoded and only its distinct values are looked at); a block id is also carried as
its 15-digit number (int64), which is how repeats are found and blocks are counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from engine.data.columns import (
    Texts,
    digits_mask,
    duplicate_problems,
    encoded,
    explain_value,
    texts_at,
)
from engine.data.problems import Problems, clip

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

_SCALE = {"State": 10**13, "County": 10**10, "Tract": 10**4, "Block": 1}
"""A block id's number from its components: state·10¹³ + county·10¹⁰ + tract·10⁴ + block."""


def _text_dtype() -> object:
    """pandas' default dtype of strings (Arrow-backed from pandas 3 on)."""
    return pd.Series(np.array([""], dtype=object)).dtype


def _as_arrow(values: Texts | Sequence[str] | np.ndarray) -> pa.ChunkedArray:
    if isinstance(values, pa.ChunkedArray):
        return values
    if isinstance(values, pa.Array):
        return pa.chunked_array([values])
    array = np.asarray(values)
    if array.dtype.kind != "U":
        array = pd.Series(array, dtype=object).astype(str).to_numpy(dtype=str)
    return pa.chunked_array([pa.array(array, pa.string())])


def geography_from_block_ids(block_ids: Texts | Sequence[str] | np.ndarray) -> pd.DataFrame:
    """The five geolevel columns of valid 15-digit block ids (prefixes 2, 5, 11, 12, 15), cut by
    Arrow and handed to pandas' Arrow-backed strings (pandas ≥ 3) without a Python string each."""
    ids = _as_arrow(block_ids)
    text = _text_dtype()
    columns: dict[str, object] = {}
    for level in BLOCK_LEVELS:
        prefixes = pc.utf8_slice_codeunits(ids, 0, ID_LENGTHS[level])
        if isinstance(text, pd.StringDtype) and text.storage == "pyarrow":
            columns[level] = pd.array(prefixes, dtype=text)
        else:  # pandas 2: object strings
            columns[level] = np.asarray(prefixes.to_numpy(zero_copy_only=False), dtype=object)
    return pd.DataFrame(columns)


def block_numbers_to_ids(numbers: np.ndarray) -> pa.Array:
    """15-digit block ids (strings) of block numbers."""
    text = pc.cast(pa.array(np.asarray(numbers, dtype=np.int64)), pa.string())
    return pc.utf8_lpad(text, width=15, padding="0")


def block_id_numbers(
    problems: Problems, file: str, column: str, ids: Texts, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(numbers, valid)`` of a column of 15-digit block ids; malformed and repeated ids are
    added to ``problems`` (the value quoted and explained; the first row of a repeat named)."""
    valid = digits_mask(ids, 15)
    numbers = np.zeros(valid.size, dtype=np.int64)
    bad = np.flatnonzero(~valid)
    if bad.size:
        problems.add(
            (column, "block id"),
            file,
            column,
            rows[bad],
            lambda take: [
                f"{clip(v)!r} is not a 15-digit block id (state 2 + county 3 + tract 6 + block 4 "
                "digits)" + explain_value(v)
                for v in texts_at(ids, bad[take])
            ],
            "with malformed block ids",
        )
        good = np.flatnonzero(valid)
        numbers[good] = _cast_numbers(pc.take(ids, pa.array(good)))
    else:
        numbers = _cast_numbers(ids)
    repeated_block_problems(problems, file, column, numbers, rows, valid)
    return numbers, valid


def _cast_numbers(ids: Texts) -> np.ndarray:
    cast = pc.cast(ids, pa.int64())
    return np.asarray(cast.to_numpy(zero_copy_only=False), dtype=np.int64)


def repeated_block_problems(
    problems: Problems,
    file: str,
    column: str,
    numbers: np.ndarray,
    rows: np.ndarray,
    valid: np.ndarray | None = None,
) -> None:
    """One problem per row that repeats an earlier row's block (the valid rows only)."""
    if valid is not None and not valid.all():
        keep = np.flatnonzero(valid)
        numbers, rows = numbers[keep], rows[keep]
    duplicate_problems(
        problems,
        file,
        column,
        numbers,
        rows,
        lambda block, first: (
            f"block {int(block):015d} appears more than once (first in row {first})"
        ),
        "repeating a block",
    )


def component_blocks(
    problems: Problems,
    file: str,
    columns: Mapping[str, Texts],
    names: Mapping[str, str],
    rows: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """``(numbers, valid)``: each row's block number from per-level codes (``columns`` maps each
    level of :data:`BLOCK_LEVELS` to its codes, ``names`` to the header name).

    Codes shorter than their width are zero-padded (spreadsheets drop leading zeros); non-digits,
    over-long codes and block groups that differ from the block number's first digit are added to
    ``problems``. Each column is dictionary-encoded: only its distinct codes are checked."""
    n = rows.size
    valid = np.ones(n, dtype=bool)
    numbers = np.zeros(n, dtype=np.int64)
    value: dict[str, np.ndarray] = {}
    for level in BLOCK_LEVELS:
        width = COMPONENT_WIDTHS[level]
        codes, distinct = encoded(columns[level])
        good = digits_mask(distinct, 1, width)
        lut = np.zeros(len(distinct), dtype=np.int64)
        if good.any():
            lut[good] = _cast_numbers(pc.filter(distinct, pa.array(good)))
        row_good = good[codes]
        bad = np.flatnonzero(~row_good)
        if bad.size:
            column = names[level]
            problems.add(
                (column, "code"),
                file,
                column,
                rows[bad],
                lambda take, d=distinct, c=codes, b=bad, lv=level, w=width: [
                    f"{clip(v)!r} is not a {lv} code of at most {w} digit(s)"
                    for v in texts_at(d, c[b[take]])
                ],
                f"with malformed {level} codes",
            )
            valid &= row_good
        value[level] = lut[codes]
        if level in _SCALE:
            numbers += value[level] * _SCALE[level]
    mismatch = np.flatnonzero(valid & (value["Block_Group"] != value["Block"] // 1000))
    if mismatch.size:
        column = names["Block_Group"]
        problems.add(
            (column, "nest"),
            file,
            column,
            rows[mismatch],
            lambda take: [
                f"block {int(value['Block'][i]):04d} does not nest in block group "
                f"{int(value['Block_Group'][i])}: a block's number starts with its block group "
                "digit"
                for i in mismatch[take]
            ],
            "whose block does not nest in its block group",
        )
        valid[mismatch] = False
    numbers[~valid] = 0
    return numbers, valid


def geography_from_level_columns(
    problems: Problems,
    file: str,
    columns: Mapping[str, Texts],
    names: Mapping[str, str],
    rows: np.ndarray,
) -> tuple[pd.DataFrame, np.ndarray]:
    """Full ids from one column per level holding either the full id or the level's own code;
    ``(geography, valid)``.

    A value as long as the level's full id (:data:`ID_LENGTHS`) is taken as the full id and must
    start with its parent's id; a shorter all-digit value is the level's own code (zero-padded to
    :data:`COMPONENT_WIDTHS`) appended to the parent's id. A block must also lie in its block group
    (the block number starts with the block group digit) and appear once."""
    ok = np.ones(rows.size, dtype=bool)
    full: dict[str, pa.ChunkedArray] = {}
    parent: pa.ChunkedArray | None = None
    parent_level = ""
    for level in BLOCK_LEVELS:
        raw = _as_arrow(columns[level])
        column = names[level]
        length, width = ID_LENGTHS[level], COMPONENT_WIDTHS[level]
        is_full = digits_mask(raw, length)
        is_code = digits_mask(raw, 1, width)
        bad = np.flatnonzero(~(is_full | is_code))
        if bad.size:
            problems.add(
                (column, "level"),
                file,
                column,
                rows[bad],
                lambda take, raw=raw, bad=bad, level=level, length=length, width=width: [
                    f"{clip(v)!r} is neither a full {level} id ({length} digits) nor a {level} "
                    f"code (at most {width} digits)"
                    for v in texts_at(raw, bad[take])
                ],
                f"with malformed {level} values",
            )
        padded = pc.utf8_lpad(raw, width=width, padding="0")
        if parent is None:
            ids = padded
        else:
            # a block number extends the tract (its first digit is the block group)
            base = full["Tract"] if level == "Block" else parent
            ids = pc.if_else(pa.array(is_full), raw, pc.binary_join_element_wise(base, padded, ""))
            head = pc.utf8_slice_codeunits(ids, 0, ID_LENGTHS[parent_level])
            starts = np.asarray(pc.equal(head, parent).to_numpy(zero_copy_only=False), dtype=bool)
            outside = np.flatnonzero(is_full & ok & ~starts)
            if outside.size:
                problems.add(
                    (column, "nest"),
                    file,
                    column,
                    rows[outside],
                    lambda take, ids=ids, parent=parent, outside=outside, level=level, up=parent_level: [
                        f"{level} {child} does not nest in {up} {above} (its id must start with "
                        f"the {up} id)"
                        for child, above in zip(
                            texts_at(ids, outside[take]),
                            texts_at(parent, outside[take]),
                            strict=True,
                        )
                    ],
                    f"whose {level} does not nest",
                )
                ok[outside] = False
        ok &= is_full | is_code
        full[level] = _as_arrow(ids)
        parent, parent_level = full[level], level
    block, group = full["Block"], full["Block_Group"]
    same = np.asarray(
        pc.equal(pc.utf8_slice_codeunits(block, 0, 12), group).to_numpy(zero_copy_only=False),
        dtype=bool,
    )
    mismatch = np.flatnonzero(ok & ~same)
    if mismatch.size:
        column = names["Block"]
        problems.add(
            (column, "group"),
            file,
            column,
            rows[mismatch],
            lambda take: [
                f"block {b} does not nest in block group {g}: a block's number starts with its "
                "block group digit"
                for b, g in zip(
                    texts_at(block, mismatch[take]), texts_at(group, mismatch[take]), strict=True
                )
            ],
            "whose block does not nest in its block group",
        )
        ok[mismatch] = False
    numbers = np.zeros(rows.size, dtype=np.int64)
    good = np.flatnonzero(ok)
    if good.size:
        numbers[good] = _cast_numbers(pc.take(block, pa.array(good)))
    repeated_block_problems(problems, file, names["Block"], numbers, rows, ok)
    frame = {
        level: np.asarray(full[level].to_numpy(zero_copy_only=False), dtype=object)
        for level in BLOCK_LEVELS
    }
    return pd.DataFrame(frame), ok
