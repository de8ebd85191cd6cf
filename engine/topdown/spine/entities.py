"""Off-spine entity sets given by block membership (SPN §4.1: the functions C_k; §7, Table 3).

An :class:`EntitySet` is a named family of disjoint entities (e.g. the 15 council wards of
Providence) over the blocks of a :class:`~engine.data.histogram.BlockHistogram`: ``codes[b]`` is
the index of the entity containing block ``b`` or ``-1``. Entity sets come from

* the shipped sample ``providence_wards`` (``data/samples/providence_wards``, ODbL): the city of
  Providence (one entity) and its 15 wards, two sets declared in the sample's manifest under
  ``entity_sets``;
* a user's block → entity CSV: a block id column (``GEOID``, ``block`` or ``Block``; 15-digit
  2010/2020 tabulation block ids), an ``entity`` column and optionally an ``entity_set`` column
  (one set per distinct value; without it the file is one set named after the file).

Problems in a CSV (malformed or repeated blocks, empty entity names, blocks absent from the data)
are collected and raised as one :class:`~engine.core.errors.DataValidationError`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from engine.core.errors import DataValidationError, Problem, ValidationError
from engine.data.samples import get_sample
from engine.data.validate import (
    MAX_PROBLEMS_PER_CHECK,
    DataSource,
    read_csv_table,
    source_name,
)

SHIPPED_ENTITY_SAMPLES: dict[str, str] = {
    "providence_wards": "providence_wards",
    "providence-wards": "providence_wards",
}
"""Names accepted for the shipped entity samples → sample folder."""

BLOCK_COLUMNS = ("GEOID", "block", "Block", "GEOID20", "GEOID10")
ENTITY_COLUMNS = ("entity", "entity_id", "name")
SET_COLUMN = "entity_set"


@dataclass(frozen=True)
class EntitySet:
    """Disjoint entities over the blocks of one histogram; ``codes[b]`` ∈ {-1, 0 … K-1}."""

    name: str
    entity_ids: tuple[str, ...]
    codes: np.ndarray
    source: str = ""
    licence: str = ""

    def __post_init__(self) -> None:
        codes = np.asarray(self.codes, dtype=np.int64)
        object.__setattr__(self, "codes", codes)
        if codes.ndim != 1:
            raise ValidationError(f"entity set {self.name!r}: codes must be one per block")
        if codes.size and (codes.min() < -1 or codes.max() >= len(self.entity_ids)):
            raise ValidationError(
                f"entity set {self.name!r}: codes outside -1..{len(self.entity_ids) - 1}"
            )
        if not self.entity_ids:
            raise ValidationError(f"entity set {self.name!r} has no entity")
        empty = np.setdiff1d(np.arange(len(self.entity_ids)), codes)
        if empty.size:
            raise ValidationError(
                f"entity set {self.name!r}: entity {self.entity_ids[int(empty[0])]!r} has no block"
            )

    @property
    def n_entities(self) -> int:
        return len(self.entity_ids)

    def membership(self) -> np.ndarray:
        """Boolean matrix (blocks × entities): C_k(b) of SPN §4.1."""
        member = np.zeros((self.codes.size, self.n_entities), dtype=bool)
        inside = np.flatnonzero(self.codes >= 0)
        member[inside, self.codes[inside]] = True
        return member

    def union(self) -> np.ndarray:
        """Boolean block mask of the union of the set's entities."""
        return self.codes >= 0


def block_ids_of(geography: pd.DataFrame, block_level: str = "Block") -> np.ndarray:
    """The block identifiers of a histogram's geography, as strings."""
    if block_level not in geography.columns:
        raise ValidationError(f"the data have no {block_level!r} column to match entities on")
    return geography[block_level].astype(str).to_numpy(dtype=object)


def load_entities(
    name_or_csv: str | DataSource, block_ids: Sequence[str] | np.ndarray, *, name: str | None = None
) -> list[EntitySet]:
    """Entity sets from a shipped sample name or a block → entity CSV, aligned to ``block_ids``."""
    if isinstance(name_or_csv, str) and name_or_csv in SHIPPED_ENTITY_SAMPLES:
        return load_entity_sample(SHIPPED_ENTITY_SAMPLES[name_or_csv], block_ids)
    if isinstance(name_or_csv, str) and not Path(name_or_csv).is_file():
        known = ", ".join(sorted(set(SHIPPED_ENTITY_SAMPLES.values())))
        raise DataValidationError(
            [
                Problem(
                    name_or_csv,
                    f"neither a shipped entity set ({known}) nor an existing block → entity CSV file",
                )
            ]
        )
    return read_entity_csv(name_or_csv, block_ids, name=name)


def load_entity_sample(sample: str, block_ids: Sequence[str] | np.ndarray) -> list[EntitySet]:
    """The entity sets declared in the manifest of the shipped ``entities`` sample ``sample``.

    On a subset of the data (e.g. one county) only the sample's blocks present in the data are
    kept, so each entity becomes its part inside the data; none present is an error.

    The manifest's ``entity_sets`` lists ``{"name", "column", "label"}`` objects: ``column`` names
    the CSV column holding each block's entity (``null`` = every listed block is one entity
    called ``label``); ``label`` is a format with ``{value}`` for the column's value.
    """
    info = get_sample(sample)
    manifest_file = str(info.path / "sample.json")
    if info.kind != "entities" or info.loader != "entities_csv":
        raise DataValidationError(
            [Problem(manifest_file, f"sample {sample!r} is not an entities_csv sample")]
        )
    declared: Any = info.manifest.get("entity_sets")
    if not isinstance(declared, list) or not declared:
        raise DataValidationError(
            [
                Problem(
                    manifest_file, "the manifest must list its 'entity_sets'", column="entity_sets"
                )
            ]
        )
    path = info.file_paths()[0]
    columns = sorted({d["column"] for d in declared if isinstance(d, dict) and d.get("column")})
    table = read_csv_table(path, [BLOCK_COLUMNS, *columns])
    present = (
        pd.Index(np.asarray(block_ids, dtype=object)).get_indexer(table.columns[BLOCK_COLUMNS[0]])
        >= 0
    )
    if not present.any():
        raise DataValidationError(
            [
                Problem(
                    table.file,
                    f"none of the {present.size:,} blocks of sample {sample!r} are in the data "
                    f"(the sample covers {info.geography})",
                )
            ]
        )
    blocks = table.columns[BLOCK_COLUMNS[0]][present]
    problems = _block_problems(
        table.file, table.rows[present], blocks, block_ids, table.found[BLOCK_COLUMNS[0]]
    )
    if problems:
        raise DataValidationError(
            problems, summary=f"{table.file}: cannot match entities to the data"
        )
    sets = []
    for spec in declared:
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise DataValidationError(
                [Problem(manifest_file, f"bad entity_sets entry {spec!r}", column="entity_sets")]
            )
        label = str(spec.get("label", "{value}"))
        column = spec.get("column")
        values = (
            np.full(blocks.size, "", dtype=object)
            if column is None
            else table.columns[column][present]
        )
        entity = np.array([label.format(value=v) for v in values.tolist()], dtype=object)
        sets.append(
            _entity_set(
                spec["name"], blocks, entity, block_ids, source=info.source, licence=info.licence
            )
        )
    return sets


def read_entity_csv(
    source: DataSource, block_ids: Sequence[str] | np.ndarray, *, name: str | None = None
) -> list[EntitySet]:
    """Entity sets from a user's block → entity CSV (columns: block id, entity[, entity_set])."""
    label = source_name(source, name)
    table = read_csv_table(
        source, [BLOCK_COLUMNS, ENTITY_COLUMNS], optional=[SET_COLUMN], name=label
    )
    blocks = table.columns[BLOCK_COLUMNS[0]]
    entity = table.columns[ENTITY_COLUMNS[0]]
    default_set = Path(label).stem or "uploaded"
    set_names = table.columns.get(SET_COLUMN, np.full(blocks.size, default_set, dtype=object))
    block_column = table.found[BLOCK_COLUMNS[0]]
    problems = _block_problems(table.file, table.rows, blocks, block_ids, block_column, set_names)
    empty = np.flatnonzero(pd.Series(entity, dtype=object).astype(str).str.len().to_numpy() == 0)
    problems += _capped_rows(
        table.file, table.rows, empty, table.found[ENTITY_COLUMNS[0]], "the entity name is empty"
    )
    empty_set = np.flatnonzero(
        pd.Series(set_names, dtype=object).astype(str).str.len().to_numpy() == 0
    )
    problems += _capped_rows(
        table.file, table.rows, empty_set, SET_COLUMN, "the entity_set name is empty"
    )
    if problems:
        raise DataValidationError(
            problems, summary=f"{table.file}: not a usable block → entity file"
        )
    sets = []
    for set_name in pd.unique(pd.Series(set_names, dtype=object)):
        rows = np.asarray(set_names == set_name)
        sets.append(_entity_set(str(set_name), blocks[rows], entity[rows], block_ids, source=label))
    return sets


def _entity_set(
    name: str,
    blocks: np.ndarray,
    entity: np.ndarray,
    block_ids: Sequence[str] | np.ndarray,
    *,
    source: str = "",
    licence: str = "",
) -> EntitySet:
    position = pd.Index(np.asarray(block_ids, dtype=object)).get_indexer(blocks)
    entity_codes, entity_ids = pd.factorize(pd.Series(entity, dtype=object), sort=True)
    codes = np.full(len(block_ids), -1, dtype=np.int64)
    codes[position] = entity_codes
    ids = tuple(str(e) for e in entity_ids)
    order = sorted(range(len(ids)), key=lambda i: _natural_key(ids[i]))
    remap = np.empty(len(ids), dtype=np.int64)
    remap[order] = np.arange(len(ids))
    inside = codes >= 0
    codes[inside] = remap[codes[inside]]
    return EntitySet(name, tuple(ids[i] for i in order), codes, source=source, licence=licence)


def _block_problems(
    file: str,
    rows: np.ndarray,
    blocks: np.ndarray,
    block_ids: Sequence[str] | np.ndarray,
    column: str,
    set_names: np.ndarray | None = None,
) -> list[Problem]:
    series = pd.Series(blocks, dtype=object).astype(str)
    malformed = ~series.str.fullmatch(r"\d{15}").to_numpy(dtype=bool)
    problems = _capped_rows(
        file,
        rows,
        np.flatnonzero(malformed),
        column,
        "{value!r} is not a 15-digit block id",
        blocks,
    )
    keys = (
        series
        if set_names is None
        else series + "\x00" + pd.Series(set_names, dtype=object).astype(str)
    )
    repeated = keys.duplicated(keep="first").to_numpy() & ~malformed
    problems += _capped_rows(
        file,
        rows,
        np.flatnonzero(repeated),
        column,
        "block {value} is listed twice (in the same entity set); an entity set's entities must be disjoint",
        blocks,
    )
    known = pd.Index(np.asarray(block_ids, dtype=object))
    unknown = (known.get_indexer(series.to_numpy(dtype=object)) < 0) & ~malformed
    problems += _capped_rows(
        file,
        rows,
        np.flatnonzero(unknown),
        column,
        "block {value} is not in the data (is the file for another state or census year?)",
        blocks,
    )
    return problems


def _capped_rows(
    file: str,
    rows: np.ndarray,
    hits: np.ndarray,
    column: str,
    message: str,
    values: np.ndarray | None = None,
) -> list[Problem]:
    out = [
        Problem(
            file,
            message.format(value=values[i]) if values is not None else message,
            int(rows[i]),
            column,
        )
        for i in hits[:MAX_PROBLEMS_PER_CHECK]
    ]
    if hits.size > MAX_PROBLEMS_PER_CHECK:
        out.append(
            Problem(
                file, f"… and {hits.size - MAX_PROBLEMS_PER_CHECK:,} more such row(s)", None, column
            )
        )
    return out


def _natural_key(text: str) -> tuple[Any, ...]:
    """Sort 'Ward 2' before 'Ward 10'."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))
