"""Incorporated-place-like entities of a generated population (docs/synthetic.md, "Places").

Production TopDown built its optimized (custom) block groups around places, among other entities
(TDA Table 6 note, §8.2; SPN §6), so a run on the optimized spine needs them. A generated
population places each county's persons along one line (neighbourhoods, then blocks, block groups
and tracts cut from it: :mod:`engine.data.population`); :func:`draw_places` cuts intervals of that
line into places:

* a county puts :data:`PLACE_PERSON_SHARE` of its persons into places, the US 2010 share of the
  population living in incorporated places;
* place sizes are log-normal with median :data:`PLACE_MEDIAN_PERSONS` and log standard deviation
  :data:`PLACE_LOG_SD` (capped at the county's place population), drawn until the share is
  reached — calibrated on the 2010 size distribution of US incorporated places (docs/synthetic.md);
* the places, in random order, are separated by unincorporated gaps of random lengths (a flat
  Dirichlet split of the rest of the county), and a block belongs to the place whose interval holds
  its midpoint on the line — so a place is a contiguous stretch of neighbourhoods that crosses block
  group and tract lines, nested in its county, like a real city or village.

Every draw comes from its own generator, :func:`place_rng` (seeded ``(seed, state, chunk,
PLACE_STREAM)``), never from the persons' one, so adding places left the persons, units and blocks
of every seed byte-identical.
"""

from __future__ import annotations

import numpy as np

from engine.core.errors import ValidationError

PLACE_STREAM = 0x706C6163
"""The fourth word of the places' seed (ASCII "plac"): a stream apart from the persons'."""
PLACE_PERSON_SHARE = 0.627
"""Share of persons living in incorporated places (US 2010: about 62–63 %, docs/synthetic.md)."""
PLACE_MEDIAN_PERSONS = 1_200.0
"""Median population of an incorporated place (US 2010: about 1,200; docs/synthetic.md)."""
PLACE_LOG_SD = 2.06
"""Log standard deviation of place sizes: with the median, a mean of ≈ 10,000 persons and about
1.6 % of places at 100,000 or more (docs/synthetic.md)."""
NO_PLACE = "99999"
"""PLACEFP of a block in no place (the CEF's code for "not in a place")."""
MAX_PLACE_CODE = 99_998


def place_rng(seed: int, state_fips: str, chunk_no: int) -> np.random.Generator:
    """The places' generator of one chunk of a generated population (module docstring)."""
    return np.random.default_rng([int(seed), int(state_fips), int(chunk_no), PLACE_STREAM])


def place_sizes(target: float, cap: float, rng: np.random.Generator) -> np.ndarray:
    """Place populations summing to ``target`` (the last one cut to fit), each at most ``cap``."""
    if target < 1:
        return np.zeros(0)
    mean = PLACE_MEDIAN_PERSONS * np.exp(PLACE_LOG_SD**2 / 2)
    draws = np.zeros(0)
    while draws.sum() < target:
        more = rng.lognormal(np.log(PLACE_MEDIAN_PERSONS), PLACE_LOG_SD, int(2 * target / mean) + 8)
        draws = np.concatenate([draws, np.minimum(np.maximum(more, 1.0), cap)])
    ends = np.cumsum(draws)
    k = int(np.searchsorted(ends, target)) + 1
    sizes = draws[:k].copy()
    sizes[-1] -= ends[k - 1] - target
    return sizes[sizes >= 1]


def draw_places(
    county: np.ndarray, midpoint: np.ndarray, persons: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """The place (0, 1, … in county order; −1 for none) of every block of one chunk.

    ``county``: each block's county index; ``midpoint``: the block's position on its county's
    population line (cumulative persons, any origin per county); ``persons``: its population.
    Places that hold no block's midpoint (a small place inside one large block) are dropped, so
    every place returned has at least one block.
    """
    county = np.asarray(county, dtype=np.int64)
    midpoint = np.asarray(midpoint, dtype=np.float64)
    persons = np.asarray(persons, dtype=np.float64)
    if not county.shape == midpoint.shape == persons.shape:
        raise ValidationError("places need one county, midpoint and population per block")
    out = np.full(county.size, -1, dtype=np.int64)
    next_code = 0
    for c in np.unique(county):
        blocks = np.flatnonzero(county == c)
        low = float(np.min(midpoint[blocks] - persons[blocks] / 2.0))
        high = float(np.max(midpoint[blocks] + persons[blocks] / 2.0))
        total = high - low
        sizes = place_sizes(PLACE_PERSON_SHARE * total, max(total * PLACE_PERSON_SHARE, 1.0), rng)
        if sizes.size == 0:
            continue
        sizes = sizes[rng.permutation(sizes.size)]
        gaps = rng.dirichlet(np.ones(sizes.size + 1)) * max(total - float(sizes.sum()), 0.0)
        starts = low + np.cumsum(gaps[:-1]) + np.concatenate([[0.0], np.cumsum(sizes)[:-1]])
        ends = starts + sizes
        where = np.searchsorted(starts, midpoint[blocks], side="right") - 1
        inside = (where >= 0) & (midpoint[blocks] < ends[np.maximum(where, 0)])
        used, local = np.unique(where[inside], return_inverse=True)
        out[blocks[inside]] = next_code + local
        next_code += used.size
    return out


def place_codes(place: np.ndarray, offset: int) -> np.ndarray:
    """PLACEFP of every block: ``offset + place + 1`` as 5 digits, :data:`NO_PLACE` for −1."""
    place = np.asarray(place, dtype=np.int64)
    codes = offset + place + 1
    if place.size and int(codes.max(initial=0)) > MAX_PLACE_CODE:
        raise ValidationError(
            f"a generated state has more than {MAX_PLACE_CODE:,} places (5-digit PLACEFP codes)"
        )
    text = np.char.zfill(codes.astype(str), 5).astype(object)
    text[place < 0] = NO_PLACE
    return text
