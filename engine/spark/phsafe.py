"""PHSafe's truncate-and-join and grouped counts as Spark DataFrame operations (PHS §3, Algs. 1–4).

The same steps as :mod:`engine.phsafe.join`, with the data in Spark and the engine's own code for
everything that decides a number (SPEC §8: any backend gives the same numbers):

1. :func:`prepare` (PHSafe reader and preprocessing, PHS §6.2.1, §6.3): keep the configured states,
   drop group-quarters geography (geo RTYPE 4 or 5), join units to their state, cast every code to
   an integer; each person gets the record hash of :func:`engine.phsafe.join.attribute_hash` and
   :func:`~engine.phsafe.join.with_occurrence` (identical records numbered by a window over equal
   hashes), computed on the executors with ``mapInArrow``.
2. :func:`tabulate_table` (Algorithm 3): the table's person filter
   (:data:`engine.phsafe.tables.MEASURED`), then the first τ persons per MAFID in the order
   (MAFID, record hash as unsigned, attributes) — a window ``row_number`` — so the persons kept do
   not depend on file order or partitioning; the unit filter; units whose MAFID is not unique are
   dropped ("DropNonUnique"); inner join on MAFID.
3. Algorithms 1, 2 and 4: every Arrow batch of joined records is counted by
   :func:`engine.phsafe.join.count_records` on an executor; counts of disjoint batches add up, so a
   ``groupBy`` sum of the batches' non-zero cells gives exactly the local counts. Truncation
   statistics come from the histogram of joined household sizes
   (:func:`engine.phsafe.join.truncation_stats`).

The result is the engine's own :class:`~engine.phsafe.join.TableTabulation`, so noise, outputs and
error analysis are the local engine's (the counts are a few thousand numbers per table).
Only the DataFrame API is used (no RDDs), so this also runs over Spark Connect.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa

from engine.data.cef_types import GEO_COLUMNS, PERSON_COLUMNS, UNIT_COLUMNS, CefExtract
from engine.data.errors import DataValidationError, Problem
from engine.phsafe.config import MEASURED_TABLES, PHSafeConfig
from engine.phsafe.join import (
    TableTabulation,
    attribute_hash,
    count_records,
    truncation_stats,
    with_occurrence,
)
from engine.phsafe.tables import MEASURED

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import DataFrame, SparkSession

PERSON_NAMES: dict[str, str] = {
    "RTYPE": "p_rtype",
    "MAFID": "p_mafid",
    "QAGE": "p_age",
    "CENHISP": "p_hisp",
    "CENRACE": "p_race",
    "RELSHIP": "p_relship",
}
"""Person-file column → the engine's integer record column (as in :mod:`engine.phsafe.join`)."""
UNIT_NAMES: dict[str, str] = {
    c: f"u_{c.lower()}"
    for c in ("RTYPE", "MAFID", "FINAL_POP", "HHSPAN", "HHRACE", "TEN", "HHT", "HHT2", "CPLT")
}
"""Unit-file column → the engine's integer record column."""
_TIE_ORDER = ("p_rtype", "p_age", "p_hisp", "p_race", "p_relship")
"""Attributes that order persons with equal MAFID and record hash (as the local lexsort does)."""
_SIGN = np.uint64(1 << 63)
_COUNT_SCHEMA = "level string, flat long, full long, trunc long, fp long"

ProgressCallback = Callable[[str, float], None]
CancelCallback = Callable[[], bool]


@dataclass(frozen=True)
class SparkCef:
    """The three CEF tables as Spark DataFrames of strings (official column names)."""

    persons: DataFrame
    units: DataFrame
    geo: DataFrame


@dataclass(frozen=True)
class SparkPrepared:
    """Integer-coded persons (with record hashes) and units (with state index) in Spark."""

    states: tuple[str, ...]
    state_filter: tuple[str, ...]
    persons: DataFrame
    """``p_*`` columns, ``p_hash`` (the record hash's bits) and ``p_order`` (its unsigned order)."""
    units: DataFrame
    """``u_*`` columns and ``u_state`` (index into :attr:`states`)."""
    n_persons: int
    n_units: int


def read_cef(spark: SparkSession, source: str | Path | CefExtract) -> SparkCef:
    """The extract as Spark DataFrames: a folder of ``persons.csv``/``units.csv``/``geo.csv``
    (optionally ``.gz``; read by Spark, so it may be on HDFS/S3 too) or an in-memory
    :class:`CefExtract` (already validated by :func:`engine.data.cef.load_cef_extract`)."""
    expected = {"persons": PERSON_COLUMNS, "units": UNIT_COLUMNS, "geo": GEO_COLUMNS}
    if isinstance(source, CefExtract):
        frames = {
            kind: spark.createDataFrame(
                pd.DataFrame({c: getattr(source, kind)[c].astype(str) for c in cols}),
                schema=", ".join(f"`{c}` string" for c in cols),
            )
            for kind, cols in expected.items()
        }
        return SparkCef(**frames)
    folder = str(source).rstrip("/")
    local = "://" not in folder
    frames = {}
    for kind, cols in expected.items():
        path = f"{folder}/{kind}.csv"
        if local and not Path(path).is_file():
            if Path(path + ".gz").is_file():
                path += ".gz"
            else:
                raise DataValidationError(
                    [Problem(folder, f"missing {kind}.csv (or {kind}.csv.gz) in the extract")],
                    summary="the CEF extract is incomplete",
                )
        frame = spark.read.csv(path, header=True, inferSchema=False, sep=",")
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            raise DataValidationError(
                [Problem(f"{kind}.csv", f"missing column {c}", None, c) for c in missing],
                summary=f"{kind}.csv does not have the PHSafe layout",
            )
        frames[kind] = frame.select(*cols)
    return SparkCef(**frames)


def _integers(frame: DataFrame, names: Mapping[str, str], label: str) -> DataFrame:
    """Cast the named string columns to bigint; a located error for any value that is not a number."""
    from pyspark.sql import functions as F

    cast = frame.select(
        *[F.expr(f"try_cast(trim(`{src}`) AS BIGINT)").alias(dst) for src, dst in names.items()],
        *[F.col(f"`{src}`").alias(f"_raw_{dst}") for src, dst in names.items()],
    )
    bad = cast.filter(" OR ".join(f"{dst} IS NULL" for dst in names.values())).limit(10).collect()
    if bad:
        problems = [
            Problem(label, f"{row[f'_raw_{dst}']!r} is not a whole number", None, src)
            for row in bad
            for src, dst in names.items()
            if row[dst] is None
        ]
        raise DataValidationError(problems[:10], summary=f"{label}: non-numeric codes")
    return cast.select(*names.values())


def _hash_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Append ``p_h0``, the attribute hash (:func:`engine.phsafe.join.attribute_hash`), as int64 bits."""
    for batch in batches:
        cols = {n: batch.column(n).to_numpy(zero_copy_only=False) for n in PERSON_NAMES.values()}
        h0 = attribute_hash(cols).view(np.int64)
        yield batch.append_column("p_h0", pa.array(h0, type=pa.int64()))


def _finish_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Replace ``p_h0``/``p_occ`` by the record hash ``p_hash`` and its unsigned order ``p_order``."""
    for batch in batches:
        h0 = batch.column("p_h0").to_numpy(zero_copy_only=False).view(np.uint64)
        occ = batch.column("p_occ").to_numpy(zero_copy_only=False).astype(np.uint64)
        h = with_occurrence(h0, occ)
        cols = [batch.column(n) for n in PERSON_NAMES.values()]
        cols += [pa.array(h.view(np.int64)), pa.array((h ^ _SIGN).view(np.int64))]
        yield pa.RecordBatch.from_arrays(cols, names=[*PERSON_NAMES.values(), "p_hash", "p_order"])


def prepare(spark: SparkSession, cef: SparkCef, state_filter: Sequence[str]) -> SparkPrepared:
    """PHSafe's preparation on Spark (see :func:`engine.phsafe.join.prepare_extract`)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    states_wanted = sorted({str(s) for s in state_filter})
    wanted = [int(s) for s in states_wanted if s.isdigit()]
    geo = _integers(
        cef.geo, {"TABBLKST": "g_state", "MAFID": "g_mafid", "RTYPE": "g_rtype"}, "geo"
    ).withColumn("in_states", F.col("g_state").isin(wanted) if wanted else F.lit(False))
    housing = geo.filter("in_states AND g_rtype NOT IN (4, 5)")
    codes = sorted(r[0] for r in housing.select("g_state").distinct().collect())
    if not codes:
        present = sorted(r[0] for r in geo.select("g_state").distinct().limit(1000).collect())
        listed = ", ".join(f"{c:02d}" for c in present[:20]) or "(none)"
        raise DataValidationError(
            [
                Problem(
                    "geo",
                    f"no housing-unit geography for state_filter {states_wanted}; the extract "
                    f"has states {listed}",
                    None,
                    "TABBLKST",
                )
            ],
            summary="nothing to tabulate",
        )
    state_index = F.array_position(F.array(*[F.lit(c) for c in codes]), F.col("g_state")) - 1
    geo_map = housing.select(
        F.col("g_mafid").alias("u_mafid"), state_index.cast("bigint").alias("u_state")
    )
    units = _integers(cef.units, UNIT_NAMES, "units").join(geo_map, "u_mafid", "inner")
    units = units.select(*UNIT_NAMES.values(), "u_state")

    persons = _integers(cef.persons, PERSON_NAMES, "persons")
    every_state = geo.filter(~F.col("in_states")).limit(1).count() == 0
    if not every_state:
        state_mafids = geo.filter("in_states").select(F.col("g_mafid").alias("p_mafid"))
        persons = persons.join(state_mafids, "p_mafid", "left_semi")
    persons = persons.select(*PERSON_NAMES.values())
    hashed = persons.mapInArrow(
        _hash_batches, ", ".join(f"{c} long" for c in [*PERSON_NAMES.values(), "p_h0"])
    )
    same_hash = Window.partitionBy("p_h0").orderBy(*PERSON_NAMES.values())
    numbered = hashed.withColumn("p_occ", (F.row_number().over(same_hash) - 1).cast("bigint"))
    persons = numbered.mapInArrow(
        _finish_batches,
        ", ".join(f"{c} long" for c in [*PERSON_NAMES.values(), "p_hash", "p_order"]),
    )
    return SparkPrepared(
        states=tuple(f"{c:02d}" for c in codes),
        state_filter=tuple(states_wanted),
        persons=persons,
        units=units,
        n_persons=persons.count(),
        n_units=units.count(),
    )


def _filter_batches(
    table: str, which: str
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function keeping the records that pass ``table``'s person or unit filter."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        spec = MEASURED[table]
        keep_of = spec.person_filter if which == "person" else spec.unit_filter
        assert keep_of is not None
        for batch in batches:
            cols = {n: batch.column(n).to_numpy(zero_copy_only=False) for n in batch.schema.names}
            yield batch.filter(pa.array(np.asarray(keep_of(cols), dtype=bool)))

    return run


def _count_batches(
    table: str, levels: tuple[str, ...], states: tuple[str, ...]
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function counting each batch with :func:`count_records` (non-zero cells)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            cols = {n: batch.column(n).to_numpy(zero_copy_only=False) for n in batch.schema.names}
            kept = np.asarray(cols.pop("kept"), dtype=bool)
            counts, unmapped = count_records(table, levels, states, cols, kept)
            lvl, flat, full, trunc, fp = [], [], [], [], []
            for level, c in counts.items():
                f, t = c.true_full.reshape(-1), c.true_truncated.reshape(-1)
                p = c.final_pop.reshape(-1) if c.final_pop is not None else np.zeros_like(f)
                nz = np.flatnonzero((f != 0) | (t != 0) | (p != 0))
                lvl += [level] * nz.size
                flat.append(nz)
                full.append(f[nz])
                trunc.append(t[nz])
                fp.append(p[nz])
            if unmapped:
                lvl.append("")
                flat.append(np.array([-1]))
                full.append(np.array([unmapped]))
                trunc.append(np.array([0]))
                fp.append(np.array([0]))
            if not lvl:
                continue
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array(lvl, type=pa.string()),
                    *(
                        pa.array(np.concatenate(a).astype(np.int64), type=pa.int64())
                        for a in (flat, full, trunc, fp)
                    ),
                ],
                names=["level", "flat", "full", "trunc", "fp"],
            )

    return run


def _empty_records() -> dict[str, np.ndarray]:
    names = [*PERSON_NAMES.values(), *UNIT_NAMES.values(), "u_state"]
    return {n: np.zeros(0, dtype=np.int64) for n in names}


def tabulate_table(
    prepared: SparkPrepared, table_name: str, tau: int | None, levels: Sequence[str]
) -> TableTabulation:
    """One measured table on Spark: the same :class:`TableTabulation` as
    :func:`engine.phsafe.join.tabulate_table` on the same extract."""
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    table = MEASURED[table_name]
    levels = tuple(levels)
    states = prepared.states
    unit_cols = [*UNIT_NAMES.values(), "u_state"]
    units = prepared.units.mapInArrow(
        _filter_batches(table_name, "unit"), ", ".join(f"{c} long" for c in unit_cols)
    )
    joined: DataFrame
    if table.algorithm == 1:
        person_cols = [*PERSON_NAMES.values(), "p_hash", "p_order"]
        persons = prepared.persons.mapInArrow(
            _filter_batches(table_name, "person"), ", ".join(f"{c} long" for c in person_cols)
        )
        if tau is not None:
            household = Window.partitionBy("p_mafid").orderBy("p_order", *_TIE_ORDER)
            persons = persons.withColumn("kept", F.row_number().over(household) <= int(tau))
        else:
            persons = persons.withColumn("kept", F.lit(True))
        unique = units.groupBy("u_mafid").count().filter("count = 1").select("u_mafid")
        units = units.join(unique, "u_mafid", "left_semi")
        joined = persons.join(units, persons.p_mafid == units.u_mafid, "inner").select(
            *PERSON_NAMES.values(), *unit_cols, "kept"
        )
        joined = joined.persist(StorageLevel.MEMORY_AND_DISK)
    else:
        joined = units.withColumn("kept", F.lit(True))
    try:
        counted = joined.mapInArrow(_count_batches(table_name, levels, states), _COUNT_SCHEMA)
        rows = (
            counted.groupBy("level", "flat")
            .agg(
                F.sum("full").alias("full"), F.sum("trunc").alias("trunc"), F.sum("fp").alias("fp")
            )
            .collect()
        )
        truncation = None
        if table.algorithm == 1 and tau is not None:
            sizes = (
                joined.groupBy("u_mafid")
                .agg(F.count("*").alias("size"), F.sum((~F.col("kept")).cast("long")).alias("lost"))
                .groupBy("size")
                .agg(F.count("*").alias("households"), F.sum("lost").alias("lost"))
                .collect()
            )
            size = np.array([r["size"] for r in sizes], dtype=np.int64)
            households = np.array([r["households"] for r in sizes], dtype=np.int64)
            dropped = int(sum(r["lost"] for r in sizes))
            truncation = truncation_stats(table_name, tau, size, households, dropped)
    finally:
        if table.algorithm == 1:
            joined.unpersist()

    empty, _ = count_records(table_name, levels, states, _empty_records(), np.zeros(0, dtype=bool))
    full = {lvl: np.zeros(c.true_full.size, dtype=np.int64) for lvl, c in empty.items()}
    trunc = {lvl: np.zeros(c.true_full.size, dtype=np.int64) for lvl, c in empty.items()}
    fp = {lvl: np.zeros(c.true_full.size, dtype=np.int64) for lvl, c in empty.items()}
    unmapped = 0
    for r in rows:
        if r["level"] == "":
            unmapped += int(r["full"])
            continue
        full[r["level"]][r["flat"]] += int(r["full"])
        trunc[r["level"]][r["flat"]] += int(r["trunc"])
        fp[r["level"]][r["flat"]] += int(r["fp"])
    counts = {
        lvl: replace(
            c,
            true_full=full[lvl].reshape(c.true_full.shape),
            true_truncated=trunc[lvl].reshape(c.true_full.shape),
            final_pop=None if c.final_pop is None else fp[lvl].reshape(c.true_full.shape),
        )
        for lvl, c in empty.items()
    }
    return TableTabulation(
        table=table_name, levels=counts, truncation=truncation, unmapped_records=unmapped
    )


def tabulate_all(
    prepared: SparkPrepared,
    config: PHSafeConfig,
    *,
    levels_of: Callable[[str], tuple[str, ...]],
    progress: ProgressCallback | None = None,
    cancel: CancelCallback | None = None,
) -> dict[str, TableTabulation]:
    """Every measured table with levels (``levels_of(table)``, e.g. the run's enabled levels), in
    the official order; ``cancel()`` is checked between tables (then :class:`InterruptedError`)."""
    out: dict[str, TableTabulation] = {}
    for i, table in enumerate(MEASURED_TABLES):
        if cancel is not None and cancel():
            raise InterruptedError(f"PHSafe on Spark cancelled before {table}")
        levels = levels_of(table)
        if not levels:
            continue
        if progress is not None:
            progress(f"joining and counting {table} on Spark", i / len(MEASURED_TABLES))
        tau = config.tau.get(table) if MEASURED[table].algorithm == 1 else None
        out[table] = tabulate_table(prepared, table, tau, levels)
    return out
