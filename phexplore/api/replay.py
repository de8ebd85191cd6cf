"""Replay a run in the app: its recorded description through the same pipeline (SPEC §8).

Part of the app-facing API (:mod:`phexplore.api`); the app's face on what ``phexplore run replay``
does. Every run's ``metrics.json`` holds its :class:`~engine.runs.spec.RunSpec` under ``run``
(engine, data, budget, seed, options). A replay takes that description from a run of the session,
an uploaded ``metrics.json`` or a result attached to a saved scenario, and runs it again through
:func:`engine.runs.pipeline.execute` in a :class:`~phexplore.api.jobs.RunJob` (progress and Cancel as every
run). With the keyed noise (SPEC §8: every noisy value keyed by seed, level, geounit and query) the
same description gives the same numbers whatever the workers or backend; the new run records
``replay_of`` (the original's run fingerprint, number, data and seed, and whether its MAE table came
out identical to the recorded one) and the original's budget provenance
(:func:`engine.runs.provenance.provenance_of`, which refuses a fingerprint altered by hand).

Data: a run of this session keeps its input (:attr:`RunRecord.data`); otherwise the data are read
again from the description's ``source`` (a shipped sample, a file or folder, with its ``filter``)
and, when the description records a content ``sha256`` (the app's TopDown runs), checked against
it. An upload that exists only in another session cannot be replayed here, and says so. No
science here.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.core.errors import ValidationError
from engine.dp.budget import PHSafeBudget, TopDownAllocation
from engine.runs.spec import RunSpec
from phexplore.api.jobs import RunJob, RunRecord
from phexplore.api.runs import (
    data_fingerprint,
    execute_topdown,
    phsafe_record,
    run_provenance,
    spark_backend_options,
    topdown_record,
)

SAME_SEED_NOTE = (
    "A replay runs the recorded description again — same engine, data, budget, seed and options — "
    "through the same pipeline. The noise is keyed by (seed, level, geounit, query), so the same "
    "seed gives the same numbers on any number of workers or backend (SPEC §8)."
)
"""What the Replay controls promise (shown beside them)."""


@dataclass(frozen=True)
class RecordedRun:
    """A run that can be replayed: its description, what it recorded, and how to name it."""

    spec: RunSpec
    recorded: Mapping[str, Any]
    """The original metrics.json (``{}`` for a bare run description)."""
    label: str
    held: Any = field(default=None, compare=False)
    """The data the original used, when this session still holds them."""


def data_label(spec: RunSpec) -> str:
    """How a run's data are named: the app's label, else the source with its filter."""
    if spec.data.get("label"):
        return str(spec.data["label"])
    text = str(spec.data.get("source"))
    chosen = spec.data.get("filter")
    if isinstance(chosen, Mapping) and chosen.get("level"):
        text += f" [{chosen['level']} {', '.join(map(str, chosen.get('units', ())))}]"
    return text


def _label(spec: RunSpec, recorded: Mapping[str, Any]) -> str:
    number = recorded.get("run_id")
    data = data_label(spec)
    engine = "TopDown" if spec.engine == "topdown" else "PHSafe"
    head = f"run #{number}" if number is not None else "run"
    return f"{head} · {engine} · {data} · seed {spec.seed} · {spec.fingerprint()[:12]}"


def recorded_of(record: RunRecord) -> RecordedRun:
    """The replayable description of a run of this session (a ValidationError says why not)."""
    from engine.runs.provenance import recorded_run

    metrics = dict(record.metrics or {})
    if "run" not in metrics:
        raise ValidationError(
            f"run #{record.id} has no recorded run description (made before runs were "
            "recorded); start it again on the Run page"
        )
    spec, recorded = recorded_run(metrics, f"run #{record.id}")
    return RecordedRun(spec, recorded, record.label, held=record.data)


def recorded_in_file(raw: bytes, name: str) -> list[RecordedRun]:
    """The replayable runs in an uploaded file: a metrics.json (one run), a bare run description,
    or a saved scenario (every attached result that carries a description).

    Anything else — not JSON, another JSON, a description edited by hand, a run drawn with the
    exact (OS-random) samplers — raises a ValidationError naming the file and the reason.
    """
    from engine.core.strict_json import loads_strict_json
    from engine.runs.provenance import recorded_run

    data = loads_strict_json(raw, label=name, allow_infinity=True)
    if not isinstance(data, dict):
        raise ValidationError(f"{name}: expected a JSON object (a metrics.json or a scenario)")
    results = data.get("results")
    if not (isinstance(results, list) and "engine" not in data):
        spec, recorded = recorded_run(data, name)
        return [RecordedRun(spec, recorded, _label(spec, recorded))]
    runs: list[RecordedRun] = []
    problems: list[str] = []
    for i in range(1, len(results) + 1):
        try:
            spec, recorded = recorded_run(data, f"{name}, result {i}", i)
        except ValidationError as exc:
            problems.append(str(exc))
            continue
        runs.append(RecordedRun(spec, recorded, f"result {i}: {_label(spec, recorded)}"))
    if not runs:
        raise ValidationError(
            problems[0] if problems else f"{name} is a scenario without attached run results"
        )
    return runs


def replay_note(run: RecordedRun) -> str:
    """What a replay of ``run`` will do, in one paragraph (data, backend, what is not repeated)."""
    spec = run.spec
    data = data_label(spec)
    parts = [
        f"Replays the {'TopDown' if spec.engine == 'topdown' else 'PHSafe'} run on **{data}** "
        f"with seed **{spec.seed}** (run fingerprint `{spec.fingerprint()[:12]}`)."
    ]
    if run.held is not None:
        parts.append("Its data are still held in this session.")
    elif spec.data.get("sha256"):
        parts.append("Its data are read again and checked against the recorded content hash.")
    else:
        parts.append("Its data are read again from where the run read them.")
    if spec.backend == "spark" and spark_backend_options() is None:
        parts.append("It ran on Spark; it replays locally (the numbers do not depend on it).")
    if spec.engine == "topdown":
        parts.append("A ρ sweep run beside it is not repeated.")
    return " ".join(parts)


def held_data(spec: RunSpec, records: Sequence[RunRecord]) -> Any:
    """Data a run of this session holds that are the data ``spec`` names (same content hash for
    TopDown, same source and label for PHSafe), else None."""
    for record in reversed(records):
        if record.data is None or record.engine != spec.engine:
            continue
        theirs = dict((record.metrics or {}).get("run", {}).get("data") or {})
        if spec.engine == "topdown":
            if spec.data.get("sha256") and theirs.get("sha256") == spec.data.get("sha256"):
                return record.data
        elif (theirs.get("source"), theirs.get("label")) == (
            spec.data.get("source"),
            spec.data.get("label"),
        ):
            return record.data
    return None


def check_readable(spec: RunSpec) -> None:
    """Refuse, before any job starts, a run whose data are neither held nor readable here."""
    source = str(spec.data.get("source"))
    label = spec.data.get("label") or source
    if Path(source).exists():
        return
    from engine.data.samples import list_samples

    if source in {s.name for s in list_samples() if s.kind == spec.engine}:
        return
    raise ValidationError(
        f"the data of this run ({label!r}) are not on this machine: no sample or file "
        f"{source!r}; an upload can be replayed only in the session that holds it — upload it "
        "again and run it on the Run page"
    )


def load_data(spec: RunSpec) -> Any:
    """Read the data of ``spec`` again (its ``source`` and ``filter``), checked against the
    recorded content hash when there is one."""
    if spec.engine == "phsafe":
        from engine.runs.phsafe import load

        return load(spec)
    from engine.runs.topdown import load as load_topdown

    hist = load_topdown(spec)
    recorded = spec.data.get("sha256")
    if recorded and data_fingerprint(hist) != recorded:
        raise ValidationError(
            f"the data at {spec.data.get('source')!r} are not the data this run used (content "
            "hash differs: the file or sample changed since); replay it where its data are"
        )
    return hist


def runnable(spec: RunSpec) -> RunSpec:
    """``spec`` as this app can run it: a Spark run replays locally when Spark is not configured
    (backend and workers do not change the numbers, SPEC §8)."""
    if spec.backend == "spark" and spark_backend_options() is None:
        return spec.replace(backend="local", backend_options={})
    return spec


def replay_work(
    run: RecordedRun,
    *,
    run_id: int,
    scenario: str,
    records: Sequence[RunRecord] = (),
) -> Callable[[RunJob], RunRecord]:
    """The work of a replay of ``run`` as the session's run ``run_id``.

    Checked before the job starts (ValidationError): the budget provenance of the recorded file
    and that its data are held or readable here. The new run keeps the original's budget
    fingerprint and origin, gets its own run number and token, and records ``replay_of``.
    """
    from engine.runs.provenance import budget_of, provenance_of, replay_of, same_numbers

    spec = runnable(run.spec)
    budget = provenance_of(spec, run.recorded)
    held = run.held if run.held is not None else held_data(spec, records)
    if held is None:
        check_readable(spec)
    label = data_label(spec)
    provenance = run_provenance(
        run_id=run_id,
        token=uuid.uuid4().hex,
        data_label=label,
        seed=spec.seed,
        fingerprint=budget["budget_fingerprint"],
        origin=budget["budget_origin"],
    )
    original = run.recorded.get("run_id")
    repeated = replay_of(spec, run.recorded, label)
    note = f"replay of #{original}" if original is not None else "replay"
    used = budget_of(spec, budget["budget_origin"])

    def work(job: RunJob) -> RunRecord:
        data = held
        if data is None:
            job.progress("Loading the data", 0.0)
            data = load_data(spec)
        if spec.engine == "topdown":
            spine = str(spec.options.get("spine", "conventional"))
            output = execute_topdown(
                spec, job, data, label, spine, provenance, extra={"replay_of": repeated}
            )
        else:
            from engine.runs.pipeline import execute

            output = execute(
                spec,
                control=job.control,
                data=data,
                extra_metrics={**provenance, "replay_of": repeated},
            )
        output.metrics["replay_of"] = {
            **repeated,
            "reproduced": same_numbers(run.recorded.get("mae"), output.metrics.get("mae")),
        }
        if isinstance(used, TopDownAllocation):
            return topdown_record(
                output,
                run_id=run_id,
                scenario=scenario,
                data_label=label,
                allocation=used,
                provenance=provenance,
                note=note,
            )
        assert isinstance(used, PHSafeBudget)
        return phsafe_record(
            output,
            run_id=run_id,
            scenario=scenario,
            data_label=label,
            budget=used,
            provenance=provenance,
            note=note,
        )

    return work


def replay_outcome(record: RunRecord) -> tuple[str, str] | None:
    """``(kind, sentence)`` the page shows for a replayed run: "success" when its MAE table is
    identical to the original's, "warning" when it differs, "info" when nothing was recorded to
    compare; None for a run that is not a replay."""
    of = (record.metrics or {}).get("replay_of")
    if not of:
        return None
    original = f"run #{of['run_id']}" if of.get("run_id") is not None else "the recorded run"
    head = (
        f"Replay of {original} (run fingerprint {str(of['run_fingerprint'])[:12]}, "
        f"seed {of['seed']}): "
    )
    if of.get("reproduced") is True:
        return "success", head + "same seed, same numbers — the MAE table is identical."
    if of.get("reproduced") is False:
        return "warning", head + (
            "the MAE table differs from the recorded one: the code or the data changed since the "
            "original run (compare the two runs' versions in their manifests)."
        )
    return "info", head + "the original recorded no MAE table to compare with."


__all__ = [
    "SAME_SEED_NOTE",
    "RecordedRun",
    "check_readable",
    "data_label",
    "held_data",
    "load_data",
    "recorded_in_file",
    "recorded_of",
    "replay_note",
    "replay_outcome",
    "replay_work",
    "runnable",
]
