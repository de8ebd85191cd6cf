"""Small inputs shared by the TopDown tests: hand-built histograms, allocations, RI subsets."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd

from engine.data.histogram import BlockHistogram
from engine.dp.budget import TopDownAllocation
from engine.schema.attributes import Attribute, Schema

TWO_CELL_SCHEMA = Schema("two_cell", (Attribute("A", ("a0", "a1")),))


def tiny_histogram() -> BlockHistogram:
    """1 state, 2 counties, 2 blocks per county, 2 cells."""
    blocks = ["44001000100000", "44001000100001", "44003000100000", "44003000100001"]
    geography = pd.DataFrame(
        {
            "State": ["44"] * 4,
            "County": [b[:5] for b in blocks],
            "Block": blocks,
        }
    )
    counts = np.array([[5, 1], [3, 2], [0, 4], [6, 0]], dtype=np.int64)
    return BlockHistogram(TWO_CELL_SCHEMA, ("State", "County", "Block"), geography, counts)


def tiny_allocation(rho: str = "1", levels: tuple[str, ...] = ("State", "County", "Block")):
    share = Fraction(1, len(levels))
    return TopDownAllocation(
        name="tiny",
        universe="persons",
        rho=Fraction(rho),
        geolevels=levels,
        level_shares={lv: share for lv in levels},
        query_shares={lv: {"TOTAL": Fraction(1, 2), "DETAILED": Fraction(1, 2)} for lv in levels},
    )


def ri_subset(n_tracts_per_county: int = 2, counties: int = 2) -> BlockHistogram:
    """The first tracts of the first counties of the RI 2010 sample (a few hundred blocks)."""
    from engine.data.samples import load_topdown_sample

    hist = load_topdown_sample("ri2010")
    geo = hist.geography
    keep_counties = sorted(geo["County"].unique())[:counties]
    tracts: list[str] = []
    for county in keep_counties:
        tracts.extend(
            sorted(geo.loc[geo["County"] == county, "Tract"].unique())[:n_tracts_per_county]
        )
    keep = geo["Tract"].isin(tracts).to_numpy()
    return BlockHistogram(
        hist.schema,
        hist.levels,
        geo[keep].reset_index(drop=True),
        hist.counts[keep],
        source=hist.source,
    )


def path_share_sums(parent: np.ndarray, share: np.ndarray, leaves: np.ndarray) -> list:
    """Σ γ along the root-to-leaf path of each of ``leaves``: the accounting that SPN Theorem 3
    says bypassing preserves (each path's shares still sum to 1)."""
    parent = np.asarray(parent, dtype=np.int64)
    sums = []
    for leaf in np.asarray(leaves, dtype=np.int64).tolist():
        total = share[leaf] * 0
        node = leaf
        for _ in range(parent.size + 1):
            total = total + share[node]
            node = int(parent[node])
            if node < 0:
                break
        else:
            raise ValueError("the parent array has a cycle")
        sums.append(total)
    return sums
