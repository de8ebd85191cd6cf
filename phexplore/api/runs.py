"""The app's runs: a :class:`~engine.runs.spec.RunSpec` from the widgets, run by the one pipeline.

Part of the app-facing API (:mod:`phexplore.api`). :func:`topdown_work` and :func:`phsafe_work`
build the run description the CLI would build from the same choices and return the work a
:class:`~phexplore.api.jobs.RunJob` runs in its thread: :func:`engine.runs.execute` (load →
measure → estimate → metrics) with the job's :class:`~engine.runs.control.RunControl`, plus an
optional ρ sweep through :func:`engine.runs.experiments.run_experiment`. No science here.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.core.errors import ValidationError
from engine.data.histogram import BlockHistogram
from engine.dp.budget import PHSafeBudget, TopDownAllocation
from engine.dp.budget.fingerprint import budget_fingerprint, short_fingerprint
from engine.metrics.epl import MULTIPLIER_RANGE, PERCENTILE_RANGE, PF_MULTIPLIER, PF_PERCENTILE
from engine.metrics.srs import DEFAULT_FRACTIONS as SRS_FRACTIONS
from engine.runs.spec import RunSpec
from engine.runs.topdown import EPL_BOOT as RUN_EPL_BOOT
from engine.runs.topdown import bootstrap_rng as bootstrap_rng
from engine.topdown.qp.settings import ROUTE_NAMES
from phexplore.api import limits
from phexplore.api.jobs import RunJob, RunRecord

EPL_BOOT = RUN_EPL_BOOT
"""Bootstrap resamples behind every EPL interval the app shows (SPEC §5)."""
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
    "(SPEC §8). Exact: OpenDP's exact discrete Gaussian / geometric samplers with OS randomness, "
    "for release-grade noise; the seed then does not reproduce the run."
)
SOLVERS: dict[str, str] = {
    "auto": "Automatic (the routing table picks per family)",
    **{name: f"{name} (where it applies; the general model elsewhere)" for name in ROUTE_NAMES},
}
"""TopDown's least-squares routes (``--solver``; recorded in metrics.json ``diagnostics``)."""
SOLVER_HELP = (
    'Which least-squares solver estimates each family (docs/topdown.md, "Choosing the '
    'least-squares route"). Automatic picks per family: closed forms for total-only passes, '
    "a batched interior point for small families, projected conjugate gradients or ADMM for "
    "large ones, Clarabel (the general model) for the rest. Naming one route uses it wherever "
    "it applies and Clarabel elsewhere. Every route reaches the same optimum within solver "
    "tolerance; rounding ties can then differ in a few cells. The families each route solved "
    "are recorded in metrics.json (diagnostics.routes)."
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


def data_fingerprint(hist: BlockHistogram) -> str:
    """SHA-256 of a histogram's block ids and counts: names data the app holds in a RunSpec."""
    digest = hashlib.sha256()
    digest.update("|".join(map(str, hist.geography.iloc[:, -1].astype(str))).encode("utf-8"))
    for chunk in hist.dense_row_chunks():  # the dense bytes, never the whole dense array
        digest.update(chunk.tobytes())
    return digest.hexdigest()


def data_source(
    *,
    sample: str | None = None,
    folder: str | None = None,
    level: str | None = None,
    units: Sequence[str] = (),
) -> dict[str, Any] | None:
    """Where a run's data can be read again: ``{"source": sample or folder}`` plus the subset as
    ``filter`` (``{"level": "County", "units": ["44007"]}``, as ``phexplore run --filter``);
    None for data that exist only in the session (an upload)."""
    where_from = sample or folder
    if not where_from:
        return None
    out: dict[str, Any] = {"source": str(where_from)}
    if level and units:
        out["filter"] = {"level": str(level), "units": [str(u) for u in units]}
    return out


SPARK_MASTER_ENV = "PHEXPLORE_SPARK_MASTER"
SPARK_REMOTE_ENV = "PHEXPLORE_SPARK_REMOTE"
"""Environment variables that offer the Spark backend on the Run page (docs/spark.md)."""


def spark_backend_options() -> dict[str, str] | None:
    """The Spark master or Connect address configured for the app, when pyspark is installed.

    None means the Run page offers no Spark choice (no pyspark, or neither variable set)."""
    import importlib.util
    import os

    if importlib.util.find_spec("pyspark") is None:
        return None
    master, remote = os.environ.get(SPARK_MASTER_ENV), os.environ.get(SPARK_REMOTE_ENV)
    if master:
        return {"master": master}
    if remote:
        return {"remote": remote}
    return None


def where(backend: str) -> dict[str, Any]:
    """``backend``/``backend_options`` of a run started in the app (``spark``: the configured one)."""
    if backend != "spark":
        return {"backend": "local"}
    options = spark_backend_options()
    if options is None:
        raise ValidationError(
            f"Spark is not configured for the app: install pyspark and set {SPARK_MASTER_ENV} "
            f"(e.g. local[2]) or {SPARK_REMOTE_ENV} (sc://HOST:15002) before starting it"
        )
    return {"backend": "spark", "backend_options": options}


def topdown_spec(
    *,
    data_label: str,
    hist: BlockHistogram,
    allocation: TopDownAllocation,
    seed: int,
    workers: int,
    spine: str,
    entities: Sequence[str],
    special_areas: str | None = None,
    spread_invariant_share: bool = False,
    epl_boot: int = EPL_BOOT,
    epl_percentile: float = EPL_PERCENTILE,
    epl_multiplier: float = EPL_MULTIPLIER,
    noise_method: str = "fast",
    solver: str = "auto",
    backend: str = "local",
    source: Mapping[str, Any] | None = None,
) -> RunSpec:
    """The :class:`RunSpec` of a TopDown run chosen on the Run page (data named and hashed).

    ``source`` says where the data can be read again (:func:`data_source`: a shipped sample or a
    generated folder, with the subset as a ``filter``), so the run can be replayed from its
    metrics.json in the app or by ``phexplore run replay``; without it (uploads) the data are
    named by ``data_label`` only. The content hash ``sha256`` is recorded either way and checked
    on replay. The EPL settings are checked here (a ValidationError names a bad value), before
    any job starts.
    """
    settings = epl_settings(epl_percentile, epl_multiplier)
    options: dict[str, Any] = {
        "epl_boot": int(epl_boot),
        "epl_percentile": settings.percentile,
        "epl_multiplier": settings.multiplier,
        "spread_invariant_share": bool(spread_invariant_share),
        "noise_method": noise_method,
    }
    if solver != "auto":  # only when not the default, so default runs keep their fingerprints
        options["solver"] = solver
    if spine != "conventional" or entities or special_areas is not None:
        options.update(spine=spine, entities=list(entities), special_areas=special_areas)
    return RunSpec(
        engine="topdown",
        data={
            "source": data_label,
            **dict(source or {}),
            "label": data_label,
            "sha256": data_fingerprint(hist),
        },
        config=allocation.to_dict(),
        seed=int(seed),
        options=options,
        workers=int(workers),
        **where(backend),
    )


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
    origin: str | None = None,
    noise_method: str = "fast",
    solver: str = "auto",
    backend: str = "local",
    source: Mapping[str, Any] | None = None,
) -> Callable[[RunJob], RunRecord]:
    """The work of a TopDown run (plus an optional ρ sweep with the SRS baseline).

    The run is tied to its exact budget: ``metrics.json`` and the record carry the allocation's
    fingerprint (:func:`engine.dp.budget.fingerprint.budget_fingerprint`), ``origin`` (the preset it
    is, or "modified from <preset>"), the run number, the data label and the seed (issue 15).

    ``special_areas`` names the areas of an AIAN-style branch (None: no branch, SPN §6);
    ``spread_invariant_share`` spreads the held-exact shares first (departure from production).
    EPLs use the density range ±``epl_multiplier`` × max(|P(100−p)|, |P(p)|) with
    p = ``epl_percentile`` (default PF's published 95 / 1.0; checked here, before the job starts).
    """
    if spread_invariant_share:
        spread_for_run(hist, allocation, special_areas)  # refused before the job starts
    spec = topdown_spec(
        data_label=data_label,
        hist=hist,
        allocation=allocation,
        seed=seed,
        workers=workers,
        spine=spine,
        entities=entities,
        special_areas=special_areas,
        spread_invariant_share=spread_invariant_share,
        epl_boot=epl_boot,
        epl_percentile=epl_percentile,
        epl_multiplier=epl_multiplier,
        noise_method=noise_method,
        solver=solver,
        backend=backend,
        source=source,
    )
    settings = epl_settings(epl_percentile, epl_multiplier)
    provenance = new_run_provenance(
        run_id=run_id, data_label=data_label, seed=seed, budget=allocation, origin=origin
    )

    def work(job: RunJob) -> RunRecord:
        output = execute_topdown(spec, job, hist, data_label, spine, provenance)
        experiment = None
        if sweep_rhos and preset:
            from engine.metrics.srs import DEFAULT_FRACTIONS
            from engine.runs.experiments import run_experiment

            job.progress(f"ρ sweep ({len(sweep_rhos)} budgets × {sweep_seeds} seeds)", 0.0)
            experiment = run_experiment(
                "topdown",
                hist,
                rhos=list(sweep_rhos),
                seeds=list(range(seed, seed + sweep_seeds)),
                preset=preset,
                queries=output.extra.get("queries"),
                srs_fractions=DEFAULT_FRACTIONS if srs else None,
                n_boot=20,
                workers=workers,
                progress=lambda m, f: job.progress(f"Sweep: {m}", f),
                cancel=job.cancel,
                data_name=data_label,
                epl_settings=settings,
            )
        return topdown_record(
            output,
            run_id=run_id,
            scenario=scenario,
            data_label=data_label,
            allocation=allocation,
            provenance=provenance,
            experiment=experiment,
        )

    return work


def execute_topdown(
    spec: RunSpec,
    job: RunJob,
    hist: BlockHistogram,
    data_label: str,
    spine: str,
    provenance: Mapping[str, Any],
    extra: Mapping[str, Any] | None = None,
) -> Any:
    """Run a TopDown ``spec`` on ``hist`` through the one pipeline with the app's tables and the
    run's provenance in metrics.json (``extra``: more sections, e.g. ``replay_of``). On the Spark
    backend, person records named by ``spec.data`` are read again by Spark's executors
    (:func:`engine.runs.topdown.reads_persons_on_spark`; the same histogram), not taken from
    ``hist``.

    metrics.json and the tables come from the sparse residuals; the dense tidy table keeps at
    most :data:`phexplore.api.limits.APP_MAX_ROWS` rows, by the rule of opened run folders
    (smallest queries first, TOTAL first; the others in ``output.extra["queries_left_out"]``)."""
    from engine.runs import execute
    from engine.topdown.queries import SCHEMA_QUERIES

    queries = SCHEMA_QUERIES.get(hist.schema.name)
    output = execute(
        spec,
        control=job.control,
        # on Spark, person records (a PPMF sample, a generated folder) are read by the executors,
        # as `phexplore run` reads them; the page's copy only described the data
        data=None if spark_reads_persons(spec) else hist,
        tables=True,
        queries=queries,
        max_tidy_rows=limits.APP_MAX_ROWS,
        # metrics.json has "seed" as a standard key already (the same value).
        extra_metrics={
            "data": data_label,
            "spine": spine,
            **{k: v for k, v in provenance.items() if k != "seed"},
            **dict(extra or {}),
        },
    )
    output.extra["queries"] = queries
    return output


def spark_reads_persons(spec: RunSpec) -> bool:
    """True when a Run-page TopDown ``spec`` runs on Spark on person records the executors can
    read again from where they are (a shipped PPMF sample, or a generated population folder by
    its absolute path: :func:`engine.runs.topdown.reads_persons_on_spark`); never for uploads,
    which exist only in the session."""
    from engine.data.samples import list_samples
    from engine.runs.topdown import reads_persons_on_spark

    source = str(spec.data.get("source", ""))
    if not (Path(source).is_absolute() or source in {s.name for s in list_samples()}):
        return False
    return reads_persons_on_spark(spec)


def topdown_record(
    output: Any,
    *,
    run_id: int,
    scenario: str,
    data_label: str,
    allocation: TopDownAllocation,
    provenance: Mapping[str, Any],
    experiment: Any = None,
    note: str = "",
) -> RunRecord:
    """The session's record of a finished TopDown run (``output``: :func:`execute_topdown`'s);
    ``note`` is appended to the label (e.g. "replay of #2")."""
    spec, result, hist = output.spec, output.result, output.data
    options = spec.options
    seed = spec.seed
    what = "ε" if allocation.mechanism == "puredp" else "ρ"
    return _record(
        output,
        run_id=run_id,
        scenario=scenario,
        data_label=data_label,
        budget_text=f"{what}={float(allocation.rho):.4g}",
        provenance=provenance,
        note=note,
        experiment=experiment,
        settings={
            "data": data_label,
            "allocation": allocation.name,
            "mechanism": allocation.mechanism,
            "rho": float(allocation.rho),
            "rho_spent": result.rho_spent,
            "spread_invariant_share": bool(options.get("spread_invariant_share", False)),
            "seed": seed,
            "noise_method": spec.noise_method,
            "solver": spec.solver,
            "spine": str(options.get("spine", "conventional")),
            "entities": list(options.get("entities", ())),
            "special_areas": options.get("special_areas"),
            "blocks": hist.n_blocks,
            "levels": [str(lv) for lv in result.tree.levels],
            "queries_left_out": list(output.extra.get("queries_left_out") or []),
            "runtime_s": result.runtime_s,
            "epl_settings": epl_settings(
                float(options.get("epl_percentile", EPL_PERCENTILE)),
                float(options.get("epl_multiplier", EPL_MULTIPLIER)),
            ).as_dict(),
        },
    )


def phsafe_spec(
    *,
    data_label: str,
    budget: PHSafeBudget,
    states: Sequence[str],
    seed: int,
    trials: int,
    scale: float | None = None,
    noise_method: str = "fast",
    solver: str = "auto",
    backend: str = "local",
    source: Mapping[str, Any] | None = None,
) -> RunSpec:
    """The :class:`RunSpec` of a PHSafe run with the working budget (official config).

    ``source`` (:func:`data_source`) says where the extract can be read again for a replay; an
    upload is named by ``data_label`` only."""
    official = budget.to_official_config()
    if states:
        official["state_filter"] = list(states)
    from engine.phsafe.config import PHSafeConfig

    config = PHSafeConfig.from_json(official)
    return RunSpec(
        engine="phsafe",
        data={"source": data_label, **dict(source or {}), "label": data_label},
        config=config.to_dict(),
        seed=int(seed),
        options={"trials": int(trials), "scale": scale, "noise_method": noise_method},
        **where(backend),
    )


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
    origin: str | None = None,
    noise_method: str = "fast",
    solver: str = "auto",
    backend: str = "local",
    source: Mapping[str, Any] | None = None,
) -> Callable[[RunJob], RunRecord]:
    """The work of a PHSafe run with the working PHSafe budget (official config) on ``extract``.

    Like :func:`topdown_work`, the run carries its budget's fingerprint (of ``budget`` as the
    planner holds it, before the run's state filter), ``origin``, run number, data and seed.

    ``scale`` is the data's declared fraction of the full population (:func:`sample_scale`):
    truncation error is then also shown per 1,000 persons and projected to full scale.
    """
    spec = phsafe_spec(
        data_label=data_label,
        budget=budget,
        states=states,
        seed=seed,
        trials=trials,
        scale=scale,
        noise_method=noise_method,
        backend=backend,
        source=source,
    )

    provenance = new_run_provenance(
        run_id=run_id, data_label=data_label, seed=seed, budget=budget, origin=origin
    )

    def work(job: RunJob) -> RunRecord:
        from engine.runs import execute

        output = execute(spec, control=job.control, data=extract, extra_metrics=provenance)
        return phsafe_record(
            output,
            run_id=run_id,
            scenario=scenario,
            data_label=data_label,
            budget=budget,
            provenance=provenance,
        )

    return work


def phsafe_record(
    output: Any,
    *,
    run_id: int,
    scenario: str,
    data_label: str,
    budget: PHSafeBudget,
    provenance: Mapping[str, Any],
    note: str = "",
) -> RunRecord:
    """The session's record of a finished PHSafe run of ``budget`` (``output``: the pipeline's);
    ``note`` is appended to the label (e.g. "replay of #2")."""
    spec, result = output.spec, output.result
    seed = spec.seed
    return _record(
        output,
        run_id=run_id,
        scenario=scenario,
        data_label=data_label,
        budget_text=f"ρ={budget.total_unbounded():.4g}",
        provenance=provenance,
        note=note,
        settings={
            "data": data_label,
            "budget": budget.name,
            "rho": budget.total_unbounded(),
            "seed": seed,
            "trials": int(spec.options.get("trials", 1)),
            "states": list(result.states),
            "persons": result.n_persons,
            "runtime_s": result.runtime_s,
            "scale": spec.options.get("scale"),
            "noise_method": spec.noise_method,
        },
    )


def _record(
    output: Any,
    *,
    run_id: int,
    scenario: str,
    data_label: str,
    budget_text: str,
    provenance: Mapping[str, Any],
    note: str,
    settings: Mapping[str, Any],
    experiment: Any = None,
) -> RunRecord:
    """A :class:`RunRecord` of the pipeline's ``output``: its label (:func:`run_label` plus
    ``note``), the engine's ``settings`` with the run fingerprint and provenance, its tables and
    the input it used (kept for a replay in this session)."""
    spec = output.spec
    engine = "TopDown" if spec.engine == "topdown" else "PHSafe"
    label = run_label(run_id, engine, data_label, budget_text, spec.seed, provenance)
    return RunRecord(
        id=run_id,
        label=label + (f" · {note}" if note else ""),
        token=str(provenance["run_token"]),
        engine=spec.engine,
        scenario=scenario,
        settings={**settings, "fingerprint": spec.fingerprint(), **provenance},
        metrics=output.metrics,
        tidy=output.tidy,
        tables=output.tables,
        experiment=experiment,
        data=output.data,
    )


def new_run_provenance(
    *, run_id: int, data_label: str, seed: int, budget: Any, origin: str | None
) -> dict[str, Any]:
    """:func:`run_provenance` of a new run of ``budget`` (a TopDown allocation or PHSafe budget):
    a fresh run token, the budget's fingerprint, and ``origin`` (default: the budget's name)."""
    return run_provenance(
        run_id=run_id,
        token=uuid.uuid4().hex,
        data_label=data_label,
        seed=seed,
        fingerprint=budget_fingerprint(budget),
        origin=origin or budget.name,
    )


def run_provenance(
    *, run_id: int, token: str, data_label: str, seed: int, fingerprint: str, origin: str
) -> dict[str, Any]:
    """The metrics.json fields that tie a run to its budget and data (issue 15)."""
    return {
        "run_id": int(run_id),
        "run_token": token,
        "data": data_label,
        "seed": int(seed),
        "budget_fingerprint": fingerprint,
        "budget_origin": origin,
    }


def run_label(
    run_id: int,
    engine: str,
    data_label: str,
    budget_text: str,
    seed: int,
    provenance: Mapping[str, Any],
) -> str:
    """``"#3 · PHSafe · phsafe_synthetic_us [states 44] · modified from phsafe-2020 (3f2a…) ·
    ρ=0.76 · seed 2020"``: run number, engine, data, budget with its fingerprint, seed."""
    short = short_fingerprint(str(provenance["budget_fingerprint"]))
    return (
        f"#{run_id} · {engine} · {data_label} · {provenance['budget_origin']} [{short}] · "
        f"{budget_text} · seed {seed}"
    )


def sample_scale(name: str) -> float | None:
    """The declared scale of a shipped sample (fraction of the full population), or None."""
    from engine.data.samples import declared_scale

    return declared_scale(name)


def epl_settings(percentile: float = EPL_PERCENTILE, multiplier: float = EPL_MULTIPLIER) -> Any:
    """The checked :class:`engine.metrics.epl.EPLSettings` (a ValidationError names a bad value)."""
    from engine.metrics.epl import EPLSettings

    return EPLSettings(percentile=float(percentile), multiplier=float(multiplier))


def states_in(hist: BlockHistogram) -> int:
    """Number of states in the data (1 without a State column: part of one state)."""
    from engine.runs.topdown import n_states

    return n_states(hist)


def spread_for_run(
    hist: BlockHistogram, allocation: TopDownAllocation, special_areas: str | None
) -> TopDownAllocation:
    """``allocation`` with its held-exact shares spread (departure from production), for ``hist``.

    Refused with an AIAN-style branch: a split state's branches measure the State TOTAL (TDA §7.4).
    """
    from engine.core.errors import ValidationError
    from engine.dp.budget import spread_invariant_share

    if special_areas:
        raise ValidationError(
            "spreading the held-exact shares cannot be combined with an AIAN-style branch: a "
            "split state's branches measure the State TOTAL (TDA §7.4); untick one of the two"
        )
    return spread_invariant_share(allocation, states_in(hist))
