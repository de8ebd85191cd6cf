"""Engine-run glue for the Streamlit app: load data, run an engine in a background thread, keep results.

It lives in :mod:`phexplore.cli` because that is the one place in ``phexplore/`` that wires the
engines (the analytic core never imports ``engine``).

No science here: data come from :mod:`engine.data` (whose :class:`DataValidationError` problems the
Run page lists), runs from :func:`engine.topdown.run.run_topdown` /
:func:`engine.topdown.spine.runner.run_on_spine` / :func:`engine.phsafe.run.run_phsafe` /
:func:`engine.metrics.experiments.run_experiment`, metrics from :mod:`engine.metrics`. A run
executes in a worker thread so the page can show progress per level/table and offer a Cancel
button (the engines poll ``cancel()`` between chunks/tables); the thread never touches
``st.session_state`` — it fills a :class:`RunJob` that the page reads.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from engine.data.errors import DataValidationError
from engine.data.histogram import BlockHistogram
from engine.data.inputs import FORMATS as INPUT_FORMATS
from engine.metrics.epl import MULTIPLIER_RANGE, PERCENTILE_RANGE, PF_MULTIPLIER, PF_PERCENTILE
from engine.metrics.srs import DEFAULT_FRACTIONS as SRS_FRACTIONS
from phexplore.budget import PHSafeBudget, TopDownAllocation
from phexplore.errors import PHExploreError
from phexplore.folded_schema import schema_note_section

TOPDOWN_UPLOAD_KINDS: dict[str, str] = dict(INPUT_FORMATS)
EPL_BOOT = 200
"""Bootstrap resamples behind every EPL interval the app shows (SPEC §5)."""
EPL_PERCENTILE = PF_PERCENTILE
"""Default EPL percentile p: Petti & Flaxman's published setting (valid 50 < p ≤ 100)."""
EPL_MULTIPLIER = PF_MULTIPLIER
"""Default EPL multiplier m: Petti & Flaxman's published setting (valid 0 < m ≤ 10)."""
EPL_PERCENTILE_RANGE = PERCENTILE_RANGE
EPL_MULTIPLIER_RANGE = MULTIPLIER_RANGE
SRS_HELP = (
    "Also estimate counts from simple random samples of the persons "
    f"({', '.join(f'{f:.0%}' for f in SRS_FRACTIONS)}) for the trade-off curve (PF Fig. 2)."
)
TRUTH_NOTE = (
    "Comparisons of DP output with the truth are only for non-confidential test data (public "
    "samples, synthetic or already-published tables) — never compute them on confidential data "
    "outside a secure environment."
)


# ------------------------------------------------------------------ data


@st.cache_resource(show_spinner="Loading the sample…", max_entries=8)
def topdown_sample(name: str) -> BlockHistogram:
    """A shipped TopDown sample as a block histogram (cached for the server's lifetime)."""
    from engine.data.samples import load_topdown_sample

    hist = load_topdown_sample(name)
    # Shared by every session: read-only so no page or engine can change the sample in place.
    hist.counts.setflags(write=False)
    if hist.units is not None:
        hist.units.setflags(write=False)
    return hist


@st.cache_resource(show_spinner="Loading the CEF extract…", max_entries=2)
def phsafe_sample(name: str) -> Any:
    """A shipped PHSafe CEF extract (cached)."""
    from engine.data.cef import load_cef_extract
    from engine.data.samples import get_sample

    return load_cef_extract(get_sample(name).path)


def samples_of(kind: str) -> dict[str, str]:
    """``{sample name: title}`` of the shipped samples of ``kind`` ("topdown" or "phsafe")."""
    from engine.data.samples import list_samples

    return {s.name: s.title for s in list_samples() if s.kind == kind}


def load_topdown_upload(kind: str, files: Sequence[Any]) -> BlockHistogram:
    """Validate and load uploaded TopDown data of ``kind`` (raises DataValidationError)."""
    from engine.data.inputs import load_topdown_files

    return load_topdown_files(kind, files)


def load_cef_upload(files: Sequence[Any]) -> Any:
    """Validate and load an uploaded CEF extract (persons, units and geo CSV files)."""
    from engine.data.cef import load_cef_extract
    from engine.data.sniff import assign_by_name

    # Several files that could each be "the persons file" are refused, never one picked.
    return load_cef_extract(assign_by_name(files, ("persons", "units", "geo"), what="CEF extract"))


def problem_lines(exc: BaseException) -> list[str]:
    """A readable list for the page: each located problem of a DataValidationError, else the text."""
    if isinstance(exc, DataValidationError):
        return [str(p) for p in exc.problems]
    return [str(exc)]


def subset_units(hist: BlockHistogram, level: str) -> pd.Series:
    """Blocks per geounit of ``level`` (smallest first), for the Run page's subset picker."""
    return hist.geography.groupby(level).size().sort_values()


def subset(hist: BlockHistogram, level: str | None, units: Sequence[str]) -> BlockHistogram:
    """The blocks of the chosen geounits (all data when ``level`` is None or nothing is chosen)."""
    if not level or not units:
        return hist
    from engine.metrics.experiments import subset_histogram

    return subset_histogram(hist, level, units)


# ------------------------------------------------------------------ results and jobs


@dataclass
class RunRecord:
    """One finished run kept in the session: its tidy comparison table, metrics and extra tables."""

    id: int
    label: str
    engine: str
    scenario: str
    settings: dict[str, Any]
    metrics: dict[str, Any]
    tidy: pd.DataFrame
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    experiment: Any = None
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    """Unique across sessions (run ids restart at 1 in every session); keys cached results."""

    @property
    def rho(self) -> float | None:
        """The run's total budget (ρ, or ε for pure DP)."""
        value = self.settings.get("rho")
        return None if value is None else float(value)


@dataclass
class RunJob:
    """A run in progress: progress per stage label, a cancel flag, and the outcome when done."""

    engine: str
    label: str
    cancel_event: threading.Event = field(default_factory=threading.Event)
    stages: dict[str, float] = field(default_factory=dict)
    fraction: float = 0.0
    record: RunRecord | None = None
    error: list[str] | None = None
    cancelled: bool = False
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    thread: threading.Thread | None = None

    def progress(self, label: str, fraction: float) -> None:
        """Engine progress callback: remember the stage and the overall fraction."""
        self.stages[label] = float(fraction)
        self.fraction = max(self.fraction, min(float(fraction), 1.0))

    def cancel(self) -> bool:
        """Engine cancel callback."""
        return self.cancel_event.is_set()

    @property
    def done(self) -> bool:
        """True once the worker thread has finished (successfully or not)."""
        return self.finished is not None

    def elapsed(self) -> float:
        """Seconds since start (until finish)."""
        return (self.finished or time.monotonic()) - self.started


JOB_KEY = "run_job"
MESSAGE_KEY = "run_last_message"


def collect_finished(state: MutableMapping[str, Any], runs_key: str) -> bool:
    """Move a finished job's record into ``state[runs_key]`` and leave a message; True if done.

    Called on every page (from ``app.py``) and by the Run page's progress panel, so a run that
    ends while the user is on another page is kept all the same.
    """
    job: RunJob | None = state.get(JOB_KEY)
    if job is None or not job.done:
        return False
    state[JOB_KEY] = None
    if job.record is not None:
        state[runs_key] = [*state[runs_key], job.record]
        state[MESSAGE_KEY] = (
            "success",
            f"Finished {job.record.label} in {job.elapsed():.1f} s.",
        )
    elif job.cancelled:
        state[MESSAGE_KEY] = ("warning", "The run was cancelled; nothing was kept.")
    else:
        lines = "\n".join(f"- {x}" for x in job.error or [])
        state[MESSAGE_KEY] = ("error", f"The run failed:\n\n{lines}")
    return True


def start_job(job: RunJob, work: Callable[[RunJob], RunRecord]) -> RunJob:
    """Run ``work(job)`` in a daemon thread; errors become readable lines on the job."""

    def target() -> None:
        try:
            job.record = work(job)
        except PHExploreError as exc:
            if type(exc).__name__ in ("RunCancelled", "PHSafeCancelled"):
                job.cancelled = True
            else:
                job.error = problem_lines(exc)
        except Exception as exc:  # one line in place; the traceback goes to the log file
            from phexplore.failures import describe_failure

            job.error = [describe_failure(exc, f"the {job.engine} run")]
        finally:
            job.finished = time.monotonic()

    job.thread = threading.Thread(target=target, name=f"phexplore-{job.engine}", daemon=True)
    job.thread.start()
    return job


def bootstrap_rng(seed: int) -> np.random.Generator:
    """The EPL bootstrap's generator for a run of noise seed ``seed``: seeded ``[seed, 1]``.

    A stream of its own (not the noise seed itself), so the bootstrap never replays the noise draws.
    """
    return np.random.default_rng([int(seed), 1])


def _spine_plan(
    hist: BlockHistogram,
    allocation: TopDownAllocation,
    spine: str,
    entities: Sequence[str],
    special_areas: str | None = None,
) -> Any:
    from engine.topdown.spine.cli_options import plan_spine

    return plan_spine(hist, allocation, spine, entities, special_areas=special_areas)


def topdown_work(
    *,
    run_id: int,
    scenario: str,
    hist: BlockHistogram,
    data_label: str,
    allocation: TopDownAllocation,
    preset: str | None,
    seed: int,
    workers: int,
    spine: str,
    entities: Sequence[str],
    sweep_rhos: Sequence[float],
    special_areas: str | None = None,
    spread_invariant_share: bool = False,
    sweep_seeds: int,
    srs: bool,
    epl_boot: int = EPL_BOOT,
    epl_percentile: float = EPL_PERCENTILE,
    epl_multiplier: float = EPL_MULTIPLIER,
) -> Callable[[RunJob], RunRecord]:
    """The work of a TopDown run (plus an optional ρ sweep with the SRS baseline).

    ``special_areas`` names the areas of an AIAN-style branch (None: no branch, SPN §6);
    ``spread_invariant_share`` spreads the held-exact shares first (departure from production).
    EPLs use the density range ±``epl_multiplier`` × max(|P(100−p)|, |P(p)|) with
    p = ``epl_percentile`` (default PF's published 95 / 1.0; checked here, before the job starts).
    """
    settings = epl_settings(epl_percentile, epl_multiplier)

    def work(job: RunJob) -> RunRecord:
        from engine.metrics import build_metrics_json, epl_table, mae_table
        from engine.metrics.blau import (
            RACEETH_GROUPS,
            blau_bias_report,
            raceeth_counts_from_tidy,
        )
        from engine.topdown.queries import SCHEMA_QUERIES
        from engine.topdown.run import run_topdown

        queries = SCHEMA_QUERIES.get(hist.schema.name)
        nonlocal allocation
        if spread_invariant_share:
            allocation = spread_for_run(hist, allocation, special_areas)
        plan = None
        if spine != "conventional" or entities:
            job.progress("Building the spine", 0.0)
            plan = _spine_plan(hist, allocation, spine, entities, special_areas)
            result = run_topdown(
                hist,
                allocation,
                seed=seed,
                workers=workers,
                progress=job.progress,
                cancel=job.cancel,
                **plan.run_kwargs(allocation),
            )
        else:
            result = run_topdown(
                hist,
                allocation,
                seed=seed,
                workers=workers,
                progress=job.progress,
                cancel=job.cancel,
            )
        job.progress("Computing metrics", 1.0)
        tidy = result.to_tidy(queries)
        tables: dict[str, pd.DataFrame] = {"mae": mae_table(tidy)}
        blau_bias = None
        if "RACEETH" in hist.schema.names and tuple(
            hist.schema.attributes[hist.schema.axis("RACEETH")].levels
        ) == tuple(RACEETH_GROUPS):
            # The run's spine levels and the tabulation geographies summed from blocks (block
            # groups, tracts), so optimized and AIAN-style spines show Block_Group too.
            blau_bias = blau_bias_report(
                tidy,
                hist,
                result.block_histogram().sum(axis=1),
                spine_counts=raceeth_counts_from_tidy(result.to_tidy(("RACEETH",))),
            )
            tables["blau_bias"] = blau_bias
        tables["epl"] = epl_table(tidy, n_boot=epl_boot, rng=bootstrap_rng(seed), settings=settings)
        prediction_rows: list[dict[str, Any]] = []
        if plan is None:  # the prediction covers the conventional spine (SPEC §7)
            from engine.metrics.prediction import prediction_table

            predicted = prediction_table(result, hist, allocation, tidy)
            if predicted is not None:
                tables["prediction"] = predicted
                prediction_rows = predicted[
                    ["geolevel", "query", "sigma", "predicted_rmse", "measured_rmse", "ratio"]
                ].to_dict("records")
        extra: dict[str, Any] = {
            "data": data_label,
            "allocation": allocation.name,
            "spine": spine,
            "spread_invariant_share": spread_invariant_share,
        }
        extra["structural_zeros"] = result.diagnostics.get("structural", {})
        schema_note = schema_note_section(hist.schema.name, allocation)
        if schema_note:
            extra["schema_note"] = schema_note
        if prediction_rows:
            extra["prediction"] = prediction_rows
        if plan is not None:
            sections = plan.metrics(result, hist)
            extra.update({k: v for k, v in sections.items() if k != "spine"})
            extra["spine"] = sections.get("spine", spine)
        metrics = build_metrics_json(
            engine="topdown",
            tidy=tidy,
            runtime_s=result.runtime_s,
            rho=float(allocation.rho),
            rho_spent=result.rho_spent,
            seed=seed,
            epl_boot=epl_boot,  # the same stream as tables["epl"]: the same values the pages show
            epl_rng=bootstrap_rng(seed),
            epl_settings=settings,
            blau_bias=blau_bias,
            extra=extra,
        )
        experiment = None
        if sweep_rhos and preset:
            from engine.metrics.experiments import run_experiment

            job.progress(f"ρ sweep ({len(sweep_rhos)} budgets × {sweep_seeds} seeds)", 0.0)
            experiment = run_experiment(
                "topdown",
                hist,
                rhos=list(sweep_rhos),
                seeds=list(range(seed, seed + sweep_seeds)),
                preset=preset,
                queries=queries,
                srs_fractions=SRS_FRACTIONS if srs else None,
                n_boot=20,
                workers=workers,
                progress=lambda m, f: job.progress(f"Sweep: {m}", f),
                cancel=job.cancel,
                data_name=data_label,
                epl_settings=settings,
            )
        what = "ε" if allocation.mechanism == "puredp" else "ρ"
        return RunRecord(
            id=run_id,
            label=f"#{run_id} {scenario} · TopDown · {data_label} · {what}={float(allocation.rho):.4g} · seed {seed}",
            engine="topdown",
            scenario=scenario,
            settings={
                "data": data_label,
                "allocation": allocation.name,
                "mechanism": allocation.mechanism,
                "rho": float(allocation.rho),
                "rho_spent": result.rho_spent,
                "spread_invariant_share": spread_invariant_share,
                "seed": seed,
                "spine": spine,
                "entities": list(entities),
                "special_areas": special_areas,
                "blocks": hist.n_blocks,
                "levels": [str(lv) for lv in result.tree.levels],
                "runtime_s": result.runtime_s,
                "epl_settings": settings.as_dict(),
            },
            metrics=metrics,
            tidy=tidy,
            tables=tables,
            experiment=experiment,
        )

    return work


def phsafe_work(
    *,
    run_id: int,
    scenario: str,
    extract: Any,
    data_label: str,
    budget: PHSafeBudget,
    states: Sequence[str],
    seed: int,
    trials: int,
    scale: float | None = None,
) -> Callable[[RunJob], RunRecord]:
    """The work of a PHSafe run with the working PHSafe budget (official config) on ``extract``.

    ``scale`` is the data's declared fraction of the full population (:func:`sample_scale`):
    truncation error is then also shown per 1,000 persons and projected to full scale.
    """

    def work(job: RunJob) -> RunRecord:
        from engine.phsafe.config import PHSafeConfig
        from engine.phsafe.run import build_metrics, run_phsafe

        official = budget.to_official_config()
        if states:
            official["state_filter"] = list(states)
        config = PHSafeConfig.from_json(official)
        result = run_phsafe(
            extract, config, seed=seed, trials=trials, progress=job.progress, cancel=job.cancel
        )
        metrics = build_metrics(result, scale=scale)
        cells = result.cell_errors
        return RunRecord(
            id=run_id,
            label=f"#{run_id} {scenario} · PHSafe · {data_label} · ρ={budget.total_unbounded():.4g} · seed {seed}",
            engine="phsafe",
            scenario=scenario,
            settings={
                "data": data_label,
                "budget": budget.name,
                "rho": budget.total_unbounded(),
                "seed": seed,
                "trials": trials,
                "states": list(result.states),
                "persons": result.n_persons,
                "runtime_s": result.runtime_s,
                "scale": scale,
            },
            metrics=metrics,
            tidy=cells,
            tables={
                "level_errors": result.level_errors,
                "truncation_scale": result.truncation_at_scale(scale)
                if result.n_persons > 0
                else pd.DataFrame(),
                "truncation": result.truncation,
                "measurements": result.measurements,
            },
        )

    return work


def sample_scale(name: str) -> float | None:
    """The declared scale of a shipped sample (fraction of the full population), or None."""
    from engine.data.samples import declared_scale

    return declared_scale(name)


def epl_settings(percentile: float = EPL_PERCENTILE, multiplier: float = EPL_MULTIPLIER) -> Any:
    """The checked :class:`engine.metrics.epl.EPLSettings` (a ValidationError names a bad value)."""
    from engine.metrics.epl import EPLSettings

    return EPLSettings(percentile=float(percentile), multiplier=float(multiplier))


def run_epl_settings(record: RunRecord) -> dict[str, Any]:
    """The EPL settings a run's EPLs were computed with (``as_dict`` form; PF's for old records)."""
    recorded = record.settings.get("epl_settings")
    return dict(recorded) if recorded else epl_settings().as_dict()


def pf_reference_epl(settings: Mapping[str, Any]) -> tuple[pd.DataFrame | None, str]:
    """PF's published TopDown EPLs (1940 Census, total counts) when ``settings`` are PF's.

    Returns ``(table, note)``: the table (epsilon, geolevel, epl) for County and Enumeration
    district total counts, or ``None`` with the reason it is not drawn when the run's EPL used other
    settings (values under other settings are not comparable — up to ~10× apart).
    """
    if not settings.get("pf_published"):
        return None, (
            "Petti & Flaxman's published EPLs are not drawn: this run's EPL uses "
            f"{settings.get('label', 'other settings')}, and PF computed theirs with "
            "±1 × max(|P5|, |P95|) (percentile 95, multiplier 1.0). EPLs under different "
            "density ranges are not comparable (up to ~10× apart on the same residuals)."
        )
    from engine.metrics.reference import load_petti_flaxman_tradeoff

    ref = load_petti_flaxman_tradeoff()
    part = ref[
        (ref["design"] == "topdown")
        & (ref["count_type"] == "tc")
        & ref["geolevel"].isin(["County", "Enumeration district"])
    ]
    return part[["epsilon", "geolevel", "epl"]].dropna().reset_index(drop=True), (
        "Grey: Petti & Flaxman's published EPLs of total counts (2018 End-to-End TopDown on the "
        "1940 Census, pure ε-DP), computed with the same settings (±1 × max(|P5|, |P95|)); "
        "their data, geography and mechanism differ from this run's."
    )


@st.cache_data(show_spinner="Computing EPL…", max_entries=64)
def epl_curves(
    token: str,
    seed: int,
    geolevel: str,
    query: str,
    _tidy: pd.DataFrame,
    percentile: float = EPL_PERCENTILE,
    multiplier: float = EPL_MULTIPLIER,
) -> dict[str, Any]:
    """EPL of one (geolevel, query) of a run with its interval and curves (cached per run token).

    Residuals are estimate − true over the group's cells (SPEC §5);
    :func:`engine.metrics.epl_details` gives the value, the bootstrap interval, the KDE and the
    EPL(x) curve, with the density range of ``percentile`` / ``multiplier`` (the run's settings).
    """
    from engine.metrics import epl_details

    part = _tidy[(_tidy["geolevel"] == geolevel) & (_tidy["query"] == query)]
    residuals = (part["estimate"] - part["true"]).to_numpy(dtype=float)
    result = epl_details(
        residuals,
        n_boot=EPL_BOOT,
        rng=bootstrap_rng(seed),
        settings=epl_settings(percentile, multiplier),
    )
    return {
        "residuals": residuals,
        "value": result.value,
        "low": result.low,
        "high": result.high,
        "n": result.n,
        "reason": result.reason,
        "x": result.x,
        "density": result.density,
        "curve": result.epl_curve,
    }


# ------------------------------------------------------------------ budget actually spent


def states_in(hist: BlockHistogram) -> int:
    """Number of states in the data (1 without a State column: part of one state)."""
    if "State" not in hist.geography.columns:
        return 1
    return max(1, int(hist.geography["State"].nunique()))


def spread_for_run(
    hist: BlockHistogram, allocation: TopDownAllocation, special_areas: str | None
) -> TopDownAllocation:
    """``allocation`` with its held-exact shares spread (departure from production), for ``hist``.

    Refused with an AIAN-style branch: a split state's branches measure the State TOTAL (TDA §7.4).
    """
    from phexplore.budget import spread_invariant_share
    from phexplore.errors import ValidationError

    if special_areas:
        raise ValidationError(
            "spreading the held-exact shares cannot be combined with an AIAN-style branch: a "
            "split state's branches measure the State TOTAL (TDA §7.4); untick one of the two"
        )
    return spread_invariant_share(allocation, states_in(hist))


def budget_caption(record: RunRecord) -> str | None:
    """ "ρ = 2.56 nominal, ρ spent on noisy measurements = 1.728 …" of a TopDown run, else None."""
    from phexplore.budget.invariants import SPREAD_LABEL, spent_label

    if record.engine != "topdown" or record.rho is None:
        return None
    what = "ε" if record.settings.get("mechanism") == "puredp" else "ρ"
    text = spent_label(record.rho, record.settings.get("rho_spent"), what)
    if record.settings.get("spread_invariant_share"):
        text += f". Allocation: {SPREAD_LABEL}"
    return text + "."


# ------------------------------------------------------------------ headline numbers


def finest_level(record: RunRecord) -> str:
    """The finest geolevel of a TopDown run in spine order (root first), e.g. ``Block``."""
    levels = record.settings.get("levels") or list(dict.fromkeys(record.tidy["geolevel"]))
    return str(levels[-1])


def headline_error(record: RunRecord) -> tuple[str, float | None, str]:
    """``(label, value, help)`` of a run's one-number error for the Run page.

    TopDown: the MAE of TOTAL at the finest geolevel (from the run's MAE table). PHSafe: the
    noise MAE over every measured cell and trial (each table × level's ``mae_noise`` weighted by
    its number of cells). ``value`` is None when the run has no such number.
    """
    if record.engine == "topdown":
        level = finest_level(record)
        mae = record.tables["mae"]
        row = mae[(mae["query"] == "TOTAL") & (mae["geolevel"] == level)]
        return (
            f"MAE of TOTAL ({level})",
            float(row["mae"].iloc[0]) if not row.empty else None,
            f"Mean absolute error of the total population over the {level} geounits, the finest "
            "geolevel of the run.",
        )
    le = record.tables.get("level_errors")
    value = None
    if le is not None and "mae_noise" in le:
        part = le.dropna(subset=["mae_noise"])
        weights = part["cells"].to_numpy(float)
        if weights.sum() > 0:
            value = float(np.average(part["mae_noise"].to_numpy(float), weights=weights))
    return (
        "Noise MAE (all cells)",
        value,
        "Mean absolute noise error over every measured cell and trial of the run (all tables "
        "and levels); truncation error is left out.",
    )


# ------------------------------------------------------------------ downloads


def tidy_bytes(frame: pd.DataFrame, fmt: str) -> bytes:
    """A table as CSV or Parquet bytes for ``st.download_button``."""
    if fmt == "csv":
        return frame.to_csv(index=False).encode("utf-8")
    import io

    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()


def metrics_bytes(metrics: Mapping[str, Any]) -> bytes:
    """metrics.json bytes (NaN and ∞ written as null so any JSON reader accepts them)."""
    import json
    import math

    def clean(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, Mapping):
            return {str(k): clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [clean(v) for v in value]
        return value

    return json.dumps(clean(metrics), indent=2, default=str).encode("utf-8")
