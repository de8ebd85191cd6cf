"""Simple-random-sampling baseline of Petti & Flaxman 2020 (Methods, Fig. 2, Table 1;
docs/science.md §5).

Sample a fraction ``f`` of the persons without replacement, scale the sampled counts by ``1/f`` and
compute the same error and EPL metrics as for TopDown. On a block histogram the sample of
``round(f · N)`` persons from the whole population is one multivariate hypergeometric draw over all
(block, cell) counts (NumPy's vectorised ``marginals`` method), whose per-block margins are exactly
those of sampling persons without replacement. ``f = 1`` reproduces the data (zero error).

:func:`tabulate_tidy` turns true and estimated block histograms into the tidy comparison table of
:mod:`engine.metrics.error_tables` for marginal queries named ``TOTAL``, ``DETAILED``, one attribute
(``RACEETH``), a product of attributes joined by ``*`` (``VOTINGAGE*RACEETH``) or a recode such as
``HHINSTLEVELS`` (household / institutional / non-institutional groups of HHGQ on the 2,016-cell
schema, :mod:`engine.schema.marginals`); cell labels are the attribute levels (or recode groups)
joined by ``|`` (``TOTAL`` has the single cell ``total``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from engine.core.errors import ValidationError
from engine.data.histogram import BlockHistogram
from engine.metrics.epl import epl_table
from engine.metrics.epl_settings import EPLSettings
from engine.metrics.error_tables import mae_table
from engine.schema.attributes import RECODES, Schema
from engine.schema.marginals import MarginalParse, cell_index, parse_marginal

DEFAULT_QUERIES: tuple[str, ...] = ("TOTAL", "VOTINGAGE", "RACEETH", "DETAILED")
DEFAULT_FRACTIONS: tuple[float, ...] = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95)


def _check_fraction(fraction: float) -> float:
    f = float(fraction) if isinstance(fraction, int | float | np.number) else math.nan
    if isinstance(fraction, bool) or not (0.0 < f <= 1.0):
        raise ValidationError(f"sampling fraction must lie in (0, 1]; got {fraction!r}")
    return f


def sample_counts(counts: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Counts of a simple random sample of ``round(fraction · total)`` persons, same shape.

    ``counts`` holds non-negative integer person counts (any shape, e.g. blocks × cells).
    """
    f = _check_fraction(fraction)
    if not isinstance(rng, np.random.Generator):
        raise ValidationError(
            "rng must be a numpy.random.Generator (use np.random.default_rng(seed))"
        )
    c = np.asarray(counts)
    if c.size and (not np.issubdtype(c.dtype, np.integer) or (c < 0).any()):
        raise ValidationError("SRS needs non-negative integer person counts")
    flat = c.astype(np.int64).ravel()
    n_sample = int(round(f * int(flat.sum())))
    if n_sample == int(flat.sum()):
        return flat.reshape(c.shape).copy()
    drawn = rng.multivariate_hypergeometric(flat, n_sample, method="marginals")
    return drawn.reshape(c.shape)


def srs_estimate(counts: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """SRS estimate of ``counts``: a ``fraction`` sample scaled by ``1 / fraction`` (float)."""
    f = _check_fraction(fraction)
    return sample_counts(counts, f, rng).astype(np.float64) / f


def _recoded(schema: Schema, query: str) -> MarginalParse | None:
    """The parse of a query that collapses an attribute's levels (``HHINSTLEVELS``, or a product
    naming one: ``HHINSTLEVELS*VOTINGAGE``), else None (a plain marginal; docs/science.md §4)."""
    if not any(part in RECODES for part in query.split("*")):
        return None
    return parse_marginal(query, schema.attribute_levels, schema.name)


def _recoded_labels(schema: Schema, parse: MarginalParse) -> list[str]:
    """Answer-cell labels of a recoded query: the kept levels (or recode groups) joined by ``|``,
    in the C order of :func:`engine.schema.marginals.cell_index`."""
    per_axis = []
    for attr in parse.kept:
        recode = parse.recode(attr)
        per_axis.append(recode[1] if recode else schema.attributes[schema.axis(attr)].levels)
    return ["|".join(combo) for combo in itertools.product(*per_axis)]


def _recoded_marginal(schema: Schema, counts: np.ndarray, parse: MarginalParse) -> np.ndarray:
    """Rows × answer cells of a recoded query: each cell's count added to its answer cell."""
    index = cell_index(parse, schema.attribute_levels)
    out = np.zeros((counts.shape[0], int(index.max()) + 1))
    for cell in range(counts.shape[1]):
        out[:, index[cell]] += counts[:, cell]
    return out


def _query_axes(schema: Schema, query: str) -> tuple[int, ...] | None:
    """Kept attribute axes of a marginal query (``None`` = all cells, i.e. DETAILED)."""
    if query == "TOTAL":
        return ()
    if query == "DETAILED":
        return None
    names = query.split("*")
    try:
        return tuple(schema.axis(n) for n in names)
    except KeyError as exc:
        raise ValidationError(
            f"query {query!r}: {exc.args[0]}; use TOTAL, DETAILED, an attribute or A*B"
        ) from None


def _cell_labels(schema: Schema, axes: tuple[int, ...]) -> list[str]:
    if not axes:
        return ["total"]
    levels = [schema.attributes[a].levels for a in axes]
    return ["|".join(combo) for combo in itertools.product(*levels)]


def _marginal(schema: Schema, counts: np.ndarray, axes: tuple[int, ...] | None) -> np.ndarray:
    """Rows × marginal cells (C order over the kept axes, in the order given)."""
    if axes is None:
        return counts
    cube = counts.reshape((counts.shape[0], *schema.shape))
    dropped = tuple(i + 1 for i in range(len(schema.shape)) if i not in axes)
    kept = cube.sum(axis=dropped)
    order = np.argsort(np.argsort(axes))  # position of each requested axis among the kept ones
    kept = np.transpose(kept, (0, *(int(o) + 1 for o in order))) if axes else kept
    return kept.reshape(counts.shape[0], -1)


def tabulate_tidy(
    hist: BlockHistogram,
    estimate: np.ndarray,
    queries: Sequence[str] = DEFAULT_QUERIES,
    *,
    levels: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Tidy table (geolevel, geounit, query, cell, true, estimate) of ``queries`` at ``levels``.

    ``estimate`` has the shape of ``hist.counts``; ``levels`` default to all of ``hist.levels``.
    """
    est = np.asarray(estimate, dtype=np.float64)
    if est.shape != hist.counts.shape:
        raise ValidationError(
            f"estimate has shape {est.shape}; the histogram's counts have {hist.counts.shape}"
        )
    chosen = list(hist.levels if levels is None else levels)
    unknown = [lv for lv in chosen if lv not in hist.levels]
    if unknown:
        raise ValidationError(f"unknown geolevel(s) {unknown}; the data has {list(hist.levels)}")
    true = hist.counts.astype(np.float64)
    frames = []
    for level in chosen:
        codes, units = pd.factorize(hist.geography[level].astype(str), sort=True)
        true_l = np.zeros((len(units), true.shape[1]))
        est_l = np.zeros_like(true_l)
        np.add.at(true_l, codes, true)
        np.add.at(est_l, codes, est)
        for query in queries:
            recoded = _recoded(hist.schema, query)
            if recoded is not None:
                labels = _recoded_labels(hist.schema, recoded)
                t = _recoded_marginal(hist.schema, true_l, recoded)
                e = _recoded_marginal(hist.schema, est_l, recoded)
            else:
                axes = _query_axes(hist.schema, query)
                labels = (
                    _cell_labels(hist.schema, tuple(range(len(hist.schema.shape))))
                    if axes is None
                    else _cell_labels(hist.schema, axes)
                )
                t = _marginal(hist.schema, true_l, axes)
                e = _marginal(hist.schema, est_l, axes)
            frames.append(
                pd.DataFrame(
                    {
                        "geolevel": level,
                        "geounit": np.repeat(np.asarray(units, dtype=str), len(labels)),
                        "query": query,
                        "cell": np.tile(np.asarray(labels, dtype=object), len(units)),
                        "true": t.ravel(),
                        "estimate": e.ravel(),
                    }
                )
            )
    return pd.concat(frames, ignore_index=True)


def srs_tidy(
    hist: BlockHistogram,
    fraction: float,
    rng: np.random.Generator,
    queries: Sequence[str] = DEFAULT_QUERIES,
    *,
    levels: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Tidy comparison table of one SRS replicate at ``fraction``."""
    return tabulate_tidy(hist, srs_estimate(hist.counts, fraction, rng), queries, levels=levels)


def srs_sweep(
    hist: BlockHistogram,
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    seeds: Sequence[int] = (0,),
    queries: Sequence[str] = DEFAULT_QUERIES,
    *,
    levels: Sequence[str] | None = None,
    n_boot: int = 100,
    epl_settings: EPLSettings | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> pd.DataFrame:
    """MAE, median AE and EPL (with bootstrap interval) per fraction × seed × geolevel × query.

    ``progress(index, count, what)`` hears each replicate as it starts.

    Columns: fraction, seed, geolevel, query, n_cells, mae, median_ae, mean_error, epl, epl_low,
    epl_high, n_residuals, reason. Each (fraction, seed) pair draws from
    ``default_rng([seed, round(fraction · 10⁶)])``, so a replicate does not depend on which other
    fractions are swept.
    """
    if not fractions:
        raise ValidationError("give at least one sampling fraction")
    checked = [_check_fraction(f) for f in fractions]
    rows = []
    count = len(checked) * len(seeds)
    for f in checked:
        for seed in seeds:
            if progress is not None:
                progress(len(rows), count, f"SRS baseline, fraction {f:g}, seed {seed}")
            rng = np.random.default_rng([int(seed), round(f * 1_000_000)])
            tidy = srs_tidy(hist, f, rng, queries, levels=levels)
            errors = mae_table(tidy)
            epl = epl_table(tidy, n_boot=n_boot, rng=rng, settings=epl_settings)
            merged = errors.merge(epl, on=["geolevel", "query"], how="left")
            merged.insert(0, "seed", int(seed))
            merged.insert(0, "fraction", f)
            rows.append(merged)
    return pd.concat(rows, ignore_index=True)
