"""Which blocks can hold people: the blocks with housing units or group quarters (TDA §5.3, Table 2).

TDA's block-level accuracy figures average over the blocks that have housing units or group
quarters — the 6,398,202 "tabulation blocks with potential positive population" of TDA Table 2, the
sum of the counts of TDA Table 12 — and production left the other blocks out of the spine
(docs/science.md §5, §6). :func:`housed_blocks` finds those blocks in whatever unit frame the data
carry:

* ``extra["housing_units"]`` and ``extra["gq_facilities"]`` (the block frame of a generated
  population, a CEF extract's units): housing units > 0 or a GQ facility of any type;
* ``units`` (occupied, vacant) and ``extra["gq_population"]`` of a P.L. 94-171 file set (H1, P5);

and returns ``None`` where the data carry no housing-unit frame (the RI 2010 sample; PPMF person
records, whose GQ types say nothing about housing units), so a caller can say that every block was
kept. The same facts give TopDown its structural zeros (:mod:`engine.topdown.constraints`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.core.errors import ValidationError
from engine.data.histogram import BlockHistogram

FRAME_SOURCE = "housing units and GQ facilities of the block frame"
PL94171_SOURCE = "P.L. 94-171 H1 housing units and P5 group-quarters types"


@dataclass(frozen=True)
class HousedBlocks:
    """``inside[b]``: block ``b`` (row of the histogram) has a housing unit or group quarters."""

    inside: np.ndarray
    source: str

    @property
    def n_inside(self) -> int:
        return int(self.inside.sum())


def housed_blocks(hist: BlockHistogram) -> HousedBlocks | None:
    """The blocks with housing units or GQ facilities, or ``None`` without a housing-unit frame."""
    n = hist.n_blocks
    extra = hist.extra
    if "housing_units" in extra:
        hu = np.asarray(extra["housing_units"], dtype=np.int64).reshape(-1)
        gq = np.asarray(extra.get("gq_facilities", np.zeros((n, 1))), dtype=np.int64)
        source = FRAME_SOURCE
    elif hist.units is not None and "gq_population" in extra:
        hu = np.asarray(hist.units, dtype=np.int64).sum(axis=1)
        gq = np.asarray(extra["gq_population"], dtype=np.int64)
        source = PL94171_SOURCE
    else:
        return None
    gq = gq.reshape(n, -1) if gq.size else np.zeros((n, 1), dtype=np.int64)
    if hu.shape != (n,):
        raise ValidationError(
            f"the unit frame has {hu.size} housing-unit counts for {n} blocks; it must have one "
            "per block"
        )
    return HousedBlocks(inside=(hu > 0) | (gq > 0).any(axis=1), source=source)
