"""Replay a run in the app: its recorded description through the same pipeline (docs/science.md §8).

Part of the app-facing API (:mod:`phexplore.api`); the app's face on what ``phexplore run replay``
does, with the same checks (:mod:`engine.runs.replay`, docs/reliability.md "Replays"). Every run's
``metrics.json`` holds its typed :class:`~engine.runs.spec.RunSpec` under ``run`` (engine, data,
budget, seed, options). A replay takes that description from a run of the session, an uploaded
``metrics.json`` or a result attached to a saved scenario — read strictly: an unknown or misspelt
key is refused naming the nearest known one — and runs it again through
:func:`engine.runs.pipeline.execute` in a :class:`~phexplore.api.jobs.RunJob` (progress and Cancel
as every run). The new run records ``replay_of`` (the original's run fingerprint, number, data,
seed and where it ran, and whether its MAE table came out identical to the recorded one) and the
original's budget provenance (:func:`engine.runs.provenance.provenance_of`, which refuses a
fingerprint altered by hand).

Where a replay runs is the app's choice — this machine, or the Spark the app was configured with
(:func:`~phexplore.api.run_choices.app_backend`) — never the backend named in the file.

Data: a run of this session keeps its input (:attr:`RunRecord.data`); otherwise the data are read
again from the description's ``source`` and checked against the content hashes recorded with the
run (the input files' ``inputs``, the histogram's ``sha256``): changed data are refused unless the
user ticks "replay on the data as they are now". An upload exists only in the session that holds
it. No science here.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.core.errors import ValidationError
from engine.core.strict_json import loads_strict_json
from engine.data.samples import list_samples
from engine.dp.budget import PHSafeBudget, TopDownAllocation
from engine.runs import phsafe as phsafe_stages
from engine.runs import topdown as topdown_stages
from engine.runs.pipeline import execute
from engine.runs.provenance import budget_of, provenance_of
from engine.runs.replay import (
    InputsChanged,
    NotARunDescription,
    NotReproducible,
    Recorded,
    check_histogram,
    check_inputs,
    difference_sentence,
    placed,
    recorded_run,
    replay_of,
    reproduction,
)
from engine.runs.spec import RunSpec
from phexplore.api.jobs import RunJob, RunRecord
from phexplore.api.run_choices import app_backend
from phexplore.api.run_records import phsafe_record, topdown_record
from phexplore.api.runs import execute_topdown

SAME_SEED_NOTE = (
    "A replay runs the recorded description again — same engine, data, budget, seed and options — "
    "through the same pipeline. The noise is keyed by (seed, level, geounit, query), so the same "
    "seed gives the same numbers on any number of workers or backend (docs/science.md §8)."
)
"""What the Replay controls promise (shown beside them)."""
CHANGED_DATA_ADVICE = "tick “Replay on the data as they are now” to replay anyway"
"""How the app lets a user replay on data that changed since the run (reported and recorded)."""


@dataclass(frozen=True)
class RecordedRun:
    """A run that can be replayed: the recorded run, how to name it, and its data if held."""

    recorded: Recorded
    label: str
    held: Any = field(default=None, compare=False)
    """The data the original used, when this session still holds them."""

    @property
    def spec(self) -> RunSpec:
        """The recorded description."""
        return self.recorded.spec


def _label(recorded: Recorded) -> str:
    spec = recorded.spec
    number = recorded.metrics.get("run_id")
    engine = "TopDown" if spec.engine == "topdown" else "PHSafe"
    head = f"run #{number}" if number is not None else "run"
    return f"{head} · {engine} · {spec.data.name} · seed {spec.seed} · {recorded.fingerprint[:12]}"


def _read(data: Any, where: str, result: int | None = None) -> Recorded:
    """:func:`engine.runs.replay.recorded_run` with the app's advice on a refusal."""
    try:
        return recorded_run(data, where, result, folder=None, option="the run picker")
    except NotARunDescription as exc:
        raise ValidationError(
            f"{exc}: upload a metrics.json written by a run (the app's or 'phexplore run') or a "
            "scenario with attached runs"
        ) from None
    except NotReproducible as exc:
        raise ValidationError(f"{exc}; start it again on the Run page") from None


def recorded_of(record: RunRecord) -> RecordedRun:
    """The replayable description of a run of this session (a ValidationError says why not)."""
    metrics = dict(record.metrics or {})
    if "run" not in metrics:
        raise ValidationError(
            f"run #{record.id} has no recorded run description (made before runs were "
            "recorded); start it again on the Run page"
        )
    recorded = _read(metrics, f"run #{record.id}")
    return RecordedRun(recorded, record.label, held=record.data)


def recorded_in_file(raw: bytes, name: str) -> list[RecordedRun]:
    """The replayable runs in an uploaded file: a metrics.json (one run), a bare run description,
    or a saved scenario (every attached result that carries a description).

    Anything else — not JSON, another JSON, a description with an unknown key or edited by hand, a
    run drawn with the exact (OS-random) samplers, a relative path (an uploaded file has no
    folder to read it from) — raises a ValidationError naming the file and the reason."""
    data = loads_strict_json(raw, label=name, allow_infinity=True)
    if not isinstance(data, dict):
        raise ValidationError(f"{name}: expected a JSON object (a metrics.json or a scenario)")
    results = data.get("results")
    if not (isinstance(results, list) and "engine" not in data):
        recorded = _read(data, name)
        return [RecordedRun(recorded, _label(recorded))]
    runs: list[RecordedRun] = []
    problems: list[str] = []
    for i in range(1, len(results) + 1):
        try:
            recorded = _read(data, f"{name}, result {i}", i)
        except ValidationError as exc:
            problems.append(str(exc))
            continue
        runs.append(RecordedRun(recorded, f"result {i}: {_label(recorded)}"))
    if not runs:
        raise ValidationError(
            problems[0] if problems else f"{name} is a scenario without attached run results"
        )
    return runs


def replay_note(run: RecordedRun, backend: str = "local") -> str:
    """What a replay of ``run`` will do, in one paragraph (data, where it runs, what is not
    repeated)."""
    spec = run.spec
    parts = [
        f"Replays the {'TopDown' if spec.engine == 'topdown' else 'PHSafe'} run on "
        f"**{spec.data.name}** with seed **{spec.seed}** (run fingerprint "
        f"`{run.recorded.fingerprint[:12]}`)."
    ]
    if run.held is not None:
        parts.append("Its data are still held in this session.")
    elif spec.data.inputs or spec.data.sha256:
        parts.append("Its data are read again and checked against the recorded content hashes.")
    else:
        parts.append(
            "Its data are read again from where the run read them (no content hash was "
            "recorded with it, so a change of the data cannot be detected)."
        )
    where = "on the Spark the app was configured with" if backend == "spark" else "on this machine"
    parts.append(
        f"It ran on {run.recorded.placement_text}; it replays {where} (the numbers do not "
        "depend on it)."
    )
    if spec.engine == "topdown":
        parts.append("A ρ sweep run beside it is not repeated.")
    return " ".join(parts)


def held_data(spec: RunSpec, records: Sequence[RunRecord]) -> Any:
    """Data a run of this session holds that are the data ``spec`` names (same content hash for
    TopDown, same source and label for PHSafe), else None."""
    for record in reversed(records):
        if record.data is None or record.engine != spec.engine:
            continue
        try:
            theirs = recorded_of(record).spec.data
        except ValidationError:
            continue
        if spec.engine == "topdown":
            if spec.data.sha256 and theirs.sha256 == spec.data.sha256:
                return record.data
        elif (theirs.source, theirs.label) == (spec.data.source, spec.data.label):
            return record.data
    return None


def check_readable(spec: RunSpec) -> None:
    """Refuse, before any job starts, a run whose data are neither held nor readable here."""
    source = spec.data.source
    if not spec.data.upload:
        if Path(source).is_absolute() and Path(source).exists():
            return
        if source in {s.name for s in list_samples() if s.kind == spec.engine}:
            return
    raise ValidationError(
        f"the data of this run ({spec.data.name!r}) are not on this machine: "
        + (
            "they were uploaded, and an upload can be replayed only in the session that holds it"
            if spec.data.upload
            else f"no sample or file {source!r}"
        )
        + " — upload them again and run them on the Run page"
    )


def load_data(spec: RunSpec, *, allow_changed: bool = False) -> tuple[Any, RunSpec, list[str]]:
    """``(data, spec, changes)``: the data of ``spec`` read again (its ``source`` and ``filter``),
    a TopDown histogram checked against the recorded content hash
    (:func:`engine.runs.replay.check_histogram`)."""
    if spec.engine == "phsafe":
        return phsafe_stages.load(spec), spec, []
    hist = topdown_stages.load(spec)
    try:
        spec, changes = check_histogram(spec, hist, allow_changed=allow_changed)
    except InputsChanged as exc:
        raise ValidationError(f"{exc}; {CHANGED_DATA_ADVICE}") from None
    return hist, spec, changes


def replay_work(
    run: RecordedRun,
    *,
    run_id: int,
    scenario: str,
    records: Sequence[RunRecord] = (),
    backend: str = "local",
    allow_changed: bool = False,
    run_token: str | None = None,
) -> Callable[[RunJob], RunRecord]:
    """The work of a replay of ``run`` as the session's run ``run_id``, on ``backend`` (this
    machine, or the app's configured Spark) — never where the file says it ran.

    Checked before the job starts (ValidationError): the budget provenance of the recorded file,
    that its data are held or readable here, and that its input files match the recorded content
    hashes (unless ``allow_changed``: then the changes are reported and recorded). The new run
    keeps the original's budget fingerprint and origin, gets its own run number and token, and
    records ``replay_of``."""
    spec = placed(run.spec, **app_backend(backend))
    label = spec.data.name
    provenance = provenance_of(
        spec,
        run.recorded.metrics,
        run_id=run_id,
        run_token=run_token or uuid.uuid4().hex,
        data=label,
    )
    held = run.held if run.held is not None else held_data(spec, records)
    changes: list[str] = []
    if held is None:
        check_readable(spec)
        try:
            spec, changes = check_inputs(spec, allow_changed=allow_changed)
        except InputsChanged as exc:
            raise ValidationError(f"{exc}; {CHANGED_DATA_ADVICE}") from None
    original = run.recorded.metrics.get("run_id")
    note = f"replay of #{original}" if original is not None else "replay"
    used = budget_of(spec, provenance.budget_origin)

    def work(job: RunJob) -> RunRecord:
        data, checked, found = held, spec, list(changes)
        if data is None:
            job.progress("Loading the data", 0.0)
            data, checked, more = load_data(spec, allow_changed=allow_changed)
            found += more
        repeated = replay_of(run.recorded, label, found)
        if checked.engine == "topdown":
            output = execute_topdown(checked, job, data, provenance, extra={"replay_of": repeated})
        else:
            output = execute(
                checked,
                control=job.control,
                data=data,
                extra_metrics={**provenance.metrics(), "replay_of": repeated},
            )
        output.metrics["replay_of"] = {
            **repeated,
            **reproduction(run.recorded.metrics, output.metrics),
        }
        if isinstance(used, TopDownAllocation):
            return topdown_record(
                output, scenario=scenario, allocation=used, provenance=provenance, note=note
            )
        assert isinstance(used, PHSafeBudget)
        return phsafe_record(
            output, scenario=scenario, budget=used, provenance=provenance, note=note
        )

    return work


def replay_outcome(record: RunRecord) -> tuple[str, str] | None:
    """``(kind, sentence)`` the page shows for a replayed run: "success" when its MAE table is
    identical to the original's, "warning" when it differs or its data changed, "info" when
    nothing was recorded to compare; None for a run that is not a replay."""
    of = (record.metrics or {}).get("replay_of")
    if not of:
        return None
    original = f"run #{of['run_id']}" if of.get("run_id") is not None else "the recorded run"
    head = (
        f"Replay of {original} (run fingerprint {str(of['run_fingerprint'])[:12]}, "
        f"seed {of['seed']}): "
    )
    changed = of.get("inputs_changed") or []
    if changed:
        return "warning", head + (
            "replayed on data that changed since the run was recorded ("
            + ", ".join(map(str, changed))
            + "), so its numbers are not a repetition of the original's."
        )
    if of.get("reproduced") is True:
        return "success", head + "same seed, same numbers — the MAE table is identical."
    if of.get("reproduced") is False:
        if of.get("mae_differences") is None:  # a replay of an earlier version of this page
            return "warning", head + (
                "the MAE table differs from the recorded one: the code or the data changed since "
                "the original run (compare the two runs' versions in their manifests)."
            )
        advice = (
            "."
            if of.get("routes_changed")
            else " (compare the two runs' versions in their manifests)."
        )
        return "warning", head + difference_sentence(of) + advice
    return "info", head + "the original recorded no MAE table to compare with."


__all__ = [
    "SAME_SEED_NOTE",
    "RecordedRun",
    "check_readable",
    "held_data",
    "load_data",
    "recorded_in_file",
    "recorded_of",
    "replay_note",
    "replay_outcome",
    "replay_work",
]
