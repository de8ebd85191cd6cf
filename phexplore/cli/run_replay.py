"""``phexplore run replay``: run again a run described by data (docs/science.md §8: same seed →
same numbers).

Every metrics.json written by ``phexplore run topdown`` / ``run phsafe`` (and every run the app
keeps) holds its :class:`~engine.runs.spec.RunSpec` under ``run``: engine, data source,
allocation or configuration, seed and options, with a SHA-256 fingerprint. ``--spec`` takes that
metrics.json, a JSON file holding only the description, or a saved scenario (``--result N``); the
run goes through the same pipeline (:func:`engine.runs.pipeline.execute`) and is written,
atomically with a manifest, to ``--out``. With the keyed noise the replay reproduces the original
numbers exactly — on any number of ``--workers`` and any ``--backend``.

What a replay refuses and why (docs/reliability.md "Replays", :mod:`engine.runs.replay`): an
unknown or misspelt key anywhere in the description (never run with a default in its place); a
run drawn with the exact (OS-random) samplers; a budget fingerprint or run fingerprint altered by
hand; input files whose content differs from the hashes recorded with the run (unless
``--allow-changed-data``: then run on the data as they are, reported and recorded). Relative paths
in the file are read from the file's folder. Where the replay runs comes only from this command's
``--backend``/``--spark-*``/``--workers``: the file's own backend is shown, never used.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from engine.core.errors import ValidationError
from phexplore.cli._backend import add_backend_arguments, backend_of
from phexplore.cli._options import add_workers_option
from phexplore.cli._output import (
    add_output_folder_options,
    end_progress_line,
    input_location,
    open_output,
    progress_line,
)
from phexplore.cli.run_phsafe import summary_lines

ALLOW_CHANGED = "--allow-changed-data"


def register(engines: Any) -> None:
    """Add ``replay`` under ``phexplore run``."""
    parser = engines.add_parser(
        "replay",
        help="run again the run recorded in a metrics.json (its 'run' description)",
        description=(
            "Replay a run from its description: the 'run' section of a metrics.json written by "
            "'phexplore run topdown' or 'run phsafe', or a JSON file holding such a description. "
            "Same engine, data, allocation, seed and options, so the same numbers. The data "
            "files are checked against the content hashes recorded with the run."
        ),
    )
    parser.add_argument(
        "--spec",
        required=True,
        help="metrics.json of an earlier run, a run-description JSON, or a saved scenario JSON "
        "(with --result)",
    )
    parser.add_argument(
        "--result",
        type=int,
        default=None,
        metavar="N",
        help="with a scenario file: replay its N-th attached run result (1 = first)",
    )
    parser.add_argument(
        ALLOW_CHANGED,
        action="store_true",
        help="replay even when the input files differ from the content hashes recorded with the "
        "run: the replay reads the data as they are now, says which files changed and records "
        "them in metrics.json replay_of.inputs_changed (without it such a replay is refused)",
    )
    add_backend_arguments(parser)
    add_workers_option(
        parser,
        "worker processes, 1 – 256 (default 1; the numbers do not depend on it, and the "
        "recorded run's own workers and backend are shown, never used)",
    )
    add_output_folder_options(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress messages")
    parser.set_defaults(func=run)


def read_recorded(path: str, result: int | None = None) -> Any:
    """The :class:`~engine.runs.replay.Recorded` run in ``path`` (a metrics.json, a description,
    or a scenario's ``result``-th run), with the command line's advice on a refusal."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.core.strict_json import load_json_object
    from engine.runs.replay import NotARunDescription, NotReproducible, recorded_run

    file = Path(path)
    data = load_json_object(file, label=f"--spec {path}", allow_infinity=True)
    try:
        return recorded_run(
            data, f"--spec {path}", result, folder=file.absolute().parent, option="--result N"
        )
    except NotARunDescription as exc:
        raise ValidationError(
            f"{exc}; give a metrics.json written by 'phexplore run topdown' or 'run phsafe'"
        ) from None
    except NotReproducible as exc:
        raise ValidationError(
            f"{exc}; run it again with 'phexplore run {exc.engine}' instead"
        ) from None


def checked(spec: Any, allow_changed: bool) -> tuple[Any, list[str]]:
    """``spec`` with its input files checked against the recorded hashes (see
    :func:`engine.runs.replay.check_inputs`), with the command line's advice on a refusal."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.runs.replay import InputsChanged, check_inputs

    if spec.data.upload:
        raise ValidationError(
            f"the data of this run ({spec.data.name}) were uploaded to the app and exist only in "
            "the app session that holds them; replay it there, or run it again with "
            "'phexplore run topdown --data FILE'"
        )
    try:
        return check_inputs(spec, allow_changed=allow_changed)
    except InputsChanged as exc:
        raise ValidationError(
            f"{exc}; pass {ALLOW_CHANGED} to replay on the data as they are now"
        ) from None


def run(args: argparse.Namespace) -> int:
    """Read and check the description, then run and write it through the one pipeline."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.runs.provenance import provenance_of
    from engine.runs.replay import placed

    recorded = read_recorded(args.spec, args.result)
    provenance = provenance_of(recorded.spec, recorded.metrics)  # refuses an altered fingerprint
    spec, changes = checked(recorded.spec, args.allow_changed_data)
    backend, backend_options = backend_of(args)
    spec = placed(spec, backend, args.workers, backend_options)
    inputs = {"spec": args.spec, "data": input_location(spec.data.source)}
    with open_output(args, "run replay", inputs, seed=spec.seed) as staging:
        return _run(args, staging, spec, recorded, provenance, changes)


def _run(
    args: argparse.Namespace,
    staging: Any,
    spec: Any,
    recorded: Any,
    provenance: Any,
    changes: list[str],
) -> int:
    """Run the description through the one pipeline with the original's budget provenance; say
    whether the same seed gave the same numbers (``replay_of`` in metrics.json, as in the app)."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.runs.control import RunControl
    from engine.runs.pipeline import execute, write
    from engine.runs.replay import (
        InputsChanged,
        check_histogram,
        difference_sentence,
        replay_of,
        reproduction,
    )
    from engine.runs.topdown import load

    data = None
    if spec.engine == "topdown" and spec.data.sha256:  # a run of the app: its histogram's hash
        data = load(spec)
        try:
            spec, more = check_histogram(spec, data, allow_changed=args.allow_changed_data)
        except InputsChanged as exc:
            raise ValidationError(
                f"{exc}; pass {ALLOW_CHANGED} to replay on the data as they are now"
            ) from None
        changes = [*changes, *more]
    for change in changes:
        print(f"warning: input changed since the run was recorded: {change}")
    progress = progress_line(not args.quiet)
    repeated = replay_of(recorded, spec.data.name, changes)
    output = execute(
        spec,
        control=RunControl(progress),
        data=data,
        extra_metrics={**provenance.metrics(), "replay_of": repeated},
    )
    end_progress_line(not args.quiet)
    staging.settings.update({"engine": spec.engine, "run_fingerprint": output.spec.fingerprint()})
    output.metrics["replay_of"] = {**repeated, **reproduction(recorded.metrics, output.metrics)}
    reproduced = output.metrics["replay_of"]["reproduced"]
    summary: list[str] = []
    if spec.engine == "phsafe":
        summary = summary_lines(
            output.result, staging.final, spec.options.scale, output.extra.get("errors")
        )
    paths = write(output, staging.path, summary=summary)
    print(
        f"Replayed {spec.engine} run {recorded.fingerprint[:12]} on {spec.data.name} "
        f"(seed {spec.seed}): {output.runtime_s:.1f} s"
    )
    where = f"{spec.backend}, {spec.workers} worker{'s' if spec.workers != 1 else ''}"
    if spec.backend == "spark":
        where = f"spark ({spec.backend_options.describe()})"
    print(f"  recorded on {recorded.placement_text}; replayed on {where} (this command's options)")
    print(
        f"  budget: {provenance.changes_text()} (fingerprint "
        f"{provenance.budget_fingerprint[:12]}, as recorded)"
    )
    print(
        "  same seed, same numbers: the MAE table is identical to the recorded one"
        if reproduced
        else "  DIFFERS: " + difference_sentence(output.metrics["replay_of"])
        if reproduced is False
        else "  (the description holds no recorded MAE table to compare with)"
    )
    print(
        "wrote "
        + ", ".join(str(staging.final / p.relative_to(staging.path)) for p in paths.values())
    )
    return 0
