"""``phexplore run topdown``: run the TopDown engine (TDA §6–§7) and write its outputs.

The arguments become a :class:`~engine.runs.spec.RunSpec` (:func:`spec_of`: typed
:class:`~engine.runs.options.TopDownRunOptions`, a :class:`~engine.runs.data_source.DataSource`
with absolute paths), run by the one run pipeline (:func:`engine.runs.pipeline.execute`,
:func:`engine.runs.pipeline.write`) the app and experiments use, written into the atomic output
folder (:mod:`engine.core.output_folder`).

Writes to ``--out`` (see docs/topdown.md "Outputs"): ``estimates`` (tidy: geolevel, geounit,
query, cell, true, estimate), ``measurements`` (noisy answers and variances, unless
``--no-measurements``), ``microdata`` (PPMF-like person records of the estimated blocks, unless
``--no-microdata``) as ``.csv`` or ``.parquet`` (``--output-format auto|csv|parquet``; sparse
Parquet estimates come with ``geounits`` and ``cells`` tables) and ``metrics.json`` (``mae`` by
geolevel and query, ``tda_mae``, ``error_universe``, ``runtime_s``, ``rho``, ``seed``, ``allocation``,
``timings``, ``outputs`` …).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from engine.core.errors import ValidationError
from engine.core.numbers import parse_exact
from engine.metrics.universe_options import HOUSED, UNIVERSES
from engine.runs.options import PRESET_SPINE, TopDownRunOptions
from engine.runs.output_options import AUTO_CSV_MAX_ROWS as AUTO_ROWS
from engine.runs.output_options import ESTIMATE_CHOICES, FORMATS
from engine.runs.typed import FieldError
from engine.topdown.qp.settings import SOLVER_CHOICES
from phexplore.cli._backend import add_backend_arguments, backend_of
from phexplore.cli._epl_options import add_epl_arguments, epl_settings_from_args
from phexplore.cli._options import (
    add_data_format_option,
    add_max_bytes_option,
    add_noise_method_option,
    add_seed_option,
    add_workers_option,
)
from phexplore.cli._output import (
    add_output_folder_options,
    dumps_json,
    end_progress_line,
    input_location,
    open_output,
    progress_line,
)
from phexplore.cli.spine_options import add_spine_arguments, spine_options_given
from phexplore.cli.tda_lines import error_lines


def register(engines: Any) -> None:
    """Add ``topdown`` under ``phexplore run``."""
    parser = engines.add_parser(
        "topdown",
        help="run the TopDown algorithm on block counts and write estimates and metrics.json",
        description=(
            "Run TopDown (measurement, then top-down least squares and controlled rounding) on a "
            "shipped sample or your own file (RI-style block CSV, PPMF person records, a P.L. 94-171 "
            "file-set folder, or any block CSV with --mapping), with a preset or an allocation JSON."
        ),
    )
    parser.add_argument(
        "--data",
        required=True,
        help="sample name (e.g. ri2010, ppmf_perry_al; see 'phexplore samples list'), a CSV file "
        "(RI 2010 layout or PPMF person records, recognised by its header), or a folder holding a "
        "P.L. 94-171 2020-style file set (*.pl)",
    )
    add_data_format_option(parser)
    parser.add_argument(
        "--mapping",
        help="mapping JSON for a generic block CSV: which schema cell each column counts "
        "(see docs/data.md)",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--preset",
        help="allocation preset (e.g. ri2010-production-like, topdown-2020-production, "
        "topdown-2021-04, e2e-2018-1940)",
    )
    source.add_argument("--config", help="allocation JSON file (see docs/topdown.md)")
    rho = parser.add_mutually_exclusive_group()
    rho.add_argument(
        "--rho",
        default=None,
        help="the PERSONS run's ρ (ε for pure-DP allocations), e.g. 2.56 or 64/25; default: the "
        "allocation's. This command runs the persons allocation only: a preset's units run "
        "(occupancy) is not run, so --rho is not a total to split (topdown-2021-04's published "
        "ρ = 1.095 is persons 1.05 + units 0.045: give --rho 1.05). Same as --rho-persons",
    )
    rho.add_argument(
        "--rho-persons",
        default=None,
        metavar="RHO",
        help="the persons run's ρ (ε for pure DP), e.g. 1.05; the same as --rho, named plainly",
    )
    add_seed_option(parser, "noise seed, 0 – 2^63-1 (default 0)", default=0)
    add_backend_arguments(parser)
    add_workers_option(parser, "worker processes, 1 – 256 (default 1)")
    parser.add_argument(
        "--levels",
        default=None,
        help="comma-separated spine levels, root first (default: the allocation's levels present "
        "in the data)",
    )
    parser.add_argument(
        "--filter",
        default=None,
        metavar="LEVEL=ID[,ID…]",
        help="keep only the blocks inside these geounits, e.g. County=44001 or "
        "Tract=44007000100,44007000200",
    )
    parser.add_argument(
        "--no-microdata", action="store_true", help="do not write the microdata table"
    )
    parser.add_argument(
        "--no-measurements",
        action="store_true",
        help="do not write the measurements table (every noisy cell of every geounit: as many "
        "rows as the dense estimates, and never sparse)",
    )
    parser.add_argument(
        "--output-format",
        choices=FORMATS,
        default="auto",
        help="file format of the estimates, measurements and microdata tables: csv, parquet, or "
        f"auto (default) = CSV when the dense estimates table has at most {AUTO_ROWS:,} rows "
        "(every shipped sample on its own schema), Parquet above (the 2,016-cell schema on more "
        "than a few hundred geounits)",
    )
    parser.add_argument(
        "--estimates",
        choices=ESTIMATE_CHOICES,
        default="auto",
        help="dense: every geounit × every cell; sparse: leave out the rows whose true and "
        "estimated counts are both 0 (with geounits and cells tables to re-expand them); "
        "auto (default): sparse for Parquet, dense for CSV",
    )
    parser.add_argument(
        "--spread-invariant-share",
        action="store_true",
        help="DEPARTURE FROM PRODUCTION: move the share of each query held exact (US/State TOTAL, "
        "TDA §5.2), which buys no measurement, to the other queries of its level in proportion "
        "to their shares, so the whole ρ is spent (not with --special-areas: a split state's "
        "branches measure the State TOTAL, TDA §7.4)",
    )
    add_noise_method_option(parser)
    parser.add_argument(
        "--solver",
        choices=SOLVER_CHOICES,
        default="auto",
        help="least-squares route: auto (default: the routing table picks per family — closed "
        "forms, projected CG, ADMM, PIQP, Clarabel; docs/topdown.md) or one "
        "route for every family it applies to (clarabel, the general model, takes the rest); "
        "same optimum within solver tolerance; recorded in metrics.json diagnostics.routes",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress messages")
    add_output_folder_options(parser)
    add_max_bytes_option(parser)
    parser.add_argument(
        "--error-universe",
        choices=UNIVERSES,
        default=HOUSED,
        help="blocks the block-level figures (MAE, EPL, Blau bias) average over: housed "
        "(default) = blocks with housing units or group quarters where the data carry a unit "
        "frame, as TDA (every block otherwise, said so); all = every block in the data",
    )
    add_spine_arguments(parser)
    add_epl_arguments(parser)
    parser.set_defaults(func=run)


def parse_filter(text: str) -> Any:
    """``LEVEL=ID[,ID…]`` → the run's :class:`~engine.runs.data_source.BlockFilter`."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.runs.data_source import BlockFilter

    level, sep, ids = text.partition("=")
    level = level.strip()
    wanted = [i.strip() for i in ids.split(",") if i.strip()]
    if not sep or not level or not wanted:
        raise ValidationError(f"--filter {text!r}: expected LEVEL=ID[,ID…], e.g. County=44001")
    return BlockFilter(level=level, units=tuple(wanted))


def load_budget(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """The persons allocation the run measures with and the whole budget it belongs to
    (``{universe: allocation}``): a preset's universes, or every universe the ``--config`` file
    holds (a preset-shaped ``{"runs": …}``, the planner's ``{"persons": …, "units": …}``
    download, or one allocation); ``--rho`` replaces the persons total in both."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.core.strict_json import load_json_object
    from engine.dp.budget import TopDownAllocation
    from engine.dp.presets import load_topdown_preset, topdown_from_dict

    if args.preset:
        budget = dict(load_topdown_preset(args.preset))
        if "persons" not in budget:
            raise ValidationError(f"preset {args.preset!r} has no persons allocation")
    else:
        path = Path(args.config)
        data = load_json_object(path, label=f"--config {path}")
        if isinstance(data.get("runs"), dict):
            budget = topdown_from_dict({"name": path.stem, **data})
        elif isinstance(data.get("persons"), dict):
            budget = {
                str(u): TopDownAllocation.from_dict(
                    {**a, "universe": u}, name=str(a.get("name", f"{path.stem} ({u})"))
                )
                for u, a in data.items()
                if isinstance(a, dict)
            }
        else:
            one = TopDownAllocation.from_dict(data, name=str(data.get("name", path.stem)))
            budget = {one.universe: one}
        if "persons" not in budget:
            raise ValidationError(
                f"--config {path}: no persons allocation (TopDown estimates persons); it has "
                f"{', '.join(sorted(budget))}"
            )
    allocation = budget["persons"]
    rho, option = persons_rho(args)
    if rho is not None:
        unit = "epsilon" if allocation.mechanism == "puredp" else "rho"
        allocation = allocation.with_rho(parse_exact(rho, where=option, range_name=unit))
        budget["persons"] = allocation
    return allocation, budget


def persons_rho(args: argparse.Namespace) -> tuple[str | None, str]:
    """The persons ρ given (``--rho`` or ``--rho-persons``) and the option that gave it."""
    if getattr(args, "rho_persons", None) is not None:
        return args.rho_persons, "--rho-persons"
    return args.rho, "--rho"


def run(args: argparse.Namespace) -> int:
    """Check the options and --out, then load, run and write atomically; print a short summary."""
    rho, option = persons_rho(args)
    if rho is not None:
        parse_exact(rho, where=option, range_name="rho")  # fail before loading anything
    epl_settings_from_args(args)
    spec = spec_of(args)  # every option checked before --out is opened
    inputs = {
        "data": input_location(args.data),
        "config": args.config,
        "preset": args.preset,
        "mapping": args.mapping,
    }
    with open_output(args, "run topdown", inputs, seed=args.seed) as staging:
        return _run(args, staging, spec)


def options_of(args: argparse.Namespace) -> Any:
    """The :class:`~engine.runs.options.TopDownRunOptions` of the parsed arguments.

    Output options are set as given; ``run replay`` writes the same files."""
    epl = epl_settings_from_args(args)
    # no spine option: the allocation's own spine (PRESET_SPINE, resolved on the data when the run
    # measures); a spine option without --spine: the conventional spine with it, as before
    spine: dict[str, Any] = {"spine": PRESET_SPINE}
    if spine_options_given(args):
        spine = {
            "spine": args.spine or "conventional",
            "entities": tuple(args.entities),
            "special_areas": args.special_areas,
            "fanout_cutoff": args.fanout_cutoff,
            "tract_groups": bool(args.tract_groups),
            "bypass": args.bypass,
        }
    levels = [lv.strip() for lv in (args.levels or "").split(",") if lv.strip()]
    try:
        return TopDownRunOptions(
            levels=tuple(levels) or None,
            microdata=not args.no_microdata,
            measurements=not args.no_measurements,
            output_format=args.output_format,
            estimates=args.estimates,
            spread_invariant_share=bool(args.spread_invariant_share),
            noise_method=args.noise_method,
            solver=args.solver,
            error_universe=args.error_universe,
            epl_percentile=epl.percentile,
            epl_multiplier=epl.multiplier,
            **spine,
        )
    except FieldError as exc:  # name the flags, not the record's fields
        raise ValidationError(as_flags(str(exc))) from None


def as_flags(message: str) -> str:
    """An option record's message with its field names (a name before ``:``, ``,`` or ``)``)
    spelt as this command's flags."""
    names = "|".join(sorted(TopDownRunOptions.__dataclass_fields__, key=len, reverse=True))
    return re.sub(
        rf"\b({names})\b(?=[:,)])", lambda m: "--" + m.group(1).replace("_", "-"), message
    )


def spec_of(args: argparse.Namespace) -> Any:
    """The :class:`~engine.runs.spec.RunSpec` of the parsed arguments (checked, nothing loaded);
    the paths it names are recorded as absolute paths."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.runs.data_source import DataSource
    from engine.runs.inputs import resolve_paths
    from engine.runs.spec import RunSpec

    data = DataSource(
        source=args.data,
        format=args.data_format,
        mapping=args.mapping,
        max_bytes=args.max_bytes,
        filter=parse_filter(args.filter) if args.filter else None,
    )
    backend, backend_options = backend_of(args)
    spec = RunSpec(
        engine="topdown",
        data=data,
        config=load_budget(args)[0].to_dict(),
        seed=args.seed,
        options=options_of(args),
        workers=args.workers,
        backend=backend,
        backend_options=backend_options,
    )
    return resolve_paths(spec, Path.cwd())


def _run(args: argparse.Namespace, staging: Any, spec: Any) -> int:
    """Run the description through the one pipeline, write into the staging folder."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.dp.budget.invariants import SPREAD_LABEL, spent_label
    from engine.runs.control import RunControl
    from engine.runs.pipeline import execute, write
    from engine.runs.provenance import run_provenance
    from engine.runs.schema_note import note_lines

    staging.settings.update(
        {"allocation": spec.config.get("name"), "rho": str(spec.config.get("rho"))}
    )
    staging.settings["filter"] = args.filter
    progress = progress_line(not args.quiet)
    # The budget's fingerprint (persons and units together) ties this metrics.json to its exact
    # budget: a scenario's report accepts only runs of its own budget. The origin names the preset
    # ("modified from <preset>" after --rho changed it, with what differs), as the app's does.
    provenance = run_provenance(spec, budget=load_budget(args)[1], preset=args.preset)
    output = execute(spec, control=RunControl(progress), extra_metrics=provenance.metrics())
    end_progress_line(not args.quiet)
    staging.settings["run_fingerprint"] = output.spec.fingerprint()
    paths = write(output, staging.path)
    final = {k: staging.final / p.relative_to(staging.path) for k, p in paths.items()}
    payload = json.loads(paths["metrics"].read_text(encoding="utf-8"))
    spine_sections = output.extra.get("spine_sections")
    result = output.result
    what = "ε" if result.mechanism == "puredp" else "ρ"
    print(
        f"TopDown run on {args.data} with {payload['allocation']} ({what} = {result.rho:g}, "
        f"seed {args.seed}): {output.runtime_s:.1f} s"
    )
    print(f"  {spent_label(result.rho, result.rho_spent, what)}")
    for line in budget_lines(provenance):
        print(line)
    used = payload.get("spine_used") or {}
    if used.get("label"):
        print(f"  spine: {used['label']}")
        if used.get("note"):
            print(f"    {used['note']}")
    if args.spread_invariant_share:
        print(f"  allocation: {SPREAD_LABEL}")
    for line in error_lines(payload):
        print(line)
    for line in epl_summary_lines(payload):
        print(line)
    for line in note_lines(payload.get("schema_note")):
        print(line)
    if spine_sections is not None:
        print(f"  spine {spine_sections['spine']['kind']}: total-population MAE")
        for key in ("conventional_mae", "entity_mae"):
            cells = ", ".join(f"{k} {v:.3g}" for k, v in spine_sections[key].items())
            print(f"    {key}: {cells}")
        if spine_sections["osed"]:
            cells = ", ".join(f"{k} {v:.3g}" for k, v in spine_sections["osed"].items())
            print(f"    mean OSED: {cells}")
    structural = payload.get("structural_zeros") or {}
    if structural.get("note"):
        print(f"  structural zeros: {structural['note']}")
    print("wrote " + ", ".join(str(p) for p in final.values()) + " (with manifest.json)")
    outputs = payload.get("outputs") or {}
    staging.settings["outputs"] = outputs
    for line in output_lines(outputs):
        print(line)
    if args.quiet:
        return 0
    print(dumps_json({"runtime_s": payload["runtime_s"], "timings": payload["timings"]}))
    return 0


def budget_lines(provenance: Any) -> list[str]:
    """The budget the run used: its origin and fingerprint, then each number that differs from
    the preset it was modified from (the same ``budget_changes`` metrics.json records)."""
    lines = [
        f"  budget: {provenance.budget_origin} (fingerprint {provenance.budget_fingerprint[:12]})"
    ]
    for change in provenance.budget_changes or ():
        lines.append(f"    {change['item']}: {change['preset']} → {change['value']}")
    return lines


def output_lines(outputs: dict[str, Any]) -> list[str]:
    """One line per table written: format, rows (sparse: of how many dense) and size."""
    lines = []
    files = outputs.get("files") or {}
    if files:
        lines.append(
            f"  tables as {outputs.get('format')} (--output-format {outputs.get('requested')}):"
        )
    for entry in files.values():
        rows = f"{entry['rows']:,} rows"
        if entry.get("sparse"):
            rows += f" (sparse; dense: {entry['dense_rows']:,})"
        size = int(entry.get("bytes", 0))
        shown = f"{size / 1e6:,.1f} MB" if size >= 1e6 else f"{size / 1e3:,.1f} kB"
        lines.append(
            f"    {entry['file']}: {rows}, {shown}, written in {entry.get('seconds', 0):.1f} s"
        )
    return lines


def epl_summary_lines(payload: dict[str, Any]) -> list[str]:
    """EPL of TOTAL per geolevel with its interval, and the settings it was computed with."""
    section = payload.get("epl") or {}
    settings = payload.get("epl_settings") or {}
    cells = []
    for level, per_query in section.items():
        entry = per_query.get("TOTAL") if isinstance(per_query, dict) else None
        if not isinstance(entry, dict):
            continue
        if entry.get("epl") is None:
            cells.append(f"{level} undefined")
        else:
            low, high = entry.get("epl_low"), entry.get("epl_high")
            interval = "" if low is None or high is None else f" [{low:.3g}, {high:.3g}]"
            cells.append(f"{level} {entry['epl']:.3g}{interval} (n={entry['n_residuals']})")
    if not cells:
        return []
    return [
        "  EPL of TOTAL (95% bootstrap interval; settings "
        + str(settings.get("label", "not recorded"))
        + "):",
        "    " + ", ".join(cells),
    ]
