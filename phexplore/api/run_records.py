"""The session's record of a finished run: its label, settings, tables and provenance.

Part of the app-facing API (:mod:`phexplore.api`). :func:`topdown_record` and :func:`phsafe_record`
turn the run pipeline's output (:class:`engine.runs.pipeline.RunOutput`) into the
:class:`~phexplore.api.jobs.RunRecord` the Run and Results pages show: a label naming the run
number, engine, data, budget (origin and fingerprint), total budget and seed (:func:`run_label`),
and the settings read from the run's typed description. No science here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.dp.budget import PHSafeBudget, TopDownAllocation
from engine.dp.budget.fingerprint import short_fingerprint
from engine.runs.pipeline import RunOutput
from engine.runs.provenance import Provenance
from engine.runs.topdown import options_of as topdown_options
from phexplore.api.jobs import RunRecord
from phexplore.api.run_choices import epl_settings


def topdown_record(
    output: RunOutput,
    *,
    scenario: str,
    allocation: TopDownAllocation,
    provenance: Provenance,
    experiment: Any = None,
    note: str = "",
) -> RunRecord:
    """The session's record of a finished TopDown run (``output``: the pipeline's); ``note`` is
    appended to the label (e.g. "replay of #2")."""
    spec, result, hist = output.spec, output.result, output.data
    options = topdown_options(spec)
    used = (output.metrics or {}).get("spine_used") or {}
    what = "ε" if allocation.mechanism == "puredp" else "ρ"
    return _record(
        output,
        scenario=scenario,
        budget_text=f"{what}={float(allocation.rho):.4g}",
        provenance=provenance,
        note=note,
        experiment=experiment,
        settings={
            "data": provenance.data,
            "allocation": allocation.name,
            "mechanism": allocation.mechanism,
            "rho": float(allocation.rho),
            "rho_spent": result.rho_spent,
            "spread_invariant_share": options.spread_invariant_share,
            "seed": spec.seed,
            "noise_method": spec.noise_method,
            "solver": options.solver,
            # the spine measured on (``preset`` resolved: metrics.json spine_used)
            "spine": str(used.get("kind") or options.spine),
            "entities": list(used.get("entities") or options.entities),
            "special_areas": used.get("special_areas", options.special_areas),
            "error_universe": options.error_universe,
            "blocks": hist.n_blocks,
            "levels": [str(lv) for lv in result.tree.levels],
            "queries_left_out": list(output.extra.get("queries_left_out") or []),
            "universe_left_out": universe_left_out(output),
            "runtime_s": result.runtime_s,
            "epl_settings": epl_settings(options.epl_percentile, options.epl_multiplier).as_dict(),
        },
    )


def universe_left_out(output: RunOutput) -> list[str]:
    """The ids of the blocks a TopDown run's block figures leave out (outside its error universe,
    :mod:`engine.metrics.universe`), so the app's charts of the dense table leave them out too."""
    universe = output.extra.get("universe")
    hist = output.data
    if universe is None or universe.inside is None or hist is None:
        return []
    ids = hist.geography[hist.levels[-1]].astype(str).to_numpy()
    return [str(b) for b in universe.outside_ids(ids)]


def phsafe_record(
    output: RunOutput,
    *,
    scenario: str,
    budget: PHSafeBudget,
    provenance: Provenance,
    note: str = "",
) -> RunRecord:
    """The session's record of a finished PHSafe run of ``budget`` (``output``: the pipeline's);
    ``note`` is appended to the label (e.g. "replay of #2")."""
    spec, result = output.spec, output.result
    return _record(
        output,
        scenario=scenario,
        budget_text=f"ρ={budget.total_unbounded():.4g}",
        provenance=provenance,
        note=note,
        settings={
            "data": provenance.data,
            "budget": budget.name,
            "rho": budget.total_unbounded(),
            "seed": spec.seed,
            "trials": spec.options.trials,
            "states": list(result.states),
            "persons": result.n_persons,
            "runtime_s": result.runtime_s,
            "scale": spec.options.scale,
            "noise_method": spec.noise_method,
        },
    )


def _record(
    output: RunOutput,
    *,
    scenario: str,
    budget_text: str,
    provenance: Provenance,
    note: str,
    settings: Mapping[str, Any],
    experiment: Any = None,
) -> RunRecord:
    """A :class:`RunRecord` of the pipeline's ``output``: its label (:func:`run_label` plus
    ``note``), the engine's ``settings`` with the run fingerprint and provenance, its tables and
    the input it used (kept for a replay in this session)."""
    spec = output.spec
    run_id = int(provenance.run_id or 0)
    engine = "TopDown" if spec.engine == "topdown" else "PHSafe"
    label = run_label(run_id, engine, str(provenance.data), budget_text, spec.seed, provenance)
    return RunRecord(
        id=run_id,
        label=label + (f" · {note}" if note else ""),
        token=str(provenance.run_token),
        engine=spec.engine,
        scenario=scenario,
        settings={**settings, "fingerprint": spec.fingerprint(), **provenance.as_dict()},
        metrics=output.metrics,
        tidy=output.tidy,
        tables=output.tables,
        experiment=experiment,
        data=output.data,
    )


def run_label(
    run_id: int,
    engine: str,
    data_label: str,
    budget_text: str,
    seed: int,
    provenance: Provenance,
) -> str:
    """``"#3 · PHSafe · phsafe_synthetic_us [states 44] · modified from phsafe-2020 (3f2a…) ·
    ρ=0.76 · seed 2020"``: run number, engine, data, budget with its fingerprint, seed."""
    short = short_fingerprint(provenance.budget_fingerprint)
    return (
        f"#{run_id} · {engine} · {data_label} · {provenance.budget_origin} [{short}] · "
        f"{budget_text} · seed {seed}"
    )
