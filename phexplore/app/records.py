"""A finished run as the app keeps it: :class:`RunRecord` (its label, settings, metrics and tables).

A record made by this server holds its tables in memory; a record read back from the workspace
(:mod:`phexplore.app.workspace`) reads its tidy table, extra tables and sweep from its run folder
only when a page asks for them (a workspace can hold many runs, each up to millions of rows), and
keeps what it read. Pages use ``record.tidy``, ``record.tables["mae"]`` and ``record.experiment``
either way. No science here (docs/app.md, "Workspace").
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pandas as pd

TableLoader = Callable[[str], pd.DataFrame]
"""Reads one table of a stored run by name (``"tidy"`` or a table of :attr:`RunRecord.tables`)."""


class LazyTables(Mapping[str, pd.DataFrame]):
    """A run's extra tables by name, each read from its run folder on first use and kept."""

    def __init__(self, names: list[str], load: TableLoader) -> None:
        self._names = list(names)
        self._load = load
        self._held: dict[str, pd.DataFrame] = {}

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name not in self._names:
            raise KeyError(name)
        if name not in self._held:
            self._held[name] = self._load(name)
        return self._held[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class RunRecord:
    """One finished run: its tidy comparison table, metrics and extra tables.

    ``id`` is the run's number in its workspace (#1, #2, …), ``token`` is unique across workspaces
    and sessions (``run_token`` in metrics.json). ``data`` is the input the run used, kept in memory
    by the server that ran it so a replay there needs no reading; never saved. ``tidy``,
    ``tables`` and ``experiment`` may be given as frames (a run just finished) or read on demand
    (``load_tidy``, ``tables`` a :class:`LazyTables`, ``load_experiment``: a run read back from its
    folder)."""

    def __init__(
        self,
        id: int,
        label: str,
        engine: str,
        scenario: str,
        settings: dict[str, Any],
        metrics: dict[str, Any],
        tidy: pd.DataFrame | None = None,
        tables: Mapping[str, pd.DataFrame] | None = None,
        experiment: Any = None,
        token: str | None = None,
        data: Any = None,
        *,
        load_tidy: Callable[[], pd.DataFrame] | None = None,
        load_experiment: Callable[[], Any] | None = None,
    ) -> None:
        self.id = int(id)
        self.label = label
        self.engine = engine
        self.scenario = scenario
        self.settings = settings
        self.metrics = metrics
        self._tidy = tidy
        self._load_tidy = load_tidy
        self.tables: Mapping[str, pd.DataFrame] = dict(tables or {})
        self._experiment = experiment
        self._load_experiment = load_experiment
        self.token = token or uuid.uuid4().hex
        self.data = data

    @property
    def tidy(self) -> pd.DataFrame:
        """The tidy comparison table (geolevel, geounit, query, cell, true, estimate …)."""
        if self._tidy is None:
            self._tidy = self._load_tidy() if self._load_tidy is not None else pd.DataFrame()
        return self._tidy

    @tidy.setter
    def tidy(self, frame: pd.DataFrame) -> None:
        self._tidy = frame

    @property
    def experiment(self) -> Any:
        """The ρ sweep run beside the run (:class:`engine.metrics.experiments.ExperimentResult`), or None."""
        if self._experiment is None and self._load_experiment is not None:
            self._experiment = self._load_experiment()
            self._load_experiment = None
        return self._experiment

    @experiment.setter
    def experiment(self, value: Any) -> None:
        self._experiment, self._load_experiment = value, None

    @property
    def has_experiment(self) -> bool:
        """Whether a sweep was run beside this run (without reading it)."""
        return self._experiment is not None or self._load_experiment is not None

    @property
    def rho(self) -> float | None:
        """The run's total budget (ρ, or ε for pure DP)."""
        value = self.settings.get("rho")
        return None if value is None else float(value)

    def __repr__(self) -> str:
        return f"RunRecord(#{self.id}, {self.engine}, {self.label!r})"
