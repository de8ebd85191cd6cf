"""Loader of a plain block CSV: one row per block, count columns mapped to schema cells.

The user's own block-level counts: a plain CSV with one row per block and count columns, and a
mapping (a JSON file, or the app's mapping form) of columns to schema cells. The mapping is a JSON
object (documented in ``docs/data.md``)::

    {
      "schema": "ri2010",                       # a preset name, or
      "schema": {"name": "mine", "attributes": [{"name": "AGE", "levels": ["child", "adult"]}]},
      "geography": {"geoid": "GEOID"},           # a 15-digit block id column, or
      "geography": {"levels": {"State": "ST", "County": "CTY", "Tract": "TR",
                               "Block_Group": "BG", "Block": "BLK"}},
      "cells": {"kids": {"AGE": "child"}, "adults": {"AGE": "adult"}},
      "allow_unmapped": false                    # optional: unmapped cells count 0 instead of failing
    }

Each ``cells`` entry maps one count column to one schema cell (a level of every attribute); several
columns mapped to the same cell are added. Level columns hold the full geounit id or the level's own
code (see :func:`engine.data.geography.geography_from_level_columns`). Only the mapped columns are
read; the JSON is parsed by the strict reader :func:`engine.core.strict_json.loads_strict_json`, nothing is evaluated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.core.errors import DataValidationError, Problem, ValidationError
from engine.core.strict_json import check_keys, loads_strict_json
from engine.data.columns import Integers, Totals, compact, joined
from engine.data.csv_reader import CsvReader
from engine.data.geography import (
    BLOCK_LEVELS,
    block_id_numbers,
    geography_from_block_ids,
    geography_from_level_columns,
)
from engine.data.histogram import BlockHistogram
from engine.data.problems import raise_if
from engine.data.sources import DEFAULT_MAX_BYTES, DataSource, read_source, source_name
from engine.schema.attributes import (
    PL94171_SCHEMA,
    REDISTRICTING_SCHEMA,
    RI2010_SCHEMA,
    Attribute,
    Schema,
)

SCHEMA_PRESETS: dict[str, Schema] = {
    s.name: s for s in (RI2010_SCHEMA, PL94171_SCHEMA, REDISTRICTING_SCHEMA)
}
MAX_MAPPING_BYTES = 10 * 1024 * 1024


@dataclass(frozen=True)
class BlockCsvMapping:
    """A checked mapping: the schema, the geography columns, and column → flat cell index."""

    schema: Schema
    geoid: str | None
    levels: dict[str, str] | None
    cells: dict[str, int]
    allow_unmapped: bool = False


def parse_mapping(
    mapping: BlockCsvMapping | Mapping[str, Any] | DataSource, *, name: str | None = None
) -> BlockCsvMapping:
    """Check a mapping given as a dict (UI) or a JSON file; raise listing every problem."""
    if isinstance(mapping, BlockCsvMapping):
        return mapping
    if isinstance(mapping, Mapping):
        label = name or "<mapping>"
        raw: Any = dict(mapping)
    else:
        label = source_name(mapping, name)
        data = read_source(mapping, max_bytes=MAX_MAPPING_BYTES, name=label)
        try:
            raw = loads_strict_json(data, label=label)
        except ValidationError as exc:
            raise DataValidationError(
                [Problem(label, str(exc).removeprefix(f"{label}: "))]
            ) from None
    if not isinstance(raw, dict):
        raise DataValidationError([Problem(label, "the mapping must be a JSON object")])
    problems: list[Problem] = []
    schema = _schema(raw.get("schema"), label, problems)
    geoid, levels = _geography(raw.get("geography"), label, problems)
    cells = _cells(raw.get("cells"), schema, label, problems) if schema else {}
    allow = raw.get("allow_unmapped", False)
    if not isinstance(allow, bool):
        problems.append(
            Problem(label, "'allow_unmapped' must be true or false", column="allow_unmapped")
        )
    try:
        check_keys(raw, ("schema", "geography", "cells", "allow_unmapped"), where=label)
    except ValidationError as exc:
        problems.append(Problem(label, str(exc).removeprefix(f"{label}: ")))
    if schema and cells and allow is False:
        unmapped = sorted(set(range(schema.size)) - set(cells.values()))
        if unmapped:
            shown = "; ".join(_cell_label(schema, i) for i in unmapped[:8])
            more = f" and {len(unmapped) - 8} more" if len(unmapped) > 8 else ""
            problems.append(
                Problem(
                    label,
                    f"{len(unmapped)} schema cell(s) have no column: {shown}{more} — map them or set "
                    '"allow_unmapped": true to count them as 0',
                    column="cells",
                )
            )
    raise_if(problems, summary=f"{label}: invalid block CSV mapping")
    assert schema is not None
    return BlockCsvMapping(schema, geoid, levels, cells, bool(allow))


def load_block_csv(
    source: DataSource,
    mapping: BlockCsvMapping | Mapping[str, Any] | DataSource,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    name: str | None = None,
) -> BlockHistogram:
    """Load a one-row-per-block CSV into a :class:`BlockHistogram` as ``mapping`` directs.

    Read batch by batch: each batch's count columns are checked and added into its rows of the
    histogram at once."""
    spec = parse_mapping(mapping)
    geo_columns = [spec.geoid] if spec.geoid else list(spec.levels.values())  # type: ignore[union-attr]
    reader = CsvReader(source, [*geo_columns, *spec.cells], max_bytes=max_bytes, name=name)
    problems, found = reader.problems, reader.layout.found
    kinds = {column: Integers() for column in spec.cells}
    counts: list[np.ndarray] = []
    text: dict[str, list[pa.Array]] = {c: [] for c in geo_columns}
    rows: list[np.ndarray] = []
    totals = Totals()
    for batch in reader.batches(kinds):
        part = np.zeros((batch.n_rows, spec.schema.size), dtype=np.int64)
        for column, cell in spec.cells.items():
            part[:, cell] += batch.values[column]
        totals.add({found[c]: batch.values[c] for c in spec.cells}, batch.rows)
        counts.append(compact(part))
        rows.append(compact(batch.rows))
        for column in geo_columns:
            text[column].append(batch.text[column])
    all_rows = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    columns = {c: pa.chunked_array(v, pa.string()) for c, v in text.items()}
    if spec.geoid:
        ids = columns[spec.geoid]
        if pc.any(pc.match_substring(ids, "US")).as_py():  # a 7500000US… prefix
            ids = pc.replace_substring_regex(ids, r"^.*US", "")
        block_id_numbers(problems, reader.label, found[spec.geoid], ids, all_rows)
    else:
        levels = spec.levels or {}
        geography, _ = geography_from_level_columns(
            problems,
            reader.label,
            {level: columns[c] for level, c in levels.items()},
            {level: found[c] for level, c in levels.items()},
            all_rows,
        )
    problems.extend(totals.problems(reader.label))
    raise_if(problems, summary=f"{reader.label}: not a usable block CSV")
    if spec.geoid:
        geography = geography_from_block_ids(ids)
    return BlockHistogram(
        schema=spec.schema,
        levels=BLOCK_LEVELS,
        geography=geography,
        counts=joined(counts, spec.schema.size),
        source=f"block CSV {reader.label}",
        extra={"mapped_columns": dict(spec.cells)},
    )


def _schema(value: Any, label: str, problems: list[Problem]) -> Schema | None:
    if isinstance(value, str):
        if value in SCHEMA_PRESETS:
            return SCHEMA_PRESETS[value]
        problems.append(
            Problem(
                label,
                f"unknown schema preset {value!r}; known: {', '.join(SCHEMA_PRESETS)}",
                column="schema",
            )
        )
        return None
    if not isinstance(value, dict):
        problems.append(
            Problem(
                label,
                "'schema' must be a preset name or an object with attributes",
                column="schema",
            )
        )
        return None
    attrs = value.get("attributes")
    if not isinstance(attrs, list) or not attrs:
        problems.append(
            Problem(label, "'schema.attributes' must be a non-empty list", column="schema")
        )
        return None
    out: list[Attribute] = []
    for k, attr in enumerate(attrs):
        where = f"schema.attributes[{k}]"
        name = attr.get("name") if isinstance(attr, dict) else None
        levels = attr.get("levels") if isinstance(attr, dict) else None
        if not isinstance(name, str) or not name:
            problems.append(Problem(label, "needs a non-empty 'name'", column=where))
            continue
        if (
            not isinstance(levels, list)
            or not levels
            or not all(isinstance(lv, str) for lv in levels)
            or len(set(levels)) != len(levels)
        ):
            problems.append(
                Problem(label, "'levels' must be a list of distinct strings", column=where)
            )
            continue
        out.append(Attribute(name, tuple(levels)))
    if len({a.name for a in out}) != len(out):
        problems.append(Problem(label, "attribute names must be distinct", column="schema"))
    if len(out) != len(attrs) or len({a.name for a in out}) != len(out):
        return None
    schema_name = value.get("name", "custom")
    return Schema(str(schema_name), tuple(out))


def _geography(
    value: Any, label: str, problems: list[Problem]
) -> tuple[str | None, dict[str, str] | None]:
    if isinstance(value, dict) and isinstance(value.get("geoid"), str) and len(value) == 1:
        return value["geoid"], None
    if isinstance(value, dict) and isinstance(value.get("levels"), dict) and len(value) == 1:
        levels = value["levels"]
        missing = [lv for lv in BLOCK_LEVELS if not isinstance(levels.get(lv), str)]
        extra = sorted(set(levels) - set(BLOCK_LEVELS))
        if missing or extra:
            problems.append(
                Problem(
                    label,
                    f"'geography.levels' must name a column for each of {', '.join(BLOCK_LEVELS)}"
                    + (f" (missing {', '.join(missing)})" if missing else "")
                    + (f" (unknown {', '.join(extra)})" if extra else ""),
                    column="geography",
                )
            )
            return None, None
        return None, {lv: levels[lv] for lv in BLOCK_LEVELS}
    problems.append(
        Problem(
            label,
            '\'geography\' must be {"geoid": COLUMN} or {"levels": {State: COLUMN, …, Block: '
            "COLUMN}}",
            column="geography",
        )
    )
    return None, None


def _cells(value: Any, schema: Schema, label: str, problems: list[Problem]) -> dict[str, int]:
    if not isinstance(value, dict) or not value:
        problems.append(
            Problem(label, "'cells' must map each count column to a schema cell", column="cells")
        )
        return {}
    out: dict[str, int] = {}
    for column, cell in value.items():
        where = f"cells.{column}"
        if not isinstance(cell, dict):
            problems.append(Problem(label, "must map each attribute to a level", column=where))
            continue
        missing = [a.name for a in schema.attributes if a.name not in cell]
        unknown = sorted(set(cell) - set(schema.names))
        bad = [
            f"{a.name}={cell[a.name]!r} (levels: {', '.join(a.levels[:10])}"
            + (" …" if a.size > 10 else "")
            + ")"
            for a in schema.attributes
            if a.name in cell and cell[a.name] not in a.levels
        ]
        if missing or unknown or bad:
            parts = []
            if missing:
                parts.append(f"no level for {', '.join(missing)}")
            if unknown:
                parts.append(f"unknown attribute(s) {', '.join(unknown)}")
            if bad:
                parts.append(f"unknown level(s) {'; '.join(bad)}")
            problems.append(Problem(label, "; ".join(parts), column=where))
            continue
        index = tuple(a.levels.index(cell[a.name]) for a in schema.attributes)
        out[column] = int(np.ravel_multi_index(index, schema.shape))
    return out


def _cell_label(schema: Schema, flat: int) -> str:
    index = np.unravel_index(flat, schema.shape)
    return ", ".join(
        f"{a.name}={a.levels[i]}" for a, i in zip(schema.attributes, index, strict=True)
    )
