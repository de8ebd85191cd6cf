"""The 2010 Census tables behind the synthetic populations: state populations and the race mix.

* ``census2010_state_populations.csv`` — the 2010 Census population of the 50 states, DC and
  Puerto Rico with their Census region and division codes (from the MIT-licensed ``ppmf`` R
  package; ``engine/data/calibration/NOTICE.md``): the generators spread persons over the chosen
  states in proportion to it (:func:`load_state_table`, :func:`select_states`).
* ``census2010_two_or_more_races.csv`` — the 2010 mix of the 57 two-or-more-races CENRACE
  combinations, from which a multi-race person's detailed code is drawn
  (:func:`load_two_or_more_races`).

Used by :mod:`engine.data.synthetic` and :mod:`engine.data.population` (method in
``docs/synthetic.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from engine.core.errors import ValidationError
from engine.data.synthetic_calibration import CALIBRATION_DIR

PUERTO_RICO = "72"


@dataclass(frozen=True)
class StateTable:
    """2010 state populations with Census region/division codes."""

    postal: np.ndarray
    fips: np.ndarray
    population: np.ndarray
    region: np.ndarray
    division: np.ndarray


def load_state_table(directory: Path | str = CALIBRATION_DIR) -> StateTable:
    """Read ``census2010_state_populations.csv`` (50 states, DC and PR)."""
    path = Path(directory) / "census2010_state_populations.csv"
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    return StateTable(
        postal=frame["state"].to_numpy(dtype=str),
        fips=frame["state_fips"].to_numpy(dtype=str),
        population=frame["population_2010"].astype(np.int64).to_numpy(),
        region=frame["region"].to_numpy(dtype=str),
        division=frame["division"].to_numpy(dtype=str),
    )


def load_two_or_more_races(
    directory: Path | str = CALIBRATION_DIR,
) -> tuple[np.ndarray, np.ndarray]:
    """CENRACE codes (as ints) of two-or-more-races combinations and their 2010 probabilities."""
    frame = pd.read_csv(
        Path(directory) / "census2010_two_or_more_races.csv", dtype={"cenrace": str}
    )
    weights = frame["persons_2010"].to_numpy(dtype=float)
    return frame["cenrace"].astype(int).to_numpy(), weights / weights.sum()


def select_states(table: StateTable, states: Sequence[str] | None, include_pr: bool) -> np.ndarray:
    """Indices into ``table`` of the requested states (postal codes or FIPS), validated."""
    if states is None:
        chosen = [i for i, f in enumerate(table.fips) if f != PUERTO_RICO]
    else:
        if isinstance(states, str):
            raise ValidationError("states must be a list of state codes, not a single string")
        by_code = {p.upper(): i for i, p in enumerate(table.postal)}
        by_code.update({f: i for i, f in enumerate(table.fips)})
        chosen = []
        unknown = []
        for code in states:
            key = str(code).strip().upper()
            if key not in by_code:
                unknown.append(str(code))
            elif by_code[key] not in chosen:
                chosen.append(by_code[key])
        if unknown:
            raise ValidationError(
                f"unknown state code(s) {unknown}; use postal codes (e.g. 'RI') or 2-digit FIPS "
                "(e.g. '44') of the 50 states, DC or PR"
            )
        if not chosen:
            raise ValidationError("states is empty; omit it to generate all 50 states and DC")
    pr_index = int(np.flatnonzero(table.fips == PUERTO_RICO)[0])
    if include_pr and pr_index not in chosen:
        chosen.append(pr_index)
    return np.array(sorted(chosen), dtype=np.int64)
