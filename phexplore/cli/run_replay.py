"""``phexplore run replay``: run again a run described by data (SPEC §8: same seed → same numbers).

Every metrics.json written by ``phexplore run topdown`` / ``run phsafe`` (and every run the app
keeps) holds its :class:`~engine.runs.spec.RunSpec` under ``run``: engine, data source,
allocation or configuration, seed and options, with a SHA-256 fingerprint. ``--spec`` takes that
metrics.json (or a JSON file holding only the spec); the run goes through the same pipeline
(:func:`engine.runs.pipeline.execute`) and is written, atomically with a manifest, to ``--out``. With the
keyed noise the replay reproduces the original numbers exactly — on any number of ``--workers``.
Runs with ``noise_method: exact`` (OpenDP, OS randomness) cannot be reproduced and are refused.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from phexplore.cli._options import add_workers_option
from phexplore.cli._output import (
    add_output_folder_options,
    end_progress_line,
    input_location,
    open_output,
    progress_line,
)


def register(engines: Any) -> None:
    """Add ``replay`` under ``phexplore run``."""
    parser = engines.add_parser(
        "replay",
        help="run again the run recorded in a metrics.json (its 'run' description)",
        description=(
            "Replay a run from its description: the 'run' section of a metrics.json written by "
            "'phexplore run topdown' or 'run phsafe', or a JSON file holding such a description. "
            "Same engine, data, allocation, seed and options, so the same numbers."
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
    add_workers_option(
        parser,
        "worker processes, 1 – 256 (default: as recorded; the numbers do not depend on it)",
        default=None,
    )
    add_output_folder_options(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress messages")
    parser.set_defaults(func=run)


def read_spec(path: str, result: int | None = None) -> Any:
    """The :class:`~engine.runs.spec.RunSpec` in ``path``: a metrics.json, a spec JSON, or the
    ``result``-th run attached to a saved scenario (its metrics.json carries the description)."""
    return read_recorded(path, result)[0]


def read_recorded(path: str, result: int | None = None) -> tuple[Any, dict[str, Any]]:
    """:func:`read_spec` and the recorded metrics.json (``{}`` for a bare run description)."""
    from engine.core.strict_json import load_json_object

    data = load_json_object(Path(path), label=f"--spec {path}", allow_infinity=True)
    from engine.runs.provenance import recorded_run

    return recorded_run(data, f"--spec {path}", result)


def run(args: argparse.Namespace) -> int:
    """Read the description, then run and write it through the one pipeline."""
    spec, recorded = read_recorded(args.spec, args.result)
    from engine.runs.provenance import provenance_of

    provenance = provenance_of(spec, recorded)  # refuses a fingerprint altered by hand
    if args.workers is not None:
        spec = spec.replace(workers=args.workers)
    source = str(spec.data.get("source"))
    inputs = {"spec": args.spec, "data": input_location(source)}
    with open_output(args, "run replay", inputs, seed=spec.seed) as staging:
        return _run(args, staging, spec, provenance, recorded)


def _run(
    args: argparse.Namespace,
    staging: Any,
    spec: Any,
    provenance: dict[str, str],
    recorded: dict[str, Any],
) -> int:
    """Run the description through the one pipeline with the original's budget provenance; say
    whether the same seed gave the same numbers (``replay_of`` in metrics.json, as in the app)."""
    from engine.runs.control import RunControl
    from engine.runs.pipeline import execute, write

    staging.settings.update({"engine": spec.engine, "run_fingerprint": spec.fingerprint()})

    progress = progress_line(not args.quiet)

    from engine.runs.provenance import replay_of, same_numbers

    repeated = replay_of(spec, recorded, str(spec.data.get("label") or spec.data.get("source")))
    output = execute(
        spec, control=RunControl(progress), extra_metrics={**provenance, "replay_of": repeated}
    )
    end_progress_line(not args.quiet)
    reproduced = same_numbers(recorded.get("mae"), output.metrics.get("mae"))
    output.metrics["replay_of"] = {**repeated, "reproduced": reproduced}
    summary: list[str] = []
    if spec.engine == "phsafe":
        from phexplore.cli.run_phsafe import summary_lines

        summary = summary_lines(
            output.result, staging.final, spec.options.get("scale"), output.extra.get("errors")
        )
    paths = write(output, staging.path, summary=summary)
    print(
        f"Replayed {spec.engine} run {spec.fingerprint()[:12]} on {spec.data.get('source')} "
        f"(seed {spec.seed}): {output.runtime_s:.1f} s"
    )
    print(
        "  same seed, same numbers: the MAE table is identical to the recorded one"
        if reproduced
        else "  the MAE table DIFFERS from the recorded one: the code or the data changed since"
        if reproduced is False
        else "  (the description holds no recorded MAE table to compare with)"
    )
    print(
        "wrote "
        + ", ".join(str(staging.final / p.relative_to(staging.path)) for p in paths.values())
    )
    return 0
