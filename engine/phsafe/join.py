"""Filter, truncate-and-join and tabulate: the data-dependent part of PHSafe (PHS §3, Algorithms 1–4).

Steps, following PHS §3.2 and the PHSafe 3.0.0 reader and preprocessing (PHS §6.2.1, §6.3):

1. :func:`prepare_extract` keeps the records of the configured states (``state_filter``), drops
   group-quarters geography (geo ``RTYPE`` 4 or 5) from the geography that defines the population
   groups, joins units to their state, and converts every code to an integer array.
2. :func:`truncate_and_join` (Algorithm 3): the table's person filter, then at most τ persons per
   MAFID — the first τ in an order fixed by a 64-bit hash of the record (ties, which need identical
   hashes, by the record's attributes; identical records are told apart by their occurrence number,
   PHS §6.2.1 footnote) — so the persons kept do not depend on file order or on any attribute order;
   the unit filter, then every unit whose MAFID is not unique is dropped ("DropNonUnique"); inner
   join on MAFID.
3. :func:`tabulate` (Algorithms 1, 2 and 4): each joined record is mapped to its population group in
   every level and to its basis cell, and counted. Counts are kept twice — after truncation (what
   PHSafe measures) and without truncation (the truth) — so the truncation error is exact.

Everything here runs once per run; repeated noise trials reuse the counts.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from engine.core.errors import DataValidationError, Problem
from engine.data.cef_types import CefExtract
from engine.phsafe.tables import ITERATION_CODES, MEASURED, MeasuredTable, iteration_index

HASH_SALT = np.uint64(0x5048_5361_6665_2E33)
"""Fixed salt of the record hash ("PHSafe.3"): the truncation order is reproducible across runs."""

TRUNCATION_CURVE_TAUS: tuple[int, ...] = tuple(range(1, 21))
"""τ values at which the share of truncated persons is reported."""

_PERSON_CODES = ("RTYPE", "MAFID", "QAGE", "CENHISP", "CENRACE", "RELSHIP")
_UNIT_CODES = ("RTYPE", "MAFID", "FINAL_POP", "HHSPAN", "HHRACE", "TEN", "HHT", "HHT2", "CPLT")


@dataclass(frozen=True)
class PreparedExtract:
    """Integer-coded persons and units of the configured states, ready for the nine runs."""

    states: tuple[str, ...]
    """The STATE key set: states with housing-unit geography, ascending FIPS."""
    persons: dict[str, np.ndarray]
    """``p_rtype, p_mafid, p_age, p_hisp, p_race, p_relship`` of the persons of those states."""
    units: dict[str, np.ndarray]
    """``u_rtype, u_mafid, u_final_pop, u_hhspan, u_hhrace, u_ten, u_hht, u_hht2, u_cplt, u_state``
    of the units joined to non-group-quarters geography (``u_state`` indexes :attr:`states`)."""
    person_order: np.ndarray
    """Persons sorted by (MAFID, record hash, attributes): the truncation order of Algorithm 3."""
    state_filter: tuple[str, ...] = ()
    """The ``state_filter`` this extract was prepared for (sorted)."""
    household_start: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """For each position of :attr:`person_order`, the position where its MAFID's run starts."""

    @property
    def n_persons(self) -> int:
        return int(self.persons["p_mafid"].size)

    @property
    def n_units(self) -> int:
        return int(self.units["u_mafid"].size)


@dataclass(frozen=True)
class LevelCounts:
    """Basis counts of one table at one population-group level, shaped (region, iteration, cell)."""

    table: str
    level: str
    region_type: str
    region_ids: tuple[str, ...]
    iteration_codes: tuple[str, ...]
    basis: tuple[int, ...]
    true_truncated: np.ndarray
    true_full: np.ndarray
    final_pop: np.ndarray | None = None
    """Σ FINAL_POP of the counted units (PH8_denom only; the official non-private PH8_num)."""


@dataclass(frozen=True)
class TruncationStats:
    """How many joined persons a table's truncation dropped, and the share at other τ values."""

    table: str
    tau: int
    persons_joined: int
    persons_dropped: int
    households: int
    households_over_tau: int
    largest_household: int
    share_dropped_by_tau: dict[int, float]

    @property
    def share_dropped(self) -> float:
        return self.persons_dropped / self.persons_joined if self.persons_joined else 0.0


@dataclass(frozen=True)
class TableTabulation:
    """All levels' counts of one measured table, its truncation statistics and unmapped records."""

    table: str
    levels: dict[str, LevelCounts]
    truncation: TruncationStats | None
    unmapped_records: int


def _to_int(frame: pd.DataFrame, column: str, label: str) -> np.ndarray:
    """Integer codes of a string column (Arrow cast; located problems when a value is not a number)."""
    try:
        arrow = pc.utf8_trim_whitespace(pa.Array.from_pandas(frame[column].astype("string")))
        cast = pc.cast(arrow, pa.int64())
        if cast.null_count == 0:
            return cast.to_numpy(zero_copy_only=False).astype(np.int64)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        pass
    values = pd.to_numeric(frame[column].astype(str).str.strip(), errors="coerce")
    bad = np.flatnonzero(values.isna().to_numpy())
    if bad.size:
        raise DataValidationError(
            [
                Problem(
                    label, f"{frame[column].iloc[i]!r} is not a whole number", int(i) + 1, column
                )
                for i in bad[:10]
            ],
            summary=f"{label}: non-numeric codes",
        )
    return values.to_numpy(dtype=np.int64)


def _mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser, a bijective avalanche mix of 64-bit words."""
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def attribute_hash(persons: Mapping[str, np.ndarray]) -> np.ndarray:
    """The 64-bit hash of each person record's attributes alone (equal for identical records)."""
    with np.errstate(over="ignore"):
        h = np.full(persons["p_mafid"].shape, HASH_SALT, dtype=np.uint64)
        for key in ("p_mafid", "p_rtype", "p_age", "p_hisp", "p_race", "p_relship"):
            h = _mix64(h ^ persons[key].astype(np.uint64))
        return h


def with_occurrence(h: np.ndarray, occurrence: np.ndarray) -> np.ndarray:
    """The record hash: the attribute hash mixed with the record's occurrence number (0, 1, … among
    records with the same attribute hash), so identical records get distinct hashes."""
    with np.errstate(over="ignore"):
        return _mix64(h ^ _mix64(occurrence.astype(np.uint64) + HASH_SALT))


def record_hash(persons: Mapping[str, np.ndarray]) -> np.ndarray:
    """A 64-bit hash of each person record; identical records get distinct hashes via occurrence.

    Which of several identical records gets which occurrence number does not matter: they are
    indistinguishable, so the multiset of hashes (and every count) is the same in any file order."""
    h = attribute_hash(persons)
    order = np.argsort(h, kind="stable")
    hs = h[order]
    starts = np.r_[True, hs[1:] != hs[:-1]]
    run_start = np.maximum.accumulate(np.where(starts, np.arange(hs.size), 0))
    occurrence = np.empty(h.size, dtype=np.uint64)
    occurrence[order] = (np.arange(hs.size) - run_start).astype(np.uint64)
    return with_occurrence(h, occurrence)


def truncation_order(persons: Mapping[str, np.ndarray]) -> np.ndarray:
    """Persons sorted by MAFID, then record hash, then (only for equal hashes) record attributes."""
    h = record_hash(persons)
    mafid = persons["p_mafid"]
    order = np.lexsort((h, mafid))
    hs, ms = h[order], mafid[order]
    if np.any((hs[1:] == hs[:-1]) & (ms[1:] == ms[:-1])):
        keys = ("p_relship", "p_race", "p_hisp", "p_age", "p_rtype")
        order = np.lexsort((*(persons[k] for k in keys), h, mafid))
    return order


def prepare_extract(extract: CefExtract, state_filter: Sequence[str]) -> PreparedExtract:
    """Filter to ``state_filter``, drop group-quarters geography, join units to states, encode."""
    states_wanted = sorted({str(s) for s in state_filter})
    geo = extract.geo
    geo_state_code = _to_int(geo, "TABBLKST", "geo")
    wanted_codes = np.array([int(s) for s in states_wanted if s.isdigit()], dtype=np.int64)
    in_states = np.isin(geo_state_code, wanted_codes)
    geo_mafid = _to_int(geo, "MAFID", "geo")
    geo_rtype = _to_int(geo, "RTYPE", "geo")
    housing_geo = in_states & (geo_rtype != 4) & (geo_rtype != 5)
    state_codes = np.unique(geo_state_code[housing_geo])
    if state_codes.size == 0:
        present = [f"{c:02d}" for c in np.unique(geo_state_code)[:20]]
        raise DataValidationError(
            [
                Problem(
                    "geo",
                    f"no housing-unit geography for state_filter {states_wanted}; the extract "
                    f"has states {', '.join(present) or '(none)'}",
                    None,
                    "TABBLKST",
                )
            ],
            summary="nothing to tabulate",
        )
    states = tuple(f"{c:02d}" for c in state_codes)
    geo_map = pd.DataFrame(
        {
            "u_mafid": geo_mafid[housing_geo],
            "u_state": np.searchsorted(state_codes, geo_state_code[housing_geo]).astype(np.int64),
        }
    )
    every_state = bool(in_states.all())
    state_mafids = geo_mafid[in_states]

    units_raw = extract.units
    u = {f"u_{c.lower()}": _to_int(units_raw, c, "units") for c in _UNIT_CODES}
    keep_u = slice(None) if every_state else np.isin(u["u_mafid"], state_mafids)
    unit_frame = pd.DataFrame({k: v[keep_u] for k, v in u.items()})
    unit_frame = unit_frame.merge(geo_map, on="u_mafid", how="inner", sort=False)
    units = {k: unit_frame[k].to_numpy(dtype=np.int64) for k in unit_frame.columns}

    persons_raw = extract.persons
    names = {"RTYPE": "p_rtype", "MAFID": "p_mafid", "QAGE": "p_age", "CENHISP": "p_hisp"}
    names |= {"CENRACE": "p_race", "RELSHIP": "p_relship"}
    p = {names[c]: _to_int(persons_raw, c, "persons") for c in _PERSON_CODES}
    keep_p = slice(None) if every_state else np.isin(p["p_mafid"], state_mafids)
    persons = {k: v[keep_p] for k, v in p.items()}
    order = truncation_order(persons)
    mafid_sorted = persons["p_mafid"][order]
    run_start = (
        np.r_[True, mafid_sorted[1:] != mafid_sorted[:-1]] if order.size else np.zeros(0, bool)
    )
    household_start = np.maximum.accumulate(np.where(run_start, np.arange(order.size), 0))
    return PreparedExtract(
        states=states,
        persons=persons,
        units=units,
        person_order=order,
        state_filter=tuple(states_wanted),
        household_start=household_start,
    )


@dataclass(frozen=True)
class JoinedRecords:
    """Output of :func:`truncate_and_join`: person/unit indices of every joined pair."""

    person_index: np.ndarray
    unit_index: np.ndarray
    kept: np.ndarray
    """False for persons beyond the first τ of their household (dropped by truncation)."""


def truncate_and_join(
    prepared: PreparedExtract, table: MeasuredTable, tau: int | None
) -> JoinedRecords:
    """PHS Algorithm 3 for ``table``: filter, keep ≤ τ persons per MAFID by hash, drop non-unique
    units, inner join. ``tau=None`` keeps every person (the untruncated truth) but still marks
    nothing as dropped."""
    persons, units = prepared.persons, prepared.units
    order = prepared.person_order
    assert table.person_filter is not None
    pmask_sorted = table.person_filter(persons)[order]
    n = order.size
    if n:
        start = prepared.household_start
        csum = np.cumsum(pmask_sorted, dtype=np.int64)
        rank = csum - (csum[start] - pmask_sorted[start]) - 1
    else:
        rank = np.zeros(0, dtype=np.int64)
    sel = np.flatnonzero(pmask_sorted)
    person_index = order[sel]
    kept = np.ones(sel.size, dtype=bool) if tau is None else rank[sel] < tau

    umask = table.unit_filter(units)
    unit_rows = np.flatnonzero(umask)
    umafid = units["u_mafid"][unit_rows]
    uniq, first, counts = np.unique(umafid, return_index=True, return_counts=True)
    unique_mafid = uniq[counts == 1]
    unique_row = unit_rows[first[counts == 1]]

    pm = persons["p_mafid"][person_index]
    pos = np.searchsorted(unique_mafid, pm)
    pos_clip = np.minimum(pos, max(unique_mafid.size - 1, 0))
    matched = (unique_mafid[pos_clip] == pm) if unique_mafid.size else np.zeros(pm.size, dtype=bool)
    return JoinedRecords(
        person_index=person_index[matched],
        unit_index=unique_row[pos_clip[matched]],
        kept=kept[matched],
    )


class _Gathered(Mapping[str, np.ndarray]):
    """Columns of the joined records, gathered from persons/units on first use (then cached)."""

    def __init__(
        self, sources: Mapping[str, tuple[np.ndarray, np.ndarray | slice]], size: int
    ) -> None:
        self._sources = sources
        self._cache: dict[str, np.ndarray] = {}
        self._size = size

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self._cache:
            column, index = self._sources[key]
            self._cache[key] = column[index]
        return self._cache[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._sources)

    def __len__(self) -> int:
        return len(self._sources)


def _records(
    prepared: PreparedExtract, joined: JoinedRecords | None, unit_rows: np.ndarray | None = None
) -> _Gathered:
    if joined is None:
        assert unit_rows is not None
        return _Gathered({k: (v, unit_rows) for k, v in prepared.units.items()}, unit_rows.size)
    sources = {k: (v, joined.person_index) for k, v in prepared.persons.items()}
    sources |= {k: (v, joined.unit_index) for k, v in prepared.units.items()}
    return _Gathered(sources, joined.person_index.size)


def basis_positions(table: MeasuredTable, cell: np.ndarray) -> np.ndarray:
    """Index of each record's cell within ``table.basis`` (−1 for records matching no basis cell)."""
    basis = np.asarray(table.basis)
    lookup = np.full(int(basis.max()) + 2, -1, dtype=np.int64)
    lookup[basis] = np.arange(basis.size)
    return np.where(cell >= 0, lookup[np.clip(cell, 0, lookup.size - 1)], -1)


def _level_counts(
    table: MeasuredTable,
    level: str,
    states: tuple[str, ...],
    recs: Mapping[str, np.ndarray],
    pos: np.ndarray,
    dropped: np.ndarray,
    final_pop: np.ndarray | None,
    iterations: Mapping[str, np.ndarray],
) -> LevelCounts:
    """Counts of one level; ``dropped`` holds the record indices truncation removed (few)."""
    geo, iteration_level = level.split("_", 1)
    it = iterations[iteration_level]
    codes = ITERATION_CODES[iteration_level]
    n_basis = len(table.basis)
    if geo == "usa":
        region_type, region_ids = "USA", ("1",)
        flat = it * n_basis + pos
    else:
        region_type, region_ids = "STATE", states
        flat = (recs["u_state"] * len(codes) + it) * n_basis + pos
    valid = (it >= 0) & (pos >= 0)
    shape = (len(region_ids), len(codes), n_basis)
    size = int(np.prod(shape))
    flat_valid = flat[valid]
    full = np.bincount(flat_valid, minlength=size)
    lost = dropped[valid[dropped]]
    trunc = full - np.bincount(flat[lost], minlength=size)
    fp = None
    if final_pop is not None:
        fp = np.bincount(flat_valid, weights=final_pop[valid], minlength=size)
        fp = np.rint(fp).astype(np.int64).reshape(shape)
    return LevelCounts(
        table=table.name,
        level=level,
        region_type=region_type,
        region_ids=region_ids,
        iteration_codes=codes,
        basis=table.basis,
        true_truncated=trunc.astype(np.int64).reshape(shape),
        true_full=full.astype(np.int64).reshape(shape),
        final_pop=fp,
    )


def _truncation_stats(table: str, tau: int, joined: JoinedRecords, n_units: int) -> TruncationStats:
    sizes = np.bincount(joined.unit_index, minlength=n_units)
    size, households = np.unique(sizes[sizes > 0], return_counts=True)
    return truncation_stats(table, tau, size, households, int((~joined.kept).sum()))


def truncation_stats(
    table: str, tau: int, size: np.ndarray, households: np.ndarray, persons_dropped: int
) -> TruncationStats:
    """Truncation statistics from the histogram of joined household sizes: ``households[i]``
    households have ``size[i]`` ≥ 1 joined persons (before truncation)."""
    size = np.asarray(size, dtype=np.int64)
    households = np.asarray(households, dtype=np.int64)
    total = int((size * households).sum())
    curve = {
        t: (float((np.maximum(size - t, 0) * households).sum()) / total if total else 0.0)
        for t in TRUNCATION_CURVE_TAUS
    }
    return TruncationStats(
        table=table,
        tau=int(tau),
        persons_joined=total,
        persons_dropped=int(persons_dropped),
        households=int(households.sum()),
        households_over_tau=int(households[size > tau].sum()),
        largest_household=int(size.max()) if size.size else 0,
        share_dropped_by_tau=curve,
    )


def tabulate_table(
    prepared: PreparedExtract, table_name: str, tau: int | None, levels: Sequence[str]
) -> TableTabulation:
    """Join (Algorithm 1 tables) and count one measured table at ``levels`` (official level keys).

    ``tau=None`` (only meaningful for the untruncated truth) keeps every person of a household."""
    table = MEASURED[table_name]
    if table.algorithm == 1:
        joined = truncate_and_join(prepared, table, tau)
        recs = _records(prepared, joined)
        kept = joined.kept
        truncation = (
            None if tau is None else _truncation_stats(table_name, tau, joined, prepared.n_units)
        )
    else:
        unit_rows = np.flatnonzero(table.unit_filter(prepared.units))
        recs = _records(prepared, None, unit_rows)
        kept = np.ones(unit_rows.size, dtype=bool)
        truncation = None
    counts, unmapped = count_records(table_name, levels, prepared.states, recs, kept)
    return TableTabulation(
        table=table_name, levels=counts, truncation=truncation, unmapped_records=unmapped
    )


def count_records(
    table_name: str,
    levels: Sequence[str],
    states: tuple[str, ...],
    recs: Mapping[str, np.ndarray],
    kept: np.ndarray,
) -> tuple[dict[str, LevelCounts], int]:
    """Algorithms 1, 2 and 4 on joined records: map each to its population group in every level and
    to its basis cell, and count (with and without the records truncation dropped, ``~kept``).

    Counts of disjoint sets of records add up, so a backend may count batches and sum them.
    Returns the counts by level and the number of records that match no basis cell."""
    table = MEASURED[table_name]
    cell = table.cell_of(recs)
    final_pop = recs["u_final_pop"] if table_name == "PH8_denom" else None
    if table.person_iteration:
        race, hisp = recs["p_race"], recs["p_hisp"]
    else:
        race, hisp = recs["u_hhrace"], recs["u_hhspan"]
    iterations = {
        it_level: iteration_index(it_level, race, hisp)
        for it_level in sorted({level.split("_", 1)[1] for level in levels})
    }
    pos = basis_positions(table, cell)
    dropped = np.flatnonzero(~kept)
    counts = {
        level: _level_counts(table, level, states, recs, pos, dropped, final_pop, iterations)
        for level in levels
    }
    return counts, int((cell < 0).sum())
