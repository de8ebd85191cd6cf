"""Structural zeros and group-quarters bounds as constraints (TDA §5.3, §6.2; docs/science.md §4,
§6).

Production TopDown held, for every block, bounds on the person counts by HHGQ derived from the
invariant unit frame: a block with no housing unit and no group-quarters (GQ) facility has 0 persons
in every cell (a structural zero), a GQ type without a facility in the block holds 0 persons, each
GQ facility holds at least one person (a lower bound per GQ type). PHExplore also holds each
occupied housing unit to at least its householder (a lower bound on the household population): that
is the 2018 End-to-End test's rule (PF), not production's — occupancy was not invariant in 2020, so
production set the household lower bound to 0 (TDA §5.3; docs/science.md §6 and its "Corrections",
item 2). The right-hand sides are summed up the tree, so every parent→children problem stays
feasible when the parent meets its own bounds (docs/science.md §4).

:func:`block_bounds` derives these bounds from whatever the data carry:

* ``extra["housing_units"]``, ``extra["occupied_units"]``, ``extra["gq_facilities"]`` (a unit frame
  per block, e.g. the generated population's ``blocks.csv`` or a CEF extract's units);
* ``units`` (occupied, vacant) and ``extra["gq_population"]`` of a P.L. 94-171 file set (H1, P5:
  a GQ type with persons has at least one facility);
* the GQ types of PPMF person records (``extra["gq_types_present"]``: a facility type present in a
  block; types absent hold nobody because the facilities are invariant).

On a schema with an HHGQ attribute the bounds are on the HHGQ marginal (household + 7 GQ types);
otherwise on the TOTAL. Data that carry no unit information (the RI 2010 sample) give no bounds:
:func:`unconstrained_note` quantifies what that lets the run do (persons placed in empty blocks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.core.errors import ValidationError
from engine.data.histogram import BlockHistogram
from engine.topdown.family import ChildBounds, QuerySpec
from engine.topdown.queries import TOTAL, QueryGroup, query_group

HHGQ_QUERY = "HHGQ"
N_GQ_TYPES = 7


@dataclass(frozen=True)
class CountBounds:
    """Bounds ``lower ≤ A_q x ≤ upper`` on query ``query`` for every row (block or node).

    ``lower`` and ``upper`` are float ``(n_rows, size_q)``; ``lower`` is 0 where there is no lower
    bound and ``upper`` is ``inf`` where there is no upper bound. ``source`` says which data gave them.
    """

    query: str
    lower: np.ndarray
    upper: np.ndarray
    source: str


def _frame_facts(hist: BlockHistogram) -> tuple[np.ndarray | None, np.ndarray, np.ndarray, str]:
    """(housing units or None, occupied units, GQ facilities (n, 7)) and a description."""
    n = hist.n_blocks
    extra = hist.extra
    if "gq_facilities" in extra or "housing_units" in extra:
        hu = np.asarray(extra.get("housing_units"), dtype=np.int64)
        occupied = np.asarray(extra.get("occupied_units", np.zeros(n)), dtype=np.int64)
        gq = np.asarray(extra.get("gq_facilities", np.zeros((n, N_GQ_TYPES))), dtype=np.int64)
        return hu, occupied, gq, "housing units and GQ facilities of the block frame"
    if hist.units is not None and "gq_population" in extra:
        units = np.asarray(hist.units, dtype=np.int64)
        gq = (np.asarray(extra["gq_population"]) > 0).astype(np.int64)
        return (
            units.sum(axis=1),
            units[:, 0],
            gq,
            "P.L. 94-171 H1 housing units and P5 group-quarters types",
        )
    if "gq_types_present" in extra:
        gq = np.asarray(extra["gq_types_present"], dtype=np.int64)
        return None, np.zeros(n, dtype=np.int64), gq, "GQ types of the PPMF person records"
    raise LookupError


def block_bounds(hist: BlockHistogram) -> CountBounds | None:
    """Per-block bounds from the data's unit frame (module docstring), or ``None`` if it has none.

    Raises :class:`~engine.core.errors.ValidationError` naming the block if the true counts break a
    bound (the unit frame and the persons disagree), since no estimate could then meet it.
    """
    try:
        hu, occupied, gq, source = _frame_facts(hist)
    except LookupError:
        return None
    n = hist.n_blocks
    if gq.shape != (n, N_GQ_TYPES):
        raise ValidationError(
            f"GQ facilities must be given per block and GQ type (shape ({n}, {N_GQ_TYPES})); "
            f"got {gq.shape}"
        )
    has_gq = gq > 0
    if HHGQ_QUERY in hist.schema.names and hist.schema.attributes[
        hist.schema.axis(HHGQ_QUERY)
    ].size == (N_GQ_TYPES + 1):
        query = HHGQ_QUERY
        lower = np.concatenate([occupied[:, None], gq], axis=1).astype(np.float64)
        upper = np.full((n, N_GQ_TYPES + 1), np.inf)
        if hu is not None:
            upper[:, 0] = np.where(hu > 0, np.inf, 0.0)
        upper[:, 1:] = np.where(has_gq, np.inf, 0.0)
    else:
        query = TOTAL
        lower = (occupied + gq.sum(axis=1)).astype(np.float64)[:, None]
        if hu is None:
            upper = np.full((n, 1), np.inf)
        else:
            upper = np.where((hu > 0) | has_gq.any(axis=1), np.inf, 0.0)[:, None]
    bounds = CountBounds(query, lower, upper, source)
    _check_truth(hist, bounds)
    return bounds


def _describe(query: str, cell: int) -> str:
    if query == TOTAL:
        return "persons"
    return "household persons" if cell == 0 else f"persons in GQ type {cell}"


def block_answers(hist: BlockHistogram, group: QueryGroup) -> np.ndarray:
    """``(n_blocks, group.size)`` float64: the true answers of every block to ``group``, summed
    from the non-zero cells of a sparse histogram (never densified) or from the dense one."""
    if not hist.is_sparse:
        return group.answer(hist.counts).astype(np.float64)
    counts = hist.sparse_counts
    rows = np.repeat(np.arange(hist.n_blocks, dtype=np.int64), np.diff(counts.indptr))
    key = rows * group.size + group.cell_index[counts.indices]
    sums = np.bincount(key, weights=counts.data, minlength=hist.n_blocks * group.size)
    return sums.reshape(hist.n_blocks, group.size)


def _check_truth(hist: BlockHistogram, bounds: CountBounds) -> None:
    answers = block_answers(hist, query_group(hist.schema, bounds.query))
    low = answers < bounds.lower
    high = answers > bounds.upper
    if not (low.any() or high.any()):
        return
    block_ids = hist.geography[hist.levels[-1]].astype(str).to_numpy()
    messages = []
    for b, a in np.argwhere(low | high)[:5]:
        what = _describe(bounds.query, int(a))
        if high[b, a]:
            messages.append(
                f"block {block_ids[b]} has {answers[b, a]:g} {what} but its unit frame allows none"
            )
        else:
            messages.append(
                f"block {block_ids[b]} has {answers[b, a]:g} {what} but its unit frame requires at "
                f"least {bounds.lower[b, a]:g} (one per occupied unit or GQ facility)"
            )
    count = int(np.sum(low | high))
    raise ValidationError(
        f"the persons and the unit frame ({bounds.source}) disagree in {count} place(s): "
        + "; ".join(messages)
        + ". Fix the input or drop its unit information to run without these constraints."
    )


def node_bounds(tree, bounds: CountBounds) -> CountBounds:
    """Block bounds summed up ``tree`` (docs/science.md §4: right-hand sides summed up the tree)."""
    lower = tree.aggregate(bounds.lower)
    upper = tree.aggregate(bounds.upper)
    return CountBounds(bounds.query, lower, upper, bounds.source)


def child_bounds(spec: QuerySpec, bounds: CountBounds, kids: np.ndarray) -> ChildBounds:
    """:class:`ChildBounds` of nodes ``kids`` (zero lower bounds become inactive, ``-inf``)."""
    lower = bounds.lower[kids]
    return ChildBounds(spec, np.where(lower > 0, lower, -np.inf), bounds.upper[kids])


@dataclass(frozen=True)
class UnconstrainedNote:
    """What a run without unit data did to empty blocks (docs/science.md §6: such data get no
    bounds, and every run says so next to its results)."""

    empty_blocks: int
    blocks: int
    persons_in_empty_blocks: int
    persons: int

    @property
    def share(self) -> float:
        return self.persons_in_empty_blocks / self.persons if self.persons else 0.0

    def sentence(self) -> str:
        return (
            f"The data carry no housing units or group quarters, so structural zeros could not be "
            f"held (docs/science.md §6): the {self.empty_blocks:,} blocks with no persons (of "
            f"{self.blocks:,}) received {self.persons_in_empty_blocks:,} persons "
            f"({100 * self.share:.1f}% of {self.persons:,}); production would have held blocks "
            "without housing units or group quarters at 0."
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "structural_zeros_held": False,
            "empty_blocks": self.empty_blocks,
            "blocks": self.blocks,
            "persons_in_empty_blocks": self.persons_in_empty_blocks,
            "share_of_persons": self.share,
            "note": self.sentence(),
        }


def unconstrained_note(truth_blocks: np.ndarray, estimate_blocks: np.ndarray) -> UnconstrainedNote:
    """Persons the estimate put in blocks whose true count is 0 (``(n_blocks, n_cells)`` arrays)."""
    true_total = np.asarray(truth_blocks).sum(axis=1)
    est_total = np.asarray(estimate_blocks).sum(axis=1)
    empty = true_total == 0
    return UnconstrainedNote(
        empty_blocks=int(empty.sum()),
        blocks=int(empty.size),
        persons_in_empty_blocks=int(est_total[empty].sum()),
        persons=int(est_total.sum()),
    )
