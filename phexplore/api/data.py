"""Data for the app: shipped samples (cached), uploads, subsets, readable problems (engine.data).

Part of the app-facing API (:mod:`phexplore.api`). No science: loading and validation live in
:mod:`engine.data`; a :class:`~engine.core.errors.DataValidationError`'s located problems become
the list the Run page shows.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from engine.core.errors import DataValidationError
from engine.data.cef import load_cef_extract
from engine.data.generated import load_generated_population
from engine.data.histogram import BlockHistogram, subset_histogram
from engine.data.inputs import FORMATS as INPUT_FORMATS
from engine.data.population import generate_population
from engine.data.samples import get_sample, list_samples, load_topdown_sample
from engine.runs.data_check import check_files
from engine.topdown.cost import estimate_topdown_cost, table_rows
from phexplore.api import limits

TOPDOWN_UPLOAD_KINDS: dict[str, str] = dict(INPUT_FORMATS)


@st.cache_resource(show_spinner="Loading the sample…", max_entries=8)
def topdown_sample(name: str) -> BlockHistogram:
    """A shipped TopDown sample as a block histogram (cached for the server's lifetime)."""
    hist = load_topdown_sample(name)
    # Shared by every session: read-only so no page or engine can change the sample in place.
    hist.set_read_only()
    return hist


@st.cache_resource(show_spinner="Loading the CEF extract…", max_entries=2)
def phsafe_sample(name: str) -> Any:
    """A shipped PHSafe CEF extract (cached)."""
    return load_cef_extract(get_sample(name).path)


GENERATED_PERSONS_RANGE = (1_000, 2_000_000)
"""Persons of a population the app generates (larger ones: ``phexplore generate population``)."""


@st.cache_resource(show_spinner="Generating the population…", max_entries=4)
def generated_population(persons: int, states: tuple[str, ...], seed: int) -> str:
    """A generated population folder for both engines (cached per persons, states and seed)."""
    folder = Path(tempfile.mkdtemp(prefix="phexplore-population-")) / "population"
    generate_population(persons, seed=seed, states=list(states) or None, out_dir=folder)
    return str(folder)


@st.cache_resource(show_spinner="Loading the generated population…", max_entries=4)
def generated_topdown(folder: str) -> BlockHistogram:
    """TopDown data of a generated folder: PPMF persons with the block frame (structural zeros)."""
    hist = load_generated_population(folder)
    hist.set_read_only()
    return hist


@st.cache_resource(show_spinner="Loading the generated CEF extract…", max_entries=2)
def generated_cef(folder: str) -> Any:
    """PHSafe data of a generated folder: its persons/units/geo CEF extract."""
    return load_cef_extract(folder)


def topdown_cost_sentence(n_blocks: int, n_cells: int) -> str:
    """The run-time and memory estimate shown before Run (:mod:`engine.topdown.cost`), with the
    app's dense comparison table (at most ``APP_MAX_ROWS`` rows) and its predicted-vs-measured
    table."""
    kept = table_rows(n_blocks, n_cells, limits.APP_MAX_ROWS)
    return estimate_topdown_cost(n_blocks, n_cells, kept_rows=kept, prediction=True).sentence()


def samples_of(kind: str) -> dict[str, str]:
    """``{sample name: title}`` of the shipped samples of ``kind`` ("topdown" or "phsafe")."""
    return {s.name: s.title for s in list_samples() if s.kind == kind}


def check_topdown_upload(kind: str, files: Sequence[Any]) -> Any:
    """Read and check uploaded TopDown data of ``kind`` as ``phexplore data check`` does
    (:func:`engine.runs.data_check.check_files`): ``.data["topdown"]`` is the histogram when
    ``.ok``; ``.problem_lines()`` every problem, sorted by file and row."""
    return check_files("topdown", files, kind=kind)


def check_cef_upload(files: Sequence[Any]) -> Any:
    """Read and check an uploaded CEF extract (persons, units and geo, assigned by name: several
    files that could each be "the persons file" are refused, never one picked)."""
    return check_files("phsafe", files)


def problem_lines(exc: BaseException) -> list[str]:
    """A readable list for the page: each located problem of a DataValidationError (sorted by
    file and row, as ``phexplore data check`` lists them), else the text."""
    if isinstance(exc, DataValidationError):
        ordered = sorted(
            exc.problems, key=lambda p: (p.file, -1 if p.row is None else p.row, p.column or "")
        )
        return [str(p) for p in ordered]
    return [str(exc)]


def subset_units(hist: BlockHistogram, level: str) -> pd.Series:
    """Blocks per geounit of ``level`` (smallest first), for the Run page's subset picker."""
    return hist.geography.groupby(level).size().sort_values()


def subset(hist: BlockHistogram, level: str | None, units: Sequence[str]) -> BlockHistogram:
    """The blocks of the chosen geounits (all data when ``level`` is None or nothing is chosen)."""
    if not level or not units:
        return hist

    return subset_histogram(hist, level, units)
