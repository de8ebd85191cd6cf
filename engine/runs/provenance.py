"""Which budget a run used, and the one builder of a run's provenance (:class:`Provenance`).

A run's ``metrics.json`` names the exact budget it was made with — ``budget_fingerprint``, the
SHA-256 of the budget's canonical numbers (:func:`engine.dp.budget.fingerprint.budget_fingerprint`;
PHSafe: ρ or ε per table × level, τ, privacy definition and state filter, PHS §7.1; TopDown: ρ and
the shares, TDA App. B) — and ``budget_origin``, the preset it is ("phsafe-2020") or
"modified from <preset>". :func:`run_provenance` builds them for every face — from the planner's
budget in the app, from the :class:`~engine.runs.spec.RunSpec`'s config on the command line, as
recorded (and checked, :func:`provenance_of`) in a replay — so a run made by either face carries
the same fingerprint for the same numbers and a saved scenario attributes it rightly.

The one normalisation (PHSafe only): the engine reads an empty ``state_filter`` as "the 50 states
and DC" and writes the list out in full (:data:`engine.phsafe.config.US_STATES`); the planner
keeps "no filter". Both mean the same run, so a configuration listing exactly those states is
fingerprinted as "no filter". A budget of 0 (a skipped level) is left out either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from engine.core.errors import ValidationError
from engine.dp.budget import PHSafeBudget, TopDownAllocation
from engine.dp.budget.fingerprint import budget_fingerprint
from engine.dp.origin import budget_origin
from engine.dp.presets import list_presets
from engine.phsafe.config import US_STATES
from engine.runs.spec import RunSpec, thaw


def phsafe_budget_of(config: Mapping[str, Any], *, name: str = "config.json") -> PHSafeBudget:
    """The planner's :class:`PHSafeBudget` for an official PHSafe ``config.json`` mapping.

    ``state_filter`` equal to every US state (the engine's spelling of "no filter") becomes no
    filter, as in the planner; everything else is taken as it stands.
    """

    official = dict(thaw(config))
    states = official.get("state_filter")
    if isinstance(states, list | tuple) and sorted(str(s) for s in states) == list(US_STATES):
        official["state_filter"] = []
    return PHSafeBudget.from_official_config(official, name=name)


def budget_of(spec: RunSpec, name: str | None = None) -> PHSafeBudget | TopDownAllocation:
    """The budget a run description measures with (TopDown allocation or PHSafe budget);
    ``name`` names a PHSafe budget (a TopDown allocation carries its own)."""
    config = thaw(spec.config)
    if spec.engine == "topdown":
        return TopDownAllocation.from_dict(config, name=str(config.get("name", "allocation")))
    return phsafe_budget_of(config, name=name or "config.json")


def spec_budget_fingerprint(spec: RunSpec) -> str:
    """``budget_fingerprint`` of the budget in ``spec.config`` (same value the app records)."""
    return budget_fingerprint(budget_of(spec))


def accepted_fingerprints(spec: RunSpec) -> frozenset[str]:
    """Budget fingerprints a metrics.json holding ``spec`` may rightly record.

    The config's own; for PHSafe also that of the config without its state filter, because the
    app fingerprints the planner's budget and applies the Run page's states to the run only.
    """
    own = spec_budget_fingerprint(spec)
    if spec.engine != "phsafe":
        return frozenset({own})
    unfiltered = {**thaw(spec.config), "state_filter": []}
    return frozenset({own, budget_fingerprint(phsafe_budget_of(unfiltered))})


def budget_origin_of(spec: RunSpec, preset: str | None = None, name: str | None = None) -> str:
    """``budget_origin``: ``preset`` when the run's budget is that shipped preset's exactly,
    "modified from <preset>" after any change of a number, else the budget's own name (``name``
    for a PHSafe config, e.g. its file name; a TopDown allocation's ``name`` field).

    Same rule as the app's planners (:func:`engine.dp.origin.budget_origin`)."""
    budget = budget_of(spec, name)
    if preset is not None:
        return budget_origin(budget, preset=preset)
    # No preset named (a config file): name the shipped preset it equals, if any.
    for info in list_presets(spec.engine):
        if budget_origin(budget, preset=info.name) == info.name:
            return info.name
    return budget_origin(budget)


@dataclass(frozen=True)
class Provenance:
    """What ties a run to its exact budget (and, in the app, to its place in the session).

    ``budget_fingerprint`` and ``budget_origin`` are written to every run's metrics.json; the app
    adds its run number ``run_id``, a ``run_token`` unique across sessions, the ``data`` label and
    the ``seed``."""

    budget_fingerprint: str
    budget_origin: str
    run_id: int | None = None
    run_token: str | None = None
    data: str | None = None
    seed: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The fields set (what the app keeps in a run's settings)."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    def metrics(self) -> dict[str, Any]:
        """The metrics.json keys (``seed`` is a standard key of metrics.json already)."""
        return {k: v for k, v in self.as_dict().items() if k != "seed"}


def run_provenance(
    spec: RunSpec,
    *,
    budget: PHSafeBudget | TopDownAllocation | None = None,
    origin: str | None = None,
    preset: str | None = None,
    name: str | None = None,
    run_id: int | None = None,
    run_token: str | None = None,
    data: str | None = None,
) -> Provenance:
    """The provenance of a new run of ``spec`` — the one builder for the CLI and the app.

    ``budget``: the budget as the planner holds it (the app: a PHSafe budget before the Run page's
    state filter); default the budget of ``spec.config``. ``origin``: as the planner names it;
    default :func:`budget_origin_of` (``preset`` named by the user, ``name`` of a config file).
    ``run_id``, ``run_token`` and ``data``: the app's session bookkeeping (with the seed)."""
    fingerprint = spec_budget_fingerprint(spec) if budget is None else budget_fingerprint(budget)
    return Provenance(
        budget_fingerprint=fingerprint,
        budget_origin=origin or budget_origin_of(spec, preset=preset, name=name),
        run_id=run_id,
        run_token=run_token,
        data=data,
        seed=spec.seed if run_id is not None else None,
    )


def provenance_of(
    spec: RunSpec, recorded: Mapping[str, Any] | None = None, **session: Any
) -> Provenance:
    """The provenance of a replay of ``spec``, as the original recorded it.

    ``recorded`` is the original metrics.json: its fingerprint and origin are kept when the
    fingerprint is one ``spec`` may carry (:func:`accepted_fingerprints`); a fingerprint that does
    not match the run's config means the file was altered, and is refused. ``session``: the app's
    ``run_id``, ``run_token`` and ``data`` of the new run."""
    recorded = recorded or {}
    stated = recorded.get("budget_fingerprint")
    if not stated:
        return run_provenance(spec, **session)
    if stated not in accepted_fingerprints(spec):
        raise ValidationError(
            f"the file's budget_fingerprint {str(stated)[:12]} does not match the budget in "
            "its run description (edited by hand?); use the metrics.json the run wrote"
        )
    return Provenance(
        budget_fingerprint=str(stated),
        budget_origin=str(recorded.get("budget_origin") or budget_origin_of(spec)),
        seed=spec.seed if session.get("run_id") is not None else None,
        **session,
    )


ENGINES = ("topdown", "phsafe")


def check_reported_run(metrics: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    """``metrics`` if it is a run's metrics.json whose budget is what it says; else refused.

    For a report (``phexplore report --results``, a scenario's attached runs): the payload must
    name a run — its ``engine`` is TopDown or PHSafe (an empty object, or any JSON naming no run,
    is refused) — and a ``budget_fingerprint`` must be one its own run description's budget gives
    (:func:`accepted_fingerprints` of the ``run`` section's config; a ×50 budget claiming
    ``phsafe-2020``'s fingerprint is refused). A fingerprint without a run description to check it
    against is refused too; a metrics.json from before budgets were recorded (neither) passes, and
    the report labels it "budget not recorded". ``where`` names the input in messages.
    """
    if not isinstance(metrics, Mapping) or not metrics:
        raise ValidationError(
            f"{where}: names no run (an empty JSON object); give the metrics.json a run wrote"
        )
    engine = metrics.get("engine")
    if engine not in ENGINES:
        raise ValidationError(
            f"{where}: names no run (no 'engine' of {' or '.join(ENGINES)}"
            f"{'' if engine is None else f'; it says {engine!r}'}); give the metrics.json a TopDown or "
            "PHSafe run wrote"
        )
    stated = metrics.get("budget_fingerprint")
    section = metrics.get("run")
    if section is None:
        if stated:
            raise ValidationError(
                f"{where}: claims budget {str(stated)[:12]} but holds no run description ('run') "
                "to check it against; give the metrics.json the run wrote"
            )
        return metrics
    if not isinstance(section, Mapping) or section.get("engine") != engine:
        raise ValidationError(
            f"{where}: its run description is not a {engine} run (altered?); give the "
            "metrics.json the run wrote"
        )
    try:
        spec = RunSpec.from_dict(dict(section))
        accepted = accepted_fingerprints(spec)
    except ValidationError as exc:
        raise ValidationError(f"{where}: its run description is not valid: {exc}") from None
    if stated and stated not in accepted:
        raise ValidationError(
            f"{where}: claims budget {str(stated)[:12]} ({metrics.get('budget_origin', '?')}) but "
            f"its run was configured with budget {spec_budget_fingerprint(spec)[:12]}; the file "
            "was edited after the run — report the metrics.json the run wrote"
        )
    return metrics
