"""``phexplore run topdown``: run the TopDown engine (TDA §6–§7) and write its outputs.

Writes to ``--out`` (see docs/topdown.md): ``estimates.csv`` (tidy: geolevel, geounit,
query, cell, true, estimate), ``measurements.csv`` (noisy answers and variances), ``microdata.csv``
(PPMF-like person records of the estimated blocks, unless ``--no-microdata``) and ``metrics.json``
(``mae`` by geolevel and query, ``runtime_s``, ``rho``, ``seed``, ``allocation``, ``timings`` …).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from engine.topdown.spine.cli_options import (
    add_spine_arguments,
    apply_spine_options,
    spine_options_given,
)
from phexplore.budget.invariants import (
    SPREAD_LABEL,
    budget_use,
    spent_label,
    spread_invariant_share,
)
from phexplore.cli._epl_options import add_epl_arguments, epl_settings_from_args
from phexplore.cli._output import add_overwrite_option, dumps_json, input_location, open_output
from phexplore.errors import ValidationError
from phexplore.folded_schema import note_lines, schema_note_section
from phexplore.parsing import option_type, parse_exact


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
    parser.add_argument(
        "--data-format",
        choices=("ri2010", "ppmf", "pl94171", "block_csv"),
        help="format of --data when its header is not enough to tell (default: sniffed)",
    )
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
    parser.add_argument(
        "--rho",
        default=None,
        help="total ρ (ε for pure-DP allocations), e.g. 2.56 or 64/25; default: the allocation's",
    )
    parser.add_argument(
        "--seed",
        type=option_type("whole", "seed", "--seed"),
        default=0,
        help="noise seed, 0 – 2^63-1 (default 0)",
    )
    parser.add_argument(
        "--workers",
        type=option_type("whole", "workers", "--workers"),
        default=1,
        help="worker processes, 1 – 256 (default 1)",
    )
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
    parser.add_argument("--no-microdata", action="store_true", help="do not write microdata.csv")
    parser.add_argument(
        "--spread-invariant-share",
        action="store_true",
        help="DEPARTURE FROM PRODUCTION: move the share of each query held exact (US/State TOTAL, "
        "TDA §5.2), which buys no measurement, to the other queries of its level in proportion "
        "to their shares, so the whole ρ is spent (not with --special-areas: a split state's "
        "branches measure the State TOTAL, TDA §7.4)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress messages")
    parser.add_argument(
        "--out", required=True, help="output folder (written atomically, with manifest.json)"
    )
    add_overwrite_option(parser)
    parser.add_argument(
        "--max-bytes",
        type=option_type("whole", "max_bytes", "--max-bytes"),
        default=None,
        help="size limit per input file in bytes, 1 – 2^40 (default 200 MB, docs/reliability.md)",
    )
    add_spine_arguments(parser)
    add_epl_arguments(parser)
    parser.set_defaults(func=run)


def _n_states(hist: Any) -> int:
    """States in the data (1 without a State column: part of one state)."""
    if "State" not in hist.geography.columns:
        return 1
    return max(1, int(hist.geography["State"].nunique()))


def _load_data(args: argparse.Namespace) -> Any:
    from engine.data.inputs import load_topdown_input
    from engine.data.validate import DEFAULT_MAX_BYTES

    return load_topdown_input(
        args.data,
        kind=args.data_format,
        mapping=args.mapping,
        max_bytes=args.max_bytes or DEFAULT_MAX_BYTES,
    )


def _filter(hist: Any, spec: str) -> Any:
    """The blocks of ``hist`` inside the geounits named by ``LEVEL=ID[,ID…]``."""
    from engine.data.histogram import BlockHistogram

    level, sep, ids = spec.partition("=")
    level = level.strip()
    wanted = {i.strip() for i in ids.split(",") if i.strip()}
    if not sep or not wanted:
        raise ValidationError(f"--filter {spec!r}: expected LEVEL=ID[,ID…], e.g. County=44001")
    if level not in hist.geography.columns:
        raise ValidationError(
            f"--filter: the data have no level {level!r}; levels: {', '.join(hist.levels)}"
        )
    keep = hist.geography[level].astype(str).isin(wanted).to_numpy()
    if not keep.any():
        raise ValidationError(f"--filter {spec!r} matches no block of the data")
    return BlockHistogram(
        hist.schema,
        hist.levels,
        hist.geography[keep].reset_index(drop=True),
        hist.counts[keep],
        source=hist.source,
        licence=hist.licence,
    )


def _load_allocation(args: argparse.Namespace) -> Any:
    from phexplore.budget import TopDownAllocation
    from phexplore.presets import load_topdown_preset

    if args.preset:
        allocations = load_topdown_preset(args.preset)
        if "persons" not in allocations:
            raise ValidationError(f"preset {args.preset!r} has no persons allocation")
        allocation = allocations["persons"]
    else:
        from phexplore.parsing import load_json_object

        path = Path(args.config)
        data = load_json_object(path, label=f"--config {path}")
        if isinstance(data.get("runs"), dict) and "persons" in data["runs"]:
            data = {"citation": data.get("citation", ""), **data["runs"]["persons"]}
        elif "persons" in data and isinstance(data["persons"], dict):
            data = data["persons"]
        allocation = TopDownAllocation.from_dict(data, name=str(data.get("name", path.stem)))
    if args.rho is not None:
        unit = "epsilon" if allocation.mechanism == "puredp" else "rho"
        allocation = allocation.with_rho(parse_exact(args.rho, where="--rho", range_name=unit))
    return allocation


def run(args: argparse.Namespace) -> int:
    """Check the options and --out, then load, run and write atomically; print a short summary."""
    if args.rho is not None:
        parse_exact(args.rho, where="--rho", range_name="rho")  # fail before loading anything
    epl_settings_from_args(args)
    inputs = {
        "data": input_location(args.data),
        "config": args.config,
        "preset": args.preset,
        "mapping": args.mapping,
    }
    with open_output(args, "run topdown", inputs, seed=args.seed) as staging:
        return _run(args, staging)


def _run(args: argparse.Namespace, staging: Any) -> int:
    from engine.topdown.export import write_outputs
    from engine.topdown.geography import GeoTree
    from engine.topdown.run import run_topdown

    epl_settings = epl_settings_from_args(args)
    hist = _load_data(args)
    if args.filter:
        hist = _filter(hist, args.filter)
    allocation = _load_allocation(args)
    n_states = _n_states(hist)
    if args.spread_invariant_share:
        if getattr(args, "special_areas", None) not in (None, "none"):
            raise ValidationError(
                "--spread-invariant-share cannot be combined with --special-areas: a split "
                "state's branches measure the State TOTAL (TDA §7.4), so its share is spent there"
            )
        allocation = spread_invariant_share(allocation, n_states)
    use = budget_use(allocation, n_states)
    staging.settings.update(
        {"allocation": allocation.name, "rho": str(allocation.rho), "filter": args.filter}
    )
    tree = None
    if args.levels:
        tree = GeoTree.from_histogram(
            hist, [lv.strip() for lv in args.levels.split(",") if lv.strip()]
        )

    def progress(message: str, fraction: float) -> None:
        if not args.quiet:
            print(f"\r[{fraction:6.1%}] {message:<40}", end="", file=sys.stderr, flush=True)

    run_kwargs: dict[str, Any] = {"tree": tree}
    spine_plan = None
    if spine_options_given(args):
        if tree is not None:
            raise ValidationError("--levels cannot be combined with the spine options (--spine …)")
        spine_plan = apply_spine_options(args, hist, allocation)
        run_kwargs = spine_plan.run_kwargs(allocation)
    result = run_topdown(
        hist, allocation, seed=args.seed, workers=args.workers, progress=progress, **run_kwargs
    )
    if not args.quiet:
        print(file=sys.stderr)
    spine_sections = spine_plan.metrics(result, hist) if spine_plan is not None else None
    schema_note = schema_note_section(hist.schema.name, allocation)
    sections = {
        **(spine_sections or {}),
        **({"schema_note": schema_note} if schema_note else {}),
        "spread_invariant_share": bool(args.spread_invariant_share),
        "held_exact": [f"{level} {query}" for level, query in use.held],
    }
    paths = write_outputs(
        result,
        staging.path,
        microdata=not args.no_microdata,
        extra_sections=sections,
        epl_settings=epl_settings,
        hist=hist,
    )
    final = {k: staging.final / p.relative_to(staging.path) for k, p in paths.items()}
    payload = json.loads(paths["metrics"].read_text(encoding="utf-8"))
    what = "ε" if allocation.mechanism == "puredp" else "ρ"
    print(
        f"TopDown run on {args.data} with {allocation.name} ({what} = {float(allocation.rho):g}, "
        f"seed {args.seed}): {result.runtime_s:.1f} s"
    )
    print(f"  {spent_label(float(allocation.rho), result.rho_spent, what)}")
    if args.spread_invariant_share:
        print(f"  allocation: {SPREAD_LABEL}")
    for level, per_query in payload["mae"].items():
        cells = ", ".join(f"{q} {v:.3g}" for q, v in per_query.items())
        print(f"  MAE {level}: {cells}")
    for line in epl_summary_lines(payload):
        print(line)
    for line in note_lines(schema_note):
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
    if args.quiet:
        return 0
    print(dumps_json({"runtime_s": payload["runtime_s"], "timings": payload["timings"]}))
    return 0


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
