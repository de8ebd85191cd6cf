"""Which budget a run used, and the one builder of a run's provenance (:class:`Provenance`).

A run's ``metrics.json`` names the exact budget it was made with — ``budget_fingerprint``, the
SHA-256 of the budget's canonical numbers (:func:`engine.dp.budget.fingerprint.budget_fingerprint`;
PHSafe: ρ or ε per table × level, τ, privacy definition and state filter, PHS §7.1; TopDown: ρ and
the shares of every universe of the budget — persons and units together, TDA App. B) — its
``budget_origin``, the preset it is ("phsafe-2020") or "modified from <preset>", and then
``budget_changes``, the numbers that differ from that preset (:func:`engine.dp.origin.describe_origin`).
A TopDown run measures one allocation (its ``run.config``) of a budget that may hold more; it records
them all under ``budget_allocations``, so the fingerprint can be checked against the file.

:func:`run_provenance` builds them for every face — from the planner's budget in the app, from the
command line's preset or allocation file, as recorded (and checked, :func:`provenance_of`) in a
replay — so a run made by any face carries the same fingerprint for the same budget and a saved
scenario attributes it rightly.

Normalisations: the engine reads an empty PHSafe ``state_filter`` as "the 50 states and DC" and
writes the list out in full (:data:`engine.phsafe.config.US_STATES`); the planner keeps "no
filter". Both mean the same run, so a configuration listing exactly those states is fingerprinted
as "no filter". A budget of 0 (a skipped level) is left out either way. A metrics.json written before
a TopDown budget covered every universe recorded the fingerprint of its one allocation
(:func:`engine.dp.budget.fingerprint.allocation_fingerprint`); it is still accepted for that file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from engine.core.errors import ValidationError
from engine.core.strict_json import as_mapping
from engine.dp.budget import PHSafeBudget, TopDownAllocation
from engine.dp.budget.fingerprint import (
    allocation_fingerprint,
    budget_fingerprint,
    topdown_budget,
)
from engine.dp.origin import Origin, changes_of, describe_origin
from engine.phsafe.config import US_STATES
from engine.runs.spec import RunSpec, thaw

Budget = PHSafeBudget | TopDownAllocation | Mapping[str, TopDownAllocation]


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
    """``budget_fingerprint`` of the budget in ``spec.config`` alone (a TopDown allocation: the
    budget of its one universe)."""
    return budget_fingerprint(budget_of(spec))


def allocations_of(section: Any, where: str) -> dict[str, TopDownAllocation]:
    """The TopDown budget of a metrics.json ``budget_allocations`` section (``{universe:
    allocation JSON}``), validated."""
    runs = as_mapping(section, where=f"{where}: budget_allocations")
    if not runs:
        raise ValidationError(f"{where}: budget_allocations is empty")
    out = {}
    for universe, data in runs.items():
        alloc = as_mapping(data, where=f"{where}: budget_allocations[{universe!r}]")
        out[str(universe)] = TopDownAllocation.from_dict(
            {**alloc, "universe": universe}, name=str(alloc.get("name", universe))
        )
    return out


def _check_holds(spec: RunSpec, budget: Mapping[str, TopDownAllocation], where: str) -> None:
    """Refuse a TopDown budget that does not hold the allocation the run measured with."""
    own = budget_of(spec)
    assert isinstance(own, TopDownAllocation)
    mine = budget.get(own.universe)
    if mine is None or allocation_fingerprint(mine) != allocation_fingerprint(own):
        raise ValidationError(
            f"{where}: the budget does not hold the {own.universe} allocation the run measured "
            "with (edited by hand?); use the metrics.json the run wrote"
        )


def accepted_fingerprints(
    spec: RunSpec, recorded: Mapping[str, Any] | None = None, where: str = "metrics.json"
) -> frozenset[str]:
    """Budget fingerprints a metrics.json holding ``spec`` (and ``recorded``'s
    ``budget_allocations``, when present) may rightly record.

    TopDown: the fingerprint of the recorded budget, which must hold the run's allocation; without
    one, the budget of the run's allocation alone, or that allocation's own fingerprint (written
    before a budget covered every universe). PHSafe: the config's own, and that of the config
    without its state filter, because the app fingerprints the planner's budget and applies the
    Run page's states to the run only.
    """
    if spec.engine == "topdown":
        section = (recorded or {}).get("budget_allocations")
        if section is not None:
            budget = allocations_of(section, where)
            _check_holds(spec, budget, where)
            return frozenset({budget_fingerprint(budget)})
        own = budget_of(spec)
        assert isinstance(own, TopDownAllocation)
        return frozenset({budget_fingerprint(own), allocation_fingerprint(own)})
    own_fp = spec_budget_fingerprint(spec)
    unfiltered = {**thaw(spec.config), "state_filter": []}
    return frozenset({own_fp, budget_fingerprint(phsafe_budget_of(unfiltered))})


def budget_origin_of(spec: RunSpec, preset: str | None = None, name: str | None = None) -> str:
    """``budget_origin`` of the run's own budget (:func:`engine.dp.origin.describe_origin`):
    ``preset`` when it is that shipped preset's exactly, "modified from <preset>" after any change
    of a number, the shipped preset it equals, else the budget's own name (``name`` for a PHSafe
    config, e.g. its file name; a TopDown allocation's ``name`` field)."""
    return describe_origin(budget_of(spec, name), preset).label


@dataclass(frozen=True)
class Provenance:
    """What ties a run to its exact budget (and, in the app, to its place in the session).

    ``budget_fingerprint``, ``budget_origin`` and (when the budget comes from a preset)
    ``budget_changes`` are written to every run's metrics.json, with a TopDown run's
    ``budget_allocations``; the app adds its run number ``run_id``, a ``run_token`` unique across
    sessions, the ``data`` label and the ``seed``."""

    budget_fingerprint: str
    budget_origin: str
    run_id: int | None = None
    run_token: str | None = None
    data: str | None = None
    seed: int | None = None
    budget_changes: tuple[Mapping[str, str], ...] | None = None
    """What differs from the preset named in ``budget_origin`` (empty: nothing; None: no preset)."""
    budget_allocations: Mapping[str, Any] | None = None
    """TopDown: every allocation of the budget as JSON (the fingerprint covers them all)."""

    def as_dict(self) -> dict[str, Any]:
        """The fields set (what the app keeps in a run's settings)."""
        out = {k: v for k, v in asdict(self).items() if v is not None}
        if self.budget_changes is not None:
            out["budget_changes"] = [dict(c) for c in self.budget_changes]
        if self.budget_allocations is not None:
            out["budget_allocations"] = thaw(self.budget_allocations)
        return out

    def metrics(self) -> dict[str, Any]:
        """The metrics.json keys (``seed`` is a standard key of metrics.json already)."""
        return {k: v for k, v in self.as_dict().items() if k != "seed"}

    def changes_text(self, limit: int = 3) -> str:
        """``budget_origin`` with what differs (:meth:`engine.dp.origin.Origin.summary`)."""
        return Origin(self.budget_origin, None, changes_of(self.budget_changes)).summary(limit)


def run_provenance(
    spec: RunSpec,
    *,
    budget: Budget | None = None,
    preset: str | None = None,
    name: str | None = None,
    run_id: int | None = None,
    run_token: str | None = None,
    data: str | None = None,
) -> Provenance:
    """The provenance of a new run of ``spec`` — the one builder for the CLI and the app.

    ``budget``: the budget the run was taken from — the app: the planner's (a PHSafe budget before
    the Run page's state filter; a TopDown budget with every universe); the CLI: a preset's or an
    allocation file's universes with ``--rho`` applied — by default the budget of ``spec.config``
    (a TopDown budget must hold the run's allocation). Its origin and changes are
    :func:`engine.dp.origin.describe_origin`'s, compared with ``preset`` when given, else with the
    preset the budget's names point to; ``name`` names a PHSafe config file. ``run_id``,
    ``run_token`` and ``data``: the app's session bookkeeping (with the seed)."""
    if budget is None:
        budget = budget_of(spec, name)
    allocations = None
    if spec.engine == "topdown":
        if isinstance(budget, PHSafeBudget):
            raise ValidationError("a TopDown run needs a TopDown budget")
        runs = topdown_budget(budget)
        _check_holds(spec, runs, "the run")
        allocations = {u: a.to_dict() for u, a in runs.items()}
    elif not isinstance(budget, PHSafeBudget):
        raise ValidationError("a PHSafe run needs a PHSafe budget")
    origin = describe_origin(budget, preset)
    return Provenance(
        budget_fingerprint=budget_fingerprint(budget),
        budget_origin=origin.label,
        run_id=run_id,
        run_token=run_token,
        data=data,
        seed=spec.seed if run_id is not None else None,
        budget_changes=None
        if origin.preset is None
        else tuple(c.as_dict() for c in origin.changes),
        budget_allocations=allocations,
    )


def provenance_of(
    spec: RunSpec, recorded: Mapping[str, Any] | None = None, **session: Any
) -> Provenance:
    """The provenance of a replay of ``spec``, as the original recorded it.

    ``recorded`` is the original metrics.json: its fingerprint, origin, changes and TopDown
    allocations are kept when the fingerprint is one ``spec`` may carry
    (:func:`accepted_fingerprints`); a fingerprint that does not match the run's budget means the
    file was altered, and is refused. ``session``: the app's ``run_id``, ``run_token`` and ``data``
    of the new run."""
    recorded = recorded or {}
    stated = recorded.get("budget_fingerprint")
    if not stated:
        return run_provenance(spec, **session)
    if stated not in accepted_fingerprints(spec, recorded, "the file"):
        raise ValidationError(
            f"the file's budget_fingerprint {str(stated)[:12]} does not match the budget in "
            "its run description (edited by hand?); use the metrics.json the run wrote"
        )
    changes = recorded.get("budget_changes")
    allocations = recorded.get("budget_allocations")
    return Provenance(
        budget_fingerprint=str(stated),
        budget_origin=str(recorded.get("budget_origin") or budget_origin_of(spec)),
        seed=spec.seed if session.get("run_id") is not None else None,
        budget_changes=tuple(dict(c) for c in changes if isinstance(c, Mapping))
        if isinstance(changes, list)
        else None,
        budget_allocations=thaw(allocations) if isinstance(allocations, Mapping) else None,
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
        accepted = accepted_fingerprints(spec, metrics, where)
    except ValidationError as exc:
        raise ValidationError(f"{where}: its run description is not valid: {exc}") from None
    if stated and stated not in accepted:
        raise ValidationError(
            f"{where}: claims budget {str(stated)[:12]} ({metrics.get('budget_origin', '?')}) but "
            f"its run was configured with budget {', '.join(sorted(f[:12] for f in accepted))}; the file "
            "was edited after the run — report the metrics.json the run wrote"
        )
    return metrics
