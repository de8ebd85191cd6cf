"""Which blocks the block-level figures average over: metrics.json ``error_universe`` (docs/science.md §5).

TDA's block figures (Tables 9, 10 and 12, §9's "90% of the blocks with housing units or GQ
population") average over the blocks with housing units or group quarters: production left the
other blocks out of the spine. A block without either is a structural zero — held at exactly 0,
its error is 0 — so averaging over every block dilutes the block MAE and EPL (a generated
1,000,000-person RI, production settings, conventional spine, seeds 1–3: Block TOTAL MAE 4.33 over
every block, 5.69 over the housed ones; TDA Table 9: 4.85; docs/metrics.md).

:func:`block_universe` chooses, for a run's data:

* ``"housed"`` (the default): the blocks with housing units or GQ where the data carry a unit
  frame (:func:`engine.data.unit_frame.housed_blocks`), **as TDA**; every block otherwise, and
  the section says why;
* ``"all"``: every block present in the data (PHExplore's figures before the universe was
  recorded; metrics.json files without ``error_universe`` used it).

Only the block level changes: a geounit above the block holds housed blocks whenever it holds
people. The :class:`BlockUniverse` restricts the block rows of residual matrices (the sparse
metrics), of tidy tables and of per-geounit tables (Blau counts), and writes the ``error_universe``
section.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from engine.core.errors import ValidationError
from engine.data.histogram import BlockHistogram
from engine.data.unit_frame import housed_blocks
from engine.metrics.universe_options import ALL, HOUSED, UNIVERSES

__all__ = ["ALL", "HOUSED", "UNIVERSES", "BlockUniverse", "block_universe", "universe_of_metrics"]
HOUSED_LABEL = "blocks with housing units or group quarters (TDA's universe: Tables 9, 10, 12, §9)"
ALL_LABEL = "every block in the data"
FIGURES: tuple[str, ...] = (
    "tda_mae",
    "mae",
    "median_ae",
    "n_cells",
    "epl",
    "blau_bias",
    "conventional_mae",
)
"""The metrics.json sections whose block-level entries the universe decides."""
NOT_RECORDED = (
    "not recorded: this metrics.json predates error_universe; its block figures average over "
    "every block in the data"
)


@dataclass(frozen=True)
class BlockUniverse:
    """The blocks (rows of the run's histogram) that the block-level figures average over."""

    level: str
    """The block level's name (the histogram's finest level, e.g. ``Block``)."""
    requested: str
    inside: np.ndarray | None
    """One flag per block; None: every block."""
    n_blocks: int
    source: str | None
    note: str

    @property
    def kind(self) -> str:
        """``"housed"`` when blocks are chosen by the unit frame, else ``"all"``."""
        return ALL if self.inside is None else HOUSED

    @property
    def n_inside(self) -> int:
        return self.n_blocks if self.inside is None else int(self.inside.sum())

    def level_nodes(self, level: str, nodes: np.ndarray, block_node: np.ndarray) -> np.ndarray:
        """The spine nodes of ``level`` whose figures count: every node above the block level;
        at the block level the leaves of the blocks inside (``block_node[b]``: block ``b``'s leaf)."""
        if self.inside is None or level != self.level:
            return nodes
        keep = np.zeros(int(max(nodes.max(initial=-1), block_node.max(initial=-1))) + 1, bool)
        keep[np.asarray(block_node)[self.inside]] = True
        return nodes[keep[nodes]]

    def outside_ids(self, block_ids: np.ndarray) -> np.ndarray:
        """The ids of the blocks left out (``block_ids`` in the histogram's block order)."""
        ids = np.asarray(block_ids, dtype=object)
        if ids.shape != (self.n_blocks,):
            raise ValidationError(f"need one block id per block ({self.n_blocks}); got {ids.size}")
        return ids[~self.inside] if self.inside is not None else ids[:0]

    def restrict(self, frame: pd.DataFrame, block_ids: np.ndarray) -> pd.DataFrame:
        """``frame`` (columns ``geolevel``, ``geounit``) without the block rows left out."""
        if self.inside is None or self.n_inside == self.n_blocks:
            return frame
        left_out = set(map(str, self.outside_ids(block_ids)))
        drop = (frame["geolevel"].astype(str) == self.level).to_numpy() & frame["geounit"].astype(
            str
        ).isin(left_out).to_numpy()
        return frame[~drop].reset_index(drop=True)

    def section(self) -> dict[str, Any]:
        """The metrics.json ``error_universe`` section."""
        return {
            "level": self.level,
            "universe": self.kind,
            "requested": self.requested,
            "label": HOUSED_LABEL if self.kind == HOUSED else ALL_LABEL,
            "blocks": self.n_inside,
            "blocks_in_data": self.n_blocks,
            "blocks_left_out": self.n_blocks - self.n_inside,
            "source": self.source,
            "figures": list(FIGURES),
            "note": self.note,
        }


def block_universe(hist: BlockHistogram, requested: str = HOUSED) -> BlockUniverse:
    """The universe of the block-level figures of a run on ``hist`` (module docstring)."""
    if requested not in UNIVERSES:
        raise ValidationError(
            f"error universe {requested!r} is not one of {', '.join(UNIVERSES)} (housed: blocks "
            "with housing units or group quarters, as TDA; all: every block)"
        )
    level = str(hist.levels[-1])
    n = int(hist.n_blocks)
    if requested == ALL:
        return BlockUniverse(
            level,
            requested,
            None,
            n,
            None,
            "Block-level figures average over every block in the data, as asked (error universe "
            "'all'); TDA's average over the blocks with housing units or group quarters.",
        )
    housed = housed_blocks(hist)
    if housed is None:
        return BlockUniverse(
            level,
            requested,
            None,
            n,
            None,
            "The data carry no housing-unit frame, so the blocks that cannot hold people cannot be "
            "told apart: block-level figures average over every block in the data (TDA's average "
            "over the blocks with housing units or group quarters only).",
        )
    left_out = n - housed.n_inside
    return BlockUniverse(
        level,
        requested,
        housed.inside,
        n,
        housed.source,
        f"Block-level figures average over the {housed.n_inside:,} blocks with housing units or "
        f"group quarters ({housed.source}), as TDA's; the {left_out:,} other blocks of the data "
        "are structural zeros held at exactly 0 and left out.",
    )


def universe_of_metrics(payload: Mapping[str, Any]) -> dict[str, Any]:
    """A metrics.json's ``error_universe``, or what a file without one used (every block)."""
    section = payload.get("error_universe")
    if isinstance(section, Mapping):
        return dict(section)
    return {"universe": ALL, "label": ALL_LABEL, "note": NOT_RECORDED, "recorded": False}
