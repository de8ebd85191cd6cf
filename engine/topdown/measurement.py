"""The measurement phase of a planned TopDown run (TDA §6.1; SPEC §8).

:func:`measure_plan` draws the noisy answers of every (node, query) of a
:class:`~engine.topdown.plan.TopDownPlan` with :func:`engine.topdown.measure.measure`; keyed
``fast`` noise can run as units of work on an executor (contiguous node ranges, joined by
:func:`concat_measurements`) and gives the same numbers as in process.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.executors import Executor
from engine.topdown.measure import Measurements, measure
from engine.topdown.plan import TopDownPlan
from engine.topdown.queries import QueryGroup


def measure_plan(
    plan: TopDownPlan, truth: np.ndarray, seed: int, *, executor: Executor | None = None
) -> Measurements:
    """The measurement phase (TDA §6.1): noisy answers of every (node, query) of the plan.

    ``fast`` noise is keyed by (seed, level, geounit, query) (SPEC §8,
    :mod:`engine.noise.keyed`); ``exact`` noise comes from OpenDP. With ``executor`` the keyed
    draws run as units of work of about ``options.chunk_cells`` cells each (contiguous node
    ranges; e.g. on Spark executors), which gives the same numbers: a geounit's noise depends only
    on its key. ``exact`` noise always runs here (it needs this process's OS randomness).
    """
    from engine.noise.keyed import geounit_hashes

    tree = plan.tree
    hashes = geounit_hashes(tree.level_names, tree.node_id)
    method = plan.options.noise_method
    mechanism = plan.allocation.mechanism
    if executor is None or method != "fast":
        return measure(
            truth,
            plan.queries,
            plan.budget,
            plan.invariant,
            mechanism,
            None,
            method=method,
            seed=int(seed),
            geounit_hash=hashes,
        )
    rows = max(1, plan.options.chunk_cells // max(truth.shape[1], 1))
    starts = range(0, truth.shape[0], rows)
    units = [
        (
            truth[a : a + rows],
            plan.queries,
            plan.budget[a : a + rows],
            plan.invariant[a : a + rows],
            mechanism,
            int(seed),
            hashes[a : a + rows],
        )
        for a in starts
    ]
    return concat_measurements(executor.map(_measure_unit, units))


def _measure_unit(
    args: tuple[np.ndarray, tuple[QueryGroup, ...], np.ndarray, np.ndarray, str, int, np.ndarray],
) -> Measurements:
    """One unit of measurement work: keyed noise for a contiguous range of nodes."""
    truth, queries, budget, invariant, mechanism, seed, hashes = args
    return measure(
        truth, queries, budget, invariant, mechanism, None, seed=seed, geounit_hash=hashes
    )


def concat_measurements(parts: Sequence[Measurements]) -> Measurements:
    """The measurements of consecutive node ranges as one (rows in the order of ``parts``)."""
    first = parts[0]
    invariant: list[np.ndarray | None] = []
    for j, group in enumerate(first.queries):
        pieces = [p.invariant[j] for p in parts]
        if all(piece is None for piece in pieces):
            invariant.append(None)
            continue
        invariant.append(
            np.concatenate(
                [
                    np.full((p.noisy[j].shape[0], group.size), np.nan) if piece is None else piece
                    for p, piece in zip(parts, pieces, strict=True)
                ]
            )
        )
    return Measurements(
        queries=first.queries,
        noisy=tuple(np.concatenate([p.noisy[j] for p in parts]) for j in range(len(first.queries))),
        variance=np.concatenate([p.variance for p in parts]),
        invariant=tuple(invariant),
        budget=np.concatenate([p.budget for p in parts]),
        mechanism=first.mechanism,
        nominal_variance=np.concatenate([p.nominal_variance for p in parts]),
    )
