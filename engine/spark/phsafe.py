"""PHSafe's truncate-and-join and grouped counts as Spark DataFrame operations (PHS §3, Algs. 1–4).

The same steps as :mod:`engine.phsafe.join`, with the data in Spark and the engine's own code for
everything that decides a number (docs/science.md §8: any backend gives the same numbers):

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

import functools
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from engine.core.errors import DataValidationError, Problem, RunCancelled
from engine.data.cef_types import GEO_COLUMNS, PERSON_COLUMNS, UNIT_COLUMNS, CefExtract
from engine.phsafe.config import MEASURED_TABLES, PHSafeConfig
from engine.phsafe.join import (
    TableTabulation,
    attribute_hash,
    count_records,
    truncation_stats,
    with_occurrence,
)
from engine.phsafe.release import run_levels
from engine.phsafe.tables import MEASURED

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import Column, DataFrame, SparkSession

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
        # through Arrow, not pandas (pyspark 4 warns that it does not fully support pandas 3)
        frames = {
            kind: spark.createDataFrame(
                pa.table(
                    {
                        c: pa.array(getattr(source, kind)[c].astype(str).tolist(), pa.string())
                        for c in cols
                    }
                )
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
        # A local path is handed to Spark as an absolute file: URI: a Spark Connect server (or a
        # cluster whose default file system is HDFS) would resolve a relative or bare path
        # against its own working folder or file system, not the one the user typed it in.
        location = Path(path).resolve().as_uri() if local else path
        frame = spark.read.csv(location, header=True, inferSchema=False, sep=",")
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
    # optional dependency (the spark extra): imported where Spark runs
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


def _columns(batch: pa.RecordBatch) -> dict[str, np.ndarray]:
    return {n: batch.column(n).to_numpy(zero_copy_only=False) for n in batch.schema.names}


def _hash_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Append ``p_h0``, the attribute hash (:func:`engine.phsafe.join.attribute_hash`), as int64 bits."""
    for batch in batches:
        h0 = attribute_hash(_columns(batch)).view(np.int64)
        yield batch.append_column("p_h0", pa.array(h0, type=pa.int64()))


def _finish_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The record hash's unsigned order ``p_order`` (from ``p_h0`` and the occurrence ``p_occ``)
    and every Algorithm-1 table's person filter ``pf_<table>``."""
    for batch in batches:
        cols = _columns(batch)
        h = with_occurrence(cols["p_h0"].view(np.uint64), cols["p_occ"].astype(np.uint64))
        arrays = [batch.column(n) for n in PERSON_NAMES.values()]
        arrays.append(pa.array((h ^ _SIGN).view(np.int64), type=pa.int64()))
        for table in _ALG1:
            keep = MEASURED[table].person_filter
            assert keep is not None
            arrays.append(pa.array(np.asarray(keep(cols), dtype=bool), type=pa.bool_()))
        yield pa.RecordBatch.from_arrays(arrays, names=_PERSON_OUT)


def _unit_flag_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Append every measured table's unit filter ``uf_<table>``."""
    for batch in batches:
        cols = _columns(batch)
        for table in MEASURED_TABLES:
            flag = np.asarray(MEASURED[table].unit_filter(cols), dtype=bool)
            batch = batch.append_column(_flag("uf", table), pa.array(flag, type=pa.bool_()))
        yield batch


def _flag(prefix: str, table: str) -> str:
    """Column name of a per-table flag (``PH1_num`` → ``pf_PH1_num``)."""
    return f"{prefix}_{table}"


_ALG1 = tuple(t for t in MEASURED_TABLES if MEASURED[t].algorithm == 1)
_ALG2 = tuple(t for t in MEASURED_TABLES if MEASURED[t].algorithm == 2)
_PERSON_OUT = [*PERSON_NAMES.values(), "p_order", *(_flag("pf", t) for t in _ALG1)]
_UNIT_OUT = [*UNIT_NAMES.values(), "u_state", *(_flag("uf", t) for t in MEASURED_TABLES)]


def _schema(names: Sequence[str]) -> str:
    return ", ".join(f"{n} {'boolean' if n[:3] in ('pf_', 'uf_') else 'long'}" for n in names)


def prepare(spark: SparkSession, cef: SparkCef, state_filter: Sequence[str]) -> SparkPrepared:
    """PHSafe's preparation on Spark (see :func:`engine.phsafe.join.prepare_extract`).

    Lazy apart from three small jobs (the states present, and the numbers of persons and units):
    the hashing and filters run when :func:`tabulate_all` asks for counts."""
    # optional dependency (the spark extra): imported where Spark runs
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    states_wanted = sorted({str(s) for s in state_filter})
    wanted = [int(s) for s in states_wanted if s.isdigit()]
    geo = _integers(
        cef.geo, {"TABBLKST": "g_state", "MAFID": "g_mafid", "RTYPE": "g_rtype"}, "geo"
    ).withColumn("in_states", F.col("g_state").isin(wanted) if wanted else F.lit(False))
    housing_flag = F.col("in_states") & ~F.col("g_rtype").isin(4, 5)
    stats = geo.agg(
        F.collect_set(F.when(housing_flag, F.col("g_state"))).alias("codes"),
        F.max((~F.col("in_states")).cast("int")).alias("outside"),
    ).collect()[0]
    codes = sorted(stats["codes"] or [])
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
    geo_map = geo.filter(housing_flag).select(
        F.col("g_mafid").alias("u_mafid"), state_index.cast("bigint").alias("u_state")
    )
    units = _integers(cef.units, UNIT_NAMES, "units").join(geo_map, "u_mafid", "inner")
    units = units.select(*UNIT_NAMES.values(), "u_state")

    persons = _integers(cef.persons, PERSON_NAMES, "persons")
    if stats["outside"]:
        state_mafids = geo.filter("in_states").select(F.col("g_mafid").alias("p_mafid"))
        persons = persons.join(state_mafids, "p_mafid", "left_semi")
    persons = persons.select(*PERSON_NAMES.values())
    n_persons, n_units = persons.count(), units.count()

    hashed = persons.mapInArrow(_hash_batches, _schema([*PERSON_NAMES.values(), "p_h0"]))
    # identical records share MAFID and attribute hash; number them 0, 1, … (any order will do)
    same = Window.partitionBy("p_mafid", "p_h0").orderBy(*_TIE_ORDER)
    numbered = hashed.withColumn("p_occ", (F.row_number().over(same) - 1).cast("bigint"))
    return SparkPrepared(
        states=tuple(f"{c:02d}" for c in codes),
        state_filter=tuple(states_wanted),
        persons=numbered.mapInArrow(_finish_batches, _schema(_PERSON_OUT)),
        units=units.mapInArrow(_unit_flag_batches, _schema(_UNIT_OUT)),
        n_persons=n_persons,
        n_units=n_units,
    )


def _emit_counts(
    rows: list[tuple[str, str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [
            pa.array([t for t, _, f, *_ in rows for _ in range(f.size)], type=pa.string()),
            pa.array([lv for _, lv, f, *_ in rows for _ in range(f.size)], type=pa.string()),
            *(
                pa.array(np.concatenate([r[k] for r in rows]).astype(np.int64), type=pa.int64())
                for k in (2, 3, 4, 5)
            ),
        ],
        names=["table", "level", "flat", "full", "trunc", "fp"],
    )


def _count_batches(
    plan: Mapping[str, tuple[str, ...]], states: tuple[str, ...], joined: bool
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function counting each batch with :func:`count_records`, every table of
    ``plan`` (table → levels); it emits the non-zero cells (and the unmapped records, level "")."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            cols = _columns(batch)
            rows = []
            for table, levels in plan.items():
                if joined:
                    rows_in = np.flatnonzero(cols[_flag("in", table)])
                    kept = np.asarray(cols[_flag("kept", table)], dtype=bool)[rows_in]
                else:
                    rows_in = np.flatnonzero(cols[_flag("uf", table)])
                    kept = np.ones(rows_in.size, dtype=bool)
                if rows_in.size == 0:
                    continue
                recs = {n: v[rows_in] for n, v in cols.items() if n[:2] in ("p_", "u_")}
                counts, unmapped = count_records(table, levels, states, recs, kept)
                for level, c in counts.items():
                    f, t = c.true_full.reshape(-1), c.true_truncated.reshape(-1)
                    p = c.final_pop.reshape(-1) if c.final_pop is not None else np.zeros_like(f)
                    nz = np.flatnonzero((f != 0) | (t != 0) | (p != 0))
                    rows.append((table, level, nz, f[nz], t[nz], p[nz]))
                if unmapped:
                    one = np.ones(1, dtype=np.int64)
                    rows.append((table, "", -one, unmapped * one, 0 * one, 0 * one))
            if rows:
                yield _emit_counts(rows)

    return run


def _empty_records() -> dict[str, np.ndarray]:
    names = [*PERSON_NAMES.values(), *UNIT_NAMES.values(), "u_state"]
    return {n: np.zeros(0, dtype=np.int64) for n in names}


def tabulate_all(
    prepared: SparkPrepared,
    config: PHSafeConfig,
    *,
    non_private: bool = False,
    progress: ProgressCallback | None = None,
    cancel: CancelCallback | None = None,
) -> dict[str, TableTabulation]:
    """Every measured table at the run's levels (:func:`engine.phsafe.release.run_levels`): the same
    :class:`TableTabulation` as :func:`engine.phsafe.release.tabulate_all` on the same extract; a
    ``tabulate`` for :func:`engine.phsafe.release.run_phsafe`.

    All tables in one pass: one window ranks each household's persons for every table (the first
    τ by record hash), one window finds non-unique units, one join, one counting job and one
    household-size job. ``cancel()`` is checked between jobs (then
    :class:`~engine.core.errors.RunCancelled`)."""
    # optional dependency (the spark extra): imported where Spark runs
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    plan = {t: run_levels(t, config, non_private) for t in MEASURED_TABLES}
    plan = {t: levels for t, levels in plan.items() if levels}
    alg1 = [t for t in _ALG1 if t in plan]
    alg2 = [t for t in _ALG2 if t in plan]
    tau = {t: config.tau.get(t) for t in alg1}
    states = prepared.states

    def check(step: str, fraction: float) -> None:
        if cancel is not None and cancel():
            raise RunCancelled(f"PHSafe run on Spark cancelled before {step}")
        if progress is not None:
            progress(step, fraction)

    rows: list = []
    sizes: list = []
    if alg1:
        household = (
            Window.partitionBy("p_mafid")
            .orderBy("p_order", *_TIE_ORDER)
            .rowsBetween(Window.unboundedPreceding, Window.currentRow)
        )
        persons = prepared.persons.filter(_any(F.col(_flag("pf", t)) for t in alg1))
        for t in alg1:
            pf = F.col(_flag("pf", t))
            rank = F.sum(pf.cast("long")).over(household)
            kept = pf if tau[t] is None else pf & (rank <= int(tau[t]))
            persons = persons.withColumn(_flag("kept", t), kept)
        same_mafid = Window.partitionBy("u_mafid")
        units = prepared.units
        for t in alg1:
            uf = F.col(_flag("uf", t))
            units = units.withColumn(
                _flag("uq", t), uf & (F.sum(uf.cast("long")).over(same_mafid) == 1)
            )
        units = units.filter(_any(F.col(_flag("uq", t)) for t in alg1))
        joined = persons.join(units, persons.p_mafid == units.u_mafid, "inner")
        joined = joined.select(
            *PERSON_NAMES.values(),
            *UNIT_NAMES.values(),
            "u_state",
            *((F.col(_flag("pf", t)) & F.col(_flag("uq", t))).alias(_flag("in", t)) for t in alg1),
            *(F.col(_flag("kept", t)) for t in alg1),
        ).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            check("truncating, joining and counting on Spark", 0.1)
            out = ", ".join(
                ["table string", "level string", "flat long", "full long", "trunc long", "fp long"]
            )
            counted = joined.mapInArrow(
                _count_batches({t: plan[t] for t in alg1}, states, True), out
            )
            if alg2:
                counted = counted.unionByName(
                    prepared.units.mapInArrow(
                        _count_batches({t: plan[t] for t in alg2}, states, False), out
                    )
                )
            rows = _sum_counts(counted)
            check("household sizes on Spark", 0.7)
            per_household = joined.groupBy("p_mafid").agg(
                *(
                    F.sum(F.col(_flag("in", t)).cast("long")).alias(f"s{i}")
                    for i, t in enumerate(alg1)
                ),
                *(
                    F.sum((F.col(_flag("in", t)) & ~F.col(_flag("kept", t))).cast("long")).alias(
                        f"l{i}"
                    )
                    for i, t in enumerate(alg1)
                ),
            )
            stacked = per_household.select(
                F.explode(
                    F.array(
                        *(
                            F.struct(
                                F.lit(t).alias("table"),
                                F.col(f"s{i}").alias("size"),
                                F.col(f"l{i}").alias("lost"),
                            )
                            for i, t in enumerate(alg1)
                        )
                    )
                ).alias("h")
            ).select("h.*")
            sizes = (
                stacked.filter("size > 0")
                .groupBy("table", "size")
                .agg(F.count("*").alias("households"), F.sum("lost").alias("lost"))
                .collect()
            )
        finally:
            joined.unpersist()
    elif alg2:
        check("counting on Spark", 0.1)
        out = "table string, level string, flat long, full long, trunc long, fp long"
        rows = _sum_counts(prepared.units.mapInArrow(_count_batches(plan, states, False), out))
    return _tabulations(plan, tau, states, rows, sizes)


def _any(columns: Iterable[Column]) -> Column:
    """The OR of boolean columns."""
    return functools.reduce(operator.or_, columns)


def _sum_counts(counted: DataFrame) -> list:
    # optional dependency (the spark extra): imported where Spark runs
    from pyspark.sql import functions as F

    return (
        counted.groupBy("table", "level", "flat")
        .agg(F.sum("full").alias("full"), F.sum("trunc").alias("trunc"), F.sum("fp").alias("fp"))
        .collect()
    )


def _tabulations(
    plan: Mapping[str, tuple[str, ...]],
    tau: Mapping[str, int | None],
    states: tuple[str, ...],
    rows: list,
    sizes: list,
) -> dict[str, TableTabulation]:
    """Assemble the engine's tabulations from the summed non-zero cells and the size histogram."""
    out: dict[str, TableTabulation] = {}
    for table, levels in plan.items():
        empty, _ = count_records(table, levels, states, _empty_records(), np.zeros(0, dtype=bool))
        sums = {
            lvl: {k: np.zeros(c.true_full.size, dtype=np.int64) for k in ("full", "trunc", "fp")}
            for lvl, c in empty.items()
        }
        unmapped = 0
        for r in rows:
            if r["table"] != table:
                continue
            if r["level"] == "":
                unmapped += int(r["full"])
                continue
            for k in ("full", "trunc", "fp"):
                sums[r["level"]][k][r["flat"]] += int(r[k])
        counts = {
            lvl: replace(
                c,
                true_full=sums[lvl]["full"].reshape(c.true_full.shape),
                true_truncated=sums[lvl]["trunc"].reshape(c.true_full.shape),
                final_pop=None
                if c.final_pop is None
                else sums[lvl]["fp"].reshape(c.true_full.shape),
            )
            for lvl, c in empty.items()
        }
        truncation = None
        if tau.get(table) is not None:
            hist = sorted(
                (int(r["size"]), int(r["households"]), int(r["lost"]))
                for r in sizes
                if r["table"] == table
            )
            truncation = truncation_stats(
                table,
                int(tau[table]),  # type: ignore[arg-type]
                np.array([h[0] for h in hist], dtype=np.int64),
                np.array([h[1] for h in hist], dtype=np.int64),
                sum(h[2] for h in hist),
            )
        out[table] = TableTabulation(
            table=table, levels=counts, truncation=truncation, unmapped_records=unmapped
        )
    return out
