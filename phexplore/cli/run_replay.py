"""``phexplore run replay``: run again a run described by data (SPEC §8: same seed → same numbers).

Every metrics.json written by ``phexplore run topdown`` / ``run phsafe`` (and every run the app
keeps) holds its :class:`~engine.runs.spec.RunSpec` under ``run``: engine, data source,
allocation or configuration, seed and options, with a SHA-256 fingerprint. ``--spec`` takes that
metrics.json (or a JSON file holding only the spec); the run goes through the same pipeline
(:func:`engine.runs.execute`) and is written, atomically with a manifest, to ``--out``. With the
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
from phexplore.errors import ValidationError


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
    from engine.runs.spec import RunSpec
    from phexplore.parsing import load_json_object

    data = load_json_object(Path(path), label=f"--spec {path}", allow_infinity=True)
    results = data.get("results")
    if isinstance(results, list) and "engine" not in data:
        if result is None or not 1 <= result <= len(results):
            raise ValidationError(
                f"--spec {path} is a scenario with {len(results)} attached run result(s); choose "
                f"one with --result N (1 – {len(results)})"
                if results
                else f"--spec {path} is a scenario without attached run results"
            )
        data = results[result - 1] if isinstance(results[result - 1], dict) else {}
    section = data.get("run", data)
    if not isinstance(section, dict) or "engine" not in section:
        raise ValidationError(
            f"--spec {path}: no run description found; give a metrics.json written by "
            "'phexplore run topdown' or 'run phsafe' (it has a 'run' section)"
        )
    spec = RunSpec.from_dict(section)
    if spec.noise_method == "exact":
        raise ValidationError(
            f"--spec {path}: this run used OpenDP's exact samplers (OS randomness), which no seed "
            f"reproduces; run it again with 'phexplore run {spec.engine}' instead"
        )
    return spec


def run(args: argparse.Namespace) -> int:
    """Read the description, then run and write it through the one pipeline."""
    spec = read_spec(args.spec, args.result)
    if args.workers is not None:
        spec = spec.replace(workers=args.workers)
    source = str(spec.data.get("source"))
    inputs = {"spec": args.spec, "data": input_location(source)}
    with open_output(args, "run replay", inputs, seed=spec.seed) as staging:
        return _run(args, staging, spec)


def _run(args: argparse.Namespace, staging: Any, spec: Any) -> int:
    from engine.runs import RunControl, execute, write

    staging.settings.update({"engine": spec.engine, "run_fingerprint": spec.fingerprint()})

    progress = progress_line(not args.quiet)

    output = execute(spec, control=RunControl(progress))
    end_progress_line(not args.quiet)
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
        "wrote "
        + ", ".join(str(staging.final / p.relative_to(staging.path)) for p in paths.values())
    )
    return 0
