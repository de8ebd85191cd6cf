"""Shared fixtures for the metrics tests: a small synthetic RI2010-schema histogram."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from engine.data.histogram import BlockHistogram
from engine.schema.attributes import RI2010_SCHEMA


def make_histogram(n_blocks: int = 60, seed: int = 0) -> BlockHistogram:
    """Blocks in 2 counties × 3 tracts each, with varied race–ethnicity mixes and some empty blocks."""
    rng = np.random.default_rng(seed)
    counts = rng.poisson(rng.gamma(0.6, 8.0, size=(n_blocks, RI2010_SCHEMA.size)))
    counts[::7] = 0  # some empty blocks
    county = np.where(np.arange(n_blocks) < n_blocks // 2, "44001", "44003")
    tract = np.array([f"{c}{i % 3:06d}" for i, c in enumerate(county)])
    geography = pd.DataFrame(
        {
            "State": "44",
            "County": county,
            "Tract": tract,
            "Block": [f"{t}{i:04d}" for i, t in enumerate(tract)],
        }
    )
    return BlockHistogram(
        schema=RI2010_SCHEMA,
        levels=("State", "County", "Tract", "Block"),
        geography=geography,
        counts=counts.astype(np.int64),
    )


@pytest.fixture
def histogram() -> BlockHistogram:
    return make_histogram()


@pytest.fixture
def histogram_factory():
    """:func:`make_histogram`, for tests that need other sizes or seeds."""
    return make_histogram
