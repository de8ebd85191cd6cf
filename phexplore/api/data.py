"""Data for the app: shipped samples (cached), uploads, subsets, readable problems (engine.data).

Part of the app-facing API (:mod:`phexplore.api`). No science: loading and validation live in
:mod:`engine.data`; a :class:`~engine.core.errors.DataValidationError`'s located problems become
the list the Run page shows.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
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
from engine.topdown.cost import AppRunCost, estimate_app_run, estimate_topdown_cost, table_rows
from phexplore.api import limits
from phexplore.app.workspace.store import Workspace

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
def generated_population(
    persons: int, states: tuple[str, ...], seed: int, _workspace: Workspace | None = None
) -> str:
    """A generated population folder for both engines (cached per persons, states and seed).

    With a workspace it lives there (``populations/``): generated once, found again after a
    reload or a restart; without one, in a temporary folder."""
    if _workspace is None:
        folder = Path(tempfile.mkdtemp(prefix="phexplore-population-")) / "population"
        generate_population(persons, seed=seed, states=list(states) or None, out_dir=folder)
        return str(folder)
    folder, known = _workspace.population_folder(persons, states, seed)
    if not known:
        folder.parent.mkdir(parents=True, exist_ok=True)
        generate_population(persons, seed=seed, states=list(states) or None, out_dir=folder)
        _workspace.register_population(persons, states, seed)
    return str(folder)


def kept_population(
    persons: int, states: tuple[str, ...], seed: int, workspace: Workspace
) -> str | None:
    """The folder of a population generated earlier in the workspace, or None."""
    folder, known = workspace.population_folder(persons, states, seed)
    return str(folder) if known else None


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


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value < 120 else f"{value / 60:.0f} min"


@dataclass(frozen=True)
class RunEstimate:
    """The time (per step) and memory estimate of an app TopDown run, shown beside Run; its
    steps also plan the progress bar (:meth:`engine.runs.control.RunControl.plan`)."""

    cost: AppRunCost
    gigabytes: float
    sweep_runs: int = 0
    srs_replicates: int = 0

    @property
    def total_s(self) -> float:
        return self.cost.total_s

    @property
    def main_share(self) -> float:
        """The run's own share of the time before its sweep ends (the sweep takes the rest)."""
        return self.cost.main_share

    def plan(self) -> list[tuple[str, float]]:
        """The job's steps with their expected seconds."""
        return self.cost.steps()

    def sentence(self) -> str:
        cost = self.cost
        run = (
            f"Estimated time ≈ {_seconds(cost.engine_s + cost.metrics_s + cost.saving_s)} for the "
            f"run (engine {_seconds(cost.engine_s)}, metrics {_seconds(cost.metrics_s)}, "
            f"writing {_seconds(cost.saving_s)})"
        )
        if self.sweep_runs:
            srs = f", {self.srs_replicates} SRS replicates" if self.srs_replicates else ""
            run += (
                f" + budget sweep ≈ {_seconds(cost.sweep_s)} ({self.sweep_runs} runs{srs}) = "
                f"≈ {_seconds(cost.total_s)} in all"
            )
        return (
            f"{run}; peak memory ≈ {self.gigabytes:.1f} GB on a quiet 2-core machine "
            "(benchmarks/app_steps.py; longer when the machine is busy)."
        )


def run_estimate(
    n_blocks: int, n_cells: int, *, sweep_runs: int = 0, srs_replicates: int = 0
) -> RunEstimate:
    """The estimate shown before Run (:func:`engine.topdown.cost.estimate_app_run`), with the
    app's dense comparison table and predicted-vs-measured table in its memory."""
    kept = table_rows(n_blocks, n_cells, limits.APP_MAX_ROWS)
    memory = estimate_topdown_cost(n_blocks, n_cells, kept_rows=kept, prediction=True).gigabytes
    cost = estimate_app_run(n_blocks, n_cells, sweep_runs=sweep_runs, srs_replicates=srs_replicates)
    return RunEstimate(cost, memory, sweep_runs, srs_replicates)


PHSAFE_PLAN: tuple[tuple[str, float], ...] = (("engine", 6.0), ("metrics", 3.0), ("saving", 1.0))
"""The steps of a PHSafe run for its progress bar. PHSafe has no cost model: these shares are
rough (engine, error analysis, writing), and the bar names the step under way."""


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
