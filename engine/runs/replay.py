"""Replaying a recorded run: read its description strictly, check what it would read, place it.

Shared by the command line (``phexplore run replay``) and the app (:mod:`phexplore.api.replay`);
the faces add the advice of their own (which command, which button). The guarantees
(docs/reliability.md "Replays"):

* the description is read by :meth:`~engine.runs.spec.RunSpec.from_dict`: an unknown or misspelt
  key (``"spin"``, an ``optons`` section, an option of a newer version) is refused naming the key
  and the nearest known one — a replay never runs with defaults in its place;
* relative paths in it are read from the folder of the file that recorded it
  (:func:`engine.runs.inputs.resolve_paths`), never from the current folder;
* the content hash of every input file recorded with the run must match the files read now
  (:func:`check_inputs`), and the app's histogram hash the data loaded (:func:`check_histogram`):
  a mismatch is refused (:class:`InputsChanged`), or with the user's explicit consent reported
  and recorded in ``replay_of.inputs_changed``;
* where it runs — backend, Spark master or remote, workers — comes only from the replaying user
  (:func:`placed`); the file's own placement is shown (:attr:`Recorded.placement`), never used.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.core.errors import ValidationError
from engine.core.strict_json import dumps_json
from engine.data.histogram import BlockHistogram
from engine.runs.inputs import changed_inputs, hash_inputs, histogram_sha256, resolve_paths
from engine.runs.options import BackendOptions, TopDownRunOptions
from engine.runs.spec import RunSpec, fingerprint_of_json


class NotARunDescription(ValidationError):
    """The JSON holds no run description (no ``run`` section naming an engine)."""


class NotReproducible(ValidationError):
    """The run drew its noise from OS randomness (OpenDP's exact samplers): no seed repeats it."""

    def __init__(self, message: str, engine: str) -> None:
        super().__init__(message)
        self.engine = engine


class InputsChanged(ValidationError):
    """The files (or the histogram) a replay would read differ from those the run recorded."""

    def __init__(self, message: str, changes: list[str]) -> None:
        super().__init__(message)
        self.changes = changes


@dataclass(frozen=True)
class Recorded:
    """A recorded run ready to replay: its description, the metrics it recorded, the original's
    run fingerprint and where it ran (shown, not used)."""

    spec: RunSpec
    metrics: Mapping[str, Any]
    """The original metrics.json (``{}`` for a bare run description)."""
    fingerprint: str
    """The original's run fingerprint, as its file states it (or as computed from the file)."""
    placement: Mapping[str, Any]
    """``backend``, ``workers`` and ``backend_options`` as recorded (shown, never used)."""

    @property
    def placement_text(self) -> str:
        """``local, 1 worker`` / ``spark (remote sc://host:15002)`` — where the original ran."""
        backend = str(self.placement.get("backend", "local"))
        options = BackendOptions.from_json(self.placement.get("backend_options") or {})
        if backend == "spark":
            return f"spark ({options.describe()})"
        workers = int(self.placement.get("workers", 1))
        return f"{backend}, {workers} worker{'s' if workers != 1 else ''}"


def description_of(
    data: Mapping[str, Any], where: str, result: int | None, option: str
) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """``(run section, recorded metrics)`` of parsed JSON: a metrics.json, a bare description, or
    the ``result``-th run attached to a scenario (``option`` names how the face chooses it)."""
    results = data.get("results")
    if isinstance(results, list) and "engine" not in data:
        if result is None or not 1 <= result <= len(results):
            raise ValidationError(
                f"{where} is a scenario with {len(results)} attached run result(s); choose "
                f"one with {option} (1 – {len(results)})"
                if results
                else f"{where} is a scenario without attached run results"
            )
        chosen = results[result - 1]
        data = chosen if isinstance(chosen, Mapping) else {}
    section = data.get("run", data)
    if not isinstance(section, Mapping) or "engine" not in section:
        raise NotARunDescription(f"{where}: no run description found (no 'run' section)")
    return section, (data if "run" in data else {})


def recorded_run(
    data: Mapping[str, Any],
    where: str,
    result: int | None = None,
    *,
    folder: str | Path | None,
    option: str = "result N",
) -> Recorded:
    """The run recorded in parsed JSON ``data`` (see :func:`description_of`), checked strictly.

    ``folder``: the folder of the file ``data`` was read from — relative paths in the description
    are read from there. ``None`` (an upload, a run of the app's session): a relative path is
    refused, since there is no folder it could be read from. ``where`` names the input in
    messages."""
    section, metrics = description_of(data, where, result, option)
    spec = RunSpec.from_dict(section, f"{where}: run")
    if spec.noise_method == "exact":
        raise NotReproducible(
            f"{where}: this run used OpenDP's exact samplers (OS randomness), which no seed "
            "reproduces",
            spec.engine,
        )
    if folder is not None:
        spec = resolve_paths(spec, folder)
    else:
        _refuse_relative(spec, where)
    placement = {k: section[k] for k in ("backend", "workers", "backend_options") if k in section}
    stated = section.get("fingerprint")
    original = str(stated) if stated is not None else fingerprint_of_json(section)
    return Recorded(spec, metrics, original, placement)


def _refuse_relative(spec: RunSpec, where: str) -> None:
    """Refuse relative paths in a description that came with no folder to read them from."""
    resolved = resolve_paths(spec, Path("/"))
    pairs = [
        ("data.source", spec.data.source, resolved.data.source),
        ("data.mapping", spec.data.mapping, resolved.data.mapping),
    ]
    if isinstance(spec.options, TopDownRunOptions) and isinstance(
        resolved.options, TopDownRunOptions
    ):
        pairs += [
            ("options.entities", a, b)
            for a, b in zip(spec.options.entities, resolved.options.entities, strict=True)
        ]
        pairs.append(
            ("options.special_areas", spec.options.special_areas, resolved.options.special_areas)
        )
    relative = [f"{name} {a!r}" for name, a, b in pairs if a is not None and a != b]
    if relative:
        raise ValidationError(
            f"{where}: {', '.join(relative)} is a relative path, and this file comes with no "
            "folder to read it from"
        )


def check_inputs(spec: RunSpec, *, allow_changed: bool = False) -> tuple[RunSpec, list[str]]:
    """``(spec, changes)``: the input files' current hashes against those recorded.

    Nothing recorded (a run of an earlier version): the current hashes are recorded and nothing is
    compared. A difference raises :class:`InputsChanged` naming the files, unless ``allow_changed``:
    then the spec records the current hashes (what the replay really reads) and ``changes`` says
    what differs."""
    if spec.data.upload:
        return spec, []
    current = hash_inputs(spec)
    changes = changed_inputs(spec.data.inputs, current) if spec.data.inputs else []
    if changes and not allow_changed:
        raise InputsChanged(
            "the data changed since the run was recorded: "
            + ", ".join(changes)
            + "; the replay would not repeat the run (same seed, other data)",
            changes,
        )
    if current:
        spec = spec.replace(data=dataclasses.replace(spec.data, inputs=current))
    return spec, changes


def check_histogram(
    spec: RunSpec, hist: BlockHistogram, *, allow_changed: bool = False
) -> tuple[RunSpec, list[str]]:
    """``(spec, changes)``: the loaded histogram's content hash against ``data.sha256`` (recorded
    by the app); refused like :func:`check_inputs` unless ``allow_changed``."""
    recorded = spec.data.sha256
    if not recorded:
        return spec, []
    current = histogram_sha256(hist)
    if current == recorded:
        return spec, []
    change = f"the block histogram of {spec.data.name} (content hash differs)"
    if not allow_changed:
        raise InputsChanged(
            f"the data changed since the run was recorded: {change}; the replay would not "
            "repeat the run (same seed, other data)",
            [change],
        )
    return spec.replace(data=dataclasses.replace(spec.data, sha256=current)), [change]


def placed(
    spec: RunSpec,
    backend: str = "local",
    workers: int = 1,
    backend_options: BackendOptions | None = None,
) -> RunSpec:
    """``spec`` placed where the replaying user says (the file's placement is never used)."""
    return spec.replace(
        backend=backend, workers=workers, backend_options=backend_options or BackendOptions()
    )


def same_numbers(recorded: Any, replayed: Any) -> bool | None:
    """True when a replay's MAE section equals the recorded one exactly (as strict JSON), False
    when it differs, None when nothing was recorded to compare."""
    if not recorded:
        return None
    return bool(json.loads(dumps_json(recorded)) == json.loads(dumps_json(replayed)))


def routes_changed(recorded: Mapping[str, Any], replayed: Mapping[str, Any]) -> bool | None:
    """Whether TopDown's least-squares routes of the replay differ from the recorded run's: True
    when the recording has none (written before the routing table, by a version whose solvers
    and rounder were others) or other counts than the replay's ``diagnostics.routes``; False when
    they are the same; None for a PHSafe run or a replay that records none."""
    now = (replayed.get("diagnostics") or {}).get("routes")
    if replayed.get("engine") != "topdown" or now is None:
        return None
    then = (recorded.get("diagnostics") or {}).get("routes")
    return then is None or json.loads(dumps_json(then)) != json.loads(dumps_json(now))


def mae_differences(recorded: Any, replayed: Any) -> dict[str, Any]:
    """How a replay's MAE table differs from the recorded one: ``entries`` (level × query),
    ``differing`` and the ``largest`` absolute difference (``level``, ``query``, ``recorded``,
    ``replayed``); an entry missing on one side counts as differing (its difference null)."""
    then = json.loads(dumps_json(recorded or {}))
    now = json.loads(dumps_json(replayed or {}))
    entries = differing = 0
    largest: dict[str, Any] | None = None
    for level in sorted(set(then) | set(now)):
        a, b = then.get(level) or {}, now.get(level) or {}
        for query in sorted(set(a) | set(b)):
            entries += 1
            x, y = a.get(query), b.get(query)
            if x == y:
                continue
            differing += 1
            gap = abs(x - y) if isinstance(x, int | float) and isinstance(y, int | float) else None
            if largest is None or (gap is not None and gap > (largest["difference"] or 0.0)):
                largest = {
                    "level": level,
                    "query": query,
                    "recorded": x,
                    "replayed": y,
                    "difference": gap,
                }
    return {"entries": entries, "differing": differing, "largest": largest}


def reproduction(recorded: Mapping[str, Any], replayed: Mapping[str, Any]) -> dict[str, Any]:
    """The keys a replay adds to ``replay_of`` once it ran: ``reproduced`` (:func:`same_numbers`
    of the MAE tables) and, when the tables differ, ``mae_differences``
    (:func:`mae_differences`) and ``routes_changed`` (:func:`routes_changed`). A TopDown run
    recorded before the least-squares routing table replays with this version's routes and
    rounder: the same problems solved to the same optimum within solver tolerance, but where
    several roundings are equally good another may be chosen (docs/metrics.md, "Replays of runs
    recorded before the routing table")."""
    out: dict[str, Any] = {"reproduced": same_numbers(recorded.get("mae"), replayed.get("mae"))}
    if out["reproduced"] is False:
        out["mae_differences"] = mae_differences(recorded.get("mae"), replayed.get("mae"))
        changed = routes_changed(recorded, replayed)
        if changed is not None:
            out["routes_changed"] = changed
    return out


def difference_sentence(of: Mapping[str, Any]) -> str:
    """What a reader of a replay that did not reproduce its MAE table should know (``of``: the
    replay's ``replay_of``): how much it differs and, when the least-squares routes changed since
    the recording, why (no advice of any face)."""
    diff = of.get("mae_differences") or {}
    largest = diff.get("largest") or {}
    head = f"the MAE table differs from the recorded one in {diff.get('differing', '?')} of " + (
        f"{diff.get('entries', '?')} entries"
    )
    if largest.get("difference") is not None:
        head += (
            f" (largest: {largest['level']} {largest['query']} {largest['recorded']:.4g} → "
            f"{largest['replayed']:.4g})"
        )
    if of.get("inputs_changed"):
        return head + ": the data changed since the original run"
    if of.get("routes_changed"):
        return head + (
            ": the run was recorded by a version with other least-squares routes or another "
            "rounder (its metrics.json lists no or other diagnostics.routes). This version "
            "solves each family's least squares to the same optimum within solver tolerance and "
            "each rounding pass to the same L1 optimum, but may choose another of several equally "
            "good roundings, so expect some counts to differ by a person or two; a larger "
            "difference means something else changed"
        )
    return head + ": the code or the data changed since the original run"


def replay_of(recorded: Recorded, data: str, changes: list[str] | None = None) -> dict[str, Any]:
    """metrics.json ``replay_of`` of a replay of ``recorded``: the original's run fingerprint and
    number, the data and seed, where the original ran (shown, not used) and, when the user
    accepted changed data, what changed. ``reproduced`` and the rest are set once it ran (:func:`reproduction`)."""
    out: dict[str, Any] = {
        "run_fingerprint": recorded.fingerprint,
        "run_id": recorded.metrics.get("run_id"),
        "data": data,
        "seed": recorded.spec.seed,
        "recorded_placement": recorded.placement_text,
    }
    if changes:
        out["inputs_changed"] = list(changes)
    return out
