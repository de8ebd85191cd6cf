"""Which file of a folder is which: one candidate per role, or a refusal naming the conflict.

A CEF extract (``persons``, ``units``, ``geo``), a generated population (``ppmf``, ``blocks``) and a
P.L. 94-171 file set (the geographic header and segments 1–3) are folders of files with roles. A
file is a candidate for a role when it is a data file (:data:`DATA_SUFFIXES`) whose name holds the
role's word (``persons.csv``, ``persons.csv.gz``, ``persons_2019.csv``, ``Persons (1).csv``). Exactly
one candidate is used; two are refused naming both — ``persons.csv`` beside ``persons.csv.gz``
(one is probably a stale copy), or two persons files — and never resolved by picking one
(docs/reliability.md "Files").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from engine.core.errors import DataValidationError, Problem

DATA_SUFFIXES = (".csv", ".csv.gz", ".txt", ".txt.gz", ".tsv", ".tsv.gz", ".dat", ".pl")
"""Names of data files (a folder's other files — notes, licences, configs — are ignored)."""


def is_data_file(name: str) -> bool:
    """Whether ``name`` is a data file's name (:data:`DATA_SUFFIXES`)."""
    return name.lower().endswith(DATA_SUFFIXES)


def candidates(directory: Path, word: str) -> list[Path]:
    """The data files of ``directory`` whose name holds ``word`` (case-insensitive), sorted."""
    try:
        entries = sorted(directory.iterdir())
    except OSError:
        return []
    word = word.lower()
    return [p for p in entries if is_data_file(p.name) and word in p.name.lower()]


def one_file(directory: Path, stem: str, *, what: str, fix: str) -> Path:
    """The one data file of ``directory`` for role ``stem`` (e.g. ``persons``); refused when
    there is none (``fix`` says what to do) or more than one (naming them)."""
    found = candidates(directory, stem)
    if len(found) == 1:
        return found[0]
    if not found:
        raise DataValidationError(
            [
                Problem(
                    str(directory),
                    f"missing {stem}.csv (or {stem}.csv.gz) in the {what} folder; {fix}",
                )
            ],
            summary=f"the {what} is incomplete",
        )
    raise ambiguous(directory, stem, [p.name for p in found])


def file_if_any(directory: Path, stem: str) -> Path | None:
    """The one data file of ``directory`` for role ``stem``, None when there is none; several are
    refused as :func:`one_file` refuses them (what a run records as its inputs is what its loader
    reads)."""
    found = candidates(directory, stem)
    if len(found) > 1:
        raise ambiguous(directory, stem, [p.name for p in found])
    return found[0] if found else None


def ambiguous(where: Path | str, role: str, names: Sequence[str]) -> DataValidationError:
    """The refusal of several files that could each be the ``role`` file."""
    listed = " and ".join(names) if len(names) == 2 else ", ".join(names)
    stale = any(n.lower().endswith(".gz") for n in names) and any(
        not n.lower().endswith(".gz") for n in names
    )
    why = "one is probably a stale copy of the other" if stale else "which one is meant is unclear"
    return DataValidationError(
        [
            Problem(
                str(where),
                f"{len(names)} files could be the {role} file ({listed}); {why} — keep the one "
                "you mean and move or rename the others",
            )
        ],
        summary="the input is ambiguous",
    )


_SEGMENT = re.compile(r"0000([1-3])")
"""A P.L. 94-171 segment file's number in its name (``ri000012018.pl`` → 1)."""


def pl94171_roles(
    files: Sequence[Any],
    segment_of: Callable[[Any], int | None],
    *,
    where: str = "input",
) -> tuple[Any, Any, Any, Any]:
    """The geographic header and segments 1, 2, 3 of a P.L. 94-171 file set: the header by its
    name (it holds ``geo``), a segment by ``segment_of`` (the number the file holds), else by its
    name (``00001``, ``00002`` or ``00003``); a missing role, two files for one role or a file of
    no role is refused naming the files."""
    roles: dict[str, list[Any]] = {"geo": [], "1": [], "2": [], "3": []}
    strays: list[str] = []
    for f in files:
        name = Path(str(getattr(f, "name", f))).name
        lower = name.lower()
        if "geo" in lower:
            roles["geo"].append(f)
            continue
        number = segment_of(f)
        match = _SEGMENT.search(lower)
        if number is not None:
            roles[str(number)].append(f)
        elif match:
            roles[match.group(1)].append(f)
        else:
            strays.append(name)
    problems: list[Problem] = []
    for role, found in roles.items():
        label = "geographic header" if role == "geo" else f"segment {role}"
        names = [Path(str(getattr(f, "name", f))).name for f in found]
        if len(found) > 1:
            problems += ambiguous(where, label, names).problems
        elif not found:
            problems.append(
                Problem(
                    where,
                    f"no {label} file ("
                    + (
                        "its name holds 'geo', e.g. rigeo2020.pl"
                        if role == "geo"
                        else f"its records have CIFSN 0{role}, e.g. ri0000{role}2020.pl"
                    )
                    + ")",
                )
            )
    for name in strays:
        problems.append(
            Problem(
                name,
                "not a file of a P.L. 94-171 set: its name does not hold 'geo' and its records "
                "are not of segment 1, 2 or 3 (CIFSN 01–03); leave it out",
            )
        )
    if problems:
        raise DataValidationError(
            problems,
            summary="a P.L. 94-171 file set needs four files, the geographic header and segments "
            "1, 2 and 3, each once",
        )
    return roles["geo"][0], roles["1"][0], roles["2"][0], roles["3"][0]
