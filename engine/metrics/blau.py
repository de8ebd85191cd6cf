"""Blau-index and homogeneity-index bias of total population (TDA §9 Table 13; PF Fig. 3;
docs/science.md §5).

* Blau index of a geounit: ``1 − Σ_k p_k²`` over the eight race–ethnicity groups (Hispanic;
  non-Hispanic White, Black, AIAN, Asian, NHPI, Some Other Race alone; Two or more races), on the
  true data. 0 for a one-group geounit, 1 − 1/8 for an even mix. An empty geounit has no mix at
  all; :func:`blau_table` scores it 0 (maximally homogeneous, as PF's homogeneity index does: all
  its cells are zero) by default, or leaves it out of the quintiles with ``empty_blau=None``.
  Scoring empty blocks 0 matches TDA Table 13, whose block quintiles 1 and 2 are merged because
  ties at 0 (empty and one-group blocks, over 40% of US blocks) fill both.
* Quintiles per geolevel by rank (ties broken by geounit id), so the five groups have equal counts
  (±1) even when many geounits share a Blau index of 0 — TDA Table 13 merges block quintiles 1 and 2
  for this reason.
* Blau-index bias: mean signed error (estimate − true) of the total population by Blau quintile ×
  geolevel. TopDown's non-negativity pushes homogeneous geounits up and diverse ones down.
* PF's homogeneity index: the number of cells of the detailed histogram whose true count is zero;
  mean signed error of the total by homogeneity index and geolevel.

Group counts come either from the tidy table (the race–ethnicity query's true values) or directly
from a :class:`~engine.data.histogram.BlockHistogram`. On a schema with a RACEETH attribute (the RI
samples) the groups are its levels; on the 2,016-cell redistricting schema (PPMF uploads, generated
populations) they are folded from HISPANIC × CENRACE as TDA §9 defines them — Hispanic of any race,
then the six race-alone groups and Two or more races (CENRACE 07–63) of non-Hispanics
(:func:`raceeth_fold`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp
from numpy.typing import ArrayLike

from engine.core.errors import ValidationError
from engine.data.histogram import BlockHistogram
from engine.metrics.error_tables import check_tidy
from engine.metrics.universe import BlockUniverse
from engine.schema.attributes import RACEETH, Schema
from engine.schema.ri_fold import raceeth_of

RACEETH_GROUPS: tuple[str, ...] = RACEETH.levels
"""The eight Blau groups, in the order of the RI2010 schema's RACEETH attribute."""
N_QUINTILES = 5
TOTAL_QUERIES: tuple[str, ...] = ("TOTAL", "DETAILED")
"""Where geounit totals come from: the TOTAL query, else the sum of the DETAILED cells."""


def blau_index(counts: ArrayLike) -> np.ndarray:
    """``1 − Σ_k p_k²`` along the last axis of ``counts`` (NaN where the total is 0)."""
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim == 0 or c.shape[-1] == 0:
        raise ValidationError("Blau index needs counts with a non-empty last (group) axis")
    if not np.isfinite(c).all() or (c < 0).any():
        raise ValidationError("Blau index needs finite, non-negative group counts")
    total = c.sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = c / total[..., None]
        out = 1.0 - (p * p).sum(axis=-1)
    return np.where(total > 0, out, np.nan)


def raceeth_fold(schema: Schema) -> sp.csr_matrix | None:
    """``(schema.size, 8)`` 0/1 matrix giving each histogram cell its Blau group (the order of
    :data:`RACEETH_GROUPS`), or ``None`` when the schema has neither a RACEETH attribute with the
    eight groups nor HISPANIC and CENRACE.

    RACEETH: the cell's own level. HISPANIC × CENRACE (TDA §9, Table 13's eight levels): Hispanic
    of any race → ``hisp``; non-Hispanic CENRACE 01–06 → the race alone; 07–63 → ``two``
    (:func:`engine.schema.attributes.raceeth_of`).
    """
    names = schema.names
    index = np.unravel_index(np.arange(schema.size), schema.shape)
    if "RACEETH" in names:
        axis = schema.axis("RACEETH")
        if tuple(schema.attributes[axis].levels) != tuple(RACEETH_GROUPS):
            return None
        group = index[axis]
    elif "HISPANIC" in names and "CENRACE" in names:
        hisp = schema.attributes[schema.axis("HISPANIC")]
        race = schema.attributes[schema.axis("CENRACE")]
        if "hispanic" not in hisp.levels:
            return None
        position = {g: i for i, g in enumerate(RACEETH_GROUPS)}
        table = np.array(
            [[position[raceeth_of(h, r)] for r in race.levels] for h in hisp.levels], np.int64
        )
        group = table[index[schema.axis("HISPANIC")], index[schema.axis("CENRACE")]]
    else:
        return None
    ones = np.ones(schema.size, dtype=np.int64)
    return sp.csr_matrix(
        (ones, (np.arange(schema.size), group)), shape=(schema.size, len(RACEETH_GROUPS))
    )


def raceeth_counts_of_rows(
    geolevel: ArrayLike, geounit: ArrayLike, counts: np.ndarray | sp.spmatrix, schema: Schema
) -> pd.DataFrame | None:
    """True counts of the eight Blau groups per geounit from histogram rows ``counts``
    (``(n, schema.size)``, dense or sparse; one row per (geolevel, geounit)), sorted by geolevel
    and geounit as :func:`raceeth_counts_from_tidy` sorts them; None when the schema has no Blau
    groups (:func:`raceeth_fold`)."""
    fold = raceeth_fold(schema)
    if fold is None:
        return None
    if sp.issparse(counts):
        groups = (sp.csr_matrix(counts) @ fold).toarray()
    else:
        groups = np.asarray(counts) @ fold.toarray()
    keys = pd.DataFrame(
        {
            "geolevel": np.asarray(geolevel, dtype=object).astype(str),
            "geounit": np.asarray(geounit, dtype=object).astype(str),
        }
    )
    order = np.lexsort((keys["geounit"].to_numpy(), keys["geolevel"].to_numpy()))
    return _group_frame(keys.iloc[order], groups[order].astype(np.float64), RACEETH_GROUPS)


def rank_quintiles(values: ArrayLike, tiebreak: ArrayLike | None = None) -> np.ndarray:
    """Quintile 1–5 of each value by rank (1 = smallest), equal group sizes ±1.

    Ties are ordered by ``tiebreak`` (default: position). NaN values get quintile 0 (unranked).
    """
    v = np.asarray(values, dtype=np.float64)
    t = np.arange(v.size) if tiebreak is None else np.asarray(tiebreak)
    out = np.zeros(v.size, dtype=np.int64)
    finite = np.flatnonzero(~np.isnan(v))
    if finite.size == 0:
        return out
    order = np.lexsort((t[finite], v[finite]))
    ranks = np.empty(finite.size, dtype=np.int64)
    ranks[order] = np.arange(finite.size)
    out[finite] = ranks * N_QUINTILES // finite.size + 1
    return out


def _group_frame(keys: pd.DataFrame, counts: np.ndarray, groups: Sequence[str]) -> pd.DataFrame:
    frame = keys.reset_index(drop=True).copy()
    for j, name in enumerate(groups):
        frame[name] = counts[:, j]
    return frame


def raceeth_counts_from_tidy(
    tidy: pd.DataFrame,
    *,
    query: str = "RACEETH",
    groups: Sequence[str] = RACEETH_GROUPS,
    value_col: str = "true",
) -> pd.DataFrame:
    """True counts of the eight groups per geounit, from the ``query`` cells of a tidy table.

    Cells are matched to ``groups`` by label (the cell label must equal the group name). Returns
    columns geolevel, geounit and one column per group.
    """
    check_tidy(
        tidy,
        by=("geolevel", "geounit", "query", "cell"),
        true_col=value_col,
        estimate_col=value_col,
    )
    rows = tidy[tidy["query"] == query]
    if rows.empty:
        raise ValidationError(
            f"the tidy table has no {query!r} query to compute the Blau index from; "
            f"queries present: {sorted(map(str, tidy['query'].unique()))}"
        )
    unknown = sorted(set(map(str, rows["cell"].unique())) - set(groups))
    if unknown:
        raise ValidationError(
            f"{query!r} cells {unknown[:5]} are not Blau groups {list(groups)}; pass groups= "
            "matching the cell labels"
        )
    wide = rows.pivot_table(
        index=["geolevel", "geounit"],
        columns="cell",
        values=value_col,
        aggfunc="sum",
        fill_value=0,
        observed=True,
    )
    wide = wide.reindex(columns=list(groups), fill_value=0)
    return _group_frame(wide.index.to_frame(index=False), wide.to_numpy(np.float64), groups)


def _level_sums(
    hist: BlockHistogram, per_block: np.ndarray
) -> list[tuple[str, pd.Index, np.ndarray]]:
    """Sum the per-block rows of ``per_block`` to every geolevel of ``hist``."""
    out = []
    for level in hist.levels:
        codes, uniques = pd.factorize(hist.geography[level].astype(str), sort=True)
        sums = np.zeros((len(uniques), per_block.shape[1]), dtype=np.float64)
        np.add.at(sums, codes, per_block)
        out.append((level, pd.Index(uniques), sums))
    return out


def raceeth_counts_from_histogram(
    hist: BlockHistogram, *, attribute: str = "RACEETH", groups: Sequence[str] | None = None
) -> pd.DataFrame:
    """True counts of the race–ethnicity groups per geounit at every geolevel of ``hist``.

    The histogram is summed over every other attribute; ``groups`` defaults to the attribute's
    levels (which must number eight for the Blau index of docs/science.md §5, but any count works).
    On a schema without RACEETH but with HISPANIC and CENRACE (the 2,016-cell one) the eight
    groups are folded from those (:func:`raceeth_fold`), from the sparse counts.
    """
    if (
        attribute == "RACEETH"
        and attribute not in hist.schema.names
        and groups is None
        and (fold := raceeth_fold(hist.schema)) is not None
    ):
        per_block = np.asarray((hist.sparse_counts @ fold).toarray(), dtype=np.float64)
        frames = []
        for level, units, sums in _level_sums(hist, per_block):
            keys = pd.DataFrame({"geolevel": level, "geounit": units.astype(str)})
            frames.append(_group_frame(keys, sums, RACEETH_GROUPS))
        return pd.concat(frames, ignore_index=True)
    try:
        axis = hist.schema.axis(attribute)
    except KeyError as exc:
        raise ValidationError(str(exc.args[0])) from None
    labels = tuple(groups) if groups is not None else hist.schema.attributes[axis].levels
    if len(labels) != hist.schema.shape[axis]:
        raise ValidationError(
            f"{len(labels)} group names given for attribute {attribute!r} with "
            f"{hist.schema.shape[axis]} levels"
        )
    cube = hist.counts.reshape((hist.n_blocks, *hist.schema.shape))
    other = tuple(i + 1 for i in range(len(hist.schema.shape)) if i != axis)
    per_block = cube.sum(axis=other).astype(np.float64)
    frames = []
    for level, units, sums in _level_sums(hist, per_block):
        keys = pd.DataFrame({"geolevel": level, "geounit": units.astype(str)})
        frames.append(_group_frame(keys, sums, labels))
    return pd.concat(frames, ignore_index=True)


def blau_table(
    counts: pd.DataFrame,
    *,
    groups: Sequence[str] = RACEETH_GROUPS,
    empty_blau: float | None = 0.0,
) -> pd.DataFrame:
    """Per geounit: geolevel, geounit, population, blau and its quintile within the geolevel.

    ``counts`` is the output of :func:`raceeth_counts_from_tidy` or
    :func:`raceeth_counts_from_histogram`. Empty geounits get blau ``empty_blau`` (default 0, the
    most homogeneous); with ``empty_blau=None`` they get NaN and quintile 0 (unranked).
    """
    missing = [c for c in ("geolevel", "geounit", *groups) if c not in counts.columns]
    if missing:
        raise ValidationError(f"group-count table lacks column(s) {missing}")
    values = counts[list(groups)].to_numpy(np.float64)
    out = counts[["geolevel", "geounit"]].copy().reset_index(drop=True)
    out["geounit"] = out["geounit"].astype(str)
    out["population"] = values.sum(axis=1)
    out["blau"] = blau_index(values)
    if empty_blau is not None:
        out.loc[out["population"] == 0, "blau"] = float(empty_blau)
    out["quintile"] = 0
    for _, idx in out.groupby("geolevel", sort=False).groups.items():
        sub = out.loc[idx]
        out.loc[idx, "quintile"] = rank_quintiles(sub["blau"].to_numpy(), sub["geounit"].to_numpy())
    out["quintile"] = out["quintile"].astype(np.int64)
    return out


def geounit_totals(
    tidy: pd.DataFrame,
    *,
    total_queries: Sequence[str] = TOTAL_QUERIES,
    true_col: str = "true",
    estimate_col: str = "estimate",
) -> pd.DataFrame:
    """True and estimated total population per geounit (geolevel, geounit, true, estimate).

    Taken from the first of ``total_queries`` present in the table, summing its cells per geounit
    (one cell for TOTAL; all cells for DETAILED).
    """
    check_tidy(
        tidy, by=("geolevel", "geounit", "query"), true_col=true_col, estimate_col=estimate_col
    )
    present = set(map(str, tidy["query"].unique()))
    for query in total_queries:
        if query in present:
            rows = tidy[tidy["query"] == query]
            sums = rows.groupby(["geolevel", "geounit"], sort=True, observed=True)[
                [true_col, estimate_col]
            ].sum()
            out = sums.reset_index().rename(columns={true_col: "true", estimate_col: "estimate"})
            out["geounit"] = out["geounit"].astype(str)
            return out
    raise ValidationError(
        f"the tidy table has none of the queries {list(total_queries)} needed for geounit totals; "
        f"queries present: {sorted(present)}"
    )


def blau_quintile_bias(tidy: pd.DataFrame, blau: pd.DataFrame, **totals_kwargs) -> pd.DataFrame:
    """Mean signed error of total population by geolevel × Blau quintile (TDA Table 13).

    ``blau`` is a :func:`blau_table`. Returns geolevel, quintile, n_geounits, blau_low, blau_high,
    mean_true, mean_signed_error and mean_abs_error, geolevels in the order they appear in ``blau``.
    """
    return _quintile_bias(geounit_totals(tidy, **totals_kwargs), blau)


def _quintile_bias(totals: pd.DataFrame, blau: pd.DataFrame) -> pd.DataFrame:
    """:func:`blau_quintile_bias` from a (geolevel, geounit, true, estimate) totals table."""
    merged = totals.merge(blau[blau["quintile"] > 0], on=["geolevel", "geounit"], how="inner")
    if merged.empty:
        raise ValidationError(
            "no geounit of the tidy table has a Blau quintile; check that the Blau table comes "
            "from the same data and geolevels (geounit ids must match)"
        )
    merged["error"] = merged["estimate"] - merged["true"]
    g = merged.groupby(["geolevel", "quintile"], sort=False, observed=True)
    out = pd.DataFrame(
        {
            "n_geounits": g["error"].size(),
            "blau_low": g["blau"].min(),
            "blau_high": g["blau"].max(),
            "mean_true": g["true"].mean(),
            "mean_signed_error": g["error"].mean(),
            "mean_abs_error": g["error"].apply(lambda s: float(np.abs(s).mean())),
        }
    ).reset_index()
    level_order = {lv: i for i, lv in enumerate(dict.fromkeys(blau["geolevel"]))}
    out["_order"] = out["geolevel"].map(level_order)
    return out.sort_values(["_order", "quintile"]).drop(columns="_order").reset_index(drop=True)


def homogeneity_index_from_tidy(
    tidy: pd.DataFrame, *, query: str = "DETAILED", true_col: str = "true"
) -> pd.DataFrame:
    """PF's homogeneity index per geounit: number of ``query`` cells whose true count is 0."""
    check_tidy(tidy, by=("geolevel", "geounit", "query"), true_col=true_col, estimate_col=true_col)
    rows = tidy[tidy["query"] == query]
    if rows.empty:
        raise ValidationError(
            f"the tidy table has no {query!r} query for the homogeneity index; queries present: "
            f"{sorted(map(str, tidy['query'].unique()))}"
        )
    zero = rows.assign(_zero=(rows[true_col].to_numpy(np.float64) == 0))
    out = zero.groupby(["geolevel", "geounit"], sort=True, observed=True)["_zero"].sum()
    out = out.astype(np.int64).rename("homogeneity_index").reset_index()
    out["geounit"] = out["geounit"].astype(str)
    return out


def homogeneity_index_from_histogram(hist: BlockHistogram) -> pd.DataFrame:
    """PF's homogeneity index per geounit at every geolevel of ``hist`` (zero detailed cells)."""
    frames = []
    for level, units, sums in _level_sums(hist, hist.counts.astype(np.float64)):
        frames.append(
            pd.DataFrame(
                {
                    "geolevel": level,
                    "geounit": units.astype(str),
                    "homogeneity_index": (sums == 0).sum(axis=1).astype(np.int64),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def homogeneity_bias(
    tidy: pd.DataFrame, homogeneity: pd.DataFrame, **totals_kwargs
) -> pd.DataFrame:
    """Mean signed error of total population by geolevel × homogeneity index (PF Fig. 3)."""
    totals = geounit_totals(tidy, **totals_kwargs)
    merged = totals.merge(homogeneity, on=["geolevel", "geounit"], how="inner")
    if merged.empty:
        raise ValidationError("no geounit of the tidy table has a homogeneity index (ids differ?)")
    merged["error"] = merged["estimate"] - merged["true"]
    g = merged.groupby(["geolevel", "homogeneity_index"], sort=True, observed=True)
    out = pd.DataFrame(
        {"n_geounits": g["error"].size(), "mean_signed_error": g["error"].mean()}
    ).reset_index()
    return out


GEOGRAPHY_SPINE = "spine"
GEOGRAPHY_TABULATION = "tabulation"
GEOGRAPHY_BOTH = "spine = tabulation"


def tabulation_totals(hist: BlockHistogram, estimated_block_totals: ArrayLike) -> pd.DataFrame:
    """True and estimated total population of every tabulation geounit, summed from blocks.

    ``hist`` holds the true blocks and their tabulation geography (its ``levels``: e.g. State,
    County, Tract, Block_Group, Block); ``estimated_block_totals`` the estimated total population
    of each block, in ``hist``'s block order. Returns geolevel, geounit, true, estimate.
    """
    est = np.asarray(estimated_block_totals, dtype=np.float64).reshape(-1)
    if est.shape != (hist.n_blocks,):
        raise ValidationError(
            f"estimated block totals must have one value per block ({hist.n_blocks}); "
            f"got {est.size}"
        )
    per_block = np.column_stack([hist.block_totals.astype(np.float64), est])
    frames = [
        pd.DataFrame(
            {
                "geolevel": level,
                "geounit": units.astype(str),
                "true": sums[:, 0],
                "estimate": sums[:, 1],
            }
        )
        for level, units, sums in _level_sums(hist, per_block)
    ]
    return pd.concat(frames, ignore_index=True)


def tabulation_blau_bias(hist: BlockHistogram, estimated_block_totals: ArrayLike) -> pd.DataFrame:
    """Blau-quintile bias on the tabulation geographies (block groups, tracts …) summed from blocks.

    The run may have measured on another spine (AIAN-style branches, optimized block groups, SPN
    §1–§6); publication is on the tabulation geographies, where TDA Table 13's pattern is read.
    Columns as :func:`blau_quintile_bias`.
    """
    blau = blau_table(raceeth_counts_from_histogram(hist))
    return _quintile_bias(tabulation_totals(hist, estimated_block_totals), blau)


def spine_and_tabulation_blau_bias(
    spine_bias: pd.DataFrame | None,
    spine_blau: pd.DataFrame | None,
    tabulation_bias: pd.DataFrame,
    tabulation_blau: pd.DataFrame,
) -> pd.DataFrame:
    """One Blau-bias table with a ``geography`` column: the run's spine levels and the tabulation ones.

    A tabulation level whose geounits are exactly a spine level's (the conventional spine) is the
    same numbers: it is kept once, marked ``"spine = tabulation"``. A tabulation level absent from
    the spine (``Block_Group`` beside ``Optimized_Block_Group``) keeps its name, marked
    ``"tabulation"``. A spine level named like a tabulation level but with other geounits (an
    AIAN-style spine splits tracts into inside/outside parts) is renamed ``"<level> (spine)"``, so
    the plain level names always mean the published (tabulation) geographies.
    """
    frames = []
    spine_units: dict[str, set[str]] = {}
    if spine_bias is not None and spine_blau is not None and not spine_bias.empty:
        for level, part in spine_blau.groupby("geolevel", sort=False):
            spine_units[str(level)] = set(map(str, part["geounit"]))
    tab_units = {
        str(level): set(map(str, part["geounit"]))
        for level, part in tabulation_blau.groupby("geolevel", sort=False)
    }
    same = {lv for lv, units in tab_units.items() if spine_units.get(lv) == units}
    if spine_units and spine_bias is not None:
        spine = spine_bias.copy()
        level = spine["geolevel"].astype(str)
        spine["geography"] = np.where(level.isin(same), GEOGRAPHY_BOTH, GEOGRAPHY_SPINE)
        clash = ~level.isin(same) & level.isin(tab_units)
        spine["geolevel"] = np.where(clash, level + " (spine)", level)
        frames.append(spine)
    tab = tabulation_bias[~tabulation_bias["geolevel"].astype(str).isin(same)].copy()
    tab["geography"] = GEOGRAPHY_TABULATION
    frames.append(tab)
    return pd.concat(frames, ignore_index=True)


def blau_bias_report(
    tidy: pd.DataFrame,
    hist: BlockHistogram,
    estimated_block_totals: ArrayLike,
    *,
    spine_counts: pd.DataFrame | None = None,
    universe: BlockUniverse | None = None,
) -> pd.DataFrame:
    """Blau-quintile bias of a run on its spine levels and on the tabulation geographies.

    ``tidy`` is the run's comparison table on its own spine (totals from TOTAL or DETAILED);
    ``spine_counts`` the true race–ethnicity counts of the spine's geounits
    (:func:`raceeth_counts_from_tidy` of the run's RACEETH query, or
    :func:`raceeth_counts_of_rows`; ``None``: tabulation levels only); ``hist`` the true blocks with
    their tabulation geography and ``estimated_block_totals`` the run's estimated block totals in
    ``hist``'s order. ``universe``: the blocks ranked into quintiles at the block level (TDA's:
    blocks with housing units or GQ, :mod:`engine.metrics.universe`; default every block). See
    :func:`spine_and_tabulation_blau_bias`.
    """
    tab_counts = raceeth_counts_from_histogram(hist)
    if universe is not None:
        block_ids = hist.geography[hist.levels[-1]].astype(str).to_numpy()
        tab_counts = universe.restrict(tab_counts, block_ids)
        if spine_counts is not None:
            spine_counts = universe.restrict(spine_counts, block_ids)
    spine_blau = blau_table(spine_counts) if spine_counts is not None else None
    spine_bias = blau_quintile_bias(tidy, spine_blau) if spine_blau is not None else None
    tab_blau = blau_table(tab_counts)
    tab_bias = _quintile_bias(tabulation_totals(hist, estimated_block_totals), tab_blau)
    return spine_and_tabulation_blau_bias(spine_bias, spine_blau, tab_bias, tab_blau)
