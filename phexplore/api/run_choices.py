"""What the Run page offers and how its choices become parts of a run description.

Part of the app-facing API (:mod:`phexplore.api`): the noise samplers, TopDown's least-squares
routes, the EPL settings and their ranges, the error universe of the block figures
(:data:`ERROR_UNIVERSES`), the spine choice "the allocation's own" and what it resolves to on the
data (:func:`spine_label`), the Spark backend configured for the app (:func:`app_backend`), and
where the data of a run can be read again (:func:`app_data_source`, a
:class:`~engine.runs.data_source.DataSource` with
the histogram's content hash). The pages build the typed records of the run description
(:class:`~engine.runs.options.TopDownRunOptions`, :class:`~engine.runs.options.PHSafeRunOptions`,
:class:`~engine.runs.spec.RunSpec`) from these; no science here.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.core.errors import ValidationError
from engine.data.histogram import BlockHistogram, subset_histogram
from engine.data.samples import declared_scale
from engine.dp.budget import PHSafeBudget, TopDownAllocation
from engine.metrics.epl_settings import (
    MULTIPLIER_RANGE,
    PERCENTILE_RANGE,
    PF_MULTIPLIER,
    PF_PERCENTILE,
    EPLSettings,
)
from engine.metrics.srs import DEFAULT_FRACTIONS as SRS_FRACTIONS
from engine.metrics.universe_options import ALL, HOUSED
from engine.phsafe.config import PHSafeConfig
from engine.runs.data_source import BlockFilter, DataSource
from engine.runs.inputs import histogram_sha256
from engine.runs.options import EPL_BOOT as RUN_EPL_BOOT
from engine.runs.options import PRESET_SPINE, BackendOptions, TopDownRunOptions
from engine.runs.spine_choice import resolve_spine
from engine.topdown.qp.settings import ROUTE_NAMES
from engine.topdown.spine.entities import has_places

EPL_BOOT = RUN_EPL_BOOT
"""Bootstrap resamples behind every EPL interval the app shows (docs/science.md §5)."""
EPL_PERCENTILE = PF_PERCENTILE
"""Default EPL percentile p: Petti & Flaxman's published setting (valid 50 < p ≤ 100)."""
EPL_MULTIPLIER = PF_MULTIPLIER
"""Default EPL multiplier m: Petti & Flaxman's published setting (valid 0 < m ≤ 10)."""
EPL_PERCENTILE_RANGE = PERCENTILE_RANGE
EPL_MULTIPLIER_RANGE = MULTIPLIER_RANGE
NOISE_METHODS: dict[str, str] = {
    "fast": "Keyed, reproducible (same seed → same numbers)",
    "exact": "Exact OpenDP samplers (release-grade, not reproducible)",
}
"""The noise samplers a run can use (recorded in metrics.json ``noise``)."""
NOISE_HELP = (
    "Keyed: every noisy value comes from a counter-based generator keyed by (seed, level, "
    "geounit, query), so the same seed gives the same numbers however the work is split "
    "(docs/science.md §8). Exact: OpenDP's exact discrete Gaussian / geometric samplers with OS "
    "randomness, for release-grade noise; the seed then does not reproduce the run."
)
SOLVERS: dict[str, str] = {
    "auto": "Automatic (the routing table picks per family)",
    **{name: f"{name} (where it applies; the general model elsewhere)" for name in ROUTE_NAMES},
}
"""TopDown's least-squares routes (``--solver``; recorded in metrics.json ``diagnostics.routes``)."""
SOLVER_HELP = (
    'Which least-squares solver estimates each family (docs/topdown.md, "Choosing the '
    'least-squares route"). Automatic picks per family: closed forms for total-only passes, '
    "projected conjugate gradients for a state's counties, ADMM for a county's tracts and a "
    "block group's blocks, PIQP on the general model for the other small families, Clarabel "
    "for the rest. Naming one route uses it wherever it applies and Clarabel elsewhere. Every "
    "route reaches the same optimum within solver tolerance; rounding ties can then differ in a "
    "few cells. The families each route solved are recorded in metrics.json (diagnostics.routes)."
)
SRS_HELP = (
    "Also estimate counts from simple random samples of the persons "
    f"({', '.join(f'{f:.0%}' for f in SRS_FRACTIONS)}) for the trade-off curve (PF Fig. 2)."
)
TRUTH_NOTE = (
    "Comparisons of DP output with the truth are only for non-confidential test data (public "
    "samples, synthetic or already-published tables) — never compute them on confidential data "
    "outside a secure environment."
)
ERROR_UNIVERSES: dict[str, str] = {
    HOUSED: "Blocks with housing units or group quarters (TDA's universe)",
    ALL: "Every block in the data",
}
"""The error universes a TopDown run offers (the run option ``error_universe``): the blocks the
block-level figures (TDA's absolute error, MAE, EPL, Blau bias) average over."""
ERROR_UNIVERSE_HELP = (
    "TDA's block figures (Tables 9, 10, 12; §9) average over the blocks with housing units or "
    "group quarters: the other blocks are structural zeros held at exactly 0, whose error is 0, so "
    "counting them dilutes the block MAE and EPL. Used where the data carry a unit frame "
    "(generated populations, the RI samples' housing units); on other data every block is used and "
    "the results say so. 'Every block' gives PHExplore's figures before the universe was recorded."
)
SPARK_MASTER_ENV = "PHEXPLORE_SPARK_MASTER"
SPARK_REMOTE_ENV = "PHEXPLORE_SPARK_REMOTE"
"""Environment variables that offer the Spark backend on the Run page (docs/spark.md)."""


def app_data_source(
    label: str,
    *,
    sample: str | None = None,
    folder: str | None = None,
    level: str | None = None,
    units: Sequence[str] = (),
    hist: BlockHistogram | None = None,
) -> DataSource:
    """The :class:`DataSource` of data the app holds, named ``label``.

    ``sample`` or ``folder`` (a generated population, recorded by its absolute path) say where the
    data can be read again for a replay, with the subset as a ``filter``; without either the data
    are an upload, which exists only in this session. ``hist`` (TopDown): its content hash is
    recorded as ``sha256`` and checked on replay."""
    where_from = sample or (str(Path(folder).absolute()) if folder else None)
    chosen = (
        BlockFilter(level=str(level), units=tuple(str(u) for u in units))
        if level and units
        else None
    )
    return DataSource(
        source=where_from or label,
        filter=chosen if where_from else None,
        label=label,
        sha256=None if hist is None else histogram_sha256(hist),
        upload=where_from is None,
    )


def spark_backend_options() -> BackendOptions | None:
    """The Spark master or Connect address configured for the app, when pyspark is installed.

    None means the Run page offers no Spark choice (no pyspark, or neither variable set)."""
    if importlib.util.find_spec("pyspark") is None:
        return None
    master, remote = os.environ.get(SPARK_MASTER_ENV), os.environ.get(SPARK_REMOTE_ENV)
    if master:
        return BackendOptions(master=master)
    if remote:
        return BackendOptions(remote=remote)
    return None


def app_backend(backend: str) -> dict[str, Any]:
    """``backend``/``backend_options`` of a run started in the app: ``spark`` is the Spark the
    app was configured with (never one named by a file), anything else this machine."""
    if backend != "spark":
        return {"backend": "local", "backend_options": BackendOptions()}
    options = spark_backend_options()
    if options is None:
        raise ValidationError(
            f"Spark is not configured for the app: install pyspark and set {SPARK_MASTER_ENV} "
            f"(e.g. local[2]) or {SPARK_REMOTE_ENV} (sc://HOST:15002) before starting it"
        )
    return {"backend": "spark", "backend_options": options}


def phsafe_run_config(budget: PHSafeBudget, states: Sequence[str] = ()) -> dict[str, Any]:
    """The official config.json of a PHSafe run of the working ``budget``, limited to ``states``
    (2-digit FIPS codes; none: the budget's own state filter)."""
    official = budget.to_official_config()
    if states:
        official["state_filter"] = list(states)
    return PHSafeConfig.from_json(official).to_dict()


def sample_scale(name: str) -> float | None:
    """The declared scale of a shipped sample (fraction of the full population), or None."""
    return declared_scale(name)


def epl_settings(percentile: float = EPL_PERCENTILE, multiplier: float = EPL_MULTIPLIER) -> Any:
    """The checked :class:`engine.metrics.epl_settings.EPLSettings` (a ValidationError names a bad value)."""
    return EPLSettings(percentile=float(percentile), multiplier=float(multiplier))


def spine_label(
    spine: str,
    allocation: TopDownAllocation,
    hist: BlockHistogram | None,
    level: str | None = None,
    units: Sequence[str] = (),
) -> str:
    """What the Run page's spine choice means for this allocation and the data it will run on
    (the subset ``level``/``units`` when given): ``preset`` resolved by
    :func:`engine.runs.spine_choice.resolve_spine`, as the run will resolve it."""
    if spine != PRESET_SPINE or hist is None:
        return spine
    data = subset_histogram(hist, level, list(units)) if level and units else hist
    return resolve_spine(TopDownRunOptions(), allocation, data).label


def data_has_places(hist: BlockHistogram | None) -> bool:
    """Whether the data carry places (a generated population written with places.csv)."""
    return hist is not None and has_places(hist)
