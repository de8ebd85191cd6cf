"""Where a generated population lives: states, chunks, counties, tracts, block groups and blocks
(docs/synthetic.md "Method", steps 1, 3 and 4).

* :func:`plan_chunks` — persons per state ∝ 2010 state populations (:func:`state_persons`); a
  state is generated in chunks of at most ``chunk_persons`` persons (whole counties), each from its
  own seed ``(seed, state, chunk)``, so memory is bounded and the US (≈ 309 M) can be written chunk
  by chunk;
* :func:`block_geography` — a chunk's units, laid along the neighbourhood order
  (:mod:`engine.data.population_chunk`), cut into blocks whose sizes are drawn from the real Rhode
  Island 2010 block sizes (heavy tailed, :func:`load_block_sizes`), blocks into block groups and
  tracts of log-normal size (mean :data:`TRACT_PERSONS`), tracts into the state's 2010 number of
  counties (scaled down for small populations, :func:`load_county_counts`); empty blocks are added
  so that they are :data:`EMPTY_BLOCK_SHARE` of all blocks (RI's own share for RI).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from engine.core.errors import ValidationError
from engine.data.census2010_tables import StateTable, load_state_table, select_states
from engine.data.synthetic_calibration import CALIBRATION_DIR

TRACT_PERSONS = 4_000
TRACT_LOG_SD = 0.35
BLOCK_GROUPS_PER_TRACT_MEAN = 3.0
EMPTY_BLOCK_SHARE = 1.0 - 6.2 / 11.0
"""US 2010: ≈ 11.0 M blocks, ≈ 6.2 M with population (docs/science.md §8) → 44% empty."""
RI_EMPTY_BLOCK_SHARE = 7_537 / 25_181
"""Rhode Island 2010 (the shipped sample): 7,537 of 25,181 blocks have no persons."""


def load_block_sizes(directory: Path | str = CALIBRATION_DIR) -> tuple[np.ndarray, np.ndarray]:
    """Populated-block sizes of RI 2010 and their probabilities."""
    frame = pd.read_csv(Path(directory) / "ri2010_block_sizes.csv")
    frame = frame[frame["persons"] > 0]
    weights = frame["blocks"].to_numpy(dtype=float)
    return frame["persons"].to_numpy(dtype=np.int64), weights / weights.sum()


def load_county_counts(directory: Path | str = CALIBRATION_DIR) -> dict[str, int]:
    frame = pd.read_csv(Path(directory) / "census2010_state_counties.csv", dtype=str)
    return dict(zip(frame["state_fips"], frame["counties_2010"].astype(int), strict=True))


def state_persons(n_persons: int, table: StateTable, chosen: np.ndarray) -> np.ndarray:
    """Persons per chosen state ∝ 2010 population, summing exactly to ``n_persons``."""
    weights = table.population[chosen].astype(float)
    exact = n_persons * weights / weights.sum()
    out = np.floor(exact).astype(np.int64)
    rest = n_persons - int(out.sum())
    out[np.argsort(-(exact - out), kind="stable")[:rest]] += 1
    return out


def block_geography(
    unit_pop: np.ndarray,
    order_key: np.ndarray,
    n_counties: int,
    block_sizes: tuple[np.ndarray, np.ndarray],
    empty_share: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, pd.DataFrame]:
    """Block index of every unit and the block table (county, tract, bg, block codes)."""
    order = np.argsort(order_key, kind="stable")
    pop = unit_pop[order]
    total = int(pop.sum())
    sizes, probs = block_sizes
    mean = float(sizes @ probs)
    targets = rng.choice(sizes, size=int(total / mean * 1.2) + 16, p=probs)
    while int(targets.sum()) < total:
        targets = np.concatenate([targets, rng.choice(sizes, size=targets.size // 2 + 16, p=probs)])
    edges = np.cumsum(targets)
    midpoint = np.cumsum(pop) - pop / 2.0
    block_sorted = np.searchsorted(edges, midpoint, side="right")
    n_blocks_raw = int(block_sorted.max()) + 1 if block_sorted.size else 1
    block_pop = np.bincount(block_sorted, weights=pop, minlength=n_blocks_raw)
    block_units = np.bincount(block_sorted, minlength=n_blocks_raw)
    keep = block_units > 0  # blocks the cut left without any unit are re-added as empty below
    new_index = np.cumsum(keep) - 1
    block_sorted = new_index[block_sorted]
    block_pop = block_pop[keep]
    n_nonempty = int(keep.sum())
    # Tracts and block groups by cumulative population (log-normal tract sizes).
    block_mid = np.cumsum(block_pop) - block_pop / 2.0
    tract_sizes = rng.lognormal(np.log(TRACT_PERSONS) - TRACT_LOG_SD**2 / 2, TRACT_LOG_SD, 64)
    while tract_sizes.sum() < total:
        tract_sizes = np.concatenate(
            [tract_sizes, rng.lognormal(np.log(TRACT_PERSONS), TRACT_LOG_SD, tract_sizes.size)]
        )
    tract_edges = np.cumsum(tract_sizes)
    tract = np.searchsorted(tract_edges, block_mid, side="right")
    tract_start = np.concatenate([[0.0], tract_edges])[tract]
    tract_size = tract_sizes[np.minimum(tract, tract_sizes.size - 1)]
    n_bg = 1 + rng.poisson(BLOCK_GROUPS_PER_TRACT_MEAN - 1.0, size=tract_sizes.size)
    n_bg = np.minimum(n_bg, 9)
    bg = np.minimum(
        ((block_mid - tract_start) / tract_size * n_bg[tract]).astype(np.int64), n_bg[tract] - 1
    )
    tract = pd.factorize(tract, sort=True)[0]
    n_tracts = int(tract.max()) + 1 if tract.size else 1
    bg_key = tract * 10 + bg
    # Counties: heavy-tailed numbers of tracts per county.
    n_counties = max(1, min(n_counties, n_tracts))
    weights = rng.lognormal(0.0, 1.0, n_counties)
    per_county = 1 + rng.multinomial(n_tracts - n_counties, weights / weights.sum())
    county_of_tract = np.repeat(np.arange(n_counties), per_county)
    county = county_of_tract[tract]
    tract_in_county = tract - (np.cumsum(per_county) - per_county)[county]
    # Empty blocks spread over block groups in proportion to their blocks.
    n_empty = int(round(empty_share / (1.0 - empty_share) * n_nonempty))
    bg_id, bg_of_block = np.unique(bg_key, return_inverse=True)
    bg_blocks = np.bincount(bg_of_block)
    empty_per_bg = rng.multinomial(n_empty, bg_blocks / bg_blocks.sum())
    first_block = np.r_[0, np.cumsum(bg_blocks)[:-1]]
    empty_template = np.repeat(first_block, empty_per_bg)
    all_county = np.concatenate([county, county[empty_template]])
    all_tract = np.concatenate([tract_in_county, tract_in_county[empty_template]])
    all_bg = np.concatenate([bg, bg[empty_template]])
    all_bg_key = np.concatenate([bg_of_block, bg_of_block[empty_template]])
    is_empty = np.concatenate([np.zeros(n_nonempty, bool), np.ones(empty_template.size, bool)])
    shuffle = rng.permutation(all_bg_key.size)  # empty blocks interleaved within the group
    rank = np.empty_like(shuffle)
    order_in_bg = np.lexsort((shuffle, all_bg_key))
    starts = np.r_[0, np.cumsum(np.bincount(all_bg_key))[:-1]]
    rank[order_in_bg] = np.arange(all_bg_key.size) - starts[all_bg_key[order_in_bg]]
    if rank.size and int(rank.max()) >= 1000:
        raise ValidationError("a synthetic block group has more than 999 blocks; lower the size")
    table = pd.DataFrame(
        {
            "county": all_county,
            "tract": all_tract,
            "bg": all_bg,
            "block": (all_bg + 1) * 1000 + rank,
            "empty": is_empty,
            # each block's midpoint on the population line (an empty block: its template's), for
            # the places (engine.data.places); drawn from no generator
            "midpoint": np.concatenate([block_mid, block_mid[empty_template]]),
        }
    )
    unit_block = np.empty(unit_pop.size, dtype=np.int64)
    unit_block[order] = block_sorted
    return unit_block, table


def plan_chunks(
    n_persons: int, states: Sequence[str] | None, chunk_persons: int
) -> list[tuple[str, str, str, str, int, int, int, int]]:
    """(postal, fips, region, division, persons, chunk number, county offset, counties) of every
    chunk, in order."""
    table = load_state_table()
    chosen = select_states(table, states, include_pr=False)
    if states is not None and any(str(s).strip().upper() in ("PR", "72") for s in states):
        chosen = select_states(table, states, include_pr=True)
    persons = state_persons(n_persons, table, chosen)
    counties = load_county_counts()
    plan = []
    for i, n in zip(chosen, persons, strict=True):
        if n <= 0:
            continue
        fips = str(table.fips[i])
        real = int(table.population[i])
        want = max(1, int(round(counties[fips] * min(1.0, n / real))))
        pieces = max(1, int(np.ceil(n / chunk_persons)))
        pieces = min(pieces, want)
        sizes = np.full(pieces, n // pieces)
        sizes[: n - int(sizes.sum())] += 1
        per = np.full(pieces, want // pieces)
        per[: want - int(per.sum())] += 1
        offset = 0
        for k in range(pieces):
            plan.append(
                (
                    str(table.postal[i]),
                    fips,
                    str(table.region[i]),
                    str(table.division[i]),
                    int(sizes[k]),
                    k,
                    offset,
                    int(per[k]),
                )
            )
            offset += int(per[k])
    return plan
