"""A toy one-state block histogram with a city and two wards, shared by the spine tests."""

from __future__ import annotations

import numpy as np

from engine.data.geography import geography_from_block_ids
from engine.data.histogram import BlockHistogram
from engine.dp.presets import load_topdown_preset
from engine.schema.attributes import RI2010_SCHEMA
from engine.topdown.spine.entities import EntitySet

# county 001: tract 0001 (BG 1: blocks 0-3, BG 2: 4-5), tract 0002 (BG 1: 6-8, a lone BG);
# county 003: tract 0001 (BG 1: 9-11, BG 2: 12-13)
BLOCK_IDS = (
    [f"44001000100{1}{i:03d}" for i in range(4)]
    + [f"44001000100{2}{i:03d}" for i in range(2)]
    + [f"44001000200{1}{i:03d}" for i in range(3)]
    + [f"44003000100{1}{i:03d}" for i in range(3)]
    + [f"44003000100{2}{i:03d}" for i in range(2)]
)
N = len(BLOCK_IDS)


def toy_histogram() -> BlockHistogram:
    rng = np.random.default_rng(3)
    geography = geography_from_block_ids(BLOCK_IDS)
    counts = rng.integers(0, 5, size=(N, RI2010_SCHEMA.size)).astype(np.int64)
    return BlockHistogram(RI2010_SCHEMA, tuple(geography.columns), geography, counts)


ALLOCATION = load_topdown_preset("ri2010-production-like")["persons"]
CITY = EntitySet("city", ("City",), np.where(np.isin(np.arange(N), [2, 3, 4, 5, 6, 7]), 0, -1))
WARDS = EntitySet(
    "wards",
    ("w1", "w2"),
    np.select([np.isin(np.arange(N), [2, 3, 4]), np.isin(np.arange(N), [5, 6, 7])], [0, 1], -1),
)
