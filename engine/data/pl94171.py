"""Loader of P.L. 94-171 redistricting summary files: block tables P1–P5, H1 and a block histogram.

Format: the Census Bureau's 2020-style P.L. 94-171 file set (2020 Census State Redistricting Data
Summary File technical documentation), as published for the 2018 End-to-End Census Test prototype
(``data/samples/pl94171_ri2018``): four pipe-delimited files without header —

* the geographic header ``<st>geo<year>.pl`` (97 fields: :data:`GEO_FIELDS`; Latin-1 text);
* segment 1 ``<st>00001<year>.pl``: ``FILEID, STUSAB, CHARITER, CIFSN, LOGRECNO``, then P1 (71 cells,
  race) and P2 (73, Hispanic or Latino by race);
* segment 2 ``<st>00002<year>.pl``: P3 (71, race, 18 and over), P4 (73, Hispanic by race, 18 and
  over), H1 (3, occupancy status);
* segment 3 ``<st>00003<year>.pl``: P5 (10, group-quarters population by major GQ type).

Records join on ``LOGRECNO``; blocks are the geographic records with ``SUMLEV`` 750. The wide CSV
written by the ``PL94171`` R package (one row per geography, columns ``SUMLEV``, ``STATE`` …
``BLOCK`` and the cell names ``P0010001`` …) is read by :func:`read_pl94171_csv`.

The block histogram (:func:`histogram_from_tables`) has schema
:data:`~engine.schema.attributes.PL94171_SCHEMA` = VOTINGAGE (2) × RACEETH (8): cell (18_plus, g) is the P4
cell of group g and (under_18, g) the P2 cell minus the P4 cell, where the groups are P2/P4 lines 2
(Hispanic or Latino), 5–10 (not Hispanic: White, Black, AIAN, Asian, NHPI, Some Other Race alone)
and 11 (not Hispanic, two or more races). What is lost: the 57 two-or-more-race combinations (and
P1/P3's race detail of Hispanics) are collapsed into one group each, and the GQ population of P5 is
not crossed with age or race — it is kept separately in ``extra["gq_population"]`` (per GQ major type
1–7). Housing units go to ``units`` as (occupied, vacant) from H1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from engine.core.errors import DataValidationError, Problem
from engine.data.columns import Codes, Integers, convert_integers, duplicate_problems, texts_at
from engine.data.csv_layout import split_fields
from engine.data.csv_reader import CsvReader
from engine.data.csv_records import CsvTable
from engine.data.folders import pl94171_roles
from engine.data.geography import (
    BLOCK_LEVELS,
    COMPONENT_WIDTHS,
    ID_LENGTHS,
    block_numbers_to_ids,
    component_blocks,
    geography_from_block_ids,
    repeated_block_problems,
)
from engine.data.histogram import BlockHistogram
from engine.data.problems import Problems, raise_if
from engine.data.sources import DEFAULT_MAX_BYTES, DataSource, TextStream, source_name
from engine.schema.attributes import PL94171_SCHEMA

GEO_FIELDS: tuple[str, ...] = tuple(
    [
        "FILEID",
        "STUSAB",
        "SUMLEV",
        "GEOVAR",
        "GEOCOMP",
        "CHARITER",
        "CIFSN",
        "LOGRECNO",
        "GEOID",
        "GEOCODE",
        "REGION",
        "DIVISION",
        "STATE",
        "STATENS",
        "COUNTY",
        "COUNTYCC",
        "COUNTYNS",
        "COUSUB",
        "COUSUBCC",
        "COUSUBNS",
        "SUBMCD",
        "SUBMCDCC",
        "SUBMCDNS",
        "ESTATE",
        "ESTATECC",
        "ESTATENS",
        "CONCIT",
        "CONCITCC",
        "CONCITNS",
        "PLACE",
        "PLACECC",
        "PLACENS",
        "TRACT",
        "BLKGRP",
        "BLOCK",
        "AIANHH",
        "AIHHTLI",
        "AIANHHFP",
        "AIANHHCC",
        "AIANHHNS",
        "AITS",
        "AITSFP",
        "AITSCC",
        "AITSNS",
        "TTRACT",
        "TBLKGRP",
        "ANRC",
        "ANRCCC",
        "ANRCNS",
        "CBSA",
        "MEMI",
        "CSA",
        "METDIV",
        "NECTA",
        "NMEMI",
        "CNECTA",
        "NECTADIV",
        "CBSAPCI",
        "NECTAPCI",
        "UA",
        "UATYPE",
        "UR",
        "CD116",
        "CD118",
        "CD119",
        "CD120",
        "CD121",
        "SLDU18",
        "SLDU22",
        "SLDU24",
        "SLDU26",
        "SLDU28",
        "SLDL18",
        "SLDL22",
        "SLDL24",
        "SLDL26",
        "SLDL28",
        "VTD",
        "VTDI",
        "ZCTA",
        "SDELM",
        "SDSEC",
        "SDUNI",
        "PUMA",
        "AREALAND",
        "AREAWATR",
        "BASENAME",
        "NAME",
        "FUNCSTAT",
        "GCUNI",
        "POP100",
        "HU100",
        "INTPTLAT",
        "INTPTLON",
        "LSADC",
        "PARTFLAG",
        "UGA",
    ]
)
"""The 97 fields of the 2020-style geographic header record."""

TABLE_SIZES: dict[str, int] = {"P1": 71, "P2": 73, "P3": 71, "P4": 73, "H1": 3, "P5": 10}
SEGMENTS: dict[int, tuple[str, ...]] = {1: ("P1", "P2"), 2: ("P3", "P4", "H1"), 3: ("P5",)}
SEGMENT_PREFIX: tuple[str, ...] = ("FILEID", "STUSAB", "CHARITER", "CIFSN", "LOGRECNO")
BLOCK_SUMLEV = "750"
NESTING_SUMLEVS: dict[str, str] = {"140": "Tract", "150": "Block_Group"}
"""Summary levels whose records must equal the sum of their blocks (the file lists all of them)."""

GEO_COLUMNS: dict[str, str] = {
    "State": "STATE",
    "County": "COUNTY",
    "Tract": "TRACT",
    "Block_Group": "BLKGRP",
    "Block": "BLOCK",
}
RACEETH_LINES: tuple[int, ...] = (2, 5, 6, 7, 8, 9, 10, 11)
"""P2/P4 line numbers of the RACEETH levels hisp, white, black, aian, asian, nhpi, other, two."""
GQ_LINES: tuple[int, ...] = (3, 4, 5, 6, 8, 9, 10)
"""P5 line numbers of the GQ major types 1–7 (GQTYPE_PL order)."""

SOURCE = "P.L. 94-171 redistricting summary file"
LICENCE = "US Government work (public domain)"


def variables(table: str) -> tuple[str, ...]:
    """Census cell names of ``table``, e.g. ``P0010001`` … ``P0010071`` for P1."""
    letter, number = table[0], int(table[1:])
    return tuple(f"{letter}{number:03d}{line:04d}" for line in range(1, TABLE_SIZES[table] + 1))


@dataclass(frozen=True)
class PL94171Tables:
    """Block tables of a P.L. 94-171 file: ``geography`` and one DataFrame per table, same row order.

    Each table has one row per block and one int64 column per cell (``P0010001`` …).
    """

    geography: pd.DataFrame
    tables: dict[str, pd.DataFrame]

    def long(self) -> pd.DataFrame:
        """Tidy long form: one row per (block, table, variable) with its ``count``."""
        parts = []
        for name, frame in self.tables.items():
            melted = frame.assign(Block=self.geography["Block"].to_numpy()).melt(
                id_vars="Block", var_name="variable", value_name="count"
            )
            parts.append(melted.assign(table=name))
        return pd.concat(parts, ignore_index=True)[["Block", "table", "variable", "count"]]


def read_pl94171(
    geo: DataSource,
    part1: DataSource,
    part2: DataSource,
    part3: DataSource,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> PL94171Tables:
    """Read a 2020-style file set (geographic header and segments 1–3) into block tables.

    Every file is read and checked before any is refused, so the problems of all four come
    together; the join on ``LOGRECNO`` and the table checks run when every file is readable."""
    problems: list[Problem] = []
    geo_table: CsvTable | None = None
    try:
        reader = CsvReader(
            geo,
            ("SUMLEV", "LOGRECNO", *GEO_COLUMNS.values(), "POP100"),
            field_names=GEO_FIELDS,
            delimiter="|",
            max_bytes=max_bytes,
            name=_label(geo, "geographic header"),
            encodings=("utf-8", "latin-1"),
        )
        geo_table = reader.read({"LOGRECNO": Integers(minimum=1, what="LOGRECNO")})
    except DataValidationError as exc:
        problems += exc.problems
    segments: list[CsvTable] = []
    for number, source in zip(SEGMENTS, (part1, part2, part3), strict=True):
        try:
            segments.append(_read_segment(source, number, max_bytes))
        except DataValidationError as exc:
            problems += exc.problems
    checks = Problems()
    for table in [*([geo_table] if geo_table is not None else []), *segments]:
        checks.extend(table.problems)
        _duplicate_logrecno(checks, table)
    if geo_table is None or len(segments) < len(SEGMENTS):
        raise_if(problems + checks.result(), summary="the P.L. 94-171 files are not usable")
    assert geo_table is not None
    geo_ok = geo_table.ok("LOGRECNO")
    logrecno = geo_table.values["LOGRECNO"]
    cells: dict[str, np.ndarray] = {}
    for table in segments:
        seg_ok = table.ok("LOGRECNO")
        _join_problems(checks, geo_table, logrecno, geo_ok, table, table.values["LOGRECNO"], seg_ok)
        position = pd.Index(table.values["LOGRECNO"]).get_indexer(logrecno)
        for key, column in table.values.items():
            if key not in ("LOGRECNO", "CIFSN"):
                cells[key] = column[position]
    raise_if(problems + checks.result(), summary="the P.L. 94-171 files are not usable")
    return _build(geo_table, cells, _sumlev(geo_table) == BLOCK_SUMLEV)


def read_pl94171_csv(
    source: DataSource, *, max_bytes: int = DEFAULT_MAX_BYTES, name: str | None = None
) -> PL94171Tables:
    """Read the wide CSV of the ``PL94171`` R package (one row per geography) into block tables."""
    names = [v for t in TABLE_SIZES for v in variables(t)]
    reader = CsvReader(
        source,
        ("SUMLEV", *GEO_COLUMNS.values(), *names),
        optional=("POP100",),
        max_bytes=max_bytes,
        name=name,
    )
    table = reader.read({variable: Integers() for variable in names})
    raise_if(list(table.problems), summary=f"{table.file}: not a usable P.L. 94-171 table file")
    return _build(table, dict(table.values), _sumlev(table) == BLOCK_SUMLEV)


def _sumlev(table: CsvTable) -> np.ndarray:
    return np.asarray(table.strings("SUMLEV"), dtype=object)


def load_pl94171_histogram(
    geo: DataSource,
    part1: DataSource,
    part2: DataSource,
    part3: DataSource,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> BlockHistogram:
    """Read a 2020-style file set and return its VOTINGAGE × RACEETH block histogram."""
    return histogram_from_tables(read_pl94171(geo, part1, part2, part3, max_bytes=max_bytes))


def histogram_from_tables(tables: PL94171Tables) -> BlockHistogram:
    """VOTINGAGE × RACEETH counts from P2 and P4, H1 units and P5 GQ population (module docstring)."""
    p2, p4 = tables.tables["P2"].to_numpy(), tables.tables["P4"].to_numpy()
    groups = [line - 1 for line in RACEETH_LINES]
    adults = p4[:, groups]
    counts = np.concatenate([p2[:, groups] - adults, adults], axis=1).astype(np.int64)
    h1 = tables.tables["H1"].to_numpy()
    p5 = tables.tables["P5"].to_numpy()
    return BlockHistogram(
        schema=PL94171_SCHEMA,
        levels=BLOCK_LEVELS,
        geography=tables.geography[list(BLOCK_LEVELS)].reset_index(drop=True),
        counts=np.ascontiguousarray(counts),
        source=SOURCE,
        licence=LICENCE,
        units=np.ascontiguousarray(h1[:, 1:3].astype(np.int64)),
        extra={
            "units_levels": ("occupied", "vacant"),
            "gq_population": np.ascontiguousarray(p5[:, [line - 1 for line in GQ_LINES]]),
            "gq_levels": ("1", "2", "3", "4", "5", "6", "7"),
        },
    )


def segment_number(source: DataSource, *, max_bytes: int = DEFAULT_MAX_BYTES) -> int | None:
    """The segment (1–3) a P.L. 94-171 file says it is (CIFSN, its first record's fourth
    field); None for the geographic header or anything else."""
    try:
        stream = TextStream(source, source_name(source), max_bytes)
    except DataValidationError:
        return None
    try:
        fields = split_fields(stream.first_line(), "|") or []
    finally:
        stream.close()
    if len(fields) > 3 and fields[3] in ("01", "02", "03"):
        return int(fields[3])
    return None


def file_set(
    files: Sequence[object], *, max_bytes: int = DEFAULT_MAX_BYTES, where: str = "input"
) -> tuple[object, object, object, object]:
    """The geographic header and segments 1, 2, 3 among ``files`` (paths or named uploads): the
    header by its name (``geo``), a segment by the number it holds (or its name); two files for
    one role, a missing role or a stray file is refused naming them
    (:func:`engine.data.folders.pl94171_roles`)."""
    return pl94171_roles(
        files,
        lambda f: segment_number(f, max_bytes=max_bytes),  # type: ignore[arg-type]
        where=where,
    )


def _read_segment(source: DataSource, number: int, max_bytes: int) -> CsvTable:
    label = _label(source, f"segment {number}")
    names = [v for t in SEGMENTS[number] for v in variables(t)]
    reader = CsvReader(
        source,
        ("CIFSN", "LOGRECNO", *names),
        field_names=(*SEGMENT_PREFIX, *names),
        delimiter="|",
        max_bytes=max_bytes,
        name=label,
    )
    first = split_fields(reader.stream.first_line(), "|") or []
    expected = f"{number:02d}"
    if len(first) > 3 and first[3] != expected:
        reader.close()
        raise DataValidationError(
            [
                Problem(
                    label,
                    f"this is not segment {number} (CIFSN {first[3]!r}); "
                    "pass the files in the order geo, segment 1, segment 2, segment 3",
                    1,
                    "CIFSN",
                )
            ]
        )
    kinds: dict[str, Codes | Integers] = {
        "CIFSN": Codes((expected,)),
        "LOGRECNO": Integers(minimum=1, what="LOGRECNO"),
    }
    kinds.update({variable: Integers() for variable in names})
    return reader.read(kinds)


def _label(source: DataSource, default: str) -> str:
    """The file's name, or ``default`` for raw bytes (four unnamed uploads must stay distinct)."""
    if isinstance(source, bytes | bytearray | memoryview):
        return default
    return source_name(source)


def _duplicate_logrecno(problems: Problems, table: CsvTable) -> None:
    ok = np.flatnonzero(table.ok("LOGRECNO"))
    duplicate_problems(
        problems,
        table.file,
        "LOGRECNO",
        table.values["LOGRECNO"][ok],
        table.rows[ok],
        lambda value, first: f"LOGRECNO {value} appears more than once (first in row {first})",
        "repeating a LOGRECNO",
    )


def _join_problems(
    problems: Problems,
    geo: CsvTable,
    geo_logrecno: np.ndarray,
    geo_ok: np.ndarray,
    segment: CsvTable,
    seg_logrecno: np.ndarray,
    seg_ok: np.ndarray,
) -> None:
    in_segment = np.asarray(
        pc.is_in(pa.array(geo_logrecno), value_set=pa.array(seg_logrecno[seg_ok])).to_numpy(
            zero_copy_only=False
        ),
        dtype=bool,
    )
    in_geo = np.asarray(
        pc.is_in(pa.array(seg_logrecno), value_set=pa.array(geo_logrecno[geo_ok])).to_numpy(
            zero_copy_only=False
        ),
        dtype=bool,
    )
    missing = np.flatnonzero(geo_ok & ~in_segment)
    if missing.size:
        problems.add(
            (segment.file, "missing"),
            segment.file,
            "LOGRECNO",
            missing,
            lambda take: [
                f"no record for LOGRECNO {geo_logrecno[i]} (row {geo.rows[i]} of {geo.file})"
                for i in missing[take]
            ],
            f"of {geo.file} without a record here",
            located=False,
        )
    extra = np.flatnonzero(seg_ok & ~in_geo)
    problems.add(
        (segment.file, "extra"),
        segment.file,
        "LOGRECNO",
        segment.rows[extra],
        lambda take: [
            f"LOGRECNO {seg_logrecno[i]} has no geographic record in {geo.file}"
            for i in extra[take]
        ],
        f"without a geographic record in {geo.file}",
    )


def _build(table: CsvTable, cells: dict[str, np.ndarray], is_block: np.ndarray) -> PL94171Tables:
    """Block tables from all records' cells; checks table identities, geo totals and nesting."""
    if not is_block.any():
        raise_if([Problem(table.file, f"no block records (SUMLEV {BLOCK_SUMLEV})", None, "SUMLEV")])
    blocks = table.subset(is_block)
    problems = Problems()
    names = {level: blocks.column(column) for level, column in GEO_COLUMNS.items()}
    numbers, valid = component_blocks(
        problems,
        table.file,
        {level: blocks.text[column] for level, column in GEO_COLUMNS.items()},
        names,
        blocks.rows,
    )
    repeated_block_problems(problems, table.file, names["Block"], numbers, blocks.rows, valid)
    geography = geography_from_block_ids(block_numbers_to_ids(numbers))
    block_cells = {k: v[is_block] for k, v in cells.items()}
    _identity_problems(problems, blocks, block_cells)
    if "POP100" in blocks.text:
        # HU100 is not checked: the 2018 prototype's H1 differs from its HU100 on some blocks.
        pop100 = convert_integers(blocks.text["POP100"].combine_chunks(), Integers())
        for check, what, index, describe in pop100.failures:
            problems.add(
                ("POP100", check),
                table.file,
                "POP100",
                blocks.rows[index],
                lambda take, index=index, describe=describe: [
                    describe(v) for v in texts_at(pop100.text, index[take])
                ],
                what,
            )
        if not pop100.failures:
            _mismatch(
                problems,
                blocks,
                pop100.values != block_cells["P0010001"],
                "POP100",
                "differs from P0010001 (total population)",
            )
    if not problems:
        _nesting_problems(problems, table, cells, geography, block_cells["P0010001"])
    raise_if(problems, summary=f"{table.file}: inconsistent P.L. 94-171 tables")
    tables = {
        name: pd.DataFrame({v: block_cells[v] for v in variables(name)}) for name in TABLE_SIZES
    }
    return PL94171Tables(geography=geography, tables=tables)


IDENTITIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("P0010001", ("P0020001",)),
    ("P0030001", ("P0040001",)),
    ("P0020001", ("P0020002", "P0020003")),
    ("P0040001", ("P0040002", "P0040003")),
    ("P0020003", tuple(f"P002{line:04d}" for line in range(5, 12))),
    ("P0040003", tuple(f"P004{line:04d}" for line in range(5, 12))),
    ("P0050001", ("P0050002", "P0050007")),
    ("P0050002", ("P0050003", "P0050004", "P0050005", "P0050006")),
    ("P0050007", ("P0050008", "P0050009", "P0050010")),
    ("H0010001", ("H0010002", "H0010003")),
)
"""Table identities of the P.L. 94-171 shells: each total equals the sum of its parts."""


def _identity_problems(problems: Problems, blocks: CsvTable, cells: dict[str, np.ndarray]) -> None:
    for total, parts in IDENTITIES:
        value = sum(cells[p] for p in parts)
        _mismatch(
            problems, blocks, value != cells[total], total, f"differs from {' + '.join(parts)}"
        )
    for line in RACEETH_LINES:
        p2, p4 = f"P002{line:04d}", f"P004{line:04d}"
        _mismatch(
            problems,
            blocks,
            cells[p4] > cells[p2],
            p4,
            f"the 18-and-over count exceeds {p2} (all ages)",
        )


def _mismatch(
    problems: Problems, table: CsvTable, mask: np.ndarray, column: str, message: str
) -> None:
    hits = np.flatnonzero(mask)
    problems.add(
        (column, message),
        table.file,
        column,
        table.rows[hits],
        lambda take: [message] * len(take),
        f"where it {message}",
    )


def _nesting_problems(
    problems: Problems,
    table: CsvTable,
    cells: dict[str, np.ndarray],
    geography: pd.DataFrame,
    block_pop: np.ndarray,
) -> None:
    """Tract and block-group records must equal the sum of their blocks, and contain every block."""
    sumlev = _sumlev(table)
    for level_code, level in NESTING_SUMLEVS.items():
        mask = sumlev == level_code
        if not mask.any():
            continue
        records = table.subset(mask)
        parts = [
            pc.utf8_lpad(records.text[GEO_COLUMNS[lv]], width=COMPONENT_WIDTHS[lv], padding="0")
            for lv in BLOCK_LEVELS[:-1]
        ]
        joined = pc.binary_join_element_wise(*parts, "")
        ids = np.asarray(
            pc.utf8_slice_codeunits(joined, 0, ID_LENGTHS[level]).to_numpy(zero_copy_only=False),
            dtype=object,
        )
        sums = pd.Series(block_pop).groupby(geography[level].to_numpy()).sum()
        expected = cells["P0010001"][mask]
        actual = sums.reindex(ids).fillna(0).to_numpy(dtype=np.int64)
        wrong = np.flatnonzero(actual != expected)
        problems.add(
            ("P0010001", f"nest {level}"),
            table.file,
            "P0010001",
            records.rows[wrong],
            lambda take, wrong=wrong, ids=ids, actual=actual, expected=expected, level=level: [
                f"the blocks of {level} {ids[i]} sum to {actual[i]:,} persons but its record "
                f"says {expected[i]:,}: blocks are missing or do not nest"
                for i in wrong[take]
            ],
            f"whose {level} record differs from the sum of its blocks",
        )
        orphans = sorted(set(geography[level]) - set(ids))
        for geoid in orphans[:10]:
            problems.append(
                Problem(
                    table.file,
                    f"blocks lie in {level} {geoid}, which has no summary record "
                    f"(SUMLEV {level_code})",
                    None,
                    GEO_COLUMNS[level],
                )
            )
