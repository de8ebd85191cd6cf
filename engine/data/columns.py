"""Vectorised checks of whole columns: whole numbers and their ranges, codes, digits, repeats.

The reader (:mod:`engine.data.csv_reader`) converts each batch of a column it is asked to type with
:class:`Integers` or :class:`Codes` here, in Arrow compute and NumPy on the whole batch: a clean batch
of counts is one Arrow cast, a batch of codes one hash lookup. Only the rows that fail are looked
at again, to word their problems (with the value quoted, clipped, and why it is not a whole number:
:func:`explain_value`). The helpers below work the same way on columns already read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from engine.core.errors import Problem
from engine.data.problems import Problems

BLANKS = " \t\r\n\x0b\x0c"
"""Characters stripped from both ends of every value (ASCII white space)."""
WHOLE = r"^[+-]?[0-9]{1,18}$"
"""A whole number the loaders accept: an optional sign and 1–18 ASCII digits (int64 holds them)."""
LIMIT = 10**18
"""Counts and ids have at most 18 digits: below this in magnitude."""

Texts = pa.Array | pa.ChunkedArray


@dataclass(frozen=True)
class Integers:
    """A column of whole numbers within [minimum, maximum]; ``what`` names them in messages."""

    minimum: int | None = 0
    maximum: int | None = None
    what: str = "count"
    keep_text: bool = False
    """Keep the (stripped) text too, as written."""


@dataclass(frozen=True)
class Codes:
    """A column of codes, each read as its index in ``codes``; with ``width``, all-digit values are
    left-padded with zeros first (spreadsheets drop leading zeros: CENRACE ``1`` is ``01``)."""

    codes: tuple[str, ...]
    width: int | None = None
    keep_text: bool = False
    """Keep the (stripped) text too, as written."""

    @cached_property
    def accepted(self) -> tuple[pa.Array, np.ndarray]:
        """Every accepted text (the codes and their forms without leading zeros) and the index of
        the code each stands for."""
        texts = list(self.codes)
        index = list(range(len(self.codes)))
        if self.width is not None:
            for k, code in enumerate(self.codes):
                if len(code) == self.width and code.isascii() and code.isdigit():
                    for cut in range(1, self.width):
                        if set(code[:cut]) == {"0"} and code[cut:] not in texts:
                            texts.append(code[cut:])
                            index.append(k)
        return pa.array(texts, pa.string()), np.asarray(index, dtype=np.int16)

    @property
    def shown(self) -> str:
        return ", ".join(self.codes[:12]) + (" …" if len(self.codes) > 12 else "")


def explain_value(value: str) -> str:
    """Why a text is not a plain whole number, as a clause to append (or "")."""
    v = value.strip().lstrip("+-")
    if v == "":
        return " (empty)"
    if v.isdigit() and not v.isascii():
        return " (it has digits that are not ASCII 0-9)"
    if v.isascii() and v.isdigit() and len(v) > 18:
        return " (too large: counts and ids are limited to 18 digits, the int64 range)"
    if re.fullmatch(r"[0-9]+(\.[0-9]*)?[eE][+-]?[0-9]+", v):
        return (
            " (scientific notation: a spreadsheet turned it into a number; format the column as "
            "text and export again)"
        )
    if re.fullmatch(r"[0-9]+\.0+", v):
        return " (a decimal point: export whole numbers without decimals)"
    return ""


def trim(values: Texts) -> Texts:
    """``values`` without ASCII blanks at either end."""
    return pc.utf8_trim(values, characters=BLANKS)


def texts_at(values: Texts, index: np.ndarray) -> list[str]:
    """The values at ``index`` as Python strings (only the few rows a message quotes)."""
    return [str(v) for v in values.take(pa.array(np.asarray(index, dtype=np.int64))).to_pylist()]


@dataclass
class Converted:
    """One batch of a typed column: ``values`` (0 where invalid), ``valid`` (None: all valid) and
    the failing rows of each check, ``(key, what, index, describe)``."""

    values: np.ndarray
    valid: np.ndarray | None
    failures: list[tuple[str, str, np.ndarray, Callable[[str], str]]]
    text: Texts


def convert_integers(raw: Texts, spec: Integers) -> Converted:
    """Whole numbers of one batch: one Arrow cast when the batch is clean, else each value checked
    against :data:`WHOLE` after stripping blanks (only then is the text trimmed)."""
    text = raw
    try:
        values = np.array(pc.cast(raw, pa.int64()).to_numpy(zero_copy_only=False), np.int64)
        bad = np.flatnonzero((values >= LIMIT) | (values <= -LIMIT))
        valid = None
        if bad.size:
            valid = np.ones(values.size, dtype=bool)
            valid[bad] = False
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        text = trim(raw)
        whole = pc.match_substring_regex(text, WHOLE)
        cleaned = pc.replace_substring(pc.if_else(whole, text, "0"), "+", "")
        values = np.array(pc.cast(cleaned, pa.int64()).to_numpy(zero_copy_only=False), np.int64)
        valid = np.asarray(whole.to_numpy(zero_copy_only=False), dtype=bool)
        bad = np.flatnonzero(~valid)
    failures: list[tuple[str, str, np.ndarray, Callable[[str], str]]] = []
    if bad.size:
        values[bad] = 0
        failures.append(
            (
                "whole",
                "that are not whole numbers",
                bad,
                lambda v: f"{v!r} is not a whole number" + explain_value(v),
            )
        )
    what = spec.what
    if spec.minimum is not None:
        low = np.flatnonzero(values < spec.minimum)
        if low.size:
            values[low] = 0
            valid = _invalid(valid, values.size, low)
            if spec.minimum == 0:
                failures.append(
                    ("low", f"with a negative {what}", low, lambda v: f"negative {what} {v}")
                )
            else:
                bound = spec.minimum
                failures.append(
                    ("low", f"below {bound}", low, lambda v: f"{what} {v} is below {bound}")
                )
    if spec.maximum is not None:
        high = np.flatnonzero(values > spec.maximum)
        if high.size:
            values[high] = 0
            valid = _invalid(valid, values.size, high)
            bound = spec.maximum
            failures.append(
                ("high", f"above {bound}", high, lambda v: f"{what} {v} is above {bound}")
            )
    return Converted(values, valid, failures, text)


def _invalid(valid: np.ndarray | None, n: int, index: np.ndarray) -> np.ndarray:
    out = np.ones(n, dtype=bool) if valid is None else valid
    out[index] = False
    return out


def convert_codes(raw: Texts, spec: Codes) -> Converted:
    """Code indices of one batch (one hash lookup; blanks stripped only when a value misses)."""
    accepted, index = spec.accepted
    if accepted.type != raw.type:  # large_string text
        accepted = accepted.cast(raw.type)
    text = raw
    found = pc.index_in(raw, value_set=accepted)
    if found.null_count:
        text = trim(raw)
        found = pc.index_in(text, value_set=accepted)
    position = np.asarray(found.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    values = index[position] if position.size else np.zeros(0, dtype=np.int16)
    valid = None
    failures: list[tuple[str, str, np.ndarray, Callable[[str], str]]] = []
    if found.null_count:
        missing = np.asarray(found.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        bad = np.flatnonzero(missing)
        values = values.copy()
        values[bad] = 0
        valid = ~missing
        shown = spec.shown
        failures.append(
            (
                "code",
                "with unknown codes",
                bad,
                lambda v: f"unknown code {v!r} (expected one of {shown})",
            )
        )
    return Converted(values, valid, failures, text)


def located(
    problems: Problems,
    file: str,
    column: str,
    key: str,
    rows: np.ndarray,
    index: np.ndarray,
    describe: Callable[[int], str],
    what: str,
) -> None:
    """Add the rows ``rows[index]`` of a check on ``column`` to ``problems``; ``describe(i)`` words
    the problem of element ``i`` (called only for the rows listed)."""
    index = np.asarray(index)
    problems.add(
        (column, key),
        file,
        column,
        np.asarray(rows)[index],
        lambda take: [describe(int(i)) for i in index[take]],
        what,
    )


def digits_mask(values: Texts, low: int, high: int | None = None) -> np.ndarray:
    """True where a value is ``low``–``high`` ASCII digits (``high`` None: exactly ``low``)."""
    top = low if high is None else high
    pattern = f"^[0-9]{{{low}}}$" if top == low else f"^[0-9]{{{low},{top}}}$"
    return np.asarray(
        pc.match_substring_regex(values, pattern).to_numpy(zero_copy_only=False), dtype=bool
    )


def first_rows(keys: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(repeat, first)``: the positions whose key appeared before, and for each the row where it
    first appeared (``keys`` int64 or strings; hashed, and not even that when sorted distinct)."""
    keys = np.asarray(keys)
    none = np.zeros(0, dtype=np.int64)
    if keys.size < 2:
        return none, none
    if keys.dtype.kind in "iu" and bool(np.all(keys[1:] > keys[:-1])):
        return none, none  # strictly increasing: all distinct
    codes, _ = pd.factorize(keys)  # numbered in order of first appearance
    new = np.r_[True, codes[1:] > np.maximum.accumulate(codes)[:-1]]
    first_position = np.flatnonzero(new)[codes]
    repeat = np.flatnonzero(~new)
    return repeat, np.asarray(rows)[first_position[repeat]]


def duplicate_problems(
    problems: Problems,
    file: str,
    column: str,
    keys: np.ndarray,
    rows: np.ndarray,
    describe: Callable[[object, int], str],
    what: str,
) -> None:
    """A problem per row whose key repeats an earlier row's; ``describe(key, first_row)``."""
    repeat, first = first_rows(keys, rows)
    if repeat.size:
        keys = np.asarray(keys)
        problems.add(
            (column, "repeat"),
            file,
            column,
            np.asarray(rows)[repeat],
            lambda take: [describe(keys[repeat[t]], int(first[t])) for t in take],
            what,
        )


INT64_MAX = np.iinfo(np.int64).max


class Totals:
    """Whether counts summed over a file stay in the int64 range: fed batch by batch (a float sum
    per batch and where the largest count is), it words the problem of counts that would overflow
    when a run adds them up (a total silently wrapping round to a negative number)."""

    def __init__(self) -> None:
        self.total = 0.0
        self.largest = (-1, 0, "")  # (count, row, column)

    def add(self, columns: dict[str, np.ndarray], rows: np.ndarray) -> None:
        """The counts of one batch: ``columns`` maps a column's header name to its values (int64)
        at the records ``rows``."""
        for name, values in columns.items():
            if values.size == 0:
                continue
            self.total += float(np.sum(values, dtype=np.float64))
            i = int(np.argmax(values))
            if int(values[i]) > self.largest[0]:
                self.largest = (int(values[i]), int(rows[i]), name)

    def problems(self, file: str) -> list[Problem]:
        if self.total < float(INT64_MAX):
            return []
        value, row, column = self.largest
        return [
            Problem(
                file,
                f"the counts add up to about {self.total:.3g}, more than int64 can hold "
                f"({INT64_MAX:,}), so totals would overflow; the largest is {value:,} — check for "
                "a misplaced or corrupted value",
                row,
                column,
            )
        ]


def encoded(values: Texts) -> tuple[np.ndarray, pa.Array]:
    """``(index of each value's distinct value, the distinct values)`` (a hash per value)."""
    chunked = values if isinstance(values, pa.ChunkedArray) else pa.chunked_array([values])
    dictionary = pc.dictionary_encode(chunked).unify_dictionaries()
    if dictionary.num_chunks == 0:
        return np.zeros(0, dtype=np.int64), pa.array([], pa.string())
    indices = np.concatenate(
        [c.indices.to_numpy(zero_copy_only=False) for c in dictionary.chunks]
    ).astype(np.int64)
    return indices, dictionary.chunk(0).dictionary


def digit_code_problems(
    problems: Problems, file: str, column: str, values: Texts, rows: np.ndarray, width: int
) -> np.ndarray:
    """The rows of ``values`` that are not exactly ``width`` ASCII digits, as problems (only the
    distinct values are checked); returns the valid mask."""
    index, distinct = encoded(values)
    good = digits_mask(distinct, width)[index] if index.size else np.zeros(0, dtype=bool)
    bad = np.flatnonzero(~good)
    if bad.size:
        problems.add(
            (column, "digits"),
            file,
            column,
            np.asarray(rows)[bad],
            lambda take: [
                f"{v!r} is not a {width}-digit code" for v in texts_at(distinct, index[bad[take]])
            ],
            f"that are not {width}-digit codes",
        )
    return good


def compact(values: np.ndarray) -> np.ndarray:
    """``values`` (int64) as int32 when every one fits: half the memory while a file is read."""
    if values.size == 0:
        return values.astype(np.int32)
    low, high = int(values.min()), int(values.max())
    if low < np.iinfo(np.int32).min or high > np.iinfo(np.int32).max:
        return values
    return values.astype(np.int32)


def joined(parts: list[np.ndarray], width: int) -> np.ndarray:
    """The batches' count rows (``parts``, each ``(n, width)``) as one int64 array; each part is
    freed once copied (``parts`` is emptied)."""
    n = sum(p.shape[0] for p in parts)
    out = np.empty((n, width), dtype=np.int64)
    at = 0
    while parts:
        part = parts.pop(0)
        out[at : at + part.shape[0]] = part
        at += part.shape[0]
    return out
